"""Exactly-once outlets: one Kafka transaction per micro-batch, written from the driver.

Spark's Kafka sink is at-least-once and writes from every task on its own: a micro-batch that
fails after some tasks wrote leaves part of its output visible, out of event-time order. A
downstream streamlet's watermark can then jump ahead, and when the batch is replayed its records
arrive late and are dropped (issue 16). Per-task transactions would not help: the batch must
become visible AS A WHOLE.

So an exactly-once outlet writes through `foreachBatch`: the batch's rows (already encoded by
`codec.encode_outlet`: key string, Avro value) are streamed to the driver
(`DataFrame.toArrow()`: columnar, the whole micro-batch in the driver's memory, so bound
batches with maxOffsetsPerTrigger; or `toLocalIterator`, two Spark partitions at a time) and
produced by one transactional confluent-kafka producer in ONE Kafka transaction:

- `transactional.id` = `<app>.<streamlet>.<query>`, stable across restarts: a restarted driver's
  `init_transactions` fences the previous one (a zombie can no longer commit) and aborts its
  open transaction.
- The batch id is committed in the same transaction (`send_offsets_to_transaction`): consumer
  group `<app>.<streamlet>.<query>.batches`, partition 0 of the ledger topic `<app>.outlet-batches`,
  offset = batch id + 1, with a fingerprint of the batch's entry in the checkpoint's offset log
  (`<checkpoint>/offsets/<batch id>`: the input offsets and batch timestamp Spark planned) as
  the offset's metadata. When Spark replays a batch whose transaction committed but whose
  commit-log entry was not written (killed in between), it replays that same offset-log entry:
  batch id and fingerprint match the ledger, and the batch is skipped, not written twice. Any
  other batch is written: a fresh checkpoint (reset state) or one restored from a savepoint plans
  new offset-log entries, whose fingerprints differ even where batch ids repeat.
- Records are partitioned like Spark's Kafka sink (Java's murmur2 of the key; librdkafka
  `partitioner=murmur2_random`), so keys land on the same partitions either way.

Inlets read with `kafka.isolation.level=read_committed` (transport.KafkaTransport), so
consumers see a batch's records only after its commit, and never an aborted batch's.

Not covered: Real-Time Mode queries cannot use foreachBatch; their Kafka sink stays
at-least-once (see `delivery_for`; `blueprint verify` warns with at-least-once-edge). Dead letters are written by their own producer outside the
batch's transaction: at-least-once (runtime.deadletter).
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("streamlets.exactly_once")

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
DELIVERY_MODES = (EXACTLY_ONCE, AT_LEAST_ONCE)
# Broker default of transaction.max.timeout.ms: a micro-batch may take up to 15 minutes to produce.
TRANSACTION_TIMEOUT_MS = 900_000
# Spark Kafka options (kafka.<librdkafka name>) that the transactional producer takes over.
_PASSED_OPTIONS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                   "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                   "ssl.endpoint.identification.algorithm", "client.id")


def _retried_codes() -> tuple[int, ...]:
    from confluent_kafka import KafkaError

    return (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
            KafkaError._TIMED_OUT, KafkaError.UNKNOWN_TOPIC_OR_PART)


_RETRIED: tuple[int, ...] = ()


def ledger_topic(app_id: str) -> str:
    """The application's batch ledger topic, `<app>.outlet-batches` (1 partition, never written:
    only consumer-group offsets are committed on it)."""
    return f"{app_id}.outlet-batches"


def transactional_id(app_id: str, streamlet: str, query: str) -> str:
    """The outlet query's Kafka `transactional.id`: `<app>.<streamlet>.<query>`."""
    return f"{app_id}.{streamlet}.{query}"


class ExactlyOnceError(RuntimeError):
    """A Kafka transaction of an exactly-once outlet failed (the micro-batch fails and is retried
    by the query's restart)."""


class TransactionalBatchWriter:
    """The `foreachBatch` function of an exactly-once outlet: `writer(df, batch_id)`.

    `df` has columns `key` (string or null) and `value` (binary), as `codec.encode_outlet` builds
    them. `bootstrap_servers` is Kafka's bootstrap.servers; `kafka_options` are the transport's
    Spark options (`kafka.<name>`; the security/SSL/SASL ones are passed to librdkafka). Raises
    ExactlyOnceError when the transaction cannot be committed (it is aborted first).

    `collect` is how the batch reaches the driver: "arrow" (default) or "iterator" (see _rows).
    `before_commit(batch_id, produced)` is a test hook called after the batch's records were
    produced and before the commit (raise there to simulate a crash mid-transaction).
    """

    def __init__(self, bootstrap_servers: str, topic: str, *, app_id: str, streamlet: str, query: str,
                 kafka_options: Mapping[str, str] | None = None, checkpoint: str | None = None,
                 storage: Any = None, collect: str = "arrow", before_commit: Callable[[int, int], None] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.transactional_id = transactional_id(app_id, streamlet, query)
        self.group = f"{self.transactional_id}.batches"
        self.ledger = ledger_topic(app_id)
        self.options = {k[len("kafka."):]: v for k, v in (kafka_options or {}).items()
                        if k.startswith("kafka.") and k[len("kafka."):] in _PASSED_OPTIONS}
        self.before_commit = before_commit
        self.checkpoint = checkpoint
        self.storage = storage
        self.collect = collect
        self._producer: Any = None
        self._group_metadata: Any = None
        self._last: tuple[int, str] | None = None  # the ledger: last committed batch id, its fingerprint
        self.written_batches: list[int] = []
        self.skipped_batches: list[int] = []

    # -- setup --------------------------------------------------------------------------------

    def _common(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.options}

    def _start(self) -> None:
        """Create the producer (fencing any earlier one of the same transactional.id, whose open
        transaction the broker aborts), then read the ledger: the next batch id to write."""
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        global _RETRIED
        _RETRIED = _RETRIED or _retried_codes()

        from confluent_kafka.admin import AdminClient, NewTopic

        # Normally created with the application's topics; created here when missing (1 partition).
        admin = AdminClient(self._common())
        for fut in admin.create_topics([NewTopic(self.ledger, 1, 1)], request_timeout=30).values():
            try:
                fut.result(60)
            except Exception as e:  # exists already, or no rights: then it must exist
                log.debug("ledger topic %s not created here: %s", self.ledger, e)
        deadline = time.monotonic() + 60
        while True:  # the group coordinator refuses offsets of a topic it does not know yet
            meta = admin.list_topics(self.ledger, timeout=10).topics.get(self.ledger)
            if meta is not None and meta.error is None and 0 in meta.partitions and meta.partitions[0].leader >= 0:
                break
            if time.monotonic() > deadline:
                raise ExactlyOnceError(f"the batch ledger topic {self.ledger!r} is not available at "
                                       f"{self.bootstrap_servers}: create it (1 partition) with the application's topics")
            time.sleep(0.2)
        producer = Producer({
            **self._common(),
            "transactional.id": self.transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",  # Java's default partitioner: Spark's Kafka sink's partitions
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "lz4",
        })
        try:
            producer.init_transactions(120)
        except KafkaException as e:
            raise ExactlyOnceError(f"outlet topic {self.topic!r}: Kafka transactions of {self.transactional_id!r} "
                                   f"could not start at {self.bootstrap_servers}: {e}") from e
        consumer = Consumer({**self._common(), "group.id": self.group, "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        try:
            deadline = time.monotonic() + 120
            while True:  # a fresh broker creates __consumer_offsets on first use: NOT_COORDINATOR meanwhile
                try:
                    (tp,) = consumer.committed([TopicPartition(self.ledger, 0)], timeout=30)
                    break
                except KafkaException as e:
                    err: Any = e.args[0] if e.args else None
                    if time.monotonic() > deadline or not (hasattr(err, "retriable") and (
                            err.retriable() or err.code() in _RETRIED)):
                        raise ExactlyOnceError(f"reading the batch ledger {self.group!r} on {self.ledger!r} "
                                               f"at {self.bootstrap_servers} failed: {e}") from e
                    time.sleep(0.5)
            self._group_metadata = consumer.consumer_group_metadata()
        finally:
            consumer.close()
        self._last = (tp.offset - 1, tp.metadata or "") if tp.offset > 0 else None
        self._producer = producer
        log.info("exactly-once outlet %s -> %s: transactional.id %s, last committed batch %s", self.group,
                 self.topic, self.transactional_id, self._last)

    def fingerprint(self, batch_id: int) -> str:
        """sha256 (16 hex digits) of the checkpoint's offset-log entry of `batch_id`; "" without
        a checkpoint (then a batch id alone identifies a batch: tests)."""
        if self.checkpoint is None:
            return ""
        from .storage import join, storage_for

        storage = self.storage or storage_for(self.checkpoint)
        text = storage.read_text(join(self.checkpoint, "offsets", str(batch_id)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # -- foreachBatch -------------------------------------------------------------------------

    def __call__(self, df: "DataFrame", batch_id: int) -> None:
        if self._producer is None:
            self._start()
        fingerprint = self.fingerprint(batch_id)
        if self._last == (batch_id, fingerprint):
            log.info("batch %d of %s is already committed in Kafka: skipped", batch_id, self.topic)
            self.skipped_batches.append(batch_id)
            return
        self._write(df, batch_id, fingerprint)
        self._last = (batch_id, fingerprint)
        self.written_batches.append(batch_id)

    def _rows(self, df: "DataFrame"):
        """The batch's (keys, values) in chunks: with `collect = "arrow"` (the default) the whole
        batch as Arrow (DataFrame.toArrow: columnar, no Row objects; the batch's encoded records
        are held in the driver's memory at once: bound batches with maxOffsetsPerTrigger); with
        "iterator" two Spark partitions at a time (toLocalIterator(prefetchPartitions=True)),
        slower per record."""
        keyed = df.select("key", "value")
        if self.collect == "arrow" and hasattr(keyed, "toArrow"):
            for b in keyed.toArrow().to_batches(max_chunksize=10_000):
                yield b.column(0).to_pylist(), b.column(1).to_pylist()
            return
        chunk_keys: list = []
        chunk_values: list = []
        for key, value in keyed.toLocalIterator(prefetchPartitions=True):
            chunk_keys.append(key)
            chunk_values.append(None if value is None else bytes(value))
            if len(chunk_keys) == 10_000:
                yield chunk_keys, chunk_values
                chunk_keys, chunk_values = [], []
        if chunk_keys:
            yield chunk_keys, chunk_values

    def _write(self, df: "DataFrame", batch_id: int, fingerprint: str) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        producer, topic = self._producer, self.topic
        produce, poll = producer.produce, producer.poll

        producer.begin_transaction()
        produced = 0
        try:
            # A failed delivery makes the transaction fail to commit (librdkafka): no callback per record.
            for keys, values in self._rows(df):
                for key, value in zip(keys, values, strict=True):
                    try:
                        produce(topic, value, key)
                    except BufferError:
                        poll(0.1)
                        produce(topic, value, key)
                produced += len(keys)
                poll(0)
            producer.flush()
            if self.before_commit is not None:
                self.before_commit(batch_id, produced)
            producer.send_offsets_to_transaction([TopicPartition(self.ledger, 0, batch_id + 1, metadata=fingerprint)],
                                                 self._group_metadata, 120)
            producer.commit_transaction(120)
        except BaseException as e:
            try:
                producer.abort_transaction(60)
            except KafkaException as abort_error:  # fenced or broker gone: the next start aborts it
                log.warning("aborting batch %d of %s failed: %s", batch_id, topic, abort_error)
                self._producer = None  # start again (init_transactions) on the next batch
            if isinstance(e, KafkaException):
                raise ExactlyOnceError(f"batch {batch_id} to {topic!r}: the Kafka transaction failed: {e}") from e
            raise
        log.debug("batch %d: %d records committed to %s", batch_id, produced, topic)


def delivery_for(run_delivery: str | None, transport: Any, dry_run: bool = False, real_time: bool = False) -> str:
    """The delivery an outlet query gets: exactly-once by default on Kafka; at-least-once when the
    run config says so (`streamlets.<name>.delivery = at-least-once`), on the file transport
    (the test kit: each batch's file already replaces itself), in a dry run, and in Real-Time
    Mode (`real_time`: its queries cannot use foreachBatch, so they take Spark's Kafka sink;
    `blueprint verify` names those edges with the warning at-least-once-edge).
    """
    from .transport import KafkaTransport

    if dry_run or real_time or not isinstance(transport, KafkaTransport):
        return AT_LEAST_ONCE
    return run_delivery or EXACTLY_ONCE


def transactional_stream_writer(ctx: Any, encoded: "DataFrame", topic: str, query_name: str):
    """`encoded.writeStream.foreachBatch(TransactionalBatchWriter(...))` for context.write_stream."""
    from .storage import storage_for

    checkpoint = ctx.checkpoint_location(query_name)
    writer = TransactionalBatchWriter(ctx.transport.bootstrap_servers, topic, app_id=ctx.app_id,
                                      streamlet=ctx.name, query=query_name, kafka_options=ctx.transport.options,
                                      checkpoint=checkpoint, storage=storage_for(checkpoint, ctx.spark))
    ctx.batch_writers = getattr(ctx, "batch_writers", {})
    ctx.batch_writers[query_name] = writer
    return encoded.writeStream.foreachBatch(writer)
