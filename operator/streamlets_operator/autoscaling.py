"""The autoscaler on a cluster: each streamlet with `spec.streamlets[].autoscaling.mode` passive or
active gets its executors decided from its driver's metrics (streamlets.autoscale, Flink's
autoscaler mapped to Spark), and, active, changed in place.

Every INTERVAL seconds ($STREAMLETS_AUTOSCALE_INTERVAL, default 15) a kopf timer per application
scrapes its autoscaled streamlets' drivers (scrape.py) and turns each page into a MetricSample
(`metric_sample`): records read and busy seconds (summed over the streamlet's queries), lag and
partitions (its inlet topic partitions), executors and cores (the driver's own gauges). A
`StreamletScaler` per streamlet keeps the samples in memory (an operator that restarts collects a
window again) and its AutoscalerState in the status (a pending scale-down survives a failover).

Applying (mode active): the `scale` control command (streamlets.runtime.executors): the driver
asks the cluster manager for the new total and, for fewer, removes idle executors between
micro-batches. No restart, no savepoint: the checkpoints and state stores stay where they are and
the next batch's tasks run on the new executors. A change that fails (no answer, an error) is
reported (AutoscaleFailed) and tried again at the next evaluation; after a change the samples
start again, so nothing is decided for a stabilization interval. Why in place for every kind of
streamlet, and what it cannot do: the README's Autoscaling.

Visible: status.streamlets.<name>.autoscaling (`status_of`), Events Autoscaled (active) and
AutoscaleRecommended (passive; the same recommendation again at most every EVENT_REPEAT seconds,
Flink's scaling.event.interval) and AutoscaleFailed, the operator's metrics
streamlets_operator_autoscaler_decisions_total{direction,mode} and
streamlets_operator_autoscaler_executors{kind=current|target} (metrics.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from blueprint.ops.figures import Sample
from streamlets.autoscale import (Autoscaler, AutoscalerState, Autoscaling, AutoscaleSettingsError, Decision,
                                  MetricSample)

log = logging.getLogger("streamlets.operator.autoscaling")

INTERVAL = float(os.environ.get("STREAMLETS_AUTOSCALE_INTERVAL", "15"))  # seconds between evaluations
SCALE_TIMEOUT = float(os.environ.get("STREAMLETS_AUTOSCALE_TIMEOUT", "120"))  # seconds a driver has to apply one
EVENT_REPEAT = 30 * 60.0  # seconds before the same passive recommendation is an Event again (Flink's 30 min)


def metric_sample(samples: Iterable[Sample], streamlet: str, at: float, real_time: bool = False) -> MetricSample | None:
    """A streamlet's MetricSample from its driver's page (streamlets.runtime.metrics): records =
    Σ streamlets_records_in_total, busy = Σ streamlets_busy_seconds_total and overhead =
    Σ streamlets_batch_overhead_seconds_total over its queries, running =
    the most streamlets_batch_running_seconds of them; lag =
    Σ streamlets_consumer_lag_records and partitions = the distinct (topic, partition) of those;
    executors and cores from streamlets_executors and streamlets_executor_cores. None when the page
    has no executor gauge (a driver image older than them)."""
    records = busy = overhead = running = 0.0
    lags: dict[tuple[str, str], float] = {}
    executors = cores = None
    for s in samples:
        if s.labels.get("streamlet") != streamlet:
            continue
        if s.name == "streamlets_records_in_total":
            records += s.value
        elif s.name == "streamlets_busy_seconds_total":
            busy += s.value
        elif s.name == "streamlets_batch_overhead_seconds_total":
            overhead += s.value
        elif s.name == "streamlets_batch_running_seconds":
            running = max(running, s.value)  # its longest-running micro-batch
        elif s.name == "streamlets_consumer_lag_records":
            key = (s.labels.get("topic", ""), s.labels.get("partition", ""))
            lags[key] = max(lags.get(key, 0.0), s.value)  # two inlets on one topic: one backlog
        elif s.name == "streamlets_executors":
            executors = int(s.value)
        elif s.name == "streamlets_executor_cores":
            cores = int(s.value)
    if executors is None or cores is None:
        return None
    return MetricSample(at=at, records=int(records), busy_seconds=busy, lag=int(sum(lags.values())),
                        executors=executors, cores=max(1, cores), partitions=len(lags), real_time=real_time,
                        running_seconds=running, overhead_seconds=overhead)


def _finite(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return dt.datetime.fromtimestamp(unix, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _unix(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def state_from_status(entry: dict[str, Any] | None) -> AutoscalerState:
    """The AutoscalerState kept in status.streamlets.<name>.autoscaling (scaleDownSince and
    scaleDownAsks); an empty state for none."""
    entry = entry or {}
    since = _unix(entry.get("scaleDownSince"))
    asks = tuple((t, int(a.get("executors", 0))) for a in entry.get("scaleDownAsks") or []
                 if (t := _unix(a.get("at"))) is not None)
    return AutoscalerState(since, asks) if since is not None else AutoscalerState()


_FIGURES = ("evaluatedAt", "executors", "targetExecutors", "wantedExecutors", "direction", "held", "reason",
            "inputRate", "arrivalRate", "trueRate", "utilization", "lag", "lagSeconds", "backlogged")


def status_of(mode: str, decision: Decision | None, state: AutoscalerState, *, error: str | None = None,
              last: dict[str, Any] | None = None) -> dict[str, Any]:
    """status.streamlets.<name>.autoscaling: the mode, executors now and the target, the direction,
    the hold and the reason (or `error`: why there is no decision), the figures it used (records per
    second, lag in records and seconds of input, utilization), when it was made, the last change
    (`lastScaled`, `lastScaledAt` from `last`: the previous status), the pending scale-down."""
    last = last or {}
    # every field, None where there is no value: the status is merge-patched, so a key left out
    # would keep an earlier evaluation's value
    out: dict[str, Any] = dict.fromkeys(_FIGURES)
    out.update({"mode": mode, "lastScaled": last.get("lastScaled"), "lastScaledAt": last.get("lastScaledAt"),
                "scaleDownSince": _iso(state.scale_down_since),
                "scaleDownAsks": [{"at": _iso(t), "executors": n} for t, n in state.scale_down_asks]})
    if decision is None:
        out["reason"] = error or "no metrics yet"
        return out
    ev = decision.evaluation
    out.update({"evaluatedAt": _iso(decision.at), "executors": decision.current, "targetExecutors": decision.target,
                "wantedExecutors": decision.wanted, "direction": decision.direction,
                "held": decision.held.value if decision.held else None, "reason": decision.reason[:1000]})
    if ev is not None:
        out.update({"inputRate": _finite(ev.input_rate), "arrivalRate": _finite(ev.arrival_rate),
                    "trueRate": _finite(ev.true_rate), "utilization": _finite(ev.utilization),
                    "lag": ev.lag, "lagSeconds": _finite(ev.lag_seconds, 1), "backlogged": ev.backlogged})
    return out


@dataclass
class Outcome:
    """What one evaluation of a streamlet did: the `decision` (None: no metrics, `error` says why),
    whether a change was `applied` (active) or `recommended` (passive), the apply's `result` text,
    and the Event to post (reason, message, warning) if any."""

    decision: Decision | None
    error: str | None = None
    applied: bool = False
    recommended: bool = False
    result: str = ""
    event: tuple[str, str, bool] | None = None


# send(executors, reason) -> (status, message): the `scale` command's result (ok, error, no-answer)
Send = Callable[[int, str], tuple[str, str]]


@dataclass
class StreamletScaler:
    """One streamlet's autoscaler on the operator: its samples and state (Autoscaler), and what it
    last recommended (for passive Events)."""

    name: str
    autoscaling: Autoscaling
    autoscaler: Autoscaler = field(init=False)
    recommended: tuple[int, float] | None = None  # (target, when) of the last passive Event

    def __post_init__(self) -> None:
        self.autoscaler = Autoscaler(self.autoscaling.settings)

    def step(self, page: list[Sample] | str, now: float, send: Send, real_time: bool = False) -> Outcome:
        """Evaluate with a driver page (or the text of why there is none) at `now` (Unix seconds);
        in active mode apply a change with `send`."""
        if isinstance(page, str):
            return Outcome(None, error=f"no metrics: {page}")
        sample = metric_sample(page, self.name, now, real_time)
        if sample is None:
            return Outcome(None, error="no metrics: the driver exports no streamlets_executors (an older image?)")
        if self.autoscaler.samples and sample.at <= self.autoscaler.samples[-1].at:
            return Outcome(None, error="no new metrics")
        self.autoscaler.observe(sample)
        decision = self.autoscaler.decide(now)
        if not decision.changes:
            return Outcome(decision)
        change = f"{self.name}: {decision.current} -> {decision.target} executor(s)"
        if self.autoscaling.mode == "passive":
            if self.recommended and self.recommended[0] == decision.target and now - self.recommended[1] < EVENT_REPEAT:
                return Outcome(decision)
            self.recommended = (decision.target, now)
            return Outcome(decision, recommended=True,
                           event=("AutoscaleRecommended", f"{change} recommended (passive): {decision.reason}", False))
        status, message = send(decision.target, decision.reason)
        if status != "ok":
            return Outcome(decision, result=message, event=(
                "AutoscaleFailed", f"{change} in place failed ({status}: {message}); tried again at the next "
                "evaluation", True))
        # the change starts a new run: no decision for a stabilization interval, a new window
        self.autoscaler.samples.clear()
        self.autoscaler.state = AutoscalerState()
        return Outcome(decision, applied=True, result=message,
                       event=("Autoscaled", f"{change} in place ({message}): {decision.reason}", False))


class Scalers:
    """The StreamletScalers of every application, by (namespace, application, streamlet): made when
    a streamlet's autoscaling is first seen, made again when its settings change, dropped when it
    is off or gone. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, str, str], StreamletScaler] = {}

    def get(self, namespace: str, app: str, name: str, autoscaling: Autoscaling,
            state: AutoscalerState) -> StreamletScaler:
        with self._lock:
            key = (namespace, app, name)
            found = self._by_key.get(key)
            if found is None or found.autoscaling != autoscaling:
                found = StreamletScaler(name, autoscaling)
                found.autoscaler.state = state
                self._by_key[key] = found
            return found

    def keep(self, namespace: str, app: str, names: set[str]) -> None:
        """Drop the application's scalers of streamlets not in `names`."""
        with self._lock:
            for key in [k for k in self._by_key if k[:2] == (namespace, app) and k[2] not in names]:
                del self._by_key[key]


SCALERS = Scalers()


def autoscaled(spec) -> list[tuple[Any, Autoscaling, bool]]:
    """(streamlet spec, its Autoscaling, runs in Real-Time Mode) of each streamlet whose mode is not
    off. Settings out of range never get here (render.validate refuses the spec)."""
    from streamlets.trigger import Trigger, TriggerError

    out = []
    for s in spec.streamlets:
        try:
            auto = s.autoscaling_settings()
        except AutoscaleSettingsError:
            continue
        if auto.mode == "off":
            continue
        text = getattr(s, "trigger", None) or (s.descriptor or {}).get("trigger")
        try:
            real_time = bool(text) and Trigger.parse(str(text)).real_time_mode
        except TriggerError:
            real_time = False
        out.append((s, auto, real_time))
    return out


__all__ = ["EVENT_REPEAT", "INTERVAL", "SCALERS", "Outcome", "Scalers", "StreamletScaler", "autoscaled",
           "metric_sample", "state_from_status", "status_of"]
