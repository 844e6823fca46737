"""The session's Kafka broker (fixture ``kafka_broker``; a pytest plugin of tests/conftest.py) and
what tests do with it: fresh topics, producing records, reading a topic back, counting it."""

from __future__ import annotations

import time
import uuid

import pytest


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real single-node Kafka broker (KRaft) for the whole session; topics are per test."""
    from blueprint.sandbox.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    yield broker
    broker.stop()


def topics(kafka_broker, *names: str, partitions: int = 1) -> list[str]:
    """Fresh topics (unique names) on the session broker."""
    from blueprint.sandbox.kafka_broker import create_topics

    suffix = uuid.uuid4().hex[:8]
    full = [f"{n}-{suffix}" for n in names]
    create_topics(kafka_broker.bootstrap_servers, [(t, partitions, {}) for t in full])
    return full


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes | None]]) -> list[tuple[int, int]]:
    """Produce (partition, value) pairs in order; returns each value's (partition, offset)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    delivered: list = [None] * len(values)

    def on_delivery(i):
        def callback(err, msg):
            delivered[i] = err or (msg.partition(), msg.offset())
        return callback

    for i, (partition, value) in enumerate(values):
        producer.produce(topic, value=value, partition=partition, on_delivery=on_delivery(i))
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unsent"
    assert all(isinstance(d, tuple) for d in delivered), delivered
    return delivered


def offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (last stable offset, high watermark)} of `topic`. The last stable offset is where
    a read_committed consumer stops: the first record of the earliest transaction still open, else
    the high watermark (Kafka's ListOffsets with isolation level READ_COMMITTED)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from blueprint.sandbox.kafka_broker import end_offsets

    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in end_offsets(bootstrap, topic)}

    def latest(level: IsolationLevel) -> dict[int, int]:
        return {tp.partition: f.result().offset
                for tp, f in admin.list_offsets(asked, isolation_level=level, request_timeout=30).items()}

    stable, ends = latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)
    return {p: (stable[p], ends[p]) for p in ends}


def read_topic(bootstrap: str, topic: str, timeout: float = 30, *, stable: bool = False) -> list:
    """Every committed record of `topic` (confluent_kafka Messages, in the order read), up to its
    current end offsets; with `stable`, up to its last stable offsets (`offsets`): what a
    read_committed consumer can read now, records of transactions still open left out, where the
    end offsets would wait for those to end. Either way the read ends as soon as every partition
    is read to that offset, never on an idle wait. Raises AssertionError after `timeout` seconds.

    Outlets are exactly-once by default: each task's transaction leaves a commit marker after its
    records in each partition it wrote, so a partition's last offsets may be markers, several of
    them; a read_committed consumer's position moves past them (librdkafka skips control
    records), so a partition is read to the end when its position reaches the end offset. Records
    of aborted transactions do not move the position; the end-of-partition event's offset, where
    the fetch reached, counts too."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from blueprint.sandbox.kafka_broker import end_offsets

    ends = {p: lso for p, (lso, _) in offsets(bootstrap, topic).items()} if stable else end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    out, deadline = [], time.monotonic() + timeout
    positions = {p: 0 for p in ends}

    def done() -> bool:
        for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
            positions[tp.partition] = max(positions[tp.partition], tp.offset)
        return all(positions[p] >= end for p, end in ends.items() if end > 0)

    try:
        while not done() and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                out.append(msg)
            elif msg.error().code() == KafkaError._PARTITION_EOF:  # the fetch passed aborted records too
                positions[msg.partition()] = max(positions[msg.partition()], msg.offset())
        assert done(), f"read {len(out)} records of {topic}, up to offsets {positions} of {ends}"
    finally:
        consumer.close()
    return out


def count(bootstrap: str, topic: str) -> int:
    """The sum of `topic`'s end offsets: its records, commit markers included."""
    from blueprint.sandbox.kafka_broker import end_offsets

    return sum(end_offsets(bootstrap, topic).values())
