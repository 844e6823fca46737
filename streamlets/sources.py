"""Named streaming sources (Spark 4.2's `DataStreamReader.name()`, SPARK-54909).

A query whose streaming sources are all named keeps its offsets per name in its checkpoint
(`offsets/N` lines `<name>:<offsets>`), so that a new version of the query may add a source, drop
one or read them in another order and still continue from the checkpoint; unnamed, Spark keys
the offsets by position and refuses a changed number of sources.

The SDK names every source it reads: an inlet's Kafka source `inlet_<inlet>` (StreamletContext
.read_stream, the control inlet too), a volume mount's files `mount_<mount>` (read_files), a
query's imported state `initial_state_<operator id>` (StreamletContext.initial_state); a second
read of one of them before the query starts gets `_2`, `_3`. A streamlet reading a source of its
own names it with `load_named` to the same end. Spark accepts ASCII letters, digits and `_` in a
name: the dashes of port names become `_` (port names are DNS labels, so no two collide).

Spark reads `spark.sql.streaming.queryEvolution.enableSourceEvolution` when a source is loaded (a
name needs it on, an unnamed load fails with it on), so `load_named` switches it on for the load
only; the runtime (streamlets.runtime.named_sources) switches it on again for a query's start
when every source of the query is named.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader

__all__ = ["SOURCE_EVOLUTION", "load_named", "session_conf", "source_name"]

SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
_VALID = re.compile(r"^[A-Za-z0-9_]+$")  # DataStreamReader.name's rule (INVALID_STREAMING_SOURCE_NAME)

INLET = "inlet"
MOUNT = "mount"
INITIAL_STATE = "initial_state"


def source_name(kind: str, name: str | int) -> str:
    """The name of a source: `<kind>_<name>`, `-` and `.` as `_` (`inlet`, `flight-data` ->
    `inlet_flight_data`). ValueError naming it if the result has other characters than Spark's
    (ASCII letters, digits, `_`)."""
    out = f"{kind}_{name}".replace("-", "_").replace(".", "_")
    if not _VALID.match(out):
        raise ValueError(f"{kind} {name!r} gives the streaming source name {out!r}, which Spark refuses "
                         "(ASCII letters, digits and '_' only)")
    return out


@contextlib.contextmanager
def session_conf(spark: "SparkSession", conf: Mapping[str, str]) -> Iterator[None]:
    """The SQL settings `conf` on the session `spark` while inside, the previous values (or none)
    restored afterwards."""
    before: dict[str, str | None] = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in before.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def load_named(spark: "SparkSession", reader: "DataStreamReader", name: str, path: str | None = None) -> "DataFrame":
    """`reader.name(name).load(path)`, with Spark's source evolution switched on for the load only
    (SOURCE_EVOLUTION): a streaming DataFrame whose source is `name` in its query's checkpoint.
    `spark` is the reader's session. PySparkValueError (INVALID_STREAMING_SOURCE_NAME) for a name
    with other characters than ASCII letters, digits and `_` (source_name makes valid ones)."""
    with session_conf(spark, {SOURCE_EVOLUTION: "true"}):
        named = reader.name(name)
        return named.load(path) if path is not None else named.load()
