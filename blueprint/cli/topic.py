"""`blueprint topic tail`: a topic's records while the application runs, decoded with its schema.

Reads the topic's Kafka partitions read_committed (what exactly-once outlets committed; records
of aborted transactions never show) and prints one JSON object per record:

    {"partition": 0, "offset": 41, "timestamp": "2026-11-25T20:51:02.113Z", "key": "JFK",
     "value": {"origin": "JFK", "flights": 12, ...}}

values as `streamlets.files.json_value` writes them (timestamps ISO 8601 UTC, decimals as text).
A value that does not decode with the producer's schema is printed with `"error"` in place of
`"value"`, and counted. Exit codes: 0 done (or Ctrl-C with --follow), 2 usage or an unreachable
Kafka.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from streamlets.schema import AvroSchema

from .errors import EXIT_USAGE, command_app, fail, guard
from .state import KAFKA_CONFIG_HELP, blueprint_and_classes, sandbox_bootstrap

topic_app = command_app(help="The records of an application's topics.")


def topic_schema(bp, classes: dict[str, Any], topic_id: str) -> "AvroSchema | None":
    """The Avro schema a blueprint topic's records are written with: its first producing
    outlet's (verify has checked that every producer and consumer agrees), else its first
    consuming inlet's for a topic only written from outside."""
    topic = bp.topics[topic_id]
    for refs, side in ((topic.producers, "outlet"), (topic.consumers, "inlet")):
        for ref in refs:
            path = ref.path
            if path is not None and isinstance(classes.get(path.streamlet), type):
                port = getattr(classes[path.streamlet].shape(), side)(path.port)
                if port is not None:
                    return port.schema
    return None


def tail(
    file: Path = typer.Argument(..., help="the blueprint file", show_default=False),
    topic: str = typer.Argument(..., help="the topic's id in the blueprint (its `topics:` key)", show_default=False),
    last: int = typer.Option(10, "--last", "-n", help="records to show per partition, from its end"),
    from_beginning: bool = typer.Option(False, "--from-beginning", help="every record the topic still has"),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing records as they arrive, until Ctrl-C"),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="the running sandbox's state folder [default: .streamlets/<app id>]"),
    kafka: str | None = typer.Option(None, "--kafka", help="HOST:PORT of the application's Kafka [default: the running sandbox's]"),
    config: Path | None = typer.Option(None, "--config", "-c", help=KAFKA_CONFIG_HELP),
    timeout: float = typer.Option(10, "--timeout", help="seconds to wait for Kafka's answers"),
) -> None:
    """Print a topic's newest records (or all, or as they come) as JSON Lines, decoded with the
    topic's Avro schema."""
    guard(lambda: _tail(file, topic, last, from_beginning, follow, state_dir, kafka, timeout, config))


def _tail(file: Path, topic: str, last: int, from_beginning: bool, follow: bool, state_dir: Path | None,
          kafka: str | None, timeout: float, config: Path | None = None) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    from streamlets.files import iso_utc, json_value
    from streamlets.kafka_logging import client_config
    from streamlets.schema import decode

    if last < 0:
        fail(f"--last {last}: give a number of records, 0 or more", EXIT_USAGE)
    bp, classes = blueprint_and_classes(file)
    if topic not in bp.topics:
        fail(f"{file} has no topic {topic!r} (it has {', '.join(bp.topics)})", EXIT_USAGE)
    schema = topic_schema(bp, classes, topic)
    if schema is None:
        fail(f"topic {topic!r} has no producer or consumer port whose schema would decode it", EXIT_USAGE)
    bootstrap = sandbox_bootstrap(bp, state_dir, kafka, config)
    if bootstrap.security.protocol != "PLAINTEXT":  # a refused password or certificate: that, in one line
        bootstrap.check(timeout)
    name = bp.topics[topic].kafka_name(bp.app_id)
    parsed = schema.parsed()
    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "streamlets-topic-tail",
                                       "enable.auto.commit": False, "isolation.level": "read_committed",
                                       "enable.partition.eof": True}))
    malformed = 0
    try:
        try:
            meta = consumer.list_topics(name, timeout=timeout).topics.get(name)
            if meta is None or meta.error is not None:
                fail(f"Kafka at {bootstrap} has no topic {name} (has the application started?)", EXIT_USAGE)
            assignment = []
            for p in sorted(meta.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=timeout, cached=False)
                assignment.append(TopicPartition(name, p, low if from_beginning else max(low, high - last)))
        except KafkaException as e:
            fail(f"cannot read topic {name} from Kafka at {bootstrap}: {e.args[0].str() if e.args else e}", EXIT_USAGE)
        consumer.assign(assignment)
        unread = {tp.partition for tp in assignment}  # until each partition's end (its EOF event)
        while follow or unread:
            msg = consumer.poll(0.5 if follow else timeout)
            if msg is None:
                if not follow:
                    break  # Kafka did not answer within --timeout: what came is printed
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    unread.discard(msg.partition())
                continue
            partition, offset = msg.partition() or 0, msg.offset() or 0
            _, millis = msg.timestamp()
            key = msg.key()
            out: dict[str, Any] = {"partition": partition, "offset": offset,
                                   "timestamp": iso_utc(_utc(millis)) if millis and millis > 0 else None,
                                   "key": None if key is None else key.decode("utf-8", errors="replace")}
            try:
                out["value"] = json_value(decode(schema, msg.value() or b"", parsed))
            except Exception as e:  # a value the schema does not decode: said, counted, not fatal
                malformed += 1
                out["error"] = f"not a {schema.name} record: {e}"
            print(json.dumps(out, separators=(", ", ": ")), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    if malformed:
        print(f"{malformed} value(s) did not decode as {schema.name}", file=sys.stderr)


def _utc(millis: int):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)


topic_app.command("tail")(tail)
