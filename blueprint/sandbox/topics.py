"""Record counts of the application's topics, for the progress view and the idle check."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamlets.kafka_logging import client_config
from streamlets.kafka_security import KafkaConnection


class TopicWatcher:
    """Sums of per-partition end offsets (Kafka high watermarks), cached for a second."""

    def __init__(self, bootstrap: str | KafkaConnection) -> None:
        self._consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "streamlets-sandbox-watch",
                                                 "enable.auto.commit": False}))
        self._cache: dict[str, tuple[float, int]] = {}
        self._offline = False

    def offline(self) -> None:
        """The broker is gone for good (the sandbox gave up on it): from now on `records` answers
        with the last counts (0 for a topic never counted) instead of waiting out the client's
        timeouts, 10 s a request."""
        self._offline = True

    def records(self, topic: str, fresh: bool = False) -> int:
        """Records ever written to `topic` (sum of high watermarks; compaction does not lower it)."""
        now = time.time()
        hit = self._cache.get(topic)
        if self._offline or (hit and not fresh and now - hit[0] < 1.0):
            return hit[1] if hit else 0
        total = 0
        try:
            meta = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
            if (meta is None or meta.error is not None) and hit:
                return hit[1]  # no answer for the topic (the broker is restarting): the last count stands
            if meta is not None and meta.error is None:
                for p in meta.partitions:
                    _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                    total += max(high, 0)
        except KafkaException:  # the broker is away (the supervisor restarts it): the last count stands
            return hit[1] if hit else 0
        self._cache[topic] = (now, total)
        self._consumer.poll(0)  # hands librdkafka's queued log lines to the log (no subscription: reads nothing)
        return total

    def close(self) -> None:
        """Close the Kafka consumer that reads the watermarks; records() cannot be called afterwards."""
        self._consumer.close()
