"""The operator's own Prometheus metrics (prometheus-client), served at /metrics by the operations
server (api.py) next to the API:

    streamlets_operator_reconciles_total{result}              reconciles, result ok or error
    streamlets_operator_reconcile_duration_seconds            a reconcile's duration (histogram)
    streamlets_operator_errors_total{handler, kind}           failed handler runs (temporary, permanent, internal)
    streamlets_operator_applications{phase}                   applications this replica handles, by status.phase
    streamlets_operator_commands_total{command, source}       control-stream commands sent (request, periodic, upgrade)
    streamlets_operator_command_results_total{command, status} their results (ok, error, no-answer)
    streamlets_operator_autoscaler_decisions_total{namespace, app, streamlet, direction, mode}
                                                              executor changes applied (active) or recommended (passive)
    streamlets_operator_autoscaler_executors{namespace, app, streamlet, kind}
                                                              the autoscaler's last figures: kind current or target

A replica that waits for its peering turn handles nothing, so it reports no applications.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import kopf
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.process_collector import ProcessCollector

PHASES = ("Pending", "Deploying", "Running", "Degraded", "Failed")

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

RECONCILES = Counter("streamlets_operator_reconciles", "Reconciles of StreamletApplications, by result (ok, error)",
                     ["result"], registry=REGISTRY)
RECONCILE_SECONDS = Histogram("streamlets_operator_reconcile_duration_seconds", "Duration of a reconcile, seconds",
                              buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300), registry=REGISTRY)
ERRORS = Counter("streamlets_operator_errors", "Handler runs that failed, by handler and kind "
                 "(temporary: retried, permanent: given up, internal: a bug, retried)", ["handler", "kind"], registry=REGISTRY)
COMMANDS = Counter("streamlets_operator_commands", "Control-stream commands sent, by command and source "
                   "(request: the annotation or the API, periodic, upgrade)", ["command", "source"], registry=REGISTRY)
COMMAND_RESULTS = Counter("streamlets_operator_command_results", "Results of control-stream commands, by command and "
                          "status (ok, error, no-answer)", ["command", "status"], registry=REGISTRY)

AUTOSCALER_DECISIONS = Counter("streamlets_operator_autoscaler_decisions", "Executor changes of autoscaled streamlets, "
                               "by direction (up, down) and mode (active: applied, passive: recommended)",
                               ["namespace", "app", "streamlet", "direction", "mode"], registry=REGISTRY)

_lock = threading.Lock()
_phases: dict[tuple[str, str], str] = {}
_executors: dict[tuple[str, str, str], tuple[int, int]] = {}  # (namespace, app, streamlet) -> (current, target)


class _Applications:
    """streamlets_operator_applications{phase}, counted at scrape time from the phases last written."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("streamlets_operator_applications",
                                   "StreamletApplications this replica handles, by status.phase", labels=["phase"])
        with _lock:
            seen = list(_phases.values())
        for phase in sorted(set(PHASES) | set(seen)):
            family.add_metric([phase], seen.count(phase))
        yield family


REGISTRY.register(_Applications())


class _Executors:
    """streamlets_operator_autoscaler_executors{namespace,app,streamlet,kind}: the last decision's
    executors now (current) and to run (target), per autoscaled streamlet."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("streamlets_operator_autoscaler_executors", "Executors of autoscaled streamlets at "
                                   "the last decision: kind current (running) or target",
                                   labels=["namespace", "app", "streamlet", "kind"])
        with _lock:
            seen = dict(_executors)
        for (ns, app, streamlet), (current, target) in sorted(seen.items()):
            family.add_metric([ns, app, streamlet, "current"], current)
            family.add_metric([ns, app, streamlet, "target"], target)
        yield family


REGISTRY.register(_Executors())


def autoscaler_decision(namespace: str, app: str, streamlet: str, mode: str, current: int | None, target: int | None,
                        direction: str | None, changed: bool) -> None:
    """Record an autoscaler evaluation: its executors (none: no decision, the streamlet's figures go),
    and, when it `changed` (applied or recommended), the decision's direction."""
    key = (namespace, app, streamlet)
    with _lock:
        if current is None or target is None:
            _executors.pop(key, None)
        else:
            _executors[key] = (current, target)
    if changed and direction in ("up", "down"):
        AUTOSCALER_DECISIONS.labels(namespace, app, streamlet, direction, mode).inc()


def forget_autoscaled(namespace: str, app: str, keep: set[str]) -> None:
    """Drop the executor figures of the application's streamlets not in `keep`."""
    with _lock:
        for key in [k for k in _executors if k[:2] == (namespace, app) and k[2] not in keep]:
            del _executors[key]


def _kind(e: BaseException) -> str:
    if isinstance(e, kopf.PermanentError):
        return "permanent"
    if isinstance(e, kopf.TemporaryError):
        return "temporary"
    return "internal"


@contextmanager
def handling(handler: str, reconcile: bool = False) -> Iterator[None]:
    """Count a handler run: an exception is an error of its kind; a reconcile also counts its
    result and duration."""
    started = time.monotonic()
    try:
        yield
    except BaseException as e:
        ERRORS.labels(handler, _kind(e)).inc()
        if reconcile:
            RECONCILES.labels("error").inc()
        raise
    else:
        if reconcile:
            RECONCILES.labels("ok").inc()
    finally:
        if reconcile:
            RECONCILE_SECONDS.observe(time.monotonic() - started)


def track_phase(app: Mapping[str, Any], patch: Any = None) -> None:
    """Remember the application's phase: the one being written (the status patch), else its status's."""
    meta = app.get("metadata") or {}
    written = (patch.status.get("phase") if patch is not None and hasattr(patch, "status") else None)
    phase = written or (app.get("status") or {}).get("phase") or "Pending"
    with _lock:
        _phases[(meta.get("namespace", ""), meta.get("name", ""))] = phase


def forget(app: Mapping[str, Any]) -> None:
    """Drop a deleted application's phase from the phase gauge (streamlets_operator_applications) and
    its streamlets' autoscaler executors (streamlets_operator_autoscaler_executors)."""
    meta = app.get("metadata") or {}
    with _lock:
        _phases.pop((meta.get("namespace", ""), meta.get("name", "")), None)
    forget_autoscaled(meta.get("namespace", ""), meta.get("name", ""), set())


def commands_sent(entries: list[dict[str, Any]], requests: list[dict[str, Any]], source: str) -> None:
    """Count the control commands sent (`requests`, by command and `source`) and the results received
    (`entries`, by command and status)."""
    for request in requests:
        COMMANDS.labels(request["command"], source).inc()
    for e in entries:
        COMMAND_RESULTS.labels(e["command"], e["status"]).inc()


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format (body, content type)."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
