"""Exactly-once outlets (streamlets.runtime.exactly_once) on a real broker and real Spark: a
micro-batch is visible to read_committed consumers only when it commits as a whole, and a
replayed batch whose transaction committed is not written twice (the batch ledger)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from blueprint.sandbox.kafka_broker import create_topics
from streamlets.runtime.exactly_once import ExactlyOnceError, TransactionalBatchWriter


def committed_records(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes]]:
    """Every record a read_committed consumer sees in `topic`, by partition then offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    out = []
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while True:
                msgs = consumer.consume(500, timeout=3)
                if not msgs:
                    break
                out.extend((m.key(), m.value()) for m in msgs if m.error() is None)
    finally:
        consumer.close()
    return out


def batch(spark, lo: int, hi: int, partitions: int = 4):
    """A DataFrame shaped like codec.encode_outlet's output: key string, value binary."""
    from pyspark.sql import functions as F

    return (spark.range(lo, hi, numPartitions=partitions)
            .select(F.col("id").cast("string").alias("key"), F.encode(F.col("id").cast("string"), "utf-8").alias("value")))


def writer(bootstrap, topic, app, **kw):
    return TransactionalBatchWriter(bootstrap, topic, app_id=app, streamlet="s", query="out", **kw)


def plan(checkpoint, batch_id: int, text: str) -> None:
    """What Spark writes before running a batch: its offset-log entry `<checkpoint>/offsets/<id>`."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(f"v1\n{text}\n")


def test_failed_batch_is_invisible_and_replay_is_written_once(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    app, topic = f"eo-{uuid.uuid4().hex[:8]}", f"eo-{uuid.uuid4().hex[:8]}.out"
    create_topics(bootstrap, [(topic, 3, {})])
    cp = tmp_path / "checkpoint"
    plan(cp, 0, '{"t": [0, 1000]}')
    plan(cp, 1, '{"t": [1000, 3000]}')

    def crash(batch_id, produced):
        if batch_id == 1:
            raise RuntimeError("simulated crash after producing, before the commit")

    first = writer(bootstrap, topic, app, checkpoint=str(cp), before_commit=crash)
    first(batch(spark, 0, 1000), 0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        first(batch(spark, 1000, 3000), 1)  # all 2000 records were produced, then the batch failed
    assert sorted(int(v) for _, v in committed_records(bootstrap, topic, 3)) == list(range(1000))

    # The restarted driver: Spark replays batch 0 (killed between the Kafka commit and its commit
    # log), then runs batch 1 again.
    second = writer(bootstrap, topic, app, checkpoint=str(cp))
    second(batch(spark, 0, 1000), 0)
    second(batch(spark, 1000, 3000), 1)
    assert second.skipped_batches == [0] and second.written_batches == [1]
    records = committed_records(bootstrap, topic, 3)
    assert sorted(int(v) for _, v in records) == list(range(3000))  # each record once
    assert all(k == v for k, v in records)

    # A third start replaying batch 1 skips it: the ledger is in Kafka, not in the writer.
    third = writer(bootstrap, topic, app, checkpoint=str(cp))
    third(batch(spark, 1000, 3000), 1)
    assert third.skipped_batches == [1]
    assert len(committed_records(bootstrap, topic, 3)) == 3000

    # A fresh checkpoint (state reset) plans batch 1 anew: same id, other offset-log entry: written.
    fresh = tmp_path / "fresh"
    plan(fresh, 1, '{"t": [3000, 3010]}')
    fourth = writer(bootstrap, topic, app, checkpoint=str(fresh))
    fourth(batch(spark, 3000, 3010), 1)
    assert fourth.written_batches == [1]
    assert sorted(int(v) for _, v in committed_records(bootstrap, topic, 3)) == list(range(3010))


def test_records_go_to_the_partitions_of_sparks_kafka_sink(spark, kafka_broker):
    """Keys land where Spark's Kafka sink (Java's murmur2 partitioner) puts them."""
    from pyspark.sql import functions as F

    bootstrap = kafka_broker.bootstrap_servers
    app, ours, sparks = f"eo-{uuid.uuid4().hex[:8]}", f"eo-{uuid.uuid4().hex[:8]}.a", f"eo-{uuid.uuid4().hex[:8]}.b"
    create_topics(bootstrap, [(ours, 3, {}), (sparks, 3, {})])
    writer(bootstrap, ours, app)(batch(spark, 0, 300), 0)
    batch(spark, 0, 300).write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", sparks).save()

    def by_partition(topic):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"p-{uuid.uuid4().hex}", "isolation.level": "read_committed"})
        out = {}
        for p in range(3):
            c.assign([TopicPartition(topic, p, 0)])
            while msgs := c.consume(500, timeout=3):
                out.update({m.key(): p for m in msgs if m.error() is None})
        c.close()
        return out

    assert by_partition(ours) == by_partition(sparks)
    assert len(by_partition(ours)) == 300


def test_a_fenced_zombie_cannot_commit(spark, kafka_broker):
    """A second driver with the same transactional.id fences the first: its next batch fails."""
    bootstrap = kafka_broker.bootstrap_servers
    app, topic = f"eo-{uuid.uuid4().hex[:8]}", f"eo-{uuid.uuid4().hex[:8]}.out"
    create_topics(bootstrap, [(topic, 1, {})])
    zombie = writer(bootstrap, topic, app)
    zombie(batch(spark, 0, 10), 0)
    fresh = writer(bootstrap, topic, app)
    fresh(batch(spark, 10, 20), 1)
    with pytest.raises(ExactlyOnceError):
        zombie(batch(spark, 20, 30), 2)
    assert sorted(int(v) for _, v in committed_records(bootstrap, topic, 1)) == list(range(20))
