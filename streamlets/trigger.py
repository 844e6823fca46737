"""How a streamlet's queries are triggered: micro-batch (the default), processing-time, real-time.

A streamlet declares it as a class attribute (`trigger = Trigger.real_time("5 seconds")`) or its
deploy/run config sets it (`streamlets.<name>.trigger = "real-time 5 seconds"`); the config wins.
Text form, as in config files and the application resource:

    micro-batch                     Spark's default: the next micro-batch as soon as the last ends
    processing-time <duration>      a micro-batch every <duration> (Trigger.ProcessingTime)
    real-time [<duration>]          Spark 4.1's Real-Time Mode; <duration> is its checkpoint
                                    interval (default 5 seconds), not a latency target

Durations: a whole number and a unit, e.g. `500 milliseconds`, `5 seconds`, `1 minute` (also
`500ms`, `5s`, `1m`).

Real-Time Mode (Spark 4.1) runs long-lived tasks that process records as they arrive. It runs
stateless queries only (projections, filters, unions, stream-static joins) from the Kafka source
to the Kafka or foreach sink, in update output mode, with at least one free core per source
partition; Python UDFs and foreachBatch are refused. PySpark 4.1.1 has no `trigger(realTime=)`
keyword (it came in 4.2): `apply` reaches the JVM's `org.apache.spark.sql.streaming.Trigger.RealTime`
through py4j.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

Kind = Literal["micro-batch", "processing-time", "real-time"]
KINDS: tuple[str, ...] = ("micro-batch", "processing-time", "real-time")
DEFAULT_CHECKPOINT_INTERVAL = "5 seconds"

_UNITS_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "second": 1000, "seconds": 1000,
             "sec": 1000, "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000}
_DURATION = re.compile(r"^\s*([0-9]+)\s*([a-z]+)\s*$")


class TriggerError(ValueError):
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
        return cls("micro-batch")

    @classmethod
    def processing_time(cls, interval: str) -> "Trigger":
        duration_ms(interval)
        return cls("processing-time", interval)

    @classmethod
    def real_time(cls, checkpoint_interval: str = DEFAULT_CHECKPOINT_INTERVAL) -> "Trigger":
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
        return self.kind == "real-time"

    def text(self) -> str:
        return self.kind if self.interval is None else f"{self.kind} {self.interval}"

    def __str__(self) -> str:
        return self.text()

    def apply(self, writer: "DataStreamWriter") -> "DataStreamWriter":
        """`writer` with this trigger set. Real-time: the JVM's Trigger.RealTime(ms) set on the
        writer's JVM object through py4j (PySpark 4.1.1 has no realTime keyword); the query must
        then use output mode update."""
        if self.kind == "processing-time":
            return writer.trigger(processingTime=f"{duration_ms(self.interval or '')} milliseconds")
        if self.kind == "real-time":
            jvm = writer._spark._sc._jvm  # noqa: SLF001 (PySpark's own handles: no public API in 4.1.1)
            jtrigger = jvm.org.apache.spark.sql.streaming.Trigger.RealTime(duration_ms(self.interval or DEFAULT_CHECKPOINT_INTERVAL))
            writer._jwrite = writer._jwrite.trigger(jtrigger)  # noqa: SLF001
            return writer
        return writer


MICRO_BATCH = Trigger.micro_batch()
