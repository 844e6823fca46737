"""Exactly-once outlets: the executors write each micro-batch's records in Kafka transactions,
the driver commits them as a whole.

Spark's Kafka sink is at-least-once and writes from every task on its own: a micro-batch that
fails after some tasks wrote leaves part of its output visible, out of event-time order. A
downstream streamlet's watermark can then jump ahead, and when the batch is replayed its records
arrive late and are dropped (issue 16). So an exactly-once outlet writes through the
`streamlets-kafka-eos` Spark sink (jvm/streamlets-kafka-eos, runtime.eos_jar; the protocol and
its crash cases: docs/eos-executor-writes.md), a two-phase commit on Kafka transactions:

- Each task (on its executor) produces its rows with its own transactional producer,
  `transactional.id` = `<app>.<streamlet>.<query>-<Spark partition>`: its `initTransactions`
  fences every earlier producer of that id (a failed attempt, a zombie executor, a crashed run's
  leftover) and aborts its open transaction. The task flushes and leaves its transaction open;
  its commit message carries (transactional id, producer id, epoch, records per partition,
  executor).
- The driver (Spark's `StreamingWrite.commit`, before the batch's commit log) records the
  decision in the ledger topic `<app>.outlet-batches` (one partition, compacted:
  runtime.system_topics; key `<app>.<streamlet>.<query>`; JSON `{"batch", "fingerprint",
  "state", "ids", "transactions"}`), then commits every task's transaction (resuming it by
  producer id and epoch, Flink's KafkaSink technique), then records `committed`. Only metadata
  reaches the driver: its cost per batch does not grow with the batch's records.
- A restarted query rolls a recorded decision forward and aborts every leftover; a batch whose
  transactions the broker aborted (a restart slower than `transaction.timeout.ms`, 15 minutes by
  default) is written again. A replayed batch is skipped when the ledger's last committed batch
  has its id and fingerprint (a hash of its checkpoint offset-log entry `<checkpoint>/offsets/<id>`):
  a fresh checkpoint, or one restored from a savepoint, plans new entries that are written even
  where batch ids repeat.
- Records are partitioned like Spark's Kafka sink (kafka-clients' default partitioner: murmur2
  of the key), so keys land on the same partitions either way.

Inlets read with `kafka.isolation.level=read_committed` (transport.KafkaTransport), so consumers
see a batch's records only once it commits, and never an aborted batch's. A batch's records
become visible partition by partition as each transaction's commit markers land (as with one
transaction); an open transaction holds its partitions' last stable offset back until the driver
commits (normally within the batch) or, after a crash, until the restart commits or aborts it.

Not covered: Real-Time Mode queries take Spark's Kafka sink, at-least-once (see `delivery_for`;
`blueprint verify` warns with at-least-once-edge). Dead letters are written by their own producer
outside the batch's transactions: at-least-once (runtime.deadletter). Speculative task attempts
would fence the attempt whose transaction the driver commits (the batch then fails and is
replayed): keep `spark.speculation` off (Spark's default) for these queries.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..kafka_logging import client_config
from ..kafka_security import KafkaConnection
from ..settings import AT_LEAST_ONCE, DELIVERY, EXACTLY_ONCE  # noqa: F401  (EXACTLY_ONCE: the runtime's name for it too)
from .system_topics import LEDGER_CONFIG, ledger_topic  # the ledger topic's name and config (their one home)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

log = logging.getLogger("streamlets.exactly_once")

DELIVERY_MODES = DELIVERY.values  # the setting's modes, EXACTLY_ONCE (its default) and AT_LEAST_ONCE: streamlets.settings


def transactional_id(app_id: str, streamlet: str, query: str) -> str:
    """The outlet query's transactional id prefix and ledger key: `<app>.<streamlet>.<query>`
    (its tasks' Kafka `transactional.id`s are `<prefix>-<Spark partition>`)."""
    return f"{app_id}.{streamlet}.{query}"


class ExactlyOnceError(RuntimeError):
    """An exactly-once outlet cannot start: its sink's jar is missing, or its ledger topic cannot be
    created or read."""


def ensure_ledger(kafka: KafkaConnection, app_id: str) -> str:
    """Create the ledger topic `<app>.outlet-batches` (1 partition, LEDGER_CONFIG) when it is
    missing (normally it is created with the application's topics) and return its name. A topic
    that exists, or a client without the right to create it, is left to the sink's start to read."""
    from confluent_kafka.admin import AdminClient, NewTopic

    ledger = ledger_topic(app_id)
    admin = AdminClient(client_config({"bootstrap.servers": kafka}))
    for fut in admin.create_topics([NewTopic(ledger, 1, 1, config=LEDGER_CONFIG)], request_timeout=30).values():
        try:
            fut.result(60)
        except Exception as e:  # exists already, or no rights: then it must exist
            log.debug("ledger topic %s not created here: %s", ledger, e)
    return ledger


def ledger_state(kafka: KafkaConnection, app_id: str, prefix: str, timeout: float = 60.0) -> dict[str, Any]:
    """The outlet query `prefix`'s last ledger record (see the module docstring), or
    `{"state": "none"}`: read_committed, partition 0 of `<app>.outlet-batches` to its end.
    ExactlyOnceError if it cannot be read in `timeout` seconds."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({**client_config({"bootstrap.servers": kafka}), "group.id": f"ledger-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    ledger, key, last = ledger_topic(app_id), prefix.encode(), {"state": "none"}
    deadline = time.monotonic() + timeout
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(ledger, 0), timeout=timeout)
        if high <= low:
            return last
        consumer.assign([TopicPartition(ledger, 0, OFFSET_BEGINNING)])
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                if msg.key() == key and msg.value():
                    last = {"state": "committed", **json.loads(msg.value() or b"{}")}
            elif err.code() == KafkaError._PARTITION_EOF:
                return last
            elif not err.retriable():
                raise ExactlyOnceError(f"reading the batch ledger {ledger!r}: {err}")
        raise ExactlyOnceError(f"the batch ledger {ledger!r} could not be read to its end in {timeout:.0f} s")
    finally:
        consumer.close()


def delivery_for(run_delivery: str | None, transport: Any, dry_run: bool = False, real_time: bool = False) -> str:
    """The delivery an outlet query gets: exactly-once by default on Kafka; at-least-once when the
    run config says so (`streamlets.<name>.delivery = at-least-once`), on the file transport
    (the test kit: each batch's file already replaces itself), in a dry run, and in Real-Time
    Mode (`real_time`: its queries take Spark's Kafka sink, the one Kafka sink Real-Time Mode runs;
    `blueprint verify` names those edges with the warning at-least-once-edge).
    """
    from .transport import KafkaTransport

    if dry_run or real_time or not isinstance(transport, KafkaTransport):
        return AT_LEAST_ONCE
    return run_delivery or str(DELIVERY.default)


@contextlib.contextmanager
def transactional_stream_writer(ctx: Any, encoded: "DataFrame", topic: str, query_name: str) -> Iterator["DataStreamWriter"]:
    """`encoded.writeStream` through the `streamlets-kafka-eos` sink to `topic`, for
    context.write_stream, as a context manager around the query's start: `encoded` has columns
    key (string or null) and value (binary), as codec.encode_outlet builds them. Its options: the
    transport's `kafka.*` client settings (bootstrap servers, security; the consumer-only ones are
    left out by the sink), the transactional id prefix, the ledger topic (created here when
    missing) and the query's checkpoint (for the batches' fingerprints). The sink's committer is
    opened on entry, in the background (EosKafkaSink.prepare: its driver producer's
    initTransactions, the ledger read, the fencing of the ids an earlier run used), so its start
    overlaps Spark's start of the query instead of delaying the first batch; when the block raises
    (the query did not start), that committer is closed again (EosKafkaSink.discardPrepared) and
    the error goes on. ExactlyOnceError when the sink's jar is not on the session's class path (no
    JDK could build it: runtime.eos_jar)."""
    from .eos_jar import FORMAT, PROVIDER_CLASS

    jvm = getattr(ctx.spark, "_jvm", None)
    if jvm is not None:
        try:
            jvm.java.lang.Class.forName(PROVIDER_CLASS, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        except Exception as e:
            raise ExactlyOnceError(f"streamlet {ctx.name!r}: the exactly-once sink's jar ({FORMAT}) is not on the "
                                   "driver's class path: the streamlet image has it among Spark's jars; elsewhere a "
                                   "JDK 17 builds it on first use (javac), and a driver launched by spark-submit "
                                   "needs it in --jars (python -c 'from streamlets.runtime.eos_jar import eos_jar; "
                                   "print(eos_jar())'); or set "
                                   f"streamlets.{ctx.name}.delivery = at-least-once") from e
    ensure_ledger(ctx.transport.connection, ctx.app_id)
    options = sink_options(ctx.transport, app_id=ctx.app_id, streamlet=ctx.name, query=query_name, topic=topic,
                           checkpoint=ctx.checkpoint_location(query_name))
    prepared = None  # the sink's class, once its committer is opening
    if jvm is not None:  # the committer opens now, in the background, while Spark starts the query
        try:
            sink = functools.reduce(getattr, PROVIDER_CLASS.split("."), jvm)
            sink.prepare(options)
            prepared = sink
        except Exception as e:  # only a head start: the query's first batch opens it then
            log.warning("streamlet %r, query %s: the exactly-once sink's committer opens with the first batch "
                        "(not ahead of it: %s)", ctx.name, query_name, type(e).__name__)
    try:
        yield encoded.select("key", "value").writeStream.format(FORMAT).options(**options)
    except BaseException:
        if prepared is not None:  # no query takes it: its driver producer would stay open
            try:
                prepared.discardPrepared(options)
            except Exception as e:  # the start's error is the one to report
                log.warning("streamlet %r, query %s: the committer prepared for the query could not be closed "
                            "(%s)", ctx.name, query_name, type(e).__name__)
        raise


def sink_options(transport: Any, *, app_id: str, streamlet: str, query: str, topic: str,
                 checkpoint: str) -> dict[str, str]:
    """The `streamlets-kafka-eos` sink's options for outlet query `query` of `streamlet`: the
    KafkaTransport's `kafka.*` client settings (bootstrap servers, security; the sink leaves out
    consumer-only ones), `topic`, `transactional.id.prefix` (transactional_id), `ledger.topic`
    (the application's ledger_topic: ensure_ledger creates it) and `checkpoint` (the query's checkpoint location,
    whose offset log fingerprints its batches)."""
    options = {k: v for k, v in transport._client_options().items() if k.startswith("kafka.")}
    options.update({
        "topic": topic,
        "transactional.id.prefix": transactional_id(app_id, streamlet, query),
        "ledger.topic": ledger_topic(app_id),
        "checkpoint": checkpoint,
    })
    return options
