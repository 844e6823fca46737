"""Exactly-once outlets (streamlets.runtime.exactly_once, the streamlets-kafka-eos sink) on a real
broker and real Spark, in this process's session: a micro-batch is visible to read_committed
consumers only when it commits as a whole (a failed batch's finished tasks wrote, and are
aborted), a replayed batch is written once, a fresh checkpoint's batches are written even where
batch ids repeat, keys land where Spark's Kafka sink puts them, and a newer driver of the same
outlet query fences an older one. Driver crashes between the tasks' writes, the decision and the
commits run in their own processes: tests/integration/test_eos_executor_writes.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from blueprint.sandbox.kafka_broker import create_topics
from streamlets.kafka_security import KafkaConnection
from streamlets.runtime.exactly_once import ensure_ledger, ledger_state, sink_options, transactional_id
from streamlets.runtime.transport import KafkaTransport
from support.kafka import read_topic

pytestmark = pytest.mark.timeout(600)


def committed_records(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    """Every record a read_committed consumer sees in `topic`, by partition then offset."""
    return [(m.key(), m.value()) for m in sorted(read_topic(bootstrap, topic), key=lambda m: (m.partition(), m.offset()))]


def values(bootstrap: str, topic: str) -> list[int]:
    return sorted(int(v) for _, v in committed_records(bootstrap, topic))


def add_batch(spark, folder: Path, name: str, lo: int, hi: int) -> None:
    """One Parquet file of ids lo..hi-1: one micro-batch of the query (maxFilesPerTrigger=1)."""
    spark.range(lo, hi, numPartitions=1).write.parquet(str(folder / name))


def outlet_query(spark, bootstrap: str, app: str, topic: str, source: Path, checkpoint: Path, *,
                 fail_at: int | None = None, trigger: dict | None = None):
    """Source files' ids -> (key, value) = (id, id as UTF-8) in 4 Spark partitions -> the
    exactly-once sink, as context.write_stream starts it. `fail_at`: the task holding that id
    fails after its partition's earlier rows were sent."""
    from pyspark.sql import functions as F

    rows = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(str(source / "*"))
            .repartition(4))
    if fail_at is not None:
        @F.udf("long")
        def fail(i):
            if i == fail_at:
                raise RuntimeError("a task fails after writing some rows")
            return i

        rows = rows.select(fail("id").alias("id"))
    encoded = rows.select(F.col("id").cast("string").alias("key"), F.encode(F.col("id").cast("string"), "utf-8").alias("value"))
    ensure_ledger(KafkaTransport(bootstrap).connection, app)
    options = sink_options(KafkaTransport(bootstrap), app_id=app, streamlet="s", query="out", topic=topic,
                           checkpoint=str(checkpoint))
    writer = encoded.writeStream.format("streamlets-kafka-eos").options(**options) \
        .option("checkpointLocation", str(checkpoint))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def test_failed_batch_is_invisible_and_replay_is_written_once(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    app = f"eo-{uuid.uuid4().hex[:8]}"
    topic = f"{app}.out"
    create_topics(bootstrap, [(topic, 3, {})])
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    add_batch(spark, source, "0", 0, 1000)
    add_batch(spark, source, "1", 1000, 3000)

    first = outlet_query(spark, bootstrap, app, topic, source, checkpoint, fail_at=2500)
    with pytest.raises(Exception, match="a task fails after writing some rows"):
        first.awaitTermination(300)
    # Batch 0 committed; batch 1's finished tasks had written: their transactions were aborted.
    assert values(bootstrap, topic) == list(range(1000))
    kafka = KafkaConnection(bootstrap_servers=bootstrap)
    prefix = transactional_id(app, "s", "out")
    assert ledger_state(kafka, app, prefix)["batch"] == 0

    second = outlet_query(spark, bootstrap, app, topic, source, checkpoint)  # replays batch 1 whole
    second.awaitTermination(300)
    assert second.exception() is None
    records = committed_records(bootstrap, topic)
    assert sorted(int(v) for _, v in records) == list(range(3000))  # each record once
    assert all(k == v for k, v in records)
    state = ledger_state(kafka, app, prefix)
    assert (state["batch"], state["state"]) == (1, "committed")
    assert sum(int(kv.split("=")[1]) for line in state["transactions"] for kv in line.split()[5].split(",")) == 2000

    # A fresh checkpoint (state reset) plans batch 0 anew: same id, other offset-log entry: written.
    fresh = tmp_path / "fresh-in"
    add_batch(spark, fresh, "0", 3000, 3010)
    third = outlet_query(spark, bootstrap, app, topic, fresh, tmp_path / "fresh-checkpoint")
    third.awaitTermination(300)
    assert third.exception() is None
    assert values(bootstrap, topic) == list(range(3010))


def test_records_go_to_the_partitions_of_sparks_kafka_sink(spark, kafka_broker, tmp_path):
    """Keys land where Spark's Kafka sink (kafka-clients' default partitioner) puts them."""
    from pyspark.sql import functions as F

    bootstrap = kafka_broker.bootstrap_servers
    app = f"eo-{uuid.uuid4().hex[:8]}"
    ours, sparks = f"{app}.a", f"{app}.b"
    create_topics(bootstrap, [(ours, 3, {}), (sparks, 3, {})])
    add_batch(spark, tmp_path / "in", "0", 0, 300)
    query = outlet_query(spark, bootstrap, app, ours, tmp_path / "in", tmp_path / "checkpoint")
    query.awaitTermination(300)
    assert query.exception() is None
    (spark.range(0, 300).select(F.col("id").cast("string").alias("key"), F.col("id").cast("string").alias("value"))
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", sparks).save())

    def by_partition(topic):
        return {m.key(): m.partition() for m in read_topic(bootstrap, topic)}

    placed = by_partition(ours)
    assert len(placed) == 300
    assert placed == by_partition(sparks)


def test_a_newer_driver_fences_the_older_one(spark, kafka_broker, tmp_path):
    """A second run of the same outlet query (a zombie driver's successor) fences the first: the
    first's next batch fails at its decision, and none of its records become visible."""
    import time

    bootstrap = kafka_broker.bootstrap_servers
    app = f"eo-{uuid.uuid4().hex[:8]}"
    topic = f"{app}.out"
    create_topics(bootstrap, [(topic, 1, {})])
    add_batch(spark, tmp_path / "a", "0", 0, 10)
    zombie = outlet_query(spark, bootstrap, app, topic, tmp_path / "a", tmp_path / "cp-a",
                          trigger={"processingTime": "200 milliseconds"})
    try:
        deadline = time.monotonic() + 120
        while values(bootstrap, topic) != list(range(10)):
            assert time.monotonic() < deadline and zombie.isActive, zombie.exception()
            time.sleep(0.5)
        add_batch(spark, tmp_path / "b", "0", 10, 20)
        newer = outlet_query(spark, bootstrap, app, topic, tmp_path / "b", tmp_path / "cp-b")
        newer.awaitTermination(300)
        assert newer.exception() is None
        add_batch(spark, tmp_path / "a", "1", 20, 30)  # the zombie's next batch
        deadline = time.monotonic() + 120
        while zombie.isActive:
            assert time.monotonic() < deadline, (f"the fenced driver kept running: {values(bootstrap, topic)}, "
                                                 f"{zombie.lastProgress}")
            time.sleep(0.5)
        assert "fenced" in str(zombie.exception())
    finally:
        zombie.stop()
    assert values(bootstrap, topic) == list(range(20))


def producer_client_ids(spark) -> set[str]:
    """The client ids of the Kafka producers open in the driver's JVM: each runs its network thread
    `kafka-producer-network-thread | <client id>` from creation to close (kafka-clients' Sender)."""
    prefix = "kafka-producer-network-thread | "
    names = [str(t.getName()) for t in spark._jvm.java.lang.Thread.getAllStackTraces().keySet()]
    return {name[len(prefix):] for name in names if name.startswith(prefix)}


def test_a_query_that_fails_to_start_leaves_no_committer_open(spark, kafka_broker, tmp_path):
    """The committer opened ahead of a query (EosKafkaSink.prepare) is closed when the query fails
    to start (EosKafkaSink.discardPrepared): its driver producer does not stay open."""
    from types import SimpleNamespace

    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    from streamlets.runtime.exactly_once import transactional_stream_writer
    from support.waiting import wait_until

    bootstrap = kafka_broker.bootstrap_servers
    app = f"eo-{uuid.uuid4().hex[:8]}"
    topic = f"{app}.out"
    create_topics(bootstrap, [(topic, 1, {})])
    checkpoint = str(tmp_path / "checkpoint")
    ctx = SimpleNamespace(spark=spark, name="s", app_id=app, transport=KafkaTransport(bootstrap),
                          checkpoint_location=lambda query: checkpoint)
    encoded = spark.readStream.format("rate").load().select(
        F.col("value").cast("string").alias("key"), F.encode(F.col("value").cast("string"), "utf-8").alias("value"))
    driver_producer = f"producer-{transactional_id(app, 's', 'out')}"  # kafka-clients' client id of a transactional.id

    with pytest.raises(AnalysisException, match="STREAMING_OUTPUT_MODE"):
        with transactional_stream_writer(ctx, encoded, topic, "out") as writer:
            wait_until(lambda: driver_producer in producer_client_ids(spark), timeout=60,
                       what="the prepared committer's driver producer")
            # no aggregation: Spark refuses complete mode when the query starts
            writer.outputMode("complete").option("checkpointLocation", checkpoint).start()
    wait_until(lambda: driver_producer not in producer_client_ids(spark), timeout=60,
               what="the prepared committer's driver producer closed")
