"""Verifying a loaded blueprint: structure, classes, declarations, connections, schemas, graph.

`verify(blueprint)` imports the streamlet classes, resolves every producer/consumer item to a
port once (`resolve`), then runs each check in CHECKS (`check`). A check is a function of the
resolved blueprint that returns problems of its kinds; add a kind by registering its code in
blueprint.problems.CODES and adding a function to CHECKS. Run and deploy config files are
checked by blueprint.configcheck against the same resolved blueprint.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from streamlets.descriptor import InletDescriptor, OutletDescriptor, StreamletDescriptor
from streamlets.logical_types import mismatches as logical_mismatches
from streamlets.names import is_dns_label

from .classes import import_streamlets, summarize_failure
from .model import KAFKA_TOPIC_NAME_MAX, Blueprint, Located, PortPath, PortRef, Topic, is_kafka_topic_name
from .errors import BlueprintError
from .problems import Problem, make_problem, report_order, suggest

PortDescriptor = InletDescriptor | OutletDescriptor
ROLE_OF = {"producers": "outlet", "consumers": "inlet"}  # what each side of a topic must name

__all__ = ["Problem", "Resolved", "resolve", "check", "verify", "CHECKS"]


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
        """The port role the item's side needs: `outlet` for producers, `inlet` for consumers."""
        return ROLE_OF[self.side]


@dataclass
class Resolved:
    """The blueprint with its classes loaded and its topic items resolved: what checks read."""

    blueprint: Blueprint
    load_errors: dict[str, Exception]
    descriptors: dict[str, StreamletDescriptor]
    classes: dict[str, type]
    bindings: list[Binding]
    by_topic: dict[str, list[Binding]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for b in self.bindings:
            self.by_topic.setdefault(b.topic.id, []).append(b)

    def problem(self, code: str, message: str, at: Located | None = None, hint: str | None = None) -> Problem:
        """A Problem of kind `code` (blueprint.problems.CODES) in the blueprint's file, at `at`'s line and
        column when given, with an optional hint."""
        return make_problem(code, message, str(self.blueprint.path), at.line if at else None,
                            at.column if at else None, hint)

    def ok(self, topic: Topic, side: str) -> list[Binding]:
        """The bindings of `topic`'s `side` (producers or consumers) that resolved to a port of the right
        role."""
        return [b for b in self.by_topic.get(topic.id, ()) if b.status == "ok" and b.side == side]

    def connected(self) -> set[tuple[str, str]]:
        """(streamlet, port) of every port a topic names, rightly or in the wrong role."""
        return {(b.path.streamlet, b.path.port) for b in self.bindings if b.status in ("ok", "wrong-role")}


class InstantiationError(BlueprintError):
    """The streamlet class raised when instantiated without arguments (as the runtime does)."""

    code = "instantiation-failed"


def resolve(blueprint: Blueprint, classes: dict | None = None) -> Resolved:
    """Load the classes (unless given: instance name -> class or load error, as import_streamlets
    returns), instantiate each once, read the descriptors and resolve every producer/consumer."""
    if classes is None:
        classes = import_streamlets(blueprint)
    load_errors: dict[str, Exception] = {}
    descriptors: dict[str, StreamletDescriptor] = {}
    loaded: dict[str, type] = {}
    for name, cls in classes.items():
        if isinstance(cls, Exception):
            load_errors[name] = cls
            continue
        try:
            cls()  # the runtime instantiates it without arguments: a failing __init__ shows here first
            descriptors[name] = cls.descriptor()
            loaded[name] = cls
        except (Exception, SystemExit) as e:
            load_errors[name] = InstantiationError(f"instantiating {cls.__module__}.{cls.__qualname__}() raised "
                                                   f"{summarize_failure(e, str(blueprint.folder))}")
    return Resolved(blueprint, load_errors, descriptors, loaded, list(_bindings(blueprint, descriptors, load_errors)))


def check(r: Resolved) -> list[Problem]:
    """Every check of CHECKS on a resolved blueprint, in report order."""
    return report_order([p for c in CHECKS for p in c(r)])


def verify(blueprint: Blueprint, classes: dict | None = None) -> list[Problem]:
    """Every problem of the blueprint, errors and warnings, in report order (grouped by kind,
    errors first, then by place in the file).

    `classes` (instance name -> class or load error, as import_streamlets returns) is imported
    from the blueprint's folder when not given. Never raises for problems in the user's code.
    """
    return check(resolve(blueprint, classes))


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


# --- checks: one kind (or one family of kinds) each ----------------------------------------------

def check_structure(r: Resolved) -> list[Problem]:
    """What the loader found and skipped: unknown keys, duplicates, wrong types."""
    return [r.problem(p.code, p.message, p) for p in r.blueprint.load_problems]


def check_app_id(r: Resolved) -> list[Problem]:
    """invalid-app-id: the app-id is not a DNS label (lowercase letters, digits, '-'; at most 63 characters)."""
    app_id = r.blueprint.app_id
    if is_dns_label(app_id):
        return []
    return [r.problem("invalid-app-id", f"app-id {app_id!r} is not a DNS label", r.blueprint.app_id_position)]


def check_streamlet_names(r: Resolved) -> list[Problem]:
    """invalid-streamlet-name: an instance name that is not a DNS label, one problem each."""
    return [r.problem("invalid-streamlet-name", f"streamlet name {name!r} is not a DNS label", ref)
            for name, ref in r.blueprint.streamlets.items() if not is_dns_label(name)]


def check_classes(r: Resolved) -> list[Problem]:
    """Classes that did not load, with the code of the reason; a class with invalid declarations
    gives one problem per declaration (port, schema, config parameter, volume mount)."""
    out = []
    for name, error in r.load_errors.items():
        ref = r.blueprint.streamlets[name]
        code = getattr(error, "code", "import-failed")
        if code == "invalid-definition":
            out.extend(r.problem(p.code, f"streamlet {name!r} ({ref.class_name}): {p.message}", ref)
                       for p in error.problems)
            continue
        hint = getattr(error, "hint", None)  # the nearest names (classes.import_streamlets)
        if hint is None and code in ("module-not-found", "class-not-found"):
            hint = f"class paths resolve against the blueprint's folder {r.blueprint.folder}"
        out.append(r.problem(code, f"streamlet {name!r}: {error}", ref, hint))
    return out


def check_topic_names(r: Resolved) -> list[Problem]:
    """invalid-topic-name: a topic whose Kafka name (its `name`, else `<app-id>.<topic id>`) Kafka would
    refuse (letters, digits, '.', '_', '-'; at most 249)."""
    out = []
    for topic in r.blueprint.topics.values():
        name = topic.kafka_name(r.blueprint.app_id)
        if not is_kafka_topic_name(name):
            source = "its name" if topic.name else "the default name <app-id>.<topic id>"
            out.append(r.problem("invalid-topic-name",
                                 f"topic {topic.id!r}: {source} {name!r} is not a valid Kafka topic name", topic,
                                 f"Kafka topic names use letters, digits, '.', '_' and '-', at most "
                                 f"{KAFKA_TOPIC_NAME_MAX} characters"))
    return out


def check_kafka_name_clashes(r: Resolved) -> list[Problem]:
    """duplicate-kafka-topic: two topics of the blueprint with the same Kafka name (named at the second)."""
    first: dict[str, Topic] = {}
    out = []
    for topic in r.blueprint.topics.values():
        name = topic.kafka_name(r.blueprint.app_id)
        if name in first:
            other = first[name]
            out.append(r.problem("duplicate-kafka-topic",
                                 f"topics {other.id!r} (line {other.line}) and {topic.id!r} both resolve to "
                                 f"the Kafka topic {name!r}", topic,
                                 "give one of them another `name:`, or list all its ports under one topic id"))
        else:
            first[name] = topic
    return out


def check_port_paths(r: Resolved) -> list[Problem]:
    """malformed-port-path: a producers/consumers item that is not `streamlet.port`."""
    return [r.problem("malformed-port-path",
                      f"topic {b.topic.id!r}: {b.ref.text!r} in {b.side} is not a port path", b.ref,
                      f"write streamlet.{b.wanted_role}, e.g. {_example(r, b.wanted_role)}")
            for b in r.bindings if b.status == "malformed"]


def check_unknown_streamlets(r: Resolved) -> list[Problem]:
    """unknown-streamlet: an item naming no streamlet of the blueprint, with the nearest names as the hint."""
    return [r.problem("unknown-streamlet",
                      f"topic {b.topic.id!r}: {b.ref.text!r} names no streamlet {b.path.streamlet!r}", b.ref,
                      suggest(b.path.streamlet, r.blueprint.streamlets, "streamlets"))
            for b in r.bindings if b.status == "unknown-streamlet"]


def check_unknown_ports(r: Resolved) -> list[Problem]:
    """unknown-port: an item naming a port its streamlet's class does not declare, with the nearest port names
    as the hint."""
    out = []
    for b in r.bindings:
        if b.status != "unknown-port":
            continue
        d = r.descriptors[b.path.streamlet]
        names = [p.name for p in (d.outlets if b.side == "producers" else d.inlets)]
        out.append(r.problem("unknown-port",
                             f"topic {b.topic.id!r}: streamlet {b.path.streamlet!r} ({d.class_name}) has no "
                             f"{b.wanted_role} {b.path.port!r}", b.ref,
                             suggest(b.path.port, names, f"{b.wanted_role}s of {b.path.streamlet!r}")))
    return out


def check_port_roles(r: Resolved) -> list[Problem]:
    """wrong-port-role: an inlet among a topic's producers or an outlet among its consumers."""
    out = []
    for b in r.bindings:
        if b.status != "wrong-role":
            continue
        actual = "inlet" if b.side == "producers" else "outlet"
        other_side = "consumers" if b.side == "producers" else "producers"
        out.append(r.problem("wrong-port-role",
                             f"topic {b.topic.id!r}: `{b.path}` is an {actual}, but {b.side} must be "
                             f"{b.wanted_role}s", b.ref, f"move `{b.path}` to the topic's {other_side}"))
    return out


def check_unconnected_inlets(r: Resolved) -> list[Problem]:
    """unconnected-inlet (an error): an inlet no topic's consumers name."""
    return _unconnected(r, "inlet", "unconnected-inlet", "add `{path}` to the consumers of the topic it should read")


def check_unconnected_outlets(r: Resolved) -> list[Problem]:
    """unconnected-outlet (a warning): an outlet no topic's producers name; its query runs with Spark's noop
    sink."""
    return _unconnected(r, "outlet", "unconnected-outlet",
                        "add `{path}` to a topic's producers; until then its query runs and its records are discarded")


def check_ports_on_many_topics(r: Resolved) -> list[Problem]:
    """port-on-many-topics: one port named by several topics (a port reads or writes exactly one topic)."""
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
            out.append(r.problem("port-on-many-topics",
                                 f"{role} `{first.path}` is bound to {len(bound)} topics "
                                 f"({', '.join(repr(b.topic.id) for b in bound)}); a port connects to one topic",
                                 bound[1].ref, hint))
    return out


def check_topic_ends(r: Resolved) -> list[Problem]:
    """Topics without producers or without consumers (written, not resolved: a misspelt port is
    its own error). Warnings; `--strict` makes them errors."""
    out = []
    for t in r.blueprint.topics.values():
        if not t.managed:
            continue  # a topic of another system: its other end is outside the application
        if not t.producers and not t.consumers:
            out.append(r.problem("empty-topic", f"topic {t.id!r} has no producers and no consumers", t))
        elif not t.producers:
            out.append(r.problem("topic-without-producers", f"topic {t.id!r} has consumers but no producers", t,
                                 "add the outlet that should write it, or mark the topic `managed: false` "
                                 "if another system writes it"))
        elif not t.consumers:
            out.append(r.problem("topic-without-consumers", f"topic {t.id!r} has producers but no consumers", t,
                                 "add the inlet that should read it, or mark the topic `managed: false` "
                                 "if another system reads it"))
    return out


def check_producer_schemas(r: Resolved) -> list[Problem]:
    """producers-disagree: producers of one topic whose schemas differ (by fingerprint), named against the
    first producer."""
    out = []
    for topic in r.blueprint.topics.values():
        if topic.schema_registry:  # values name their writer schema: each inlet is checked against each
            continue
        producers = r.ok(topic, "producers")
        first = producers[0] if producers else None
        for other in producers[1:]:
            if other.port.fingerprint != first.port.fingerprint:
                out.append(r.problem("producers-disagree",
                                     f"topic {topic.id!r}: outlets `{first.path}` ({first.port.schema_name}) and "
                                     f"`{other.path}` ({other.port.schema_name}) write different schemas "
                                     f"(fingerprints {first.port.fingerprint} and {other.port.fingerprint})",
                                     other.ref))
                continue
            # Fingerprints (the Parsing Canonical Form) leave logical types out: compare those too.
            differ = [f"field {m.field!r} is {m.reader} in `{other.path}` but {m.writer} in `{first.path}`"
                      for m in logical_mismatches(first.port.schema_, other.port.schema_)]
            if differ:
                out.append(r.problem("producers-disagree",
                                     f"topic {topic.id!r}: outlets `{first.path}` and `{other.path}` write "
                                     f"{first.port.schema_name} with different logical types: {'; '.join(differ)}",
                                     other.ref))
    return out


def check_schemas(r: Resolved) -> list[Problem]:
    """Each producer's schema as writer against each consumer's schema as reader, per topic: the
    direction data flows, so a consumer may lag a compatible evolution of its producer. Avro
    resolution by underlying types (incompatible-schema), and the logical types of the fields
    it pairs (logical-type-mismatch, streamlets.logical_types): one problem per field."""
    out = []
    compatibility: dict[tuple[str, str], str | Exception | None] = {}  # (reader, writer) fingerprints
    parsed: dict[str, object] = {}  # fingerprint -> the avro package's schema: parsing is most of the cost
    logical: dict[tuple[int, int], list] = {}  # (reader, writer) schema dicts, by id: the descriptors hold them
    for topic in r.blueprint.topics.values():
        consumers = r.ok(topic, "consumers")
        for w in r.ok(topic, "producers"):
            for c in consumers:
                key = (id(c.port.schema_), id(w.port.schema_))
                if key not in logical:
                    logical[key] = logical_mismatches(writer=w.port.schema_, reader=c.port.schema_)
                out.extend(r.problem("logical-type-mismatch",
                                     f"topic {topic.id!r}: inlet `{c.path}` ({c.port.schema_name}) would misread what "
                                     f"outlet `{w.path}` ({w.port.schema_name}) writes: {m.message}", c.ref)
                           for m in logical[key])
                if w.port.fingerprint == c.port.fingerprint:
                    continue  # the same schema but for logical types (the Parsing Canonical Form leaves them out)
                pair = (c.port.fingerprint, w.port.fingerprint)
                if pair not in compatibility:
                    try:
                        compatibility[pair] = _incompatibility(reader=c.port.schema_, writer=w.port.schema_,
                                                               parsed=parsed, fingerprints=pair)
                    except Exception as e:  # the avro package rejects a schema fastavro accepted
                        compatibility[pair] = e
                broken = compatibility[pair]
                where = f"topic {topic.id!r}: inlet `{c.path}` ({c.port.schema_name})"
                if isinstance(broken, Exception):
                    out.append(r.problem("uncomparable-schema",
                                         f"{where} and outlet `{w.path}` use different schemas that could not "
                                         f"be compared: {broken}", c.ref))
                elif broken:
                    out.append(r.problem(
                        "incompatible-schema",
                        f"{where} cannot read what outlet `{w.path}` ({w.port.schema_name}) writes: {broken}", c.ref))
    return out


def check_unbounded_arrays(r: Resolved) -> list[Problem]:
    """Schemas an inlet decodes with (its own, and a producer's that differs) with an array whose
    items encode to zero bytes: a value of a few bytes can announce a million of them, so the
    decoder's work is not bounded by the value's length (streamlets.avro_limits)."""
    from streamlets.avro_limits import zero_size_arrays

    out = []
    for name, d in r.descriptors.items():
        ref = r.blueprint.streamlets[name]
        for inlet in d.inlets:
            paths = zero_size_arrays(inlet.schema_)
            if paths:
                out.append(r.problem("zero-size-array-items",
                                     f"streamlet {name!r}: inlet {inlet.name!r} ({inlet.schema_name}): array "
                                     f"{', '.join(paths)} has items that encode to zero bytes", ref))
    for topic in r.blueprint.topics.values():
        consumers = r.ok(topic, "consumers")
        for w in r.ok(topic, "producers"):
            paths = zero_size_arrays(w.port.schema_)
            if paths and consumers and all(c.port.fingerprint != w.port.fingerprint for c in consumers):
                out.append(r.problem("zero-size-array-items",
                                     f"topic {topic.id!r}: outlet `{w.path}` ({w.port.schema_name}) writes array "
                                     f"{', '.join(paths)} whose items encode to zero bytes, which its consumers decode",
                                     w.ref))
    return out


def check_cycles(r: Resolved) -> list[Problem]:
    """Streamlets that feed back into themselves through topics, each loop reported once with its path."""
    edges: dict[str, list[tuple[str, Topic]]] = {}  # streamlet -> (next streamlet, through topic)
    for topic in r.blueprint.topics.values():
        for w in r.ok(topic, "producers"):
            for c in r.ok(topic, "consumers"):
                edges.setdefault(w.path.streamlet, []).append((c.path.streamlet, topic))
    out = []
    for component in _strongly_connected(list(r.blueprint.streamlets), edges):
        start = min(component, key=lambda n: list(r.blueprint.streamlets).index(n))
        if len(component) == 1 and all(n != start for n, _ in edges.get(start, [])):
            continue  # a single streamlet without a self-loop is no cycle
        path = _cycle_through(start, component, edges)
        shown = " ".join(f"{name} -[{topic.id}]->" for name, topic in path) + f" {start}"
        out.append(r.problem("cycle", f"cycle: {shown}", r.blueprint.streamlets[start]))
    return out


CHECKS: tuple[Callable[[Resolved], list[Problem]], ...] = (
    check_structure, check_app_id, check_streamlet_names, check_classes, check_topic_names,
    check_kafka_name_clashes, check_port_paths, check_unknown_streamlets, check_unknown_ports, check_port_roles,
    check_unconnected_inlets, check_unconnected_outlets, check_ports_on_many_topics, check_topic_ends,
    check_producer_schemas, check_schemas, check_unbounded_arrays, check_cycles,
)


# --- helpers -----------------------------------------------------------------------------------

def _unconnected(r: Resolved, role: str, code: str, hint: str) -> list[Problem]:
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
                out.append(r.problem(code, f"{role} `{path}` is not connected to a topic",
                                     r.blueprint.streamlets[name], hint.format(path=path)))
    return out


def _strongly_connected(nodes: list[str], edges: dict[str, list[tuple[str, Topic]]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (a generated blueprint may chain thousands of streamlets)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = edges.get(node, [])
            if i < len(successors):
                work.append((node, i + 1))
                nxt = successors[i][0]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _cycle_through(start: str, component: list[str], edges: dict[str, list[tuple[str, Topic]]]) -> list[tuple[str, Topic]]:
    """A shortest loop from `start` back to itself inside its component: [(streamlet, topic out), ...]."""
    members = set(component)
    previous: dict[str, tuple[str, Topic]] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt, topic in edges.get(node, []):
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [(node, topic)]
                    while node != start:
                        node, topic = previous[node]
                        path.append((node, topic))
                    return path[::-1]
                if nxt not in previous:
                    previous[nxt] = (node, topic)
                    following.append(nxt)
        frontier = following
    return []


def _example(r: Resolved, role: str) -> str:
    for name, d in r.descriptors.items():
        ports = d.inlets if role == "inlet" else d.outlets
        if ports:
            return f"{name}.{ports[0].name}"
    return f"my-streamlet.{'in' if role == 'inlet' else 'out'}"


def _incompatibility(reader: dict, writer: dict, parsed: dict | None = None,
                     fingerprints: tuple[str, str] | None = None) -> str | None:
    """None if `reader` can read what `writer` writes (Avro schema resolution), else what breaks.

    `parsed` caches the avro package's parsed schemas by the `fingerprints` (reader, writer).
    Raises the avro package's errors if it cannot parse a schema.
    """
    import avro.schema
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    def avro_schema(schema: dict, fingerprint: str | None):
        if parsed is None or fingerprint is None:
            return avro.schema.parse(json.dumps(schema))
        if fingerprint not in parsed:
            parsed[fingerprint] = avro.schema.parse(json.dumps(schema))
        return parsed[fingerprint]

    reader_fp, writer_fp = fingerprints or (None, None)
    result = ReaderWriterCompatibilityChecker().get_compatibility(avro_schema(reader, reader_fp),
                                                                  avro_schema(writer, writer_fp))
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    kinds = {k.value for k in result.incompatibilities}
    messages = sorted(result.messages)
    fields = sorted({_field_at(reader, loc) for loc in result.locations} - {""})
    # The checker keeps messages and locations as separate sets: pair them only when there is one.
    if len(kinds) == 1 and len(messages) == 1 and len(fields) <= 1:
        kind, message, field_name = kinds.pop(), messages[0], (fields[0] if fields else "")
        mismatch = re.match(r"reader type: (\S+) not compatible with writer type: (\S+)", message)
        if kind == "type_mismatch" and mismatch:
            subject = f"field {field_name!r}" if field_name else "the record"
            return f"{subject} is {mismatch.group(1)} in the reader but {mismatch.group(2)} in the writer"
        if kind == "reader_field_missing_default_value":
            return f"field {field_name or message!r} of the reader has no default and the writer does not write it"
        if kind == "name_mismatch":
            subject = f"the type of field {field_name!r}" if field_name else "the record"
            return f"{subject} has another name than the writer's ({message})"
        if kind == "missing_enum_symbols":
            return f"enum field {field_name!r} lacks the writer's symbols {message}"
        return f"{field_name or 'the record'}: {message}"
    at = f" at {', '.join(repr(f) for f in fields)}" if fields else ""
    return f"{', '.join(sorted(k.replace('_', ' ') for k in kinds))}{at}: {'; '.join(messages)}"


def _field_at(schema: dict, location: str) -> str:
    """Dotted field names along a checker location such as `/fields/1/type/fields/0/type`."""
    tokens = [t for t in location.split("/") if t]
    node, names, i = schema, [], 0
    while i < len(tokens):
        token = tokens[i]
        if token == "fields" and i + 1 < len(tokens) and isinstance(node, dict) and "fields" in node:
            item = node["fields"][int(tokens[i + 1])]
            names.append(item["name"])
            node, i = item, i + 2
        elif token in ("type", "items", "values") and isinstance(node, dict) and token in node:
            node, i = node[token], i + 1
        else:
            break  # names, sizes, symbols and union branches end the walk
    return ".".join(names)
