"""The operations API's OpenAPI 3.1 document: paths written here, schemas generated from the
pydantic models of blueprint.ops.model (one home for the shapes)."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic.json_schema import models_json_schema

from . import model

_MODELS = (model.ApplicationSummary, model.ApplicationView, model.StreamletView, model.TopicView, model.DeadLetterView,
           model.SavepointView, model.CommandRequest, model.SavepointRequest, model.CommandResultView, model.ErrorBody)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "the request body or a parameter is not valid", 401: "no bearer token, or one Kubernetes does not accept",
            403: "RBAC does not give the caller this verb on the application", 404: "no such application",
            413: "the request body is larger than 1 MiB", 500: "the server failed"}
    return {str(c): _ok(text[c], _ref("ErrorBody")) for c in codes}


@cache
def document(secured: bool = True) -> dict[str, Any]:
    """The document; `secured=False` for a server that asks for no credentials (the sandbox): no
    security requirement, so a client (or a test generated from it) sends none."""
    _, defs = models_json_schema([(m, "serialization") for m in _MODELS], ref_template="#/components/schemas/{model}")
    app_params = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"},
                   "description": "Kubernetes namespace (`local` in the sandbox)"},
                  {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    read = _errors(401, 403, 404, 500)
    write = _errors(400, 401, 403, 404, 413, 500)
    base = "/api/v1/namespaces/{namespace}/applications/{name}"
    return {
        "openapi": "3.1.0",
        "info": {"title": "Streamlets operations API", "version": "1",
                 "description": "Running streamlet applications: their graph with live rates and lag per topic, "
                                "streamlets' state, dead letters (metadata), savepoints, and control commands. "
                                "Authorization is Kubernetes' own: a bearer token checked by TokenReview, verbs checked "
                                "by SubjectAccessReview on streamletapplications.streamlets.io (list, get; patch for "
                                "commands and savepoints). The sandbox (`blueprint run --ui`) asks for none."},
        "components": {"schemas": defs["$defs"],
                       "securitySchemes": {"kubernetesToken": {"type": "http", "scheme": "bearer",
                                                                "description": "a Kubernetes bearer token"}}},
        "security": [{"kubernetesToken": []}] if secured else [],
        "paths": {
            "/api/v1/applications": {"get": {
                "operationId": "listApplications", "summary": "Applications the caller may list (verb list)",
                "responses": {"200": _ok("applications", {"type": "array", "items": _ref("ApplicationSummary")}),
                              **_errors(401, 403, 500)}}},
            base: {"get": {
                "operationId": "getApplication", "parameters": app_params,
                "summary": "An application's graph with live figures per streamlet and topic (verb get)",
                "responses": {"200": _ok("the application", _ref("ApplicationView")), **read}}},
            base + "/dead-letters": {"get": {
                "operationId": "listDeadLetters", "summary": "The newest dead letters, metadata only (verb get)",
                "parameters": [*app_params, {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 20},
                                          "description": "how many, newest first; clamped to 1..500"}],
                "responses": {"200": _ok("dead letters, newest first", {"type": "array", "items": _ref("DeadLetterView")}),
                              **_errors(400, 401, 403, 404, 500)}}},
            base + "/savepoints": {
                "get": {"operationId": "listSavepoints", "parameters": app_params,
                        "summary": "Savepoints taken, oldest first (verb get)",
                        "responses": {"200": _ok("savepoints", {"type": "array", "items": _ref("SavepointView")}), **read}},
                "post": {"operationId": "takeSavepoint", "parameters": app_params,
                         "summary": "Take a savepoint of one or every streamlet (verb patch, as kubectl streamlets savepoint)",
                         "requestBody": {"required": False, "content": {"application/json": {"schema": _ref("SavepointRequest")}}},
                         "responses": {"200": _ok("a result per streamlet", {"type": "array", "items": _ref("CommandResultView")}),
                                       **write}}},
            base + "/commands": {"post": {
                "operationId": "sendCommand", "parameters": app_params,
                "summary": "Send a control command on the control stream (verb patch)",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("CommandRequest")}}},
                "responses": {"200": _ok("a result per streamlet", {"type": "array", "items": _ref("CommandResultView")}),
                              **write}}},
            "/metrics": {"get": {"operationId": "metrics", "security": [],
                                 "summary": "Prometheus text exposition (the README's metrics table)",
                                 "responses": {"200": {"description": "metrics",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        },
    }
