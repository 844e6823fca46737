"""The newest dead letters of an application, read from its dead-letter topic: metadata only.

A dead letter's value is the raw bytes that did not decode (streamlets.runtime.deadletter); the
API and the web view show where it came from, why it failed and its size, never the bytes.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamlets.kafka_logging import client_config
from streamlets.kafka_security import KafkaConnection
from streamlets.schema import decode

from .model import DeadLetterView


def recent_dead_letters(bootstrap: str | KafkaConnection, topic: str, limit: int = 20, timeout: float = 5.0) -> list[DeadLetterView]:
    """The last `limit` dead letters of `topic` (at most, over all partitions), newest first.
    Reads read_committed from each partition's end minus `limit`; an absent topic or a broker that
    does not answer within `timeout` seconds gives none. Raises nothing for Kafka."""
    from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA

    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "streamlets-ops-dead-letters",
                                       "enable.auto.commit": False, "isolation.level": "read_committed"}))
    out: list[DeadLetterView] = []
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        assignment, ends = [], {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
            if high > low:
                assignment.append(TopicPartition(topic, p, max(low, high - limit)))
                ends[p] = high
        if not assignment:
            return []
        consumer.assign(assignment)
        done: set[int] = set()
        while len(done) < len(ends):
            msg = consumer.poll(timeout)
            if msg is None:
                break
            if msg.error():
                continue
            partition, offset, value = msg.partition() or 0, msg.offset() or 0, msg.value() or b""
            if offset + 1 >= ends[partition]:
                done.add(partition)
            try:
                d = decode(DEAD_LETTER_SCHEMA, value)
            except Exception:  # not ours: skip it
                continue
            ts = d.get("timestamp")  # timestamp-millis: fastavro gives a datetime
            out.append(DeadLetterView(streamlet=d["streamlet"], inlet=d["inlet"], topic=d["topic"], partition=d["partition"],
                                      offset=d["offset"], timestamp=None if ts is None else ts.timestamp(),
                                      error=d["error"], value_bytes=len(d.get("value") or b"")))
    except KafkaException:
        return out
    finally:
        consumer.close()
    return sorted(out, key=lambda d: (d.timestamp or 0, d.offset), reverse=True)[:limit]
