"""Where port data lives: Kafka topics (sandbox, cluster) or folders (test kit).

Both give and take DataFrames shaped like Spark's Kafka source: key, value (binary), topic,
partition, offset, timestamp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..kafka_security import KafkaConnection, KafkaSecurity
from ..sources import load_named

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader, DataStreamWriter

KAFKA_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def load_source(spark: "SparkSession", reader: "DataStreamReader", name: str | None, path: str | None = None) -> "DataFrame":
    """`reader.load(path)`, as the source `name` (streamlets.sources.load_named) when one is given."""
    if name is not None:
        return load_named(spark, reader, name, path)
    return reader.load(path) if path is not None else reader.load()


class KafkaTransport:
    """Spark's Kafka source and sink (spark-sql-kafka-0-10) on `bootstrap_servers`.

    `security` (streamlets.kafka_security) says how the clients connect: its Java settings become
    `kafka.`-prefixed options of every read and write; `options` are passed through after them
    (Spark's own source options, or any other `kafka.*` client setting); streams read with
    `kafka.isolation.level=read_committed` (exactly-once outlets, runtime.exactly_once); the source starts at the
    earliest offset when a query has no checkpoint (Kafka `startingOffsets`), and does not
    fail when offsets were deleted by retention (`failOnDataLoss=false` would hide loss, so it
    stays true unless set).
    """

    def __init__(self, bootstrap_servers: str, options: Mapping[str, str] | None = None,
                 security: KafkaSecurity | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.options = dict(options or {})
        self.security = security or KafkaSecurity()

    @property
    def connection(self) -> KafkaConnection:
        """The bootstrap servers with the security: what confluent-kafka clients are given."""
        return KafkaConnection(bootstrap_servers=self.bootstrap_servers, security=self.security)

    def _client_options(self) -> dict[str, str]:
        """`kafka.bootstrap.servers`, the security's Java settings (secrets read now), then `options`."""
        return {"kafka.bootstrap.servers": self.bootstrap_servers, **self.security.java("kafka."), **self.options}

    def _reader(self, reader):
        reader = reader.format("kafka")
        for k, v in self._client_options().items():
            reader = reader.option(k, v)
        return reader

    def read_stream(self, spark: "SparkSession", topic: str, max_offsets_per_trigger: int | None = None, *,
                    name: str | None = None) -> "DataFrame":
        # read_committed: only committed transactions (exactly-once outlets: whole micro-batches);
        # records of non-transactional producers are read as before.
        """A streaming DataFrame of `topic` (Kafka's columns: key, value, topic, partition, offset,
        timestamp), from the earliest offset on a first start, reading committed records only
        (isolation.level read_committed); at most `max_offsets_per_trigger` records per micro-batch when
        set; the source named `name` (streamlets.sources) when given."""
        reader = (self._reader(spark.readStream).option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("kafka.isolation.level", "read_committed"))
        if max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        return load_source(spark, reader, name)

    def read_range(self, spark: "SparkSession", topic: str, start: dict[str, int] | None, end: dict[str, int]) -> "DataFrame":
        """Batch read of `topic` from `start` (per partition, inclusive; None: earliest) to `end` (exclusive)."""
        parts = sorted(end, key=int)
        starting = json.dumps({topic: {p: start.get(p, -2) for p in parts}}) if start else "earliest"
        return (
            self._reader(spark.read)
            .option("assign", json.dumps({topic: [int(p) for p in parts]}))
            .option("startingOffsets", starting)
            .option("endingOffsets", json.dumps({topic: {p: end[p] for p in parts}}))
            .load()
        )

    def partitions(self, topic: str, timeout: float = 10.0) -> int:
        """Number of partitions of `topic` (0 if it does not exist), from the broker's metadata."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        from ..kafka_logging import client_config

        passed = {k[len("kafka."):]: v for k, v in self.options.items() if k.startswith("kafka.")}
        conf: dict[str, Any] = {**client_config({"bootstrap.servers": self.connection}), **passed}
        try:
            meta = AdminClient(conf).list_topics(topic, timeout=timeout)
        except (KafkaException, ValueError, TypeError):  # Java-only client settings librdkafka does not know
            return 0
        found = meta.topics.get(topic)
        return 0 if found is None or found.error is not None else len(found.partitions)

    def write_stream(self, df: "DataFrame", topic: str) -> "DataStreamWriter":
        """A DataStreamWriter to `topic` with Spark's Kafka sink (at-least-once) and the transport's `kafka.*`
        options; `df` has Kafka's key and value columns."""
        writer = df.writeStream.format("kafka").option("topic", topic)
        for k, v in self._client_options().items():
            if k.startswith("kafka."):
                writer = writer.option(k, v)
        return writer

    def write_batch(self, df: "DataFrame", topic: str) -> None:
        """Write the batch DataFrame `df` (key, value) to `topic` with Spark's Kafka sink (the
        bootstrap servers and the security's Java settings; `options` are a reader's)."""
        writer = df.write.format("kafka").option("topic", topic)
        for k, v in {"kafka.bootstrap.servers": self.bootstrap_servers, **self.security.java("kafka.")}.items():
            writer = writer.option(k, v)
        writer.save()


class FileTransport:
    """Each topic is a folder of Parquet files with the Kafka columns (the test kit's transport).

    Streaming reads pick up files in order (Spark's file source); nothing is ever malformed here
    because the test kit encodes every value itself.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def folder(self, topic: str) -> Path:
        """The folder holding `topic`'s Parquet files: `<root>/<topic>`."""
        return self.root / topic

    def read_stream(self, spark: "SparkSession", topic: str, max_offsets_per_trigger: int | None = None, *,
                    name: str | None = None) -> "DataFrame":
        """A streaming DataFrame of `topic`'s Parquet files with Kafka's columns, one file per micro-batch (so
        that tests set batch boundaries); `max_offsets_per_trigger` is ignored; the source named `name` when
        given."""
        self.folder(topic).mkdir(parents=True, exist_ok=True)
        # One file per micro-batch, so that tests control batch boundaries (and watermarks).
        reader = spark.readStream.format("parquet").schema(KAFKA_COLUMNS).option("maxFilesPerTrigger", 1)
        return load_source(spark, reader, name, str(self.folder(topic)))

    def read_range(self, spark, topic, start, end) -> "DataFrame":
        """Every record of `topic` as a batch DataFrame (the test kit's topics are small; `start` and `end`
        are ignored)."""
        return spark.read.schema(KAFKA_COLUMNS).parquet(str(self.folder(topic)))

    def write_stream(self, df: "DataFrame", topic: str) -> "DataStreamWriter":
        """One Parquet file per micro-batch, `batch-<id>.parquet`, rows in the batch's order.

        Through foreachBatch, so that every output mode works (Spark's file sink is append-only)
        and a replayed batch replaces its file. Rows are collected on the driver: test sizes.
        """
        folder = self.folder(topic)
        folder.mkdir(parents=True, exist_ok=True)

        from pyspark.sql import functions as F

        def write(batch: "DataFrame", batch_id: int) -> None:
            import os

            import pyarrow as pa
            import pyarrow.parquet as pq

            rows = batch.select(F.col("key").cast("binary").alias("key"), "value").collect()
            table = pa.table({"key": [None if r.key is None else bytes(r.key) for r in rows],
                              "value": [None if r.value is None else bytes(r.value) for r in rows]},
                             schema=pa.schema([("key", pa.binary()), ("value", pa.binary())]))
            tmp = folder / f".batch-{batch_id:08d}.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, folder / f"batch-{batch_id:08d}.parquet")

        return df.writeStream.foreachBatch(write)

    def written(self, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        """(key, value) pairs written to `topic`, in batch order and, within a batch, row order."""
        import pyarrow.parquet as pq

        pairs: list[tuple[bytes | None, bytes | None]] = []
        for path in sorted(self.folder(topic).glob("batch-*.parquet")):
            table = pq.read_table(path)
            pairs.extend(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
        return pairs

    def write_batch(self, df: "DataFrame", topic: str) -> None:
        """Append the batch DataFrame `df` to `topic`'s folder as Parquet."""
        df.write.mode("append").parquet(str(self.folder(topic)))
