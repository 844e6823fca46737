"""Verifying a loaded blueprint: names, classes, connections and schema compatibility.

`verify(blueprint)` imports the streamlet classes, resolves every producer/consumer item to a
port once, then runs each check in CHECKS. A check is a function of the resolved blueprint that
returns problems of one kind; add a kind by adding a function to CHECKS.

Problem codes:
  error    invalid-app-id, invalid-streamlet-name, unloadable-class, invalid-topic-name,
           malformed-port-path, unknown-streamlet, unknown-port, wrong-port-role,
           unconnected-inlet, port-on-many-topics, incompatible-schema
  warning  unconnected-outlet, schema-differs, empty-topic
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

from pydantic import BaseModel

from streamlets.descriptor import InletDescriptor, OutletDescriptor, StreamletDescriptor
from streamlets.names import is_dns_label

from .loader import import_streamlets
from .model import KAFKA_TOPIC_NAME_MAX, Blueprint, Located, PortPath, PortRef, Topic, is_kafka_topic_name

Severity = Literal["error", "warning"]
PortDescriptor = InletDescriptor | OutletDescriptor
ROLE_OF = {"producers": "outlet", "consumers": "inlet"}  # what each side of a topic must name


class Problem(BaseModel):
    """One finding, located in the blueprint file (line and column are 1-based, or None)."""

    severity: Severity
    code: str
    message: str
    file: str
    line: int | None = None
    column: int | None = None
    hint: str | None = None


@dataclass(frozen=True)
class Binding:
    """One producer/consumer item of a topic, resolved as far as it goes.

    `status`: ok, malformed, unknown-streamlet, unloaded (its class failed: reported once by
    check_classes), unknown-port, wrong-role. `port` is set for ok and wrong-role.
    """

    topic: Topic
    side: str  # "producers" or "consumers"
    ref: PortRef
    path: PortPath | None
    status: str
    port: PortDescriptor | None = None

    @property
    def wanted_role(self) -> str:
        return ROLE_OF[self.side]


@dataclass
class Resolved:
    """The blueprint with its classes loaded and its topic items resolved: what checks read."""

    blueprint: Blueprint
    load_errors: dict[str, Exception]
    descriptors: dict[str, StreamletDescriptor]
    bindings: list[Binding]

    def problem(self, severity: Severity, code: str, message: str, at: Located | None = None,
                hint: str | None = None) -> Problem:
        return Problem(severity=severity, code=code, message=message, file=str(self.blueprint.path),
                       line=at.line if at else None, column=at.column if at else None, hint=hint)

    def connected(self) -> set[tuple[str, str]]:
        """(streamlet, port) of every port a topic names, rightly or in the wrong role."""
        return {(b.path.streamlet, b.path.port) for b in self.bindings if b.status in ("ok", "wrong-role")}


def verify(blueprint: Blueprint, classes: dict | None = None) -> list[Problem]:
    """Every problem of the blueprint, errors and warnings, in file order.

    `classes` (instance name -> class or load error, as import_streamlets returns) is imported
    from the blueprint's folder when not given. Never raises for problems in the user's code.
    """
    if classes is None:
        classes = import_streamlets(blueprint)
    load_errors: dict[str, Exception] = {}
    descriptors: dict[str, StreamletDescriptor] = {}
    for name, cls in classes.items():
        if isinstance(cls, Exception):
            load_errors[name] = cls
            continue
        try:
            descriptors[name] = cls.descriptor()
        except Exception as e:  # a class that passed definition checks should not fail here
            load_errors[name] = e
    resolved = Resolved(blueprint, load_errors, descriptors, list(_bindings(blueprint, descriptors, load_errors)))
    problems = [p for check in CHECKS for p in check(resolved)]
    return sorted(problems, key=lambda p: (p.line or 0, p.column or 0))


def _bindings(bp: Blueprint, descriptors: dict[str, StreamletDescriptor],
              load_errors: dict[str, Exception]) -> Iterable[Binding]:
    for topic in bp.topics.values():
        for side in ("producers", "consumers"):
            for ref in getattr(topic, side):
                path = ref.path
                if path is None:
                    yield Binding(topic, side, ref, None, "malformed")
                elif path.streamlet in load_errors:
                    yield Binding(topic, side, ref, path, "unloaded")
                elif path.streamlet not in descriptors:
                    yield Binding(topic, side, ref, path, "unknown-streamlet")
                else:
                    d = descriptors[path.streamlet]
                    wanted = d.outlet(path.port) if side == "producers" else d.inlet(path.port)
                    other = d.inlet(path.port) if side == "producers" else d.outlet(path.port)
                    if wanted is not None:
                        yield Binding(topic, side, ref, path, "ok", wanted)
                    elif other is not None:
                        yield Binding(topic, side, ref, path, "wrong-role", other)
                    else:
                        yield Binding(topic, side, ref, path, "unknown-port")


# --- checks: one kind each ---------------------------------------------------------------------

def check_app_id(r: Resolved) -> list[Problem]:
    app_id = r.blueprint.app_id
    if is_dns_label(app_id):
        return []
    return [r.problem("error", "invalid-app-id", f"app-id {app_id!r} is not a DNS label", r.blueprint.app_id_position,
                      "use lowercase letters, digits and '-', at most 63 characters, starting and ending "
                      "with a letter or digit")]


def check_streamlet_names(r: Resolved) -> list[Problem]:
    return [r.problem("error", "invalid-streamlet-name",
                      f"streamlet name {name!r} is not a DNS label", ref,
                      "use lowercase letters, digits and '-', at most 63 characters; it names Kubernetes resources")
            for name, ref in r.blueprint.streamlets.items() if not is_dns_label(name)]


def check_classes(r: Resolved) -> list[Problem]:
    out = []
    for name, error in r.load_errors.items():
        # Only a module or class not found is about where class paths resolve.
        not_found = "No module named" in str(error) or "has no class" in str(error)
        out.append(r.problem("error", "unloadable-class", f"streamlet {name!r}: {error}", r.blueprint.streamlets[name],
                             f"class paths resolve against the blueprint's folder {r.blueprint.folder}"
                             if not_found else None))
    return out


def check_topic_names(r: Resolved) -> list[Problem]:
    out = []
    for topic in r.blueprint.topics.values():
        name = topic.kafka_name(r.blueprint.app_id)
        if not is_kafka_topic_name(name):
            source = "its name" if topic.name else "the default name <app-id>.<topic id>"
            out.append(r.problem("error", "invalid-topic-name",
                                 f"topic {topic.id!r}: {source} {name!r} is not a valid Kafka topic name", topic,
                                 f"Kafka topic names use letters, digits, '.', '_' and '-', at most "
                                 f"{KAFKA_TOPIC_NAME_MAX} characters"))
    return out


def check_port_paths(r: Resolved) -> list[Problem]:
    return [r.problem("error", "malformed-port-path",
                      f"topic {b.topic.id!r}: {b.ref.text!r} in {b.side} is not a port path", b.ref,
                      f"write streamlet.{b.wanted_role}, e.g. {_example(r, b.wanted_role)}")
            for b in r.bindings if b.status == "malformed"]


def check_unknown_streamlets(r: Resolved) -> list[Problem]:
    return [r.problem("error", "unknown-streamlet",
                      f"topic {b.topic.id!r}: {b.ref.text!r} names no streamlet {b.path.streamlet!r}", b.ref,
                      _suggest(b.path.streamlet, r.blueprint.streamlets, "streamlets"))
            for b in r.bindings if b.status == "unknown-streamlet"]


def check_unknown_ports(r: Resolved) -> list[Problem]:
    out = []
    for b in r.bindings:
        if b.status != "unknown-port":
            continue
        d = r.descriptors[b.path.streamlet]
        names = [p.name for p in (d.outlets if b.side == "producers" else d.inlets)]
        out.append(r.problem("error", "unknown-port",
                             f"topic {b.topic.id!r}: streamlet {b.path.streamlet!r} ({d.class_name}) has no "
                             f"{b.wanted_role} {b.path.port!r}", b.ref,
                             _suggest(b.path.port, names, f"{b.wanted_role}s of {b.path.streamlet!r}")))
    return out


def check_port_roles(r: Resolved) -> list[Problem]:
    out = []
    for b in r.bindings:
        if b.status != "wrong-role":
            continue
        actual = "inlet" if b.side == "producers" else "outlet"
        other_side = "consumers" if b.side == "producers" else "producers"
        out.append(r.problem("error", "wrong-port-role",
                             f"topic {b.topic.id!r}: `{b.path}` is an {actual}, but {b.side} must be "
                             f"{b.wanted_role}s", b.ref, f"move `{b.path}` to the topic's {other_side}"))
    return out


def check_unconnected_inlets(r: Resolved) -> list[Problem]:
    return _unconnected(r, "inlet", "error", "unconnected-inlet",
                        "add `{path}` to the consumers of the topic it should read")


def check_unconnected_outlets(r: Resolved) -> list[Problem]:
    return _unconnected(r, "outlet", "warning", "unconnected-outlet",
                        "add `{path}` to a topic's producers; writing to an unconnected outlet fails at run time")


def check_ports_on_many_topics(r: Resolved) -> list[Problem]:
    seen: dict[tuple[str, str], list[Binding]] = {}
    for b in r.bindings:
        if b.status == "ok":
            bound = seen.setdefault((b.path.streamlet, b.path.port), [])
            if all(x.topic.id != b.topic.id for x in bound):  # the same item twice in one topic is harmless
                bound.append(b)
    out = []
    for bound in seen.values():
        if len(bound) > 1:
            first = bound[0]
            role = first.wanted_role
            hint = ("list every consumer under one topic: a topic feeds any number of inlets" if role == "outlet"
                    else "an inlet reads one topic: list all its producers under that topic")
            out.append(r.problem("error", "port-on-many-topics",
                                 f"{role} `{first.path}` is bound to {len(bound)} topics "
                                 f"({', '.join(repr(b.topic.id) for b in bound)}); a port connects to one topic",
                                 bound[1].ref, hint))
    return out


def check_schemas(r: Resolved) -> list[Problem]:
    """Each producer's schema as writer against each consumer's schema as reader, per topic."""
    out = []
    for topic in r.blueprint.topics.values():
        ok = [b for b in r.bindings if b.topic is topic and b.status == "ok"]
        for w in (b for b in ok if b.side == "producers"):
            for c in (b for b in ok if b.side == "consumers"):
                if w.port.fingerprint == c.port.fingerprint:
                    continue
                where = f"topic {topic.id!r}: inlet `{c.path}` ({c.port.schema_name})"
                try:
                    broken = _incompatibility(reader=c.port.schema_, writer=w.port.schema_)
                except Exception as e:  # the avro package rejects a schema fastavro accepted
                    out.append(r.problem("warning", "schema-differs",
                                         f"{where} and outlet `{w.path}` use different schemas that could not "
                                         f"be compared: {e}", c.ref))
                    continue
                if broken:
                    out.append(r.problem(
                        "error", "incompatible-schema",
                        f"{where} cannot read what outlet `{w.path}` ({w.port.schema_name}) writes: {broken}", c.ref,
                        "a reader may add fields only with a default, and may widen a type: "
                        "int -> long -> float -> double, string <-> bytes"))
                else:
                    out.append(r.problem(
                        "warning", "schema-differs",
                        f"{where} reads a different version of the schema than outlet `{w.path}` writes "
                        f"(fingerprints {c.port.fingerprint} and {w.port.fingerprint}); Avro resolution allows it",
                        c.ref,
                        "the inlet decodes with its own schema only (Spark from_avro), so use the same schema "
                        "on both ends until the runtime resolves writer against reader"))
    return out


def check_empty_topics(r: Resolved) -> list[Problem]:
    return [r.problem("warning", "empty-topic", f"topic {t.id!r} has no producers and no consumers", t,
                      "connect ports to it or remove it")
            for t in r.blueprint.topics.values() if not t.producers and not t.consumers]


CHECKS: tuple[Callable[[Resolved], list[Problem]], ...] = (
    check_app_id, check_streamlet_names, check_classes, check_topic_names, check_port_paths,
    check_unknown_streamlets, check_unknown_ports, check_port_roles, check_unconnected_inlets,
    check_unconnected_outlets, check_ports_on_many_topics, check_schemas, check_empty_topics,
)


# --- helpers -----------------------------------------------------------------------------------

def _unconnected(r: Resolved, role: str, severity: Severity, code: str, hint: str) -> list[Problem]:
    connected = r.connected()
    # A misspelt port (unknown-port, whose hint names the real one) is not reported twice.
    misspelt = {b.path.streamlet for b in r.bindings if b.status == "unknown-port" and b.wanted_role == role}
    out = []
    for name, d in r.descriptors.items():
        if name in misspelt:
            continue
        for port in (d.inlets if role == "inlet" else d.outlets):
            if (name, port.name) not in connected:
                path = f"{name}.{port.name}"
                out.append(r.problem(severity, code, f"{role} `{path}` is not connected to a topic",
                                     r.blueprint.streamlets[name], hint.format(path=path)))
    return out


def _suggest(name: str, known: Iterable[str], what: str) -> str:
    known = sorted(known)
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if near:
        return "did you mean " + " or ".join(repr(n) for n in near) + "?"
    return f"{what}: {', '.join(known)}" if known else f"there are no {what}"


def _example(r: Resolved, role: str) -> str:
    for name, d in r.descriptors.items():
        ports = d.inlets if role == "inlet" else d.outlets
        if ports:
            return f"{name}.{ports[0].name}"
    return f"my-streamlet.{'in' if role == 'inlet' else 'out'}"


def _incompatibility(reader: dict, writer: dict) -> str | None:
    """None if `reader` can read what `writer` writes (Avro schema resolution), else what breaks.

    Raises the avro package's errors if it cannot parse a schema.
    """
    import avro.schema
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer)))
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    kinds = {k.value for k in result.incompatibilities}
    messages = sorted(result.messages)
    fields = sorted({_field_at(reader, loc) for loc in result.locations} - {""})
    # The checker keeps messages and locations as separate sets: pair them only when there is one.
    if len(kinds) == 1 and len(messages) == 1 and len(fields) <= 1:
        kind, message, field = kinds.pop(), messages[0], (fields[0] if fields else "")
        mismatch = re.match(r"reader type: (\S+) not compatible with writer type: (\S+)", message)
        if kind == "type_mismatch" and mismatch:
            subject = f"field {field!r}" if field else "the record"
            return f"{subject} is {mismatch.group(1)} in the reader but {mismatch.group(2)} in the writer"
        if kind == "reader_field_missing_default_value":
            return f"field {field or message!r} of the reader has no default and the writer does not write it"
        if kind == "name_mismatch":
            subject = f"the type of field {field!r}" if field else "the record"
            return f"{subject} has another name than the writer's ({message})"
        if kind == "missing_enum_symbols":
            return f"enum field {field!r} lacks the writer's symbols {message}"
        return f"{field or 'the record'}: {message}"
    at = f" at {', '.join(repr(f) for f in fields)}" if fields else ""
    return f"{', '.join(sorted(k.replace('_', ' ') for k in kinds))}{at}: {'; '.join(messages)}"


def _field_at(schema: dict, location: str) -> str:
    """Dotted field names along a checker location such as `/fields/1/type/fields/0/type`."""
    tokens = [t for t in location.split("/") if t]
    node, names, i = schema, [], 0
    while i < len(tokens):
        token = tokens[i]
        if token == "fields" and i + 1 < len(tokens) and isinstance(node, dict) and "fields" in node:
            field = node["fields"][int(tokens[i + 1])]
            names.append(field["name"])
            node, i = field, i + 2
        elif token in ("type", "items", "values") and isinstance(node, dict) and token in node:
            node, i = node[token], i + 1
        else:
            break  # names, sizes, symbols and union branches end the walk
    return ".".join(names)
