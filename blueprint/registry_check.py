"""`blueprint verify --schema-registry URL`: the blueprint's schema registry topics
(`schema-registry: true`) against the registry, as the registry itself would judge.

For each such topic, under its subject `<Kafka topic>-value` (streamlets.schema_registry.subject):

- each outlet's schema is checked against the versions registered under the subject's
  compatibility level (its own, else the registry's global one), the rules of Confluent's
  levels: BACKWARD (the new schema reads the latest version), FORWARD (the latest reads the new),
  FULL (both); their _TRANSITIVE forms against every version; NONE nothing. The Avro checker
  names the field (blueprint.verify's incompatible-schema words); the registry's own verdict
  (`POST /compatibility/subjects/<subject>/versions/latest`) is asked too, so a refusal that our
  checker does not explain is still reported (registry-incompatible);
- each inlet's schema must read every version registered (registry-unreadable-version): the
  topic may hold values of any of them.

A topic whose subject has no version yet passes (the first outlet to start registers it). The
registry unreachable or refusing the credentials is one registry-unavailable error.
"""

from __future__ import annotations

from streamlets.schema import AvroSchema
from streamlets.schema_registry import SchemaRegistry, SchemaRegistryError, compatibility, registered, subject

from .problems import Problem
from .verify import Resolved, _incompatibility

# level -> (the new schema must read the old ones, the old ones must read the new, against all versions)
LEVELS = {"NONE": (False, False, False),
          "BACKWARD": (True, False, False), "BACKWARD_TRANSITIVE": (True, False, True),
          "FORWARD": (False, True, False), "FORWARD_TRANSITIVE": (False, True, True),
          "FULL": (True, True, False), "FULL_TRANSITIVE": (True, True, True)}


def registry_problems(r: Resolved, registry: SchemaRegistry) -> list[Problem]:
    """The problems of the blueprint's registry topics against `registry` (see the module)."""
    out: list[Problem] = []
    bp = r.blueprint
    for topic in bp.topics.values():
        if not topic.schema_registry:
            continue
        name = topic.kafka_name(bp.app_id)
        where = f"topic {topic.id!r} (subject {subject(name)})"
        try:
            versions = registered(registry, name)
            level = compatibility(registry, name).upper() if versions else "NONE"
        except SchemaRegistryError as e:  # one error: the other topics would say the same
            return [*out, r.problem("registry-unavailable", str(e), topic)]
        if not versions:
            continue
        latest = versions[-1]
        backward, forward, transitive = LEVELS.get(level, (True, False, False))
        against = versions if transitive else [latest]
        for w in r.ok(topic, "producers"):
            assert w.port is not None  # r.ok: resolved
            schema = w.port.schema_
            broken: list[str] = []
            for version, schema_id, old in against:
                if backward and (why := _incompatibility(reader=schema, writer=old)):
                    broken.append(f"it cannot read version {version} (id {schema_id}): {why}")
                if forward and (why := _incompatibility(reader=old, writer=schema)):
                    broken.append(f"version {version} (id {schema_id}) cannot read it: {why}")
            if not broken and level != "NONE" and not _registry_accepts(registry, name, schema):
                broken.append("the registry refuses it (it gave no reason)")
            if broken:
                out.append(r.problem("registry-incompatible",
                                     f"{where}: outlet `{w.path}` ({w.port.schema_name}) breaks the subject's {level} "
                                     f"compatibility: {'; '.join(broken)}", w.ref))
        for c in r.ok(topic, "consumers"):
            assert c.port is not None
            for version, schema_id, old in versions:
                why = _incompatibility(reader=c.port.schema_, writer=old)
                if why:
                    out.append(r.problem("registry-unreadable-version",
                                         f"{where}: inlet `{c.path}` ({c.port.schema_name}) cannot read version "
                                         f"{version} (id {schema_id}) registered under the subject: {why}", c.ref))
    return out


def _registry_accepts(registry: SchemaRegistry, topic: str, schema: dict) -> bool:
    """The registry's own verdict on registering `schema` under the topic's subject now."""
    from confluent_kafka.schema_registry import Schema

    try:
        return bool(registry.client().test_compatibility(subject(topic), Schema(AvroSchema.load(schema).json, "AVRO")))
    except Exception:
        return True  # its verdict is a second opinion: our checker's stands
