"""The application graph: streamlet instances and topics connected by port edges, rendered as
plain text, Mermaid, Graphviz DOT, and (with the Graphviz `dot` executable) SVG or PNG.

The graph is drawn from whatever the blueprint says, sound or not: streamlets whose class did
not load are nodes marked unloaded, and port paths that cannot be drawn (malformed, naming an
unknown streamlet or a port the class does not have) are skipped and listed in
`AppGraph.skipped`. Telling the user what is wrong is the verifier's job; this module never
raises on a broken blueprint.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from streamlets.descriptor import StreamletDescriptor

from .model import Blueprint
from .errors import BlueprintError

IMAGE_FORMATS = ("svg", "png")


class GraphvizError(BlueprintError, RuntimeError):
    """Graphviz could not render the graph (the `dot` executable failed or timed out)."""


class GraphvizMissingError(GraphvizError):
    """The Graphviz `dot` executable is not on PATH."""


# --- the graph as data -----------------------------------------------------------------------

@dataclass(frozen=True)
class Port:
    """An inlet or outlet of a streamlet instance. `schema_name` is None when the class did not load."""

    name: str
    schema_name: str | None = None


@dataclass
class StreamletNode:
    """A streamlet instance. Unloaded (its class failed to import): ports are those the blueprint names."""

    name: str
    class_name: str
    loaded: bool = True
    error: str | None = None
    inlets: list[Port] = field(default_factory=list)
    outlets: list[Port] = field(default_factory=list)


@dataclass
class TopicNode:
    """A topic: its id in the blueprint, its Kafka name and partition count."""

    id: str
    kafka_name: str
    partitions: int = 1


@dataclass(frozen=True)
class Edge:
    """`produce`: streamlet outlet -> topic; `consume`: topic -> streamlet inlet. Labelled `port`."""

    kind: Literal["produce", "consume"]
    streamlet: str
    port: str
    topic: str


@dataclass(frozen=True)
class Skipped:
    """A producer or consumer entry that is not drawn, and why."""

    topic: str
    role: Literal["producer", "consumer"]
    text: str
    reason: str


@dataclass
class AppGraph:
    """Nodes (streamlets, topics, in blueprint order) and edges of one application."""

    app_id: str
    streamlets: dict[str, StreamletNode] = field(default_factory=dict)
    topics: dict[str, TopicNode] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def producers(self, topic: str) -> list[Edge]:
        """The produce edges into topic `topic` (by topic id)."""
        return [e for e in self.edges if e.kind == "produce" and e.topic == topic]

    def consumers(self, topic: str) -> list[Edge]:
        """The consume edges out of topic `topic` (by topic id)."""
        return [e for e in self.edges if e.kind == "consume" and e.topic == topic]

    def edges_at(self, streamlet: str, port: str, kind: str) -> list[Edge]:
        """The edges of `kind` (produce or consume) at port `port` of streamlet `streamlet`."""
        return [e for e in self.edges if e.streamlet == streamlet and e.port == port and e.kind == kind]

    def order(self) -> list[str]:
        """Streamlet names from sources to sinks: by depth (the longest chain of topics from a
        source: sources first), blueprint order among equals. Streamlets on a cycle (and what only
        they feed) follow in blueprint order.
        """
        downstream: dict[str, set[str]] = {name: set() for name in self.streamlets}
        for topic in self.topics:
            for p in self.producers(topic):
                for c in self.consumers(topic):
                    if c.streamlet != p.streamlet:
                        downstream[p.streamlet].add(c.streamlet)
        indegree = {name: 0 for name in self.streamlets}
        for targets in downstream.values():
            for t in targets:
                indegree[t] += 1
        depth = {name: 0 for name in self.streamlets}
        ready = [n for n in self.streamlets if indegree[n] == 0]
        sorted_: list[str] = []
        while ready:
            name = ready.pop()
            sorted_.append(name)
            for t in downstream[name]:
                depth[t] = max(depth[t], depth[name] + 1)
                indegree[t] -= 1
                if indegree[t] == 0:
                    ready.append(t)
        position = {name: i for i, name in enumerate(self.streamlets)}
        sorted_.sort(key=lambda n: (depth[n], position[n]))
        return sorted_ + [n for n in self.streamlets if n not in sorted_]


def build_graph(blueprint: Blueprint, descriptors: Mapping[str, StreamletDescriptor],
                load_errors: Mapping[str, str] | None = None) -> AppGraph:
    """The graph of `blueprint`, with ports and schema names from `descriptors` (instance name ->
    descriptor of its class). Streamlets missing from `descriptors` are unloaded nodes (reason from
    `load_errors`, if given) whose ports are those the topics name. Never raises for a broken
    blueprint: port paths that do not parse, name an unknown streamlet or a port the class lacks
    are skipped (see `AppGraph.skipped`).
    """
    load_errors = load_errors or {}
    graph = AppGraph(app_id=blueprint.app_id)
    for name, ref in blueprint.streamlets.items():
        d = descriptors.get(name)
        if d is None:
            graph.streamlets[name] = StreamletNode(name, ref.class_name, loaded=False, error=load_errors.get(name))
        else:
            graph.streamlets[name] = StreamletNode(
                name, ref.class_name,
                inlets=[Port(p.name, p.schema_name) for p in d.inlets],
                outlets=[Port(p.name, p.schema_name) for p in d.outlets])
    for topic_id, topic in blueprint.topics.items():
        graph.topics[topic_id] = TopicNode(topic_id, topic.kafka_name(blueprint.app_id), topic.partitions)
        for role, refs in (("producer", topic.producers), ("consumer", topic.consumers)):
            for ref in refs:
                edge, reason = _edge(graph, topic_id, role, ref.text)
                if edge is None:
                    graph.skipped.append(Skipped(topic_id, role, ref.text, reason))
                elif edge not in graph.edges:
                    graph.edges.append(edge)
    return graph


def _edge(graph: AppGraph, topic_id: str, role: str, text: str) -> tuple[Edge | None, str]:
    parts = text.split(".") if isinstance(text, str) else []
    if len(parts) != 2 or not all(p.strip() for p in parts):
        return None, "not a port path of the form streamlet.port"
    streamlet, port = (p.strip() for p in parts)
    node = graph.streamlets.get(streamlet)
    if node is None:
        return None, f"no streamlet named {streamlet!r}"
    kind: Literal["produce", "consume"] = "produce" if role == "producer" else "consume"
    ports = node.outlets if kind == "produce" else node.inlets
    if not node.loaded:
        if all(p.name != port for p in ports):
            ports.append(Port(port))  # unknown schema: the class did not load
    elif all(p.name != port for p in ports):
        return None, f"streamlet {streamlet!r} has no {'outlet' if kind == 'produce' else 'inlet'} {port!r}"
    return Edge(kind, streamlet, port, topic_id), ""


# --- plain text ------------------------------------------------------------------------------

def to_text(graph: AppGraph) -> str:
    """A plain-text rendering (no ANSI codes), streamlets from sources to sinks:

        flights  (flight_delays.ingress.FlightIngress)  source
          out: FlightEvent --> [flight-events] --> enrich.flights

    Inlets read `in: Schema <-- [topic] <-- producer.port`; ports on no topic say
    `(not connected)`; then the topics, and the entries that were skipped.
    """
    lines = [f"{graph.app_id}: {_count(len(graph.streamlets), 'streamlet')}, "
             f"{_count(len(graph.topics), 'topic')}", ""]
    for name in graph.order():
        s = graph.streamlets[name]
        role = _role(s)
        lines.append(f"{_plain(name)}  ({_plain(s.class_name)})  {role}".rstrip())
        if not s.loaded and s.error:
            lines.append(f"  ! {_plain(s.error)}")
        for ports, kind, arrow, others, missing in ((s.inlets, "consume", "<--", graph.producers, "(no producers)"),
                                                    (s.outlets, "produce", "-->", graph.consumers, "(no consumers)")):
            for p in ports:
                head = f"  {_plain(p.name)}{_schema(p)}"
                edges = graph.edges_at(name, p.name, kind)
                if not edges:
                    lines.append(f"{head}  (not connected)")
                for e in edges:
                    ends = ", ".join(f"{_plain(x.streamlet)}.{_plain(x.port)}" for x in others(e.topic))
                    lines.append(f"{head} {arrow} [{_plain(e.topic)}] {arrow} {ends or missing}")
        if s.loaded and not s.inlets and not s.outlets:
            lines.append("  (no ports)")
    if graph.topics:
        lines += ["", "topics:"]
        for t in graph.topics.values():
            notes = [n for n, missing in (("no producers", not graph.producers(t.id)),
                                          ("no consumers", not graph.consumers(t.id))) if missing]
            lines.append(f"  [{_plain(t.id)}]  kafka: {_plain(t.kafka_name)}, "
                         f"{_count(t.partitions, 'partition')}" + (f"  ({', '.join(notes)})" if notes else ""))
    if graph.skipped:
        lines += ["", "not drawn:"]
        lines += [f"  {s.role} {_plain(s.text)} of [{_plain(s.topic)}]: {_plain(s.reason)}" for s in graph.skipped]
    return "\n".join(lines) + "\n"


def _role(s: StreamletNode) -> str:
    if not s.loaded:
        return "UNLOADED"
    if s.outlets and not s.inlets:
        return "source"
    if s.inlets and not s.outlets:
        return "sink"
    return ""


def _schema(p: Port) -> str:
    return f": {_plain(p.schema_name)}" if p.schema_name else ""


def _plain(text: str) -> str:
    """`text` on one line with control characters (ANSI escapes, newlines) shown as \\x.. escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --- Mermaid ---------------------------------------------------------------------------------

def to_mermaid(graph: AppGraph) -> str:
    """A Mermaid `flowchart LR`: streamlets are rectangles `id["name<br/>class"]`, topics are
    cylinders `id[("topic<br/>kafka name")]`, edges carry the port name `a -->|"out"| b`.

    Node ids are `s_<name>` / `t_<topic>` reduced to [A-Za-z0-9_] (made unique with a suffix);
    labels are quoted with `"`, `<`, `>`, `&` and `#` written as Mermaid entity codes.
    Unloaded streamlets get the dashed `unloaded` class; skipped entries are `%%` comments.
    """
    ids = _node_ids(graph)
    lines = ["flowchart LR"]
    for name in graph.order():
        s = graph.streamlets[name]
        label = _mm(name) + "<br/>" + _mm(s.class_name) + ("<br/>(not loaded)" if not s.loaded else "")
        lines.append(f'    {ids["s", name]}["{label}"]')
    for t in graph.topics.values():
        label = _mm(t.id) + "<br/>" + _mm(t.kafka_name) + f" ({_count(t.partitions, 'partition')})"
        lines.append(f'    {ids["t", t.id]}[("{label}")]')
    for e in graph.edges:
        s_id, t_id = ids["s", e.streamlet], ids["t", e.topic]
        a, b = (s_id, t_id) if e.kind == "produce" else (t_id, s_id)
        lines.append(f'    {a} -->|"{_mm(e.port)}"| {b}')
    unloaded = [ids["s", s.name] for s in graph.streamlets.values() if not s.loaded]
    if unloaded:
        lines.append("    classDef unloaded stroke:#c00,stroke-dasharray:5 5")
        lines.append(f"    class {','.join(unloaded)} unloaded")
    for s in graph.skipped:
        lines.append(f"    %% not drawn: {s.role} {_plain(s.text)} of {_plain(s.topic)}: {_plain(s.reason)}")
    return "\n".join(lines) + "\n"


_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;",
                     "|": "#124;", "\n": " ", "\r": " "}


def _mm(text: str) -> str:
    """Text for inside a quoted Mermaid label."""
    return "".join(_MERMAID_ENTITIES.get(c, c if c.isprintable() else " ") for c in str(text))


def _node_ids(graph: AppGraph) -> dict[tuple[str, str], str]:
    """(`s`|`t`, name) -> a unique id of [A-Za-z0-9_]: safe in Mermaid and DOT alike."""
    ids: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for kind, names in (("s", graph.streamlets), ("t", graph.topics)):
        for name in names:
            base = f"{kind}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
            node_id, n = base, 2
            while node_id in used:
                node_id, n = f"{base}_{n}", n + 1
            used.add(node_id)
            ids[kind, name] = node_id
    return ids


# --- Graphviz --------------------------------------------------------------------------------

def to_dot(graph: AppGraph) -> str:
    """A Graphviz `digraph` (rankdir=LR): streamlets are boxes, topics cylinders, edges labelled
    with the port name. Node ids are the sanitised ids of `to_mermaid`, quoted; every label and
    the graph name are quoted with `\\` and `"` escaped and newlines as `\\n`. Unloaded
    streamlets are dashed red; skipped entries are `//` comments.
    """
    ids = _node_ids(graph)
    lines = [f"digraph {_dq(graph.app_id)} {{",
             "    rankdir=LR;",
             '    node [fontname="Helvetica", fontsize=11];',
             '    edge [fontname="Helvetica", fontsize=10];']
    for name in graph.order():
        s = graph.streamlets[name]
        label = f"{name}\n{s.class_name}" + ("\n(not loaded)" if not s.loaded else "")
        style = ', style="dashed", color="red"' if not s.loaded else ""
        lines.append(f'    {_dq(ids["s", name])} [shape=box, label={_dq(label)}{style}];')
    for t in graph.topics.values():
        label = f"{t.id}\n{t.kafka_name} ({_count(t.partitions, 'partition')})"
        lines.append(f'    {_dq(ids["t", t.id])} [shape=cylinder, label={_dq(label)}];')
    for e in graph.edges:
        s_id, t_id = _dq(ids["s", e.streamlet]), _dq(ids["t", e.topic])
        a, b = (s_id, t_id) if e.kind == "produce" else (t_id, s_id)
        lines.append(f"    {a} -> {b} [label={_dq(e.port)}];")
    for s in graph.skipped:
        lines.append(f"    // not drawn: {s.role} {_plain(s.text)} of {_plain(s.topic)}: {_plain(s.reason)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dq(text: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, line breaks as \\n."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return '"' + "".join(c if c.isprintable() else " " for c in text) + '"'


def render_image(dot_text: str, fmt: str, timeout: float = 60.0) -> bytes:
    """Run Graphviz `dot -T<fmt>` on `dot_text` and return the image (`svg` or `png`) as bytes.

    Raises ValueError for another format, GraphvizMissingError if `dot` is not on PATH (install
    Graphviz, e.g. `apt-get install graphviz`, or use --format dot|mermaid|text), GraphvizError if
    `dot` fails or takes longer than `timeout` seconds.
    """
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unsupported image format {fmt!r} (expected one of: {', '.join(IMAGE_FORMATS)})")
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissingError(
            f"--format {fmt} needs the Graphviz `dot` program, which is not installed: install Graphviz "
            "(e.g. `apt-get install graphviz`) or use --format dot|mermaid|text")
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizError(f"Graphviz `dot -T{fmt}` did not finish within {timeout:g} s") from None
    except OSError as e:
        raise GraphvizError(f"cannot run Graphviz `{dot}`: {e}") from None
    if done.returncode != 0 or not done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise GraphvizError(f"Graphviz `dot -T{fmt}` failed: {message}")
    return done.stdout
