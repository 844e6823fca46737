"""The StreamletApplication API of a Kubernetes cluster (the kubeconfig's), in one namespace: what
`kubectl streamlets` (blueprint.cli.kubectl) reads, applies, patches and deletes.

Resources are dicts as the API server gives them; a spec is patched as its model
(blueprint.deploy.spec). API errors are the kubernetes client's ApiException; an unknown
application is ApplicationNotFound.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import BlueprintError
from .crd import GROUP, PLURAL, REQUEST_ANNOTATION, VERSION
from .spec import StreamletSpec


class ApplicationNotFound(BlueprintError):
    """No StreamletApplication of that name in the namespace."""


class Cluster:
    """The StreamletApplication API of the kubeconfig's cluster, in one namespace: `namespace`
    is the one given, else the kubeconfig context's, else `default`. Raises the kubernetes
    client's ConfigException for a kubeconfig it cannot use."""

    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
        from kubernetes import client, config

        config.load_kube_config(config_file=kubeconfig, context=context)
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c["name"] == context), active) if context else active
        self.namespace = namespace or (chosen or {}).get("context", {}).get("namespace") or "default"
        self.api = client.CustomObjectsApi()

    def get(self, name: str) -> dict[str, Any]:
        """The application `name`; ApplicationNotFound if there is none."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                raise ApplicationNotFound(f"no application {name!r} in namespace {self.namespace!r}") from None
            raise

    def list(self, all_namespaces: bool) -> list[dict[str, Any]]:
        """The applications of the namespace, or of every namespace."""
        if all_namespaces:
            return self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        return self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)["items"]

    def apply(self, resource: dict[str, Any]) -> str:
        """Create the resource, or replace the spec of the existing one: 'created' or 'configured'."""
        from kubernetes.client.exceptions import ApiException

        name = resource["metadata"]["name"]
        try:
            current = self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise
            self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, resource)
            return "created"
        resource = {**resource, "metadata": {**resource["metadata"],
                                             "resourceVersion": current["metadata"]["resourceVersion"]}}
        self.api.replace_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, resource)
        return "configured"

    def patch_streamlets(self, name: str, app: dict[str, Any], streamlets: Sequence[StreamletSpec]) -> None:
        """Replace spec.streamlets of the application `app` (as read), guarded by the
        resourceVersion read (a concurrent change fails with 409)."""
        body = {"metadata": {"resourceVersion": app["metadata"]["resourceVersion"]},
                "spec": {"streamlets": [s.dump() for s in streamlets]}}
        self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, body)

    def request(self, name: str, request: dict[str, Any]) -> None:
        """Ask the operator for a control-stream command (the REQUEST_ANNOTATION, JSON)."""
        self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name,
                                                {"metadata": {"annotations": {REQUEST_ANNOTATION: json.dumps(request)}}})

    def delete(self, name: str) -> None:
        """Delete the application; ApplicationNotFound if there is none."""
        self.get(name)  # a clear message for an unknown application
        self.api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
