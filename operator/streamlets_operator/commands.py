"""Control-stream commands sent by the operator for an application (streamlets.runtime.control).

Users ask through the annotation `commands.streamlets.io/request` (JSON: id, command, target,
args; `kubectl streamlets savepoint|state` write it); the operator also sends savepoints itself
(periodic, and before an upgrade in upgrade mode `savepoint`). Results become status entries:
`status.commands` (every result) and `status.savepoints` (savepoints taken), newest last.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from typing import Any

from blueprint.deploy.crd import REQUEST_ANNOTATION, REQUEST_TIMEOUT_MAX  # the CRD contract's one home
from blueprint.deploy.spec import ApplicationSpec
from streamlets.errors import StreamletError
from streamlets.kafka_security import KafkaConnection

from .render import typed

TIMEOUT = float(os.environ.get("STREAMLETS_COMMAND_TIMEOUT", "120"))  # seconds to wait for every result
# Seconds a streamlet has to answer the savepoint before an upgrade; no answer means not running.
UPGRADE_TIMEOUT = float(os.environ.get("STREAMLETS_UPGRADE_SAVEPOINT_TIMEOUT", "60"))
KEEP = 50


class RequestError(StreamletError, ValueError):
    """The annotation's request is not a command the operator can send."""


def parse_request(text: str) -> dict[str, Any]:
    """The command request annotation's JSON as `{id, command, target, args, timeout}` (a new id if none is
    given; args as strings; timeout: the seconds the streamlets have to answer, TIMEOUT when absent);
    RequestError, naming the annotation, for text that is not JSON, an unknown command, args that are
    not an object or a timeout that is not a number of seconds in (0, REQUEST_TIMEOUT_MAX]."""
    from streamlets.runtime.control import COMMANDS

    try:
        request = json.loads(text)
    except ValueError as e:
        raise RequestError(f"annotation {REQUEST_ANNOTATION} is not JSON: {e}") from None
    if not isinstance(request, dict) or request.get("command") not in COMMANDS:
        raise RequestError(f"annotation {REQUEST_ANNOTATION}: command must be one of {', '.join(COMMANDS)}")
    args = request.get("args") or {}
    if not isinstance(args, dict):
        raise RequestError(f"annotation {REQUEST_ANNOTATION}: args must be an object of strings")
    timeout = request.get("timeout", TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= REQUEST_TIMEOUT_MAX:
        raise RequestError(f"annotation {REQUEST_ANNOTATION}: timeout must be a number of seconds, more than 0 "
                           f"and at most {REQUEST_TIMEOUT_MAX:.0f}, not {timeout!r}")
    return {"id": str(request.get("id") or uuid.uuid4().hex), "command": request["command"],
            "target": request.get("target"), "args": {str(k): str(v) for k, v in args.items()},
            "timeout": float(timeout)}


def now() -> str:
    """The current UTC time as ISO-8601 with seconds and `Z` (the commands' and savepoints' status times)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def send(spec: dict[str, Any] | ApplicationSpec, request: dict[str, Any], timeout: float = TIMEOUT, source: str = "request",
         kafka: str | KafkaConnection | None = None) -> list[dict[str, Any]]:
    """Send one command and wait for a result from each targeted streamlet (see send_all)."""
    return send_all(spec, [request], timeout, source, kafka)


def send_all(spec: dict[str, Any] | ApplicationSpec, requests: list[dict[str, Any]], timeout: float = TIMEOUT,
             source: str = "request", kafka: str | KafkaConnection | None = None) -> list[dict[str, Any]]:
    """Send the commands at once and wait, together, for a result from each targeted streamlet;
    returns status entries, `no-answer` for a streamlet that did not answer within `timeout`
    seconds (not running). Raises RequestError for a target the application does not have.
    `source` (request, periodic, upgrade) labels the operator's metrics; `kafka`: how to reach the
    application's Kafka (streamlets_operator.kafka.connection; default its bootstrap servers in
    PLAINTEXT). The spec is read as its
    model (blueprint.deploy.spec): pydantic's ValidationError for one that is not valid."""
    from streamlets.runtime.control import Command, collect_results, results_consumer, send_command

    from . import metrics
    app = typed(spec)
    bootstrap, app_id = kafka or app.kafka.bootstrap_servers, app.app_id
    names = [s.name for s in app.streamlets]
    waiting: dict[str, tuple[Command, set[str]]] = {}
    for request in requests:
        target = request.get("target")
        if target is not None and target not in names:
            raise RequestError(f"the application has no streamlet {target!r}")
        command = Command(request["command"], target, request.get("args") or {}, request["id"])
        waiting[command.id] = (command, {target} if target else set(names))
    consumer = results_consumer(bootstrap, app_id)
    try:
        for command, _ in waiting.values():
            send_command(bootstrap, app_id, command)
        results = collect_results(consumer, {cid: expected for cid, (_, expected) in waiting.items()}, timeout)
    finally:
        consumer.close()
    entries = [{"id": r["command_id"], "command": r["command"], "streamlet": r["streamlet"], "status": r["status"],
                "message": r["message"], "location": r["location"] or "", "batchIds": dict(r["batch_ids"]),
                "time": now()} for r in results]
    for cid, (command, expected) in waiting.items():
        for missing in sorted(expected - {r["streamlet"] for r in results if r["command_id"] == cid}):
            entries.append({"id": cid, "command": command.command, "streamlet": missing, "status": "no-answer",
                            "message": f"no result within {timeout:.0f} s (is the streamlet running?)", "time": now()})
    metrics.commands_sent(entries, requests, source)
    return entries


def savepoint_entries(entries: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    """status.savepoints entries for the savepoints among command results."""
    out = []
    for e in entries:
        if e["command"] == "savepoint" and e["status"] == "ok":
            out.append({"streamlet": e["streamlet"], "name": e["location"].rstrip("/").rsplit("/", 1)[-1],
                        "location": e["location"], "batchIds": e.get("batchIds") or {}, "time": e["time"],
                        "state": "Completed", "reason": reason, "commandId": e["id"]})
    return out


def appended(status: dict[str, Any], key: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`status[key]` with `entries` appended, keeping the last KEEP (50) entries."""
    return ((status.get(key) or []) + entries)[-KEEP:]
