"""An application's Kafka topics, computed in one place for the sandbox and `blueprint build`.

Names: a blueprint topic's Kafka name is `Topic.kafka_name(app_id)` (blueprint.model); the system
topics' (dead letters, the control stream's two, exactly-once outlets' batch ledger) are
streamlets.runtime.system_topics'.
"""

from __future__ import annotations

from streamlets.logical_types import mismatches as logical_mismatches
from streamlets.runtime import system_topics

from .model import Blueprint


def dead_letter_topic(bp: Blueprint) -> str:
    """The application's dead-letter topic: `<app>.dead-letters` (streamlets.runtime.system_topics)."""
    return system_topics.dead_letter_topic(bp.app_id)


def application_topics(bp: Blueprint) -> list[tuple[str, int, dict[str, str]]]:
    """Every topic the application needs, as (Kafka name, partitions, topic config): the
    blueprint's topics, then the system topics (streamlets.runtime.system_topics; one partition
    each in the sandbox)."""
    topics = [(t.kafka_name(bp.app_id), t.partitions, dict(t.config)) for t in bp.topics.values()]
    return topics + [(t.name, t.partitions or 1, dict(t.config)) for t in system_topics.system_topics(bp.app_id)]


def topic_bindings(bp: Blueprint, name: str, classes: dict[str, type]) -> tuple[dict[str, str], dict[str, dict]]:
    """Port -> Kafka topic of one streamlet instance, and inlet -> its producer's schema where
    that differs from the inlet's, logical types included (verify has checked that the two are
    compatible); not for a schema registry topic, whose values name their writer schema."""
    topics: dict[str, str] = {}
    writers: dict[str, dict] = {}
    for topic in bp.topics.values():
        producer_schemas = {}
        for ref in topic.producers:
            p = ref.path
            outlet = classes[p.streamlet].shape().outlet(p.port) if p and p.streamlet in classes else None
            if outlet is not None:
                producer_schemas[outlet.schema.fingerprint] = outlet.schema
        for ref in (*topic.producers, *topic.consumers):
            path = ref.path
            if path is None or path.streamlet != name:
                continue
            topics[path.port] = topic.kafka_name(bp.app_id)
            inlet = classes[name].shape().inlet(path.port)
            if inlet is not None and len(producer_schemas) == 1 and not topic.schema_registry:  # the ids say
                (writer,) = producer_schemas.values()
                # Fingerprints leave logical types out: a writer that differs only in those goes to
                # the runtime too, which refuses to start rather than decode into another meaning.
                if writer.fingerprint != inlet.schema.fingerprint or logical_mismatches(writer.schema, inlet.schema.schema):
                    writers[inlet.name] = writer.schema
    return topics, writers


def registry_ports(bp: Blueprint, name: str) -> list[str]:
    """The ports of streamlet instance `name` whose topics carry the schema registry's wire format
    (`schema-registry: true`), sorted."""
    ports = {ref.path.port for topic in bp.topics.values() if topic.schema_registry
             for ref in (*topic.producers, *topic.consumers) if ref.path is not None and ref.path.streamlet == name}
    return sorted(ports)
