"""Test kit: run one streamlet on in-memory rows and collect what its outlets wrote.

Rows go through the real Avro encoding both ways: the kit encodes inlet rows with fastavro,
the streamlet decodes them with Spark's from_avro, writes with to_avro, and the kit decodes the
outlet values with fastavro. Ports are backed by folders (FileTransport), not Kafka, so a test
needs only local Spark. Each batch of input rows is one file and so one micro-batch.

    result = run_streamlet(DelayStats, {"in": [row, row]}, config={"window": "1 hour"})
    assert result["out"] == [...]
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from . import state  # noqa: F401  (registers the imported-state reader with the runtime)
from .errors import StreamletRunError
from .runtime.failures import user_exception
from .runtime.layout import StateLayout
from .runtime.runconfig import StreamletRunConfig
from .runtime.runner import StreamletRuntime
from .runtime.transport import FileTransport
from .schema import decode, encode
from .streamlet import Streamlet

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Rows = Sequence[Mapping[str, Any]]

_ARROW_KAFKA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
     ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC"))]
)


@dataclass
class TestkitResult:
    """Decoded outlet records by outlet name (dicts as fastavro reads them), in the order written
    (micro-batch by micro-batch), their Kafka keys, and the queries' progress totals."""

    outlets: dict[str, list[dict[str, Any]]]
    keys: dict[str, list[str | None]] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, outlet: str) -> list[dict[str, Any]]:
        return self.outlets[outlet]


def spark_session() -> "SparkSession":
    """A local SparkSession with the connectors, for tests (shared within the process)."""
    from .runtime.spark_session import build_spark_session

    return build_spark_session("streamlets-testkit", {"spark.sql.shuffle.partitions": "2"}, master="local[2]")


def run_streamlet(
    streamlet: type[Streamlet],
    inputs: Mapping[str, Rows] | Sequence[Mapping[str, Rows]],
    *,
    config: Mapping[str, Any] | None = None,
    volume_mounts: Mapping[str, str] | None = None,
    spark: "SparkSession | None" = None,
    workdir: str | Path | None = None,
    name: str = "under-test",
) -> TestkitResult:
    """Run `streamlet` until its inputs are processed (Trigger.AvailableNow) and return outlet rows.

    `inputs` maps inlet name -> rows, or is a list of such maps, one per micro-batch. Rows are
    dicts in the form fastavro writes: logical types as Python values (`datetime.date` for
    `date`, an aware `datetime` for `timestamp-millis`/`-micros`, `Decimal`, `uuid.UUID` or its
    text).

    Raises:
        ValueError: an input names an inlet the streamlet lacks, or a row does not fit its inlet's
            schema (the message names the inlet, the batch, the row and fastavro's reason).
        streamlets.errors.StreamletRunError: a query failed while running; one line naming the
            streamlet, the query and the user's exception with its file and line, or a known Spark
            error's meaning and fix (e.g. null written into a non-null outlet field); Spark's
            `StreamingQueryException` is its `__cause__`.
        What `create_logic` itself raises before any query runs (pyspark's `AnalysisException`
        for a plan Spark refuses, streamlets.errors.SchemaMismatchError for columns that do not
        fit an outlet, ConfigError for a bad config value) propagates as it is.
    """
    spark = spark or spark_session()
    batches = [inputs] if isinstance(inputs, Mapping) else list(inputs)
    layout = StateLayout(str(workdir or tempfile.mkdtemp(prefix="streamlets-testkit-")))
    transport = FileTransport(layout.topics)
    shape = streamlet.shape()
    for batch in batches:
        unknown = set(batch) - {p.name for p in shape.inlets}
        if unknown:
            raise ValueError(f"{streamlet.class_name()} has no inlet(s) {', '.join(sorted(unknown))}")
    for inlet in shape.inlets:
        transport.folder(inlet.name).mkdir(parents=True, exist_ok=True)
        parsed = inlet.schema.parsed()
        for i, batch in enumerate(batches):
            rows = batch.get(inlet.name)
            if rows:
                _write_batch(transport.folder(inlet.name) / f"batch-{i:05d}.parquet", inlet.name,
                             [_encode_row(inlet.name, inlet.schema, parsed, i, n, r) for n, r in enumerate(rows)])

    run = StreamletRunConfig(
        app_id="testkit",
        streamlet=name,
        class_name=streamlet.class_name(),
        topics={p.name: p.name for p in (*shape.inlets, *shape.outlets)},
        config_parameters=dict(config or {}),
        volume_mounts=dict(volume_mounts or {}),
        checkpoint_root=layout.checkpoints(),  # the one streamlet's
        available_now=True,
    )
    runtime = StreamletRuntime(spark, run.app_id, None, transport)
    try:
        runtime.start_class(streamlet, run)
        for q in runtime.queries():
            try:
                q.awaitTermination()
            except Exception as e:  # Spark's StreamingQueryException: the query failed
                raise StreamletRunError(streamlet.__name__, _query(q.name, name), user_exception(str(e))) from e
        failures = runtime.failed()
        if failures:
            query, error = failures[0]
            raise StreamletRunError(streamlet.__name__, _query(query, name), user_exception(error))
    finally:
        runtime.stop()

    outlets: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, list[str | None]] = {}
    for outlet in shape.outlets:
        pairs = transport.written(outlet.name)
        parsed = outlet.schema.parsed()
        outlets[outlet.name] = [decode(outlet.schema, value, parsed) for _, value in pairs]
        keys[outlet.name] = [key.decode() if key is not None else None for key, _ in pairs]
    return TestkitResult(outlets, keys, {k: v for k, v in runtime.monitor.stats.items()})


def _query(query: str | None, streamlet: str) -> str:
    """A query's name without the `<streamlet>.` the runtime puts before it."""
    return (query or "?").removeprefix(f"{streamlet}.")


def _encode_row(inlet: str, schema, parsed, batch: int, n: int, row: Mapping[str, Any]) -> bytes:
    try:
        return encode(schema, dict(row), parsed)
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # fastavro's reasons name the field
        raise ValueError(f"inlet {inlet!r}, batch {batch}, row {n}: the row does not fit the inlet's schema: {e} "
                         f"(row {row!r})") from None


def _write_batch(path: Path, topic: str, values: list[bytes]) -> None:
    now = datetime.now(timezone.utc)
    table = pa.table(
        {"key": [None] * len(values), "value": values, "topic": [topic] * len(values),
         "partition": [0] * len(values), "offset": list(range(len(values))), "timestamp": [now] * len(values)},
        schema=_ARROW_KAFKA,
    )
    pq.write_table(table, path)
