"""Autoscaling decisions for a streamlet's executors, from its lag and rates (issue 31): pure logic.

This module decides; it applies nothing. The operator or a driver feeds it `MetricSample`s (one per
scrape of a streamlet's counters and lag) and reads a `Decision`: the executors to run, the
direction, whether the change is held back and why, and a reason text fit for a Kubernetes Event.
Applying the decision (the driver's executor requests, or a savepoint and a redeploy) is later work;
a caller that only reports the decision is the passive mode.

How it decides: the Flink Kubernetes Operator's autoscaler, mapped to Spark
-----------------------------------------------------------------------------
Sources: apache/flink-kubernetes-operator at 6e9caeb4 (flink-autoscaler/src/main/java/org/apache/
flink/autoscaler/, below `F/`), and its docs/content/docs/custom-resource/autoscaler.md.

1. Averages over a window, never one sample (`F/ScalingMetricCollector.java` 139-185: a decision
   waits until the window after the stabilization interval is full; autoscaler.md 143-149). Rates
   come from cumulative counters, (last - first) / elapsed time, as Flink's `getRate` does.
2. True processing rate from busy time (`F/ScalingMetricEvaluator.java` 371-377:
   `rate / (busyMsPerSecond / 1000)`): the records a streamlet processes per second of busy time,
   i.e. at 100% busy with its current executors.
3. Target rate (`F/ScalingMetricEvaluator.java` 460-480, `F/utils/AutoScalerUtils.java` 52-80):
   the ingestion rate (input rate plus the lag's growth rate) over the target utilization, plus
   lag / catch-up duration, plus input rate * restart time / catch-up duration (the records that
   pile up while the change restarts work).
4. A no-action band (`F/ScalingMetricEvaluator.java` 412-447): scale up only when the true rate is
   below the target rate at `utilization_max` (no restart term), down only when it is above the
   target rate at `utilization_min` (with it); in between nothing happens, which keeps a steady load
   from flapping (`F/ScalingExecutor.java` 300-316 scales only when a vertex is outside the bound).
5. No scale-down while backlogged (`F/ScalingMetricEvaluator.java` 201-226, 424-428): while the lag
   is more than `backlog_lag_threshold` seconds of input, the band is [0, 1] and nothing goes down.
6. New count = ceil(current * target rate / true rate) (`F/JobVertexScaler.java` 205, 558), the
   factor clamped per step by `max_scale_down_factor` and `max_scale_up_factor` (213-229), then
   clamped to [min, max] (563-567) and to what the partitions can use (below).
7. Stabilization (`F/config/AutoScalerOptions.java` 76-82): after a change (or a start) nothing is
   decided for `stabilization_interval`, and its samples are not used.
8. Scale-down delay (`F/JobVertexScaler.java` 426-466, `F/DelayedScaleDown.java`): a scale-down
   waits until it has been asked for during a whole `scale_down_interval`, then goes to the
   largest count asked for in that interval; a scale-up or a no-change in between cancels it.
9. Sources capped at partitions, aligned (`F/alignment/ParallelismAligner.java` 197-239): Flink
   caps a source's parallelism at its partition count and prefers counts that divide it.

Mapped to Spark Structured Streaming: the unit is the streamlet's executor count, each with `cores`
task slots. Spark's Kafka source runs one task per inlet topic partition per micro-batch, so more
slots than partitions stay idle (the cap: ceil(partitions / cores) executors), and a micro-batch
with P partitions on S slots runs ceil(P / S) waves of tasks: 8 partitions on 5, 6 or 7 slots take
as long as on 4. Capacity is counted in waves (`aligned_executors`), the Spark form of Flink's
divisor alignment: a scale-up goes to the least count that gives the capacity asked for, and a
scale-down that would not remove a wave is not made (unlike Flink, which then uses the unaligned
count, here that count would lose capacity without saving a wave). Real-Time Mode runs one
long-lived task per partition and needs a core for each (trigger.py): its count is fixed at
ceil(partitions / cores) and the load does not move it.

A micro-batch reports its records and busy time only when it finishes, so a window may hold
none while one long batch drains a backlog (Spark's Kafka source reads everything there is unless
`max-offsets-per-trigger` bounds it). Then the running batch's time so far
(`MetricSample.running_seconds`) stands in: it reads at most the lag, so lag / running time is an
upper bound of its rate, and a batch that has run longer than the catch-up duration asks for more
executors (by at most `max_scale_up_factor` a step) before it finishes. Flink needs no such
bound: its busy time and record counts are continuous.

Busy time of a micro-batch streamlet: the sum of its batches' `durationMs.addBatch` (the data
processing, in monitor.QueryStats.add_batch_ms) over the window, less each batch's fixed cost;
`durationMs.triggerExecution` (the whole batch) would also count planning, offset fetching and the
commit log, per-batch costs that executors do not shorten. The wall time between batches is no
busy measure: with Spark's default trigger batches run back to back whenever data arrives, so a
nearly idle streamlet looks always busy. Nor is addBatch alone: it holds a cost every batch pays
whatever its records (job submission, task launch, a stateful operator's state store partitions),
and since batches run back to back and grow with the input, that cost fills the time between them
at 1,000 records/s as at 10,000 (bench/README.md's bench_latency: addBatch 40 and 44 ms a batch).
So each query's driver estimates its batches' fixed cost from the recent ones (`batch_fixed_cost`,
a line addBatch = fixed + records x per-record fitted robustly; 0 until the batches differ enough
in size to tell) and counts it apart (MetricSample.overhead_seconds); busy time is what is left,
the time that grows with the records. True rate = records processed / that busy time: the rate at
which more input is absorbed when batches grow. While backlogged the whole addBatch counts (a fixed
cost misjudged as too large must not hide a backlog's need). Flink's other refinements (observed
true processing rate while catching up, scaling-effectiveness detection, observed scalability,
memory tuning, excluded periods) are not here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from itertools import combinations, pairwise
from statistics import median
from typing import Any, Literal

from .errors import ConfigError

Direction = Literal["up", "down", "none"]


class AutoscaleSettingsError(ConfigError, ValueError):
    """An autoscaling setting out of its range (the message names the setting and the range)."""


def _knob(default: object, doc: str, flink: str, *, seconds: bool = False) -> Any:
    """A setting of AutoscaleSettings: its default, what it means, the Flink option it follows
    (`job.autoscaler.<flink>`), and whether it is a duration in seconds."""
    return field(default=default, metadata={"doc": doc, "flink": flink, "seconds": seconds})


@dataclass(frozen=True)
class AutoscaleSettings:
    """One streamlet's autoscaling settings: the one home of their names, defaults, meanings and
    Flink counterparts (each field's metadata; `KNOBS` reads them for the config keys, the resource
    fields and the README). Durations are seconds. Raises AutoscaleSettingsError on a value out of
    range."""

    min_executors: int = _knob(1, "fewest executors", "vertex.min-parallelism")
    max_executors: int | None = _knob(None, "most executors; unset: only the partition cap bounds it",
                                      "vertex.max-parallelism")
    target_utilization: float = _knob(0.7, "share of its capacity a streamlet should be busy after a change",
                                      "utilization.target")
    utilization_min: float = _knob(0.4, "below this utilization it scales down",
                                   "utilization.min")
    utilization_max: float = _knob(1.0, "above this utilization it scales up",
                                   "utilization.max")
    catch_up_duration: float = _knob(30 * 60.0, "time a change should give to drain the lag; 0 leaves lag out",
                                     "catch-up.duration", seconds=True)
    restart_time: float = _knob(5 * 60.0, "expected pause of processing while a change is applied",
                                "restart.time", seconds=True)
    metrics_window: float = _knob(15 * 60.0, "span the rates are averaged over", "metrics.window", seconds=True)
    stabilization_interval: float = _knob(5 * 60.0, "after a change or a start, no decision and no sample used",
                                          "stabilization.interval", seconds=True)
    scale_down_interval: float = _knob(60 * 60.0, "a scale-down must be asked for this long before it is made; "
                                       "0 makes it at once", "scale-down.interval", seconds=True)
    backlog_lag_threshold: float = _knob(5 * 60.0, "lag, in seconds of input, above which nothing scales down",
                                         "backlog-processing.lag-threshold", seconds=True)
    max_scale_up_factor: float = _knob(100_000.0, "a step multiplies the executors by at most 1 + this",
                                       "scale-up.max-factor")
    max_scale_down_factor: float = _knob(0.6, "a step removes at most this share of the executors",
                                         "scale-down.max-factor")

    def __post_init__(self) -> None:
        def bad(name: str, rule: str) -> AutoscaleSettingsError:
            key = name.replace("_", "-")  # the config key (KNOBS)
            return AutoscaleSettingsError(f"autoscaling.{key} = {getattr(self, name)!r}: {rule.replace('_', '-')}")

        if self.min_executors < 1:
            raise bad("min_executors", "must be 1 or more")
        if self.max_executors is not None and self.max_executors < self.min_executors:
            raise bad("max_executors", f"must be at least min_executors ({self.min_executors})")
        if not 0 < self.target_utilization <= 1:
            raise bad("target_utilization", "must be in (0, 1]")
        if not 0 <= self.utilization_min <= self.target_utilization:
            raise bad("utilization_min", f"must be in [0, target_utilization={self.target_utilization}]")
        if not self.target_utilization <= self.utilization_max <= 1:
            raise bad("utilization_max", f"must be in [target_utilization={self.target_utilization}, 1]")
        for name in ("catch_up_duration", "restart_time", "stabilization_interval", "scale_down_interval",
                     "backlog_lag_threshold", "max_scale_up_factor"):
            if getattr(self, name) < 0:
                raise bad(name, "must not be negative")
        if self.metrics_window <= 0:
            raise bad("metrics_window", "must be positive")
        if not 0 <= self.max_scale_down_factor < 1:
            raise bad("max_scale_down_factor", "must be in [0, 1)")


Mode = Literal["off", "passive", "active"]
MODES: tuple[Mode, ...] = ("off", "passive", "active")
"""off: nothing evaluated (the default); passive: decisions reported, never applied (Flink
`job.autoscaler.scaling.enabled` false); active: decisions applied."""
SECTION = "autoscaling"  # the config section: streamlets.<name>.autoscaling.<key>
MODE_KEY = "mode"


@dataclass(frozen=True)
class Knob:
    """One autoscaling setting as the config and the resource carry it (from AutoscaleSettings'
    field metadata): `key` in the config (kebab case: `catch-up-duration`), `field` of
    AutoscaleSettings, `resource` field of spec.streamlets[].autoscaling (snake case here, camelCase
    in the resource; durations end in `_seconds`), `kind` int or float, `seconds` a duration (the
    config takes "5 minutes", a bare number being milliseconds as everywhere in the config; the
    resource takes seconds), `default`, `doc`, `flink` (the `job.autoscaler.` option it follows)."""

    key: str
    field: str
    resource: str
    kind: type
    seconds: bool
    default: Any
    doc: str
    flink: str

    def parse(self, value: Any) -> int | float | None:
        """A config value as the setting's (seconds for a duration); raises AutoscaleSettingsError
        naming the key and the forms accepted."""
        from .params import parse_duration

        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            if self.default is None:
                return None
            raise AutoscaleSettingsError(f"autoscaling.{self.key}: a value is needed")
        try:
            if isinstance(value, bool):
                raise ValueError(value)
            if self.seconds:
                return parse_duration(value).total_seconds()
            number = float(str(value).strip())
            if self.kind is int:
                if not number.is_integer():
                    raise ValueError(value)
                return int(number)
            return number
        except ValueError:
            what = ("a duration (examples: 90s, 5 minutes, 1h)" if self.seconds else
                    "a whole number" if self.kind is int else "a number")
            raise AutoscaleSettingsError(f"autoscaling.{self.key}: {value!r} is not {what}") from None


def _knobs() -> tuple[Knob, ...]:
    out = []
    for f in fields(AutoscaleSettings):
        meta = f.metadata
        kind = int if f.name.endswith("_executors") else float
        out.append(Knob(f.name.replace("_", "-"), f.name, f.name + ("_seconds" if meta["seconds"] else ""), kind,
                        meta["seconds"], f.default, meta["doc"], meta["flink"]))
    return tuple(out)


KNOBS: dict[str, Knob] = {k.key: k for k in _knobs()}
"""The settings of streamlets.<name>.autoscaling, by config key (besides `mode`)."""


@dataclass(frozen=True)
class Autoscaling:
    """A streamlet's autoscaling: its `mode` (MODES) and `settings`. Built from the config
    (`from_config`) or the resource (`from_resource`); `resource()` is what the resource carries."""

    mode: Mode = "off"
    settings: AutoscaleSettings = field(default_factory=AutoscaleSettings)

    @classmethod
    def from_config(cls, values: dict[str, Any]) -> "Autoscaling":
        """From the entries of streamlets.<name>.autoscaling (config key -> value). Raises
        AutoscaleSettingsError naming the key: an unknown key, a value of the wrong form, a value
        out of range."""
        return cls().updated(values)

    def updated(self, values: dict[str, Any]) -> "Autoscaling":
        """A copy with config entries (config key -> value) applied over these settings; raises
        AutoscaleSettingsError as from_config."""
        mode = str(values.get(MODE_KEY, self.mode)).strip().lower()
        if mode not in MODES:
            raise AutoscaleSettingsError(f"autoscaling.mode: {values.get(MODE_KEY)!r} is not one of {', '.join(MODES)}")
        unknown = sorted(set(values) - set(KNOBS) - {MODE_KEY})
        if unknown:
            raise AutoscaleSettingsError(f"autoscaling.{unknown[0]}: no such setting (settings: "
                                         f"{', '.join((MODE_KEY, *KNOBS))})")
        parsed = {KNOBS[k].field: KNOBS[k].parse(v) for k, v in values.items() if k != MODE_KEY}
        return Autoscaling(mode, replace(self.settings, **parsed))  # type: ignore[arg-type]

    @classmethod
    def from_resource(cls, values: dict[str, Any]) -> "Autoscaling":
        """From spec.streamlets[].autoscaling as the typed spec holds it (snake case, unset fields
        absent or None). Raises AutoscaleSettingsError for a value out of range."""
        mode = values.get("mode") or "off"
        if mode not in MODES:
            raise AutoscaleSettingsError(f"autoscaling.mode: {mode!r} is not one of {', '.join(MODES)}")
        given = {k.field: values[k.resource] for k in KNOBS.values() if values.get(k.resource) is not None}
        return cls(mode, AutoscaleSettings(**given))

    def resource(self) -> dict[str, Any]:
        """The resource's fields (snake case), the mode and every setting that is not its default."""
        out: dict[str, Any] = {"mode": self.mode}
        for k in KNOBS.values():
            value = getattr(self.settings, k.field)
            if value != k.default:
                out[k.resource] = value
        return out


@dataclass(frozen=True)
class MetricSample:
    """One observation of a streamlet (one scrape). Counters are cumulative since the streamlet's
    process started (a drop reads as a restart); the rest is the value now.

    - `at`: when, in seconds (any monotonic clock the caller keeps; Unix seconds will do).
    - `records`: records its queries read (monitor.QueryStats.input_rows, summed over queries).
    - `busy_seconds`: time spent processing them (the sum of every batch's durationMs.addBatch:
      monitor.QueryStats.busy_seconds, the metric streamlets_busy_seconds_total; a streamlet's
      queries share its executors, so their records and busy times add up).
    - `lag`: records not yet read, summed over its inlet partitions (metrics.InletLag.lag).
    - `executors`: executors it runs now; `cores`: task slots per executor.
    - `partitions`: inlet topic partitions it reads in parallel (distinct (topic, partition) of
      its InletLag rows).
    - `real_time`: its queries run in Real-Time Mode (a core per partition, fixed).
    - `running_seconds`: how long its longest-running unfinished micro-batch has run (the metric
      streamlets_batch_running_seconds; 0: none runs). Its records and busy time count only when
      it finishes; until then this bounds its rate (evaluate).
    - `overhead_seconds`: the part of busy_seconds that was its batches' fixed cost (each batch's
      batch_fixed_cost at its end, at most its addBatch: monitor.QueryStats.overhead_seconds, the
      metric streamlets_batch_overhead_seconds_total); busy time less it grows with the records.
    """

    at: float
    records: int
    busy_seconds: float
    lag: int
    executors: int
    cores: int
    partitions: int
    real_time: bool = False
    running_seconds: float = 0.0
    overhead_seconds: float = 0.0


# batch_fixed_cost: how many recent micro-batches it fits, and the fewest it fits at all
FIXED_COST_BATCHES = 40
FIXED_COST_MIN_BATCHES = 8


def batch_fixed_cost(batches: Sequence[tuple[int, float]]) -> float:
    """Seconds of a micro-batch's data processing (durationMs.addBatch) that do not grow with its
    records, from recent batches as (records, addBatch seconds) pairs: the intercept of the line
    seconds = fixed + records x per-record, fitted by Theil-Sen (the median of the pairwise slopes,
    then the median intercept), which a few batches slowed by a garbage collection or a cold
    executor do not move. 0 with fewer than FIXED_COST_MIN_BATCHES batches or when they all read as
    many records (no slope to tell the parts apart); at most the smallest batch's seconds."""
    if len(batches) < FIXED_COST_MIN_BATCHES:
        return 0.0
    slopes = [(d2 - d1) / (n2 - n1) for (n1, d1), (n2, d2) in combinations(batches, 2) if n1 != n2]
    if not slopes:
        return 0.0
    per_record = max(0.0, median(slopes))
    fixed = median(d - per_record * n for n, d in batches)
    return max(0.0, min(fixed, min(d for _, d in batches)))


@dataclass(frozen=True)
class Evaluation:
    """A streamlet's load averaged over the metric window (records per second unless named).

    `input_rate`: records read per second; `arrival_rate`: records written to its inlets per
    second (input rate plus the lag's growth, Flink's ingestion rate); `true_rate`: records per
    busy second (NaN with no busy time; inf when all of it was the batches' fixed cost); `busy`:
    busy seconds per second, the fixed cost left out (`overhead`: it per second); `lag`: the last
    sample's lag, `lag_seconds`: it in seconds of arrivals (inf when nothing arrives); `backlogged`:
    lag_seconds above the backlog threshold; `target_rate`: the capacity asked for at the target
    utilization (catch-up and restart terms included); `utilization`: arrival rate over true rate."""

    start: float
    end: float
    input_rate: float
    arrival_rate: float
    true_rate: float
    busy: float
    lag: int
    lag_seconds: float
    backlogged: bool
    target_rate: float
    utilization: float
    executors: int
    cores: int
    partitions: int
    running_seconds: float = 0.0  # the unfinished micro-batch whose time bounds true_rate (0: not used)
    overhead: float = 0.0  # the batches' fixed cost, seconds per second, left out of busy


class Hold(str, Enum):
    """Why a change the load asks for is not made now."""

    STABILIZING = "stabilizing"  # within the stabilization interval of the last change or start
    COLLECTING = "collecting"  # the metric window is not full yet
    BACKLOG = "backlog"  # a scale-down while the lag is above the backlog threshold
    SCALE_DOWN_DELAY = "scale-down-delay"  # a scale-down not yet asked for during scale_down_interval
    AT_MAX = "at-max"  # more executors wanted, already at max_executors
    AT_MIN = "at-min"  # fewer executors wanted, already at min_executors
    PARTITION_CAP = "partition-cap"  # more wanted, but the inlets' partitions keep no more cores busy
    ALIGNMENT = "alignment"  # fewer wanted, but no smaller count removes a wave of tasks


@dataclass(frozen=True)
class Decision:
    """What to do with a streamlet's executors now.

    `current`: executors it runs; `target`: executors to run (== current when nothing changes);
    `direction`: up, down or none (target against current); `wanted`: the count the load asks for
    before any hold (None before an evaluation); `held`: why a change is not made (None when none is
    held back); `reason`: one line for an Event or a status, with rates, lag and utilization;
    `evaluation`: the figures it used (None while stabilizing or collecting)."""

    at: float
    current: int
    target: int
    direction: Direction
    wanted: int | None
    held: Hold | None
    reason: str
    evaluation: Evaluation | None = None

    @property
    def changes(self) -> bool:
        """Whether applying it changes the executor count."""
        return self.target != self.current


@dataclass(frozen=True)
class AutoscalerState:
    """What the decisions remember between calls (the operator can keep it in the status):
    `scale_down_since`: when the pending scale-down was first asked for (None: none pending);
    `scale_down_asks`: (time, executors) of the asks within the scale-down interval that can still
    be the most asked for, fewer executors the later (Flink's DelayedScaleDown). A new run (the
    executors changed, whoever changed them, or the driver restarted) voids them."""

    scale_down_since: float | None = None
    scale_down_asks: tuple[tuple[float, int], ...] = ()


def partition_cap(partitions: int, cores: int) -> int:
    """Most executors whose cores the inlets' partitions keep busy: ceil(partitions / cores),
    at least 1 (Spark's Kafka source runs one task per topic partition; Real-Time Mode needs this
    many)."""
    return max(1, math.ceil(partitions / max(1, cores)))


def aligned_executors(wanted: int, partitions: int, cores: int) -> int:
    """The least executor count whose micro-batches run no more waves of tasks than `wanted`
    executors' slots would if every slot counted: with P partitions, S slots run ceil(P / S)
    waves, so capacity is P / waves partitions at a time. Returns at most partition_cap; e.g. 8
    partitions, 1 core: wanted 5 gives 8 (5 to 7 slots take two waves, as 4 do), wanted 3 gives 4."""
    cap = partition_cap(partitions, cores)
    if partitions <= 0 or wanted >= cap:
        return min(wanted, cap) if partitions > 0 else wanted
    waves = max(1, partitions // (wanted * cores))  # most waves that still give wanted * cores slots
    return min(cap, math.ceil(partitions / (waves * cores)))


def _changed_at(samples: Sequence[MetricSample]) -> float | None:
    """When the last run among `samples` started: the executors changed or a counter dropped (a
    restarted process); None when none did."""
    changed = None
    for before, after in pairwise(samples):
        if (after.executors != before.executors or after.records < before.records
                or after.busy_seconds < before.busy_seconds):
            changed = after.at
    return changed


def _window(samples: Sequence[MetricSample], settings: AutoscaleSettings, now: float
            ) -> tuple[float, float | None, list[MetricSample]]:
    """(when the current run is stable, when its metric window is full (None: no sample since it
    is stable), the window's samples). A run starts at the first sample, at a change of executors
    or at a counter drop (a restarted process); it is stable a stabilization interval later, and
    its window is full a metric window after its first stable sample (Flink's
    ScalingMetricCollector)."""
    changed = _changed_at(samples)
    stable = (samples[0].at if changed is None else changed) + settings.stabilization_interval
    after_stable = [s for s in samples if s.at >= stable]
    full_at = after_stable[0].at + settings.metrics_window if after_stable else None
    return stable, full_at, [s for s in after_stable if s.at >= now - settings.metrics_window]


def target_rate(settings: AutoscaleSettings, arrival_rate: float, lag: float, utilization: float,
                with_restart: bool) -> float:
    """Records per second a streamlet must process to run at `utilization` and drain `lag` within
    the catch-up duration (Flink's AutoScalerUtils.getTargetProcessingCapacity): arrival /
    utilization + lag / catch-up + (arrival * restart time / catch-up if `with_restart`). Infinite
    at utilization 0."""
    catch_up = settings.catch_up_duration
    lag_rate = lag / catch_up if catch_up else 0.0
    restart = arrival_rate * settings.restart_time / catch_up if with_restart and catch_up else 0.0
    if utilization <= 0:
        return math.inf
    return arrival_rate / utilization + lag_rate + restart


def evaluate(samples: Sequence[MetricSample], settings: AutoscaleSettings, now: float) -> Evaluation | None:
    """The window's averages (Evaluation), or None while stabilizing, while the window after the
    stabilization interval is not full, or with fewer than two samples in it."""
    if not samples:
        return None
    stable, full_at, window = _window(samples, settings, now)
    if now < stable or full_at is None or now < full_at or len(window) < 2:
        return None
    first, last = window[0], window[-1]
    span = last.at - first.at
    if span <= 0:
        return None
    records = last.records - first.records
    input_rate = records / span
    arrival = max(0.0, input_rate + (last.lag - first.lag) / span)
    lag_seconds = last.lag / arrival if arrival > 0 else (math.inf if last.lag > 0 else 0.0)
    backlogged = lag_seconds > settings.backlog_lag_threshold
    busy_s = last.busy_seconds - first.busy_seconds
    # the batches' fixed cost apart (none while backlogged: the whole addBatch counts)
    overhead = 0.0 if backlogged else min(busy_s, max(0.0, last.overhead_seconds - first.overhead_seconds))
    busy_s -= overhead
    if records > 0 and busy_s > 0:
        true_rate = records / busy_s
    else:  # no records: not measured; records but only fixed cost: no measurable per-record cost
        true_rate = math.inf if records > 0 and overhead > 0 else math.nan
    running = 0.0
    if records == 0 and last.running_seconds > 0 and last.lag > 0:
        # No micro-batch finished in the window, one is running: it reads at most the lag, so its
        # rate is at most lag / its time so far (an upper bound: never more executors than it shows).
        running = last.running_seconds
        true_rate, busy_s = last.lag / running, min(span, running)
    target = target_rate(settings, arrival, last.lag, settings.target_utilization, True)
    return Evaluation(start=first.at, end=last.at, input_rate=input_rate, arrival_rate=arrival,
                      true_rate=true_rate, busy=busy_s / span, lag=last.lag, lag_seconds=lag_seconds,
                      backlogged=backlogged, target_rate=target,
                      utilization=arrival / true_rate if true_rate > 0 else math.nan,
                      executors=last.executors, cores=last.cores, partitions=last.partitions,
                      running_seconds=running, overhead=overhead / span)


def _figures(e: Evaluation) -> str:
    """The evaluation as the reason text's second half."""
    lag = f"lag {e.lag} records" + (f" ({e.lag_seconds:.0f} s of input)" if math.isfinite(e.lag_seconds) else "")
    true = ("n/a" if math.isnan(e.true_rate) else "unbounded (only the batches' fixed cost measured)"
            if math.isinf(e.true_rate) else f"{e.true_rate:.1f}/s")
    if e.running_seconds:
        true = f"at most {true} (no micro-batch finished; one running {e.running_seconds:.0f} s)"
    util = "n/a" if math.isnan(e.utilization) else f"{e.utilization:.2f}"
    fixed = f" (+{e.overhead:.2f} fixed per batch)" if e.overhead else ""
    return (f"input {e.input_rate:.1f}/s, arrivals {e.arrival_rate:.1f}/s, capacity {true} on {e.executors} "
            f"executor(s) x {e.cores} core(s), busy {e.busy:.2f}{fixed}, utilization {util}, {lag}, "
            f"target rate {e.target_rate:.1f}/s, {e.partitions} partition(s)")


def decide(samples: Sequence[MetricSample], settings: AutoscaleSettings, state: AutoscalerState, now: float
           ) -> tuple[Decision, AutoscalerState]:
    """The decision for a streamlet at `now` from its samples (oldest first, at least those of the
    last stabilization interval and metric window) and the state of the previous call; returns it
    and the state for the next call. Pure: the caller applies the decision (or, in passive mode,
    only reports it) and passes the returned state back; it also sees that the samples are fresh
    (on a stopped driver's last samples it would decide on stale figures). Raises ValueError
    without samples."""
    if not samples:
        raise ValueError("autoscaling needs at least one metric sample")
    last = samples[-1]
    current = last.executors
    cap = partition_cap(last.partitions, last.cores) if last.partitions > 0 else None  # 0: not known

    def result(target: int, wanted: int | None, held: Hold | None, reason: str, ev: Evaluation | None,
               new_state: AutoscalerState) -> tuple[Decision, AutoscalerState]:
        direction: Direction = "up" if target > current else "down" if target < current else "none"
        return Decision(now, current, target, direction, wanted, held, reason, ev), new_state

    if last.real_time:  # a core per partition, whatever the load
        need = max(cap or current, settings.min_executors)
        text = (f"Real-Time Mode needs a core per inlet partition: {last.partitions} partition(s) on "
                f"{last.cores} core(s) per executor need {need} executor(s)")
        return result(need, need, None, text, None, AutoscalerState())

    stable, full_at, _ = _window(samples, settings, now)
    changed = _changed_at(samples)
    if state.scale_down_since is not None and changed is not None and state.scale_down_since < changed:
        state = AutoscalerState()  # asked for before the executors changed (or the driver restarted): void
    if now < stable:
        return result(current, None, Hold.STABILIZING,
                      f"stabilizing after the last change or start until {stable - now:.0f} s from now", None, state)
    ev = evaluate(samples, settings, now)
    if ev is None:
        left = "after the next sample" if full_at is None or full_at <= now else f"in {full_at - now:.0f} s"
        return result(current, None, Hold.COLLECTING,
                      f"collecting metrics: the {settings.metrics_window:.0f} s window is full {left}", None, state)

    figures = _figures(ev)
    up_at = target_rate(settings, ev.arrival_rate, ev.lag, settings.utilization_max, False)
    down_at = target_rate(settings, ev.arrival_rate, ev.lag, settings.utilization_min, True)
    idle = math.isnan(ev.true_rate) and ev.arrival_rate == 0 and ev.lag == 0  # nothing to do: go to the minimum
    if math.isnan(ev.true_rate) and not idle:
        return result(current, None, None, f"no busy time measured; {figures}", ev, AutoscalerState())
    if not idle and up_at <= ev.true_rate <= down_at:
        return result(current, current, None, f"within the utilization band [{settings.utilization_min}, "
                      f"{settings.utilization_max}]; {figures}", ev, AutoscalerState())

    factor = 0.0 if idle else ev.target_rate / ev.true_rate
    factor = min(max(factor, 1 - settings.max_scale_down_factor), 1 + settings.max_scale_up_factor)
    raw = max(1, math.ceil(factor * current - 1e-9))
    upper = min((b for b in (cap, settings.max_executors) if b is not None), default=sys.maxsize)
    lower = min(settings.min_executors, upper)
    wanted = min(max(raw, lower), upper)
    if wanted > current:
        wanted = max(wanted, min(aligned_executors(wanted, ev.partitions, ev.cores), upper))
    elif wanted < current:
        aligned = aligned_executors(wanted, ev.partitions, ev.cores)
        if aligned >= current:
            return result(current, wanted, Hold.ALIGNMENT,
                          f"{wanted} executor(s) would run as many waves of tasks over {ev.partitions} "
                          f"partition(s) as fewer and lose capacity, {current} kept; {figures}", ev, AutoscalerState())
        wanted = max(aligned, lower)

    bound = (f"the partition cap ({ev.partitions} partition(s) / {ev.cores} core(s) per executor)"
             if upper == cap else f"max_executors={settings.max_executors}")
    if wanted == current:
        if raw == current:  # outside the band by less than a whole executor
            return result(current, current, None, f"the load asks for no whole executor more or less; {figures}",
                          ev, AutoscalerState())
        if raw > current:
            return result(current, raw, Hold.PARTITION_CAP if upper == cap else Hold.AT_MAX,
                          f"more executors wanted ({raw}) but at {bound}; {figures}", ev, AutoscalerState())
        return result(current, raw, Hold.AT_MIN, f"fewer executors wanted ({raw}) but at min_executors="
                      f"{settings.min_executors}; {figures}", ev, AutoscalerState())

    if wanted > current:
        capped = f", capped at {bound} ({raw} wanted)" if raw > wanted else ""
        return result(wanted, wanted, None, f"scale up {current} -> {wanted}{capped}: capacity {ev.true_rate:.1f}/s "
                      f"below {up_at:.1f}/s (utilization {settings.utilization_max}); {figures}", ev, AutoscalerState())

    if ev.backlogged:
        return result(current, wanted, Hold.BACKLOG,
                      f"scale-down to {wanted} held: lag is {ev.lag_seconds:.0f} s of input, above the backlog "
                      f"threshold {settings.backlog_lag_threshold:.0f} s; {figures}", ev, AutoscalerState())
    since = state.scale_down_since if state.scale_down_since is not None else now
    window_start = now - settings.scale_down_interval
    # only the asks that can still be the most asked for: a later ask of as many or more outlasts an
    # earlier one in the interval (a sliding-window maximum), so at most one ask per executor count
    asks = (*(a for a in state.scale_down_asks if a[0] >= window_start - 1e-9 and a[1] > wanted), (now, wanted))
    capacity = "idle" if idle else "unbounded" if math.isinf(ev.true_rate) else f"{ev.true_rate:.1f}/s"
    why = (f"capacity {capacity} above {down_at:.1f}/s "
           f"(utilization {settings.utilization_min})")
    if now - since < settings.scale_down_interval:
        return result(current, wanted, Hold.SCALE_DOWN_DELAY,
                      f"scale-down to {wanted} delayed: asked for since {now - since:.0f} s, made after "
                      f"{settings.scale_down_interval:.0f} s; {why}; {figures}", ev, AutoscalerState(since, asks))
    target = max(n for _, n in asks)  # the most asked for within the interval (Flink's DelayedScaleDown)
    if target >= current:
        return result(current, wanted, Hold.SCALE_DOWN_DELAY, f"scale-down to {wanted} delayed: {target} "
                      f"executor(s) were asked for within {settings.scale_down_interval:.0f} s; {figures}",
                      ev, AutoscalerState(since, asks))
    return result(target, wanted, None, f"scale down {current} -> {target}: {why} for "
                  f"{now - since:.0f} s; {figures}", ev, AutoscalerState())


@dataclass
class Autoscaler:
    """`decide` with its memory: keeps the samples the next decision needs (the stabilization
    interval and metric window back, plus the sample a run started at) and the AutoscalerState.
    `observe(sample)` then `decide(now)`; not thread-safe."""

    settings: AutoscaleSettings = field(default_factory=AutoscaleSettings)
    samples: list[MetricSample] = field(default_factory=list)
    state: AutoscalerState = field(default_factory=AutoscalerState)

    def observe(self, sample: MetricSample) -> None:
        """Add a sample (times must not go backwards: ValueError) and drop those no decision needs."""
        if self.samples and sample.at < self.samples[-1].at:
            raise ValueError(f"metric sample at {sample.at} is older than the last one ({self.samples[-1].at})")
        self.samples.append(sample)
        # Enough that a run's start, when it is not among them, lies a stabilization interval and a
        # window back: its window is full (assuming samples come at most a stabilization interval apart).
        keep = self.settings.metrics_window + 2 * self.settings.stabilization_interval
        old = sum(1 for s in self.samples if s.at < sample.at - keep)
        if old > 1:  # and one older sample: it tells whether the executors changed since
            self.samples = self.samples[old - 1:]

    def decide(self, now: float | None = None) -> Decision:
        """The decision now (default: the last sample's time); ValueError before any sample."""
        if not self.samples:
            raise ValueError("autoscaling needs at least one metric sample")
        decision, self.state = decide(self.samples, self.settings, self.state,
                                      self.samples[-1].at if now is None else now)
        return decision


__all__ = ["KNOBS", "MODES", "AutoscaleSettings", "AutoscaleSettingsError", "Autoscaler", "Autoscaling",
           "AutoscalerState", "Decision", "Knob", "Mode",
           "Evaluation", "Hold", "MetricSample", "aligned_executors", "decide", "evaluate", "partition_cap",
           "target_rate"]
