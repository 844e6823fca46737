"""The control stream: commands to running streamlets on a Kafka topic, results on another.

Per application, topic `<app>.control` carries Command records and `<app>.control-results`
Result records (names: streamlets.runtime.system_topics) (Avro, schemas below, keyed by the command id). Every process running streamlets
has one ControlListener: it reads commands issued after it started (its own consumer group,
`auto.offset.reset=latest`), acts for each of its streamlets the command targets (`target` null:
all), and publishes one Result per streamlet. Commands:

- `ping`: ok, with the last committed batch id of each query;
- `savepoint`: a savepoint of the streamlet (streamlets.state.savepoint), `location` its folder;
- `dump-state`: the state of each stateful query at its last committed batch, exported with
  streamlets.state.export (`args.format`: jsonl, parquet or csv), `location` the folder;
- `reload-config`: `args` are new config-parameter values, checked against the declarations; the
  streamlet's queries stop (a running micro-batch is cancelled and runs again) and start again
  with the new config, from their checkpoints;
- `stop`: the streamlet's queries stop;
- `scale`: the streamlet's driver runs `args.executors` executors from now on, changed in place
  (streamlets.runtime.executors; the autoscaler's in-place path); a local master answers an error.

A streamlet can also read the control topic itself: declare `ControlInlet("control")`, bind it
to the topic `<app>.control` in the blueprint (`managed: false`) and join it with its data, as
in the seed's control-stream pattern. Its own commands are `custom` commands whose name is the
arg `CUSTOM_NAME` (`Command.custom`, `blueprint control APP NAME --custom`); the listener leaves
them to the streamlets' queries and answers nothing. (New symbols go at the enum's end, `custom`
then `scale`, so earlier commands keep the bytes they had; a listener older than a symbol drops
its commands as malformed, which is what it should do with them.)
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from ..kafka_logging import client_config
from ..kafka_security import KafkaConnection
from ..ports import AvroInlet, ErrorHandling
from ..schema import AvroSchema, decode, encode
from .system_topics import control_topic, results_topic  # the topics' names (their one home)

log = logging.getLogger(__name__)

COMMANDS = ("savepoint", "dump-state", "reload-config", "stop", "ping", "scale")
CUSTOM = "custom"
CUSTOM_NAME = "_name"  # the arg that names a custom command
COMMAND_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Command", "namespace": "io.streamlets.control",
    "doc": "A command to the running streamlets of an application.",
    "fields": [
        {"name": "id", "type": "string", "doc": "unique; results carry it"},
        {"name": "command", "type": {"type": "enum", "name": "CommandType",
                                     "symbols": ["savepoint", "dump_state", "reload_config", "stop", "ping", "custom",
                                                 "scale"]},
         "doc": "custom: a streamlet's own command, named by the arg _name, for ControlInlet queries"},
        {"name": "target", "type": ["null", "string"], "default": None, "doc": "a streamlet name; null: every streamlet"},
        {"name": "args", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "issued_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
RESULT_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Result", "namespace": "io.streamlets.control",
    "doc": "What one streamlet did with a command.",
    "fields": [
        {"name": "command_id", "type": "string"},
        {"name": "command", "type": "string"},
        {"name": "streamlet", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["ok", "error"]}},
        {"name": "message", "type": "string", "default": ""},
        {"name": "location", "type": ["null", "string"], "default": None, "doc": "savepoint or dump folder"},
        {"name": "batch_ids", "type": {"type": "map", "values": "long"}, "default": {},
         "doc": "query -> the committed micro-batch the result is consistent with"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


_SCHEMAS = {s["name"]: AvroSchema.load(s) for s in (COMMAND_SCHEMA, RESULT_SCHEMA)}


class ControlInlet(AvroInlet):
    """An inlet of Command records (COMMAND_SCHEMA: `id`, `command`, `target`, `args`), for a
    streamlet that reads the application's control topic in its own query (README, "The control
    stream"): declare `control = ControlInlet("control")` and bind the port to `<app>.control`
    (`managed: false`) in the blueprint. `error_handling` as AvroInlet's."""

    def __init__(self, name: str = "control", *, error_handling: ErrorHandling = "dead-letter",
                 description: str = "") -> None:
        super().__init__(name, COMMAND_SCHEMA, error_handling=error_handling, description=description)


@dataclass
class Command:
    """A command: one of COMMANDS, or `custom` with a `name` (see `custom`)."""

    command: str
    target: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    name: str | None = None

    @classmethod
    def custom(cls, name: str, target: str | None = None, args: dict[str, str] | None = None) -> "Command":
        """A command of a streamlet's own, read by its ControlInlet query (e.g. `set-threshold`);
        its name travels as the arg CUSTOM_NAME."""
        return cls(CUSTOM, target, dict(args or {}), name=name)

    def record(self) -> dict[str, Any]:
        """The Avro record (COMMAND_SCHEMA). Raises ValueError for an unknown command, or a custom
        one without a name."""
        if self.command not in (*COMMANDS, CUSTOM):
            raise ValueError(f"unknown command {self.command!r} (one of {', '.join(COMMANDS)}, or a custom one)")
        if (self.command == CUSTOM) != bool(self.name):
            raise ValueError("a custom command needs a name, and only a custom command has one")
        args = {**self.args, CUSTOM_NAME: self.name} if self.name else dict(self.args)
        return {"id": self.id, "command": self.command.replace("-", "_"), "target": self.target,
                "args": args, "issued_at": int(time.time() * 1000)}


@dataclass
class Outcome:
    """What an action returns: message, location and batch ids of an `ok` result."""

    message: str = ""
    location: str | None = None
    batch_ids: dict[str, int] = field(default_factory=dict)


class ControlResult(BaseModel):
    """What one streamlet did with a command: a record of RESULT_SCHEMA on the results topic
    (`model_dump()` is the Avro record; `at` is epoch milliseconds when sent, the decoder's
    datetime when read)."""

    model_config = ConfigDict(extra="forbid")

    command_id: str
    command: str
    streamlet: str
    status: Literal["ok", "error"]
    message: str = ""
    location: str | None = None
    batch_ids: dict[str, int] = {}
    at: datetime | int


# --- wire ---------------------------------------------------------------------------------------

def _encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    return encode(_SCHEMAS[schema["name"]], record)


def _decode(schema: dict[str, Any], data: bytes) -> dict[str, Any]:
    return decode(_SCHEMAS[schema["name"]], data)


def send_command(bootstrap: str | KafkaConnection, app_id: str, command: Command) -> None:
    """Produce `command` to the application's control topic (`<app_id>.control`, keyed by the command id) and
    wait for the delivery. Raises RuntimeError if Kafka at `bootstrap` has not acknowledged it within 30
    seconds."""
    from confluent_kafka import Producer

    producer = Producer(client_config({"bootstrap.servers": bootstrap}))
    producer.produce(control_topic(app_id), key=command.id.encode(), value=_encode(COMMAND_SCHEMA, command.record()))
    if producer.flush(30):
        raise RuntimeError(f"the command was not delivered to {control_topic(app_id)} on {bootstrap}")


def await_results(bootstrap: str | KafkaConnection, app_id: str, command_id: str, expected: set[str] | None, timeout: float,
                  consumer=None) -> list[dict[str, Any]]:
    """Results of command `command_id` until one from each of `expected` streamlets (None: wait the
    whole timeout) or `timeout` seconds. Pass a `consumer` subscribed before the command was sent
    to miss nothing; otherwise results are read from the beginning of the topic."""
    from confluent_kafka import Consumer

    own = consumer is None
    if own:
        consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": f"control-client-{uuid.uuid4().hex}",
                                           "auto.offset.reset": "earliest", "enable.auto.commit": False}))
        consumer.subscribe([results_topic(app_id)])
    try:
        return collect_results(consumer, {command_id: expected}, timeout)
    finally:
        if own:
            consumer.close()


def collect_results(consumer, waiting: dict[str, set[str] | None], timeout: float) -> list[dict[str, Any]]:
    """Results (decoded) of the commands whose ids are the keys of `waiting`, read from `consumer`
    until each has a result from every streamlet of its set (None: wait the whole timeout), or
    `timeout` seconds pass."""
    results: list[dict[str, Any]] = []
    keys = {cid.encode() for cid in waiting}

    def answered() -> bool:
        return all(expected is not None and expected <= {r["streamlet"] for r in results if r["command_id"] == cid}
                   for cid, expected in waiting.items())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not answered():
        msg = consumer.poll(0.5)
        if msg is None or msg.error() or msg.key() not in keys:
            continue
        results.append(ControlResult.model_validate(_decode(RESULT_SCHEMA, msg.value())).model_dump())
    return results


def results_consumer(bootstrap: str | KafkaConnection, app_id: str):
    """A consumer of the results topic positioned at its end (create it before sending)."""
    from confluent_kafka import Consumer

    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": f"control-client-{uuid.uuid4().hex}",
                                       "auto.offset.reset": "latest", "enable.auto.commit": False}))
    _assign_at_end(consumer, results_topic(app_id))
    return consumer


def _assign_at_end(consumer, topic: str, timeout: float = 30) -> None:
    """Read every partition of `topic` from its current end: assigned directly, with no consumer
    group to join or rebalance (a listener must not miss a command while a group settles)."""
    from confluent_kafka import TopicPartition

    metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise RuntimeError(f"topic {topic} does not exist" + (f": {metadata.error}" if metadata and metadata.error else ""))
    ends = []
    for p in sorted(metadata.partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        ends.append(TopicPartition(topic, p, high))
    consumer.assign(ends)


# --- listener -----------------------------------------------------------------------------------

class ControlListener(threading.Thread):
    """Reads the application's control topic and runs commands on the runtime's streamlets.

    `actions(streamlet, command, args, command_id) -> Outcome` does the work (StreamletRuntime.control);
    an exception becomes an `error` result with its message. Started by the runner and sandbox.
    """

    def __init__(self, bootstrap: str | KafkaConnection, app_id: str, streamlets: Callable[[], list[str]],
                 actions: Callable[[str, str, dict[str, str], str], Outcome]) -> None:
        super().__init__(name=f"control-{app_id}", daemon=True)
        from confluent_kafka import Consumer, Producer

        self.app_id, self.streamlets, self.actions = app_id, streamlets, actions
        self.consumer = Consumer(client_config({"bootstrap.servers": bootstrap,
                                                "group.id": f"{app_id}.control.{uuid.uuid4().hex}",
                                                "auto.offset.reset": "latest", "enable.auto.commit": False}))
        self.producer = Producer(client_config({"bootstrap.servers": bootstrap}))
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.handled = 0

    def run(self) -> None:
        """The thread's loop: read the control topic from its end (set `ready` once assigned), run each
        command for the targeted streamlets of this runtime and produce one result per streamlet to the
        results topic, until stop(). A malformed command is logged and skipped."""
        try:
            _assign_at_end(self.consumer, control_topic(self.app_id))
            self.ready.set()
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                try:
                    command = _decode(COMMAND_SCHEMA, msg.value())
                except Exception as e:  # a malformed command: nobody to answer, so say it in the log
                    log.warning("control: malformed command at %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), e)
                    continue
                self._handle(command)
        finally:
            self.ready.set()
            self.consumer.close()
            self.producer.flush(10)

    def _handle(self, command: dict[str, Any]) -> None:
        name = command["command"].replace("_", "-")
        if name == CUSTOM:  # for the streamlets' own ControlInlet queries
            return
        mine = self.streamlets()
        targets = mine if command["target"] is None else [t for t in mine if t == command["target"]]
        for streamlet in targets:
            try:
                outcome = self.actions(streamlet, name, dict(command["args"] or {}), command["id"])
                result: dict[str, Any] = {"status": "ok", "message": outcome.message, "location": outcome.location,
                                          "batch_ids": outcome.batch_ids}
            except Exception as e:  # the command failed; the streamlet carries on
                log.warning("control: %s on %s failed: %s", name, streamlet, e)
                result = {"status": "error", "message": str(e).splitlines()[0] if str(e) else type(e).__name__,
                          "location": None, "batch_ids": {}}
            record = ControlResult(command_id=command["id"], command=name, streamlet=streamlet,
                                   at=int(time.time() * 1000), **result)
            self.producer.produce(results_topic(self.app_id), key=command["id"].encode(),
                                  value=_encode(RESULT_SCHEMA, record.model_dump()))
            self.producer.flush(10)
            self.handled += 1

    def stop(self) -> None:
        """Ask the loop to end and wait up to 15 seconds for the thread (it closes its consumer and flushes
        its results, at most 10 seconds)."""
        self.stopping.set()
        self.join(15)
