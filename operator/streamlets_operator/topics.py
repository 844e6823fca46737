"""The application's Kafka topics, through confluent-kafka's AdminClient.

Managed topics (the default) are created when missing, with the partitions and replication factor
of the spec (else spec.kafka.topicDefaults, else the broker's defaults); unmanaged ones are only
checked to exist. The system topics (streamlets.runtime.system_topics: the dead-letter topic
spec.deadLetterTopic, the control stream's, the batch ledger) are managed. Topics are deleted only
on request (spec.deleteTopicsOnDelete), never because a topic left the spec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from blueprint.deploy.spec import ApplicationSpec
from streamlets.errors import StreamletError
from streamlets.kafka_security import KafkaConnection
from streamlets.runtime.system_topics import DEAD_LETTERS, system_topics

from .render import typed


class TopicError(StreamletError, RuntimeError):
    """Kafka could not be reached or refused an operation (transient as far as the operator knows)."""


@dataclass(frozen=True)
class Topic:
    id: str
    name: str
    partitions: int  # -1: the broker's default
    replication: int  # -1: the broker's default
    config: dict[str, str] = field(default_factory=dict)
    managed: bool = True


def desired_topics(spec: dict[str, Any] | ApplicationSpec) -> list[Topic]:
    """Every topic the application needs: spec.topics (partitions and replication factor unset ->
    spec.kafka.topicDefaults, else -1, the broker's default), then the system topics
    (streamlets.runtime.system_topics) the spec does not list: the dead-letter topic when
    spec.deadLetterTopic names it, the control stream's two and the batch ledger (their own
    partitions, e.g. 1, when they pin one). Raises pydantic's ValidationError for a spec that is
    not an ApplicationSpec."""
    app = typed(spec)
    defaults = app.kafka.topic_defaults
    parts = defaults.partitions if defaults and defaults.partitions is not None else -1
    repl = defaults.replication_factor if defaults and defaults.replication_factor is not None else -1
    out = [Topic(t.id, t.name, parts if t.partitions is None else t.partitions,
                 repl if t.replication_factor is None else t.replication_factor,
                 dict(t.config or {}), t.managed) for t in app.topics or []]
    dead = app.dead_letter_topic  # the dead-letter topic is the one the spec names
    if dead and dead not in {t.name for t in out}:
        out.append(Topic(DEAD_LETTERS, dead, parts, repl, {}, True))
    for st in system_topics(app.app_id):  # the other system topics (the control stream's two, the batch ledger)
        if st.id != DEAD_LETTERS and st.name not in {t.name for t in out}:
            out.append(Topic(st.id, st.name, parts if st.partitions is None else st.partitions, repl,
                             dict(st.config), True))
    return out


def _admin(bootstrap: str | KafkaConnection, timeout: float):
    from confluent_kafka.admin import AdminClient

    from streamlets.kafka_logging import client_config

    return AdminClient(client_config({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
                                      "socket.connection.setup.timeout.ms": int(timeout * 1000)}))


def _existing(admin, bootstrap: str | KafkaConnection, timeout: float) -> dict[str, Any]:
    from confluent_kafka import KafkaException

    try:
        return admin.list_topics(timeout=timeout).topics
    except KafkaException as e:
        raise TopicError(f"cannot list topics at {bootstrap}: {e}") from None


def ensure_topics(bootstrap: str | KafkaConnection, topics: list[Topic], timeout: float = 15) -> list[dict[str, Any]]:
    """Create the missing managed topics; returns one status entry per topic
    ({id, name, partitions, state: Created|Exists|Missing}). `bootstrap`: the bootstrap servers, or
    the connection with its security (streamlets_operator.kafka.connection). Raises TopicError if
    Kafka fails or refuses the client."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap, timeout)
    existing = _existing(admin, bootstrap, timeout)
    missing = [t for t in topics if t.managed and t.name not in existing]
    created: set[str] = set()
    if missing:
        futures = admin.create_topics(
            [NewTopic(t.name, num_partitions=t.partitions, replication_factor=t.replication, config=t.config)
             for t in missing], operation_timeout=timeout, request_timeout=timeout)
        for name, fut in futures.items():
            try:
                err = fut.exception(timeout=timeout)
            except Exception as e:  # the future timed out
                raise TopicError(f"creating topic {name!r} timed out: {e}") from None
            kerr = err.args[0] if isinstance(err, KafkaException) and err.args else None
            if err is None or (kerr is not None and kerr.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                created.add(name)
                continue
            raise TopicError(f"creating topic {name!r} failed: {kerr or err}")
        deadline = time.monotonic() + timeout
        while True:  # wait for the new topics' metadata (leaders), as producers need it
            existing = _existing(admin, bootstrap, timeout)
            if all(n in existing and existing[n].error is None and existing[n].partitions for n in created):
                break
            if time.monotonic() > deadline:
                raise TopicError(f"topics {sorted(created)} have no metadata after {timeout}s")
            time.sleep(0.2)
    out = []
    for t in topics:
        entry: dict[str, Any] = {"id": t.id, "name": t.name}
        meta = existing.get(t.name)
        if meta is not None and meta.partitions:
            entry["partitions"] = len(meta.partitions)
        if t.name in created:
            entry["state"] = "Created"
        elif meta is not None:
            entry["state"] = "Exists"
        else:
            entry["state"], entry["message"] = "Missing", "unmanaged topic does not exist"
        out.append(entry)
    return out


def delete_topics(bootstrap: str | KafkaConnection, names: list[str], timeout: float = 15) -> None:
    """Delete the topics that exist among `names`. Raises TopicError if Kafka fails."""
    from confluent_kafka import KafkaError, KafkaException

    admin = _admin(bootstrap, timeout)
    present = [n for n in names if n in _existing(admin, bootstrap, timeout)]
    if not present:
        return
    for name, fut in admin.delete_topics(present, operation_timeout=timeout, request_timeout=timeout).items():
        err = fut.exception(timeout=timeout)
        kerr = err.args[0] if isinstance(err, KafkaException) and err.args else None
        if err is not None and not (kerr is not None and kerr.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise TopicError(f"deleting topic {name!r} failed: {kerr or err}")
