"""`blueprint graph`: the application drawn as text, Mermaid, DOT, SVG and PNG, broken blueprints too."""

import re
import shutil
import subprocess
import sys
import textwrap
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

import blueprint.graph as graph_module
from blueprint.cli import app
from blueprint.graph import AppGraph, StreamletNode, TopicNode, to_dot, to_mermaid

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flight-delays" / "blueprint.yaml"
EXAMPLE_STREAMLETS = ["flights", "weather", "enrich", "stats", "files"]
EXAMPLE_TOPICS = ["flight-events", "weather-observations", "enriched-flights", "delay-stats"]
# (from, to) as names: outlet -> topic and topic -> inlet, labelled with the port.
EXAMPLE_EDGES = {
    ("flights", "flight-events", "out"), ("flight-events", "enrich", "flights"),
    ("weather", "weather-observations", "out"), ("weather-observations", "enrich", "weather"),
    ("enrich", "enriched-flights", "out"), ("enriched-flights", "stats", "in"),
    ("stats", "delay-stats", "out"), ("delay-stats", "files", "in"),
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed (./dev/setup installs it "
                               "with apt-get; or apt-get install graphviz)")
runner = CliRunner()

STREAMLETS = """
    from streamlets import AvroInlet, AvroOutlet, Streamlet

    R = {"type": "record", "name": "Reading", "namespace": "graph.test",
         "fields": [{"name": "id", "type": "string"}]}

    class Source(Streamlet):
        out = AvroOutlet("out", R)
        def create_logic(self, ctx):
            pass

    class Proc(Streamlet):
        inlet = AvroInlet("in", R)
        out = AvroOutlet("out", R)
        def create_logic(self, ctx):
            pass

    class Sink(Streamlet):
        inlet = AvroInlet("in", R)
        def create_logic(self, ctx):
            pass
    """


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch):
    # import_streamlets puts each blueprint's folder on sys.path for good: undo it after the test.
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def make_blueprint(tmp_path):
    """Write `text` (M. -> a fresh module of the Source/Proc/Sink streamlets) and return its path."""
    created = []

    def make(text: str, **modules: str) -> Path:
        module = f"graph_streamlets_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(STREAMLETS))
        created.append(module)
        for name, source in modules.items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
            created.append(name)
        path = tmp_path / "blueprint.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n").replace("M.", f"{module}."))
        return path

    yield make
    for module in created:
        sys.modules.pop(module, None)


def graph(*args: str):
    return runner.invoke(app, ["graph", *map(str, args)])


def mermaid_structure(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """(node id -> label, [(from id, to id, edge label)]); fails on any line it does not understand."""
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for line in lines[1:]:
        line = line.strip()
        if m := re.fullmatch(r'([A-Za-z0-9_]+)\["([^"]*)"\]', line):
            nodes[m[1]] = m[2]
        elif m := re.fullmatch(r'([A-Za-z0-9_]+)\[\("([^"]*)"\)\]', line):
            nodes[m[1]] = m[2]
        elif m := re.fullmatch(r'([A-Za-z0-9_]+) -->\|"([^"]*)"\| ([A-Za-z0-9_]+)', line):
            edges.append((m[1], m[3], m[2]))
        elif line.startswith(("classDef ", "class ", "%% ")):
            continue
        else:
            pytest.fail(f"unexpected Mermaid line: {line!r}")
    for a, b, _ in edges:
        assert a in nodes and b in nodes, (a, b, sorted(nodes))
    return nodes, edges


def by_name(nodes: dict[str, str], edges):
    """Mermaid edges as (from name, to name, label), names being the first line of each label."""
    name = {node_id: label.split("<br/>")[0] for node_id, label in nodes.items()}
    return {(name[a], name[b], label) for a, b, label in edges}


def headers_of(text: str) -> list[str]:
    """The streamlet names of a text rendering, in the order shown."""
    return [line.split()[0] for line in text.splitlines() if line and not line[0].isspace() and "(" in line]


def svg_texts(svg: bytes) -> str:
    root = ET.fromstring(svg)  # raises if the SVG is not well-formed XML
    assert root.tag.endswith("svg")
    return "\n".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))


# --- the example -----------------------------------------------------------------------------

def test_example_text_names_everything_sources_first():
    result = graph(EXAMPLE)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("flight-delays: 5 streamlets, 4 topics\n")
    assert "\x1b" not in out  # no ANSI codes when stdout is not a terminal
    assert headers_of(out) == EXAMPLE_STREAMLETS  # topological: sources, join, stats, sink
    for topic in EXAMPLE_TOPICS:
        assert f"[{topic}]  kafka: flight-delays.{topic}, 3 partitions" in out
    assert "  out: nyc.flights.FlightEvent --> [flight-events] --> enrich.flights\n" in out
    assert "  flights: nyc.flights.FlightEvent <-- [flight-events] <-- flights.out\n" in out
    assert "  in: nyc.flights.DelayStats <-- [delay-stats] <-- stats.out\n" in out
    assert "flights  (flight_delays.ingress.FlightIngress)  source" in out
    assert "files  (flight_delays.egress.DelayStatsFiles)  sink" in out
    assert "not connected" not in out and "not drawn" not in out


def test_example_mermaid_is_structurally_sound():
    result = graph(EXAMPLE, "--format", "mermaid")
    assert result.exit_code == 0, result.output
    nodes, edges = mermaid_structure(result.stdout)
    assert len(nodes) == 9 and len(edges) == 8
    assert by_name(nodes, edges) == EXAMPLE_EDGES
    assert 't_flight_events[("flight-events<br/>flight-delays.flight-events (3 partitions)")]' in result.stdout


def test_example_dot_text():
    result = graph(EXAMPLE, "-f", "dot")
    assert result.exit_code == 0, result.output
    dot = result.stdout
    assert dot.startswith('digraph "flight-delays" {\n') and dot.rstrip().endswith("}")
    assert "rankdir=LR;" in dot
    assert '"s_flights" [shape=box, label="flights\\nflight_delays.ingress.FlightIngress"];' in dot
    assert '"t_delay_stats" [shape=cylinder, ' in dot
    assert '"t_flight_events" -> "s_enrich" [label="flights"];' in dot
    assert dot.count(" -> ") == 8


@needs_dot
def test_example_dot_is_accepted_by_graphviz(tmp_path):
    dot_file = tmp_path / "app.dot"
    assert graph(EXAMPLE, "-f", "dot", "-o", dot_file).exit_code == 0
    done = subprocess.run(["dot", "-Tsvg", str(dot_file)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    texts = svg_texts(done.stdout)
    for name in EXAMPLE_STREAMLETS + EXAMPLE_TOPICS:
        assert name in texts


@needs_dot
def test_example_svg_to_file_and_stdout(tmp_path):
    out = tmp_path / "app.svg"
    result = graph(EXAMPLE, "--format", "svg", "--output", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    texts = svg_texts(out.read_bytes())
    for name in EXAMPLE_STREAMLETS:
        assert name in texts
    to_stdout = graph(EXAMPLE, "--format", "svg")
    assert to_stdout.exit_code == 0, to_stdout.output
    assert "enrich" in svg_texts(to_stdout.stdout_bytes)


@needs_dot
def test_example_png(tmp_path):
    out = tmp_path / "app.png"
    result = graph(EXAMPLE, "--format", "png", "--output", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    assert out.stat().st_size > 1000


def test_module_entry_point_runs_graph():
    done = subprocess.run([sys.executable, "-m", "blueprint.cli", "graph", str(EXAMPLE), "-f", "mermaid"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart LR\n")
    assert "Traceback" not in done.stderr


# --- broken blueprints still render ----------------------------------------------------------

BROKEN = """
    app-id: broken
    streamlets:
      src: M.Source
      sink: M.Sink
      boom: graph_boom.Exploding
      gone: graph_missing_module.Nope
    topics:
      readings:
        producers: [src.out, src, ghost.out, src.nope]
        consumers: [sink.in, boom.in, sink.out]
      orphan:
        consumers: [gone.in]
    """
BOOM = {"graph_boom": "raise RuntimeError('exploded on import')\n"}


def test_broken_blueprint_text_marks_and_skips(make_blueprint):
    result = graph(make_blueprint(BROKEN, **BOOM))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "boom  (graph_boom.Exploding)  UNLOADED" in out
    assert "exploded on import" in out
    assert "gone  (graph_missing_module.Nope)  UNLOADED" in out
    # The unloaded streamlets' ports come from the blueprint (no schema known).
    assert "  in <-- [readings] <-- src.out" in out
    assert "  in <-- [orphan] <-- (no producers)" in out
    assert "[orphan]  kafka: broken.orphan, 1 partition  (no producers)" in out
    skipped = out.split("not drawn:\n", 1)[1].splitlines()
    assert skipped == [
        "  producer src of [readings]: not a port path of the form streamlet.port",
        "  producer ghost.out of [readings]: no streamlet named 'ghost'",
        "  producer src.nope of [readings]: streamlet 'src' has no outlet 'nope'",
        "  consumer sink.out of [readings]: streamlet 'sink' has no inlet 'out'",
    ]


def test_broken_blueprint_mermaid_and_dot(make_blueprint):
    path = make_blueprint(BROKEN, **BOOM)
    mermaid = graph(path, "-f", "mermaid")
    assert mermaid.exit_code == 0, mermaid.output
    nodes, edges = mermaid_structure(mermaid.stdout)
    assert by_name(nodes, edges) == {("src", "readings", "out"), ("readings", "sink", "in"),
                                     ("readings", "boom", "in"), ("orphan", "gone", "in")}
    assert "    class s_boom,s_gone unloaded" in mermaid.stdout
    assert mermaid.stdout.count("%% not drawn:") == 4
    dot = graph(path, "-f", "dot")
    assert dot.exit_code == 0, dot.output
    assert '"s_boom" [shape=box, label="boom\\ngraph_boom.Exploding\\n(not loaded)", style="dashed"' in dot.stdout
    assert dot.stdout.count(" -> ") == 4
    if HAS_DOT:
        done = subprocess.run(["dot", "-Tsvg"], input=dot.stdout.encode(), capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "boom" in svg_texts(done.stdout)


def test_unconnected_ports_and_cycles(make_blueprint):
    path = make_blueprint("""
        streamlets:
          a: M.Proc
          b: M.Proc
          lonely: M.Proc
        topics:
          ab: {producers: [a.out], consumers: [b.in]}
          ba: {producers: [b.out], consumers: [a.in]}
        """)
    result = graph(path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "  in: graph.test.Reading  (not connected)" in out
    assert "  out: graph.test.Reading  (not connected)" in out
    lonely = out.split("lonely  (", 1)[1].split("\n\n", 1)[0]
    assert lonely.count("(not connected)") == 2
    assert "  out: graph.test.Reading --> [ab] --> b.in" in out
    assert "  in: graph.test.Reading <-- [ba] <-- b.out" in out


def test_sources_come_first_whatever_the_blueprint_order(make_blueprint):
    path = make_blueprint("""
        streamlets:
          z-sink: M.Sink
          middle: M.Proc
          a-source: M.Source
        topics:
          t1: {producers: [a-source.out], consumers: [middle.in]}
          t2: {producers: [middle.out], consumers: [z-sink.in]}
        """)
    assert headers_of(graph(path).stdout) == ["a-source", "middle", "z-sink"]


def test_order_is_by_depth_then_blueprint_order(make_blueprint):
    # src-1 feeds proc directly and sink via a longer chain; src-2 comes later in the file.
    path = make_blueprint("""
        streamlets:
          src-1: M.Source
          sink: M.Sink
          proc: M.Proc
          src-2: M.Source
          other-sink: M.Sink
        topics:
          t1: {producers: [src-1.out], consumers: [proc.in]}
          t2: {producers: [proc.out, src-2.out], consumers: [sink.in]}
          t3: {producers: [src-2.out], consumers: [other-sink.in]}
        """)
    assert headers_of(graph(path).stdout) == ["src-1", "src-2", "proc", "other-sink", "sink"]


# --- escaping --------------------------------------------------------------------------------

WEIRD = """
    app-id: 'we"ird app'
    streamlets:
      'sou"rce-1': M.Source
      'back\\slash': M.Sink
      'a-b': M.Sink
      'a_b': M.Sink
    topics:
      'top"ic-#1.<x>':
        name: 'kafka-name.v1'
        producers: ['sou"rce-1.out']
        consumers: ['back\\slash.in', 'a-b.in', 'a_b.in']
    """


def test_names_with_quotes_and_dashes_are_escaped_in_mermaid(make_blueprint):
    result = graph(make_blueprint(WEIRD), "-f", "mermaid")
    assert result.exit_code == 0, result.output
    nodes, edges = mermaid_structure(result.stdout)  # quotes inside labels would break the parse
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", node_id) for node_id in nodes)
    assert len(nodes) == 5 and len(edges) == 4  # a-b and a_b stay two nodes
    assert nodes["s_sou_rce_1"] == "sou#quot;rce-1<br/>" + nodes["s_sou_rce_1"].split("<br/>")[1]
    topic_label = next(label for node_id, label in nodes.items() if node_id.startswith("t_"))
    assert topic_label.startswith("top#quot;ic-#35;1.#lt;x#gt;<br/>kafka-name.v1")
    assert {nodes["s_a_b"].split("<br/>")[0], nodes["s_a_b_2"].split("<br/>")[0]} == {"a-b", "a_b"}


def test_names_with_quotes_and_dashes_are_escaped_in_dot(make_blueprint):
    result = graph(make_blueprint(WEIRD), "-f", "dot")
    assert result.exit_code == 0, result.output
    dot = result.stdout
    assert dot.startswith('digraph "we\\"ird app" {')
    assert 'label="sou\\"rce-1\\n' in dot
    assert 'label="back\\\\slash\\n' in dot
    assert 'label="top\\"ic-#1.<x>\\nkafka-name.v1 (1 partition)"' in dot
    if HAS_DOT:
        done = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        texts = svg_texts(done.stdout)
        for name in ('sou"rce-1', "back\\slash", "a-b", "a_b", 'top"ic-#1.<x>'):
            assert name in texts


def test_dot_and_mermaid_escape_line_breaks_and_backslash_at_the_end():
    g = AppGraph(app_id="x", streamlets={"evil\\": StreamletNode("evil\\", 'm.C"\n}', loaded=False)},
                 topics={"t\n": TopicNode("t\n", "k", 1)})
    dot = to_dot(g)
    assert '"s_evil_" [shape=box, label="evil\\\\\\nm.C\\"\\n}\\n(not loaded)"' in dot
    assert '"t_t_" [shape=cylinder, label="t\\n\\nk (1 partition)"]' in dot
    nodes, _ = mermaid_structure(to_mermaid(g))
    assert nodes["s_evil_"] == "evil\\<br/>m.C#quot; }<br/>(not loaded)"
    if HAS_DOT:
        assert subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60).returncode == 0


# --- errors ----------------------------------------------------------------------------------

def test_unreadable_file_exits_2(tmp_path):
    missing = graph(tmp_path / "nope.yaml")
    assert missing.exit_code == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: cannot read blueprint: No such file or directory"
    folder = graph(tmp_path)
    assert folder.exit_code == 2 and folder.stderr.startswith("error: ")
    assert graph(EXAMPLE, "--format", "jpeg").exit_code == 2


def test_malformed_yaml_exits_1(tmp_path):
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets:\n  a: [unclosed\n")
    result = graph(path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {path}:") and "malformed YAML" in result.stderr
    assert result.stdout == ""
    no_streamlets = tmp_path / "empty.yaml"
    no_streamlets.write_text("app-id: x\n")
    assert graph(no_streamlets).exit_code == 1


def test_missing_graphviz_exits_2_with_advice(monkeypatch, tmp_path):
    monkeypatch.setattr(graph_module.shutil, "which", lambda name: None)
    out = tmp_path / "app.svg"
    result = graph(EXAMPLE, "-f", "svg", "-o", out)
    assert result.exit_code == 2
    assert "apt-get install graphviz" in result.stderr and "--format dot|mermaid|text" in result.stderr
    assert not out.exists()
    assert graph(EXAMPLE, "-f", "dot").exit_code == 0  # the text formats need no Graphviz


def test_unwritable_output_exits_2(tmp_path):
    result = graph(EXAMPLE, "-f", "mermaid", "-o", tmp_path / "no-such-folder" / "app.mmd")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot write ") and "No such file or directory" in result.stderr


def test_unexpected_error_is_one_line_exit_2(monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("bug")

    monkeypatch.setattr(graph_module, "build_graph", broken)
    result = graph(EXAMPLE)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: internal error while drawing {EXAMPLE}: KeyError: 'bug'"
    assert result.stdout == ""


def test_streamlet_prints_go_to_stderr(make_blueprint):
    path = make_blueprint("""
        streamlets:
          noisy: graph_noisy.Noisy
        """, graph_noisy="""
            from streamlets import AvroOutlet, Streamlet
            print("hello from the module")
            class Noisy(Streamlet):
                out = AvroOutlet("out", {"type": "record", "name": "N", "fields": []})
                def create_logic(self, ctx):
                    pass
            """)
    result = graph(path, "-f", "mermaid")
    assert result.exit_code == 0, result.output
    assert "hello from the module" in result.stderr
    assert "hello" not in result.stdout
    mermaid_structure(result.stdout)
