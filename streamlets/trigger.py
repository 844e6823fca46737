"""How a streamlet's queries are triggered: micro-batch (the default), processing-time, real-time.

A streamlet declares it as a class attribute (`trigger = Trigger.real_time("5 seconds")`) or its
deploy/run config sets it (`streamlets.<name>.trigger = "real-time 5 seconds"`); the config wins.
Text form, as in config files and the application resource:

    micro-batch                     Spark's default: the next micro-batch as soon as the last ends
    processing-time <duration>      a micro-batch every <duration> (Trigger.ProcessingTime)
    real-time [<duration>]          Spark 4.1's Real-Time Mode; <duration> is its checkpoint
                                    interval (default 5 minutes, Spark's), not a latency target

Durations: a whole number and a unit, e.g. `500 milliseconds`, `5 seconds`, `1 minute` (also
`500ms`, `5s`, `1m`).

Real-Time Mode (Spark 4.1) runs long-lived tasks that process records as they arrive. It runs
stateless queries only (projections, filters, unions, stream-static joins) from the Kafka source
to the Kafka or foreach sink, in update output mode, with at least one free core per source
partition; Python UDFs and foreachBatch are refused. `apply` sets it with PySpark's own
`DataStreamWriter.trigger(realTime=...)` (PySpark 4.2, SPARK-54660).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .errors import StreamletError

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

Kind = Literal["micro-batch", "processing-time", "real-time"]
KINDS: tuple[str, ...] = ("micro-batch", "processing-time", "real-time")
# Spark's own default (Trigger.RealTime()). Every interval the long-running tasks end and new ones
# start; records arriving in that gap (a few hundred ms on 2 cores) wait, so a short interval puts
# the gap into the p99 (bench/README.md, one hop on 2 cores: with 5 s, p99 382 ms under load;
# with 5 minutes, p99 7 to 10 ms at 1,000 records/s on a quiet machine, a transition included). A
# longer one delays what happens per interval: progress and metrics, dead letters; and a failure
# or a stop replays the uncommitted batch (up to one interval of input, written again).
DEFAULT_CHECKPOINT_INTERVAL = "5 minutes"

_UNITS_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "second": 1000, "seconds": 1000,
             "sec": 1000, "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000}
_DURATION = re.compile(r"^\s*([0-9]+)\s*([a-z]+)\s*$")


class TriggerError(StreamletError, ValueError):
    """A trigger setting that cannot be understood (the message says what is accepted)."""


def duration_ms(text: str) -> int:
    """Milliseconds of a duration such as `5 seconds`, `500ms`, `1 minute`. TriggerError otherwise."""
    m = _DURATION.match(str(text).lower())
    if not m or m.group(2) not in _UNITS_MS:
        raise TriggerError(f"{text!r} is not a duration such as '500 milliseconds', '5 seconds' or '1 minute'")
    ms = int(m.group(1)) * _UNITS_MS[m.group(2)]
    if ms <= 0:
        raise TriggerError(f"{text!r}: a duration must be positive")
    return ms


@dataclass(frozen=True)
class Trigger:
    """A query trigger. `interval`: the processing-time interval, or Real-Time Mode's checkpoint
    interval (text, validated by duration_ms); None for micro-batch."""

    kind: Kind = "micro-batch"
    interval: str | None = None

    @classmethod
    def micro_batch(cls) -> "Trigger":
        """Spark's default trigger: the next micro-batch starts as soon as the last one ends."""
        return cls("micro-batch")

    @classmethod
    def processing_time(cls, interval: str) -> "Trigger":
        """A micro-batch every `interval` (`"10 seconds"`, `"500ms"`); TriggerError for an interval that is no
        duration."""
        duration_ms(interval)
        return cls("processing-time", interval)

    @classmethod
    def real_time(cls, checkpoint_interval: str = DEFAULT_CHECKPOINT_INTERVAL) -> "Trigger":
        """Real-Time Mode (Spark 4.1+, Trigger.RealTime): records flow through long-running tasks,
        checkpointed every `checkpoint_interval` (default DEFAULT_CHECKPOINT_INTERVAL); TriggerError for an
        interval that is no duration."""
        duration_ms(checkpoint_interval)
        return cls("real-time", checkpoint_interval)

    @classmethod
    def parse(cls, text: "str | Trigger") -> "Trigger":
        """The text form (see the module docstring). TriggerError names what is accepted."""
        if isinstance(text, Trigger):
            return text
        if not isinstance(text, str) or not text.strip():
            raise TriggerError(f"{text!r} is not a trigger: use micro-batch, processing-time <duration> "
                               "or real-time [<checkpoint interval>]")
        kind, _, rest = text.strip().partition(" ")
        rest = rest.strip()
        if kind == "micro-batch" and not rest:
            return cls.micro_batch()
        if kind == "processing-time" and rest:
            return cls.processing_time(rest)
        if kind == "real-time":
            return cls.real_time(rest or DEFAULT_CHECKPOINT_INTERVAL)
        raise TriggerError(f"{text!r} is not a trigger: use micro-batch, processing-time <duration> "
                           "or real-time [<checkpoint interval>]")

    @property
    def real_time_mode(self) -> bool:
        """True for Real-Time Mode."""
        return self.kind == "real-time"

    def text(self) -> str:
        """The trigger as the deploy config writes it: `micro-batch`, `processing-time 10 seconds`, `real-time
        5 minutes` (Trigger.parse reads it back)."""
        return self.kind if self.interval is None else f"{self.kind} {self.interval}"

    def __str__(self) -> str:
        return self.text()

    def apply(self, writer: "DataStreamWriter") -> "DataStreamWriter":
        """`writer` with this trigger set (PySpark's `DataStreamWriter.trigger`: `processingTime`,
        or `realTime` with the checkpoint interval); real-time queries must then use output mode
        update. Micro-batch leaves the writer as it is (Spark's default trigger)."""
        if self.kind == "processing-time":
            return writer.trigger(processingTime=f"{duration_ms(self.interval or '')} milliseconds")
        if self.kind == "real-time":
            return writer.trigger(realTime=f"{duration_ms(self.interval or DEFAULT_CHECKPOINT_INTERVAL)} milliseconds")  # type: ignore[call-overload]  # PySpark 4.2's @overloads of trigger() omit realTime
        return writer


MICRO_BATCH = Trigger.micro_batch()


# --- what Real-Time Mode cannot run (checked by the runner before a query starts) ------------

class RealTimeModeError(StreamletError):
    """A query Real-Time Mode cannot run; the message is one line naming the streamlet and why."""


# Logical operators of Spark 4.1's Real-Time Mode allowlist (RealTimeModeAllowlist holds their
# physical forms). Everything else is refused, with the reasons below where they are known.
_ALLOWED = {"Project", "Filter", "Union", "CollectMetrics", "SubqueryAlias", "EventTimeWatermark", "LocalRelation",
            "Range", "LogicalRDD", "LogicalRelation", "Generate", "Expand", "SerializeFromObject",
            "DeserializeToObject", "MapElements", "MapPartitions", "AppendColumns", "ResolvedHint", "Join",
            "StreamingRelationV2", "StreamingExecutionRelation", "View", "OneRowRelation"}
_STATEFUL = {"Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
             "TransformWithState", "FlatMapGroupsInPandasWithState", "TransformWithStateInPySpark", "Window",
             "Sort", "GlobalLimit", "LocalLimit", "Distinct", "Intersect", "Except", "Repartition",
             "RepartitionByExpression"}
# Operators that keep state across micro-batches (Spark's StateStoreWriter nodes), and stream-stream joins.
KEEPS_STATE = frozenset({"Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
                         "TransformWithState", "FlatMapGroupsInPandasWithState", "TransformWithStateInPySpark",
                         "GlobalLimit", "Distinct", "Join"})


def _nodes(plan) -> list:
    out, todo = [], [plan]
    while todo:
        node = todo.pop()
        out.append(node)
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return out


def _streaming(node) -> bool:
    return bool(node.isStreaming())


def optimized_nodes(df) -> list:
    """The JVM nodes of the streaming DataFrame `df`'s optimized logical plan."""
    spark = df.sparkSession
    jspark = spark._jsparkSession  # noqa: SLF001
    return _nodes(jspark.sessionState().optimizer().execute(df._jdf.queryExecution().analyzed()))  # noqa: SLF001


def stateful_refusal(node, why: str, operators: frozenset[str] | set[str] = _STATEFUL) -> str | None:
    """The reason a plan node among `operators` (default: what Real-Time Mode refuses as stateful or
    blocking) is refused, `why` saying what the mode runs; None for other nodes. A stream-stream
    join keeps state too: refused where `operators` has "Join"."""
    name = node.getClass().getSimpleName()
    if name == "Join" and "Join" in operators and all(_streaming(node.children().apply(i)) for i in range(2)):
        return f"a stream-stream join runs in the query; {why}"
    if name in operators and name != "Join":
        return f"a stateful or blocking operator ({name}) runs in the query; {why}"
    return None


def source_refusal(node, mode: str) -> str | None:
    """The reason a plan node that reads a source other than Kafka is refused by `mode`, else None."""
    name = node.getClass().getSimpleName()
    if name == "StreamingRelationV2":
        source = str(node.sourceName())
        return None if source == "kafka" else f"the query reads a {source} source; {mode} reads Kafka only"
    if name == "StreamingRelation":
        return f"the query reads a {node.dataSource().className()} source; {mode} reads Kafka only"
    return None


def plan_refusals(df) -> list[str]:
    """Why Real-Time Mode cannot run the streaming DataFrame `df` (empty: it can, as far as the
    optimized logical plan shows): stateful operators, Python UDFs, sources other than Kafka,
    stream-stream joins. Spark's own allowlist check (at the query's first batch) stays on."""
    reasons: list[str] = []
    for node in optimized_nodes(df):
        name = node.getClass().getSimpleName()
        refused = stateful_refusal(node, "Real-Time Mode runs stateless queries") or source_refusal(node, "Real-Time Mode")
        if "Python" in name or "Pandas" in name or "Arrow" in name:
            reasons.append(f"a Python UDF ({name}) runs in the query; Real-Time Mode runs JVM expressions only")
        elif refused:
            reasons.append(refused)
        elif name == "Join" and all(_streaming(node.children().apply(i)) for i in range(2)):
            reasons.append("a stream-stream join runs in the query; Real-Time Mode joins a stream with static data only")
        elif name not in _ALLOWED:
            reasons.append(f"operator {name} is not in Real-Time Mode's allowlist")
    return list(dict.fromkeys(reasons))


def writer_sink(writer) -> str | None:
    """The sink format a DataStreamWriter was given (`kafka`, `foreachBatch`, `parquet`...), read
    from the JVM writer; None if it cannot be told."""
    try:
        jw = writer._jwrite  # noqa: SLF001
        field = jw.getClass().getDeclaredField("source")
        field.setAccessible(True)
        return str(field.get(jw))
    except Exception:  # another Spark's writer: leave it to Spark's own check
        return None


def sink_refusal(sink: str | None) -> str | None:
    """Why Real-Time Mode cannot write to `sink` (a DataStreamWriter's source name, writer_sink), or None for
    Kafka, foreach and an unknown sink."""
    if sink is None or sink in ("kafka", "foreach"):
        return None
    if sink == "foreachBatch":
        return "the query writes through foreachBatch; Real-Time Mode writes to Kafka or a foreach sink only"
    return f"the query writes to a {sink} sink; Real-Time Mode writes to Kafka or a foreach sink only"


def cores_refusal(partitions: int, cores: int, taken: int = 0) -> str | None:
    """Real-Time Mode runs one long-lived task per source partition: they must all fit in the
    cores (`taken`: cores other real-time queries of the application already hold)."""
    if partitions + taken > cores:
        held = f" ({taken} held by other real-time queries)" if taken else ""
        return (f"its inlets have {partitions} Kafka partitions but only {cores - taken} of {cores} cores are free{held}; "
                "Real-Time Mode needs a core per partition (more executor cores or local[N])")
    return None
