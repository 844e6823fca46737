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


def read_topic(bootstrap: str, topic: str, timeout: float = 30) -> list:
    """Every committed record of `topic` (confluent_kafka Messages), up to its current end offsets.

    Outlets are exactly-once by default: each task's transaction leaves a commit marker after its
    records in each partition it wrote, so a partition's last offsets may be markers, several of
    them; a read_committed consumer's position moves past them (librdkafka skips control
    records), so a partition is read to the end when its position reaches the end offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from blueprint.sandbox.kafka_broker import end_offsets

    ends = end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
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
            if msg is not None and msg.error() is None:
                out.append(msg)
        assert done(), f"read {len(out)} records of {topic}, up to offsets {positions} of {ends}"
    finally:
        consumer.close()
    return out


def count(bootstrap: str, topic: str) -> int:
    """The sum of `topic`'s end offsets: its records, commit markers included."""
    from blueprint.sandbox.kafka_broker import end_offsets

    return sum(end_offsets(bootstrap, topic).values())
