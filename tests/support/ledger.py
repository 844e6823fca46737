"""An application's batch ledger followed from its start (the exactly-once sink's decisions:
streamlets.runtime.exactly_once, docs/eos-executor-writes.md), for tests that count what each
executor wrote."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

from streamlets.kafka_security import KafkaConnection
from streamlets.runtime.system_topics import ledger_topic


class LedgerFollower:
    """Reads `<app>.outlet-batches` from its start as it is written (read_committed), in a thread:
    every record, before compaction can drop a query's older ones. Subscribes, so the topic may be
    created after it starts."""

    def __init__(self, kafka: KafkaConnection, app: str):
        from confluent_kafka import Consumer

        self.records: list[tuple[str, dict]] = []  # (key, value) in ledger order
        self._consumer = Consumer({**kafka.librdkafka(), "group.id": f"ledger-follower-{uuid.uuid4().hex}",
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                   "isolation.level": "read_committed", "topic.metadata.refresh.interval.ms": 2000})
        self._consumer.subscribe([ledger_topic(app)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="ledger-follower", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value():
                self.records.append((msg.key().decode(), json.loads(msg.value())))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()

    def records_per_executor(self, key_prefix: str) -> Counter[str]:
        """Executor id -> records its tasks wrote, over the batches of the outlet queries whose
        ledger key starts with `key_prefix` (`<app>.<streamlet>.`): the last decision recorded per
        query and batch (a rolled-forward one is recorded once more), from its TxnCommit lines
        (`sparkPartition taskId transactionalId producerId epoch p=n,p=n executor token`)."""
        decided = {(key, value["batch"]): value["transactions"] for key, value in list(self.records)
                   if key.startswith(key_prefix) and value.get("state") == "decided"}
        out: Counter[str] = Counter()
        for lines in decided.values():
            for fields in (line.split() for line in lines):
                if fields[5] != "-":
                    out[fields[6]] += sum(int(kv.split("=")[1]) for kv in fields[5].split(","))
        return out
