"""Loading blueprint files: the model, source positions, structural errors, importing classes."""

import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blueprint.loader import BlueprintError, BlueprintReadError, import_streamlets, load_blueprint
from blueprint.model import PortPath, Topic, dns_label_from, is_kafka_topic_name

FIXTURES = Path(__file__).parent / "fixtures" / "verify_app"


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch):
    # import_streamlets puts blueprint folders on sys.path: undo it after each test.
    monkeypatch.setattr(sys, "path", [str(FIXTURES), *sys.path])


def write(tmp_path: Path, text: str, name: str = "blueprint.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_fixture_blueprint_is_read_with_positions():
    bp = load_blueprint(FIXTURES / "blueprint.yaml")
    assert bp.app_id == "verify-app"  # the folder name, made a DNS label
    assert list(bp.streamlets) == ["ingress", "stats", "printer"]
    stats = bp.streamlets["stats"]
    assert (stats.class_name, stats.line, stats.column) == ("verify_fixture_streamlets.Stats", 4, 3)

    events = bp.topics["flight-events"]
    assert (events.line, events.column, events.partitions) == (7, 3, 3)
    assert [(r.text, r.line, r.column) for r in events.consumers] == [("stats.in", 9, 17), ("printer.in", 9, 27)]
    assert events.kafka_name(bp.app_id) == "verify-app.flight-events"

    stats_topic = bp.topics["delay-stats"]
    assert [(r.text, r.line, r.column) for r in stats_topic.producers] == [("stats.out", 14, 9)]
    assert stats_topic.kafka_name(bp.app_id) == "verify.delay-stats"
    assert stats_topic.config == {"retention.ms": "604800000"}  # Kafka configs are text
    assert stats_topic.consumers == [] and stats_topic.replication_factor is None


def test_app_id_and_topic_settings(tmp_path):
    bp = load_blueprint(write(tmp_path, """
        app-id: flights
        streamlets:
          on: m.C
        topics:
          t:
            producers: on.out
            replication-factor: 2
            config: {cleanup.policy: compact, compression.enabled: true}
        """))
    assert bp.app_id == "flights"
    assert (bp.app_id_position.line, bp.app_id_position.column) == (1, 9)
    assert list(bp.streamlets) == ["on"]  # as written: YAML 1.1 would make this key True
    t = bp.topics["t"]
    assert [r.text for r in t.producers] == ["on.out"]  # one scalar is a one-item list
    assert t.replication_factor == 2 and t.partitions == 1
    assert t.config == {"cleanup.policy": "compact", "compression.enabled": "true"}


def test_default_app_id_from_folder(tmp_path):
    folder = tmp_path / "My Flights_App"
    folder.mkdir()
    bp = load_blueprint(write(folder, "streamlets: {a: m.C}\n"))
    assert bp.app_id == "my-flights-app"


@pytest.mark.parametrize("text, line, column, code, words", [
    ("streamlets: [a\n", 2, 1, "malformed-blueprint", "malformed YAML"),
    ("", 1, 1, "missing-streamlets", "empty"),
    ("- a\n- b\n", 1, 1, "malformed-blueprint", "must be a mapping"),
    ("topics: {}\n", 1, 1, "missing-streamlets", "no `streamlets:`"),
    ("streamlets: {}\n", 1, 1, "empty-streamlets", "names no streamlet"),
    ("streamlets:\n", 1, 1, "empty-streamlets", "names no streamlet"),
    ("streamlets: a.B\n", 1, 13, "wrong-type", "must be a mapping"),
])
def test_fatal_errors_name_file_line_and_column(tmp_path, text, line, column, code, words):
    path = write(tmp_path, text)
    with pytest.raises(BlueprintError) as caught:
        load_blueprint(path)
    e = caught.value
    assert (e.file, e.line, e.column, e.code) == (str(path), line, column, code)
    assert words in e.message
    assert str(e).startswith(f"{path}:{line}:{column}: ")


@pytest.mark.parametrize("text, line, column, code, words", [
    ("streamlets:\n  a: m.C\n  a: m.D\n", 3, 3, "duplicate-streamlet", "'a' is given twice (first on line 2)"),
    ("streamlets:\n  a: m.C\ntopic: {}\n", 3, 1, "unknown-key", "did you mean 'topics'"),
    ("streamlets:\n  a:\n", 2, 5, "wrong-type", "class of streamlet 'a' must be text"),
    ("streamlets:\n  a: [m.C]\n", 2, 6, "wrong-type", "must be text, not a list"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n    consumer: [a.in]\n", 5, 5, "unknown-key", "did you mean 'consumers'"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n    producers: {a: out}\n", 5, 16, "wrong-type", "must be a list of port paths"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n    producers: [a.out, {x: 1}]\n", 5, 24, "wrong-type", "an item of producers"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n    partitions: 0\n", 5, 17, "wrong-type", "positive whole number"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n    partitions: true\n", 5, 17, "wrong-type", "positive whole number"),
    ("streamlets:\n  a: m.C\ntopics:\n  t:\n", 4, 5, "wrong-type", "topic 't' must be a mapping"),
    ("streamlets:\n  a: m.C\ntopics:\n  t: {config: {x: [1]}}\n", 4, 19, "wrong-type", "config 'x' of topic 't'"),
    ("streamlets:\n  a: m.C\ntopics:\n  t: {}\n  t: {}\n", 5, 3, "duplicate-topic", "'t' is given twice"),
    ("streamlets:\n  a: m.C\ntopics:\n  t: {managed: maybe}\n", 4, 16, "wrong-type", "true or false"),
])
def test_structural_problems_are_collected_with_their_place(tmp_path, text, line, column, code, words):
    bp = load_blueprint(write(tmp_path, text))
    assert len(bp.load_problems) == 1, bp.load_problems
    p = bp.load_problems[0]
    assert (p.line, p.column, p.code) == (line, column, code)
    assert words in p.message


def test_every_structural_problem_at_once(tmp_path):
    bp = load_blueprint(write(tmp_path, "streamlets:\n  a: m.C\n  a: m.D\n  b: [x]\ntopics:\n"
                                        "  t: {producer: [a.out], partitions: -1}\n"))
    assert [(p.code, p.line) for p in bp.load_problems] == [
        ("duplicate-streamlet", 3), ("wrong-type", 4), ("unknown-key", 6), ("wrong-type", 6)]
    assert list(bp.streamlets) == ["a"] and bp.streamlets["a"].class_name == "m.C"


def test_cloudflow_hocon_blueprint(tmp_path):
    path = tmp_path / "blueprint.conf"
    path.write_text(
        "blueprint {\n"
        "  streamlets {\n"
        "    ingress = sensors.Ingress\n"
        "    metrics = sensors.Metrics\n"
        "  }\n"
        "  topics {\n"
        "    sensor-data {\n"
        "      producers = [ingress.out]\n"
        "      consumers = [metrics.in, \"metrics.other\"]\n"
        "      replicas = 2\n"
        "      topic { name = \"sensor.data\", partitions = 3 }\n"
        "      managed = false\n"
        "    }\n"
        "  }\n"
        "}\n")
    bp = load_blueprint(path)
    assert bp.load_problems == []
    assert {n: r.class_name for n, r in bp.streamlets.items()} == {"ingress": "sensors.Ingress", "metrics": "sensors.Metrics"}
    assert (bp.streamlets["metrics"].line, bp.streamlets["metrics"].column) == (4, 5)
    t = bp.topics["sensor-data"]
    assert (t.name, t.partitions, t.replication_factor, t.managed) == ("sensor.data", 3, 2, False)
    assert [(r.text, r.line) for r in t.consumers] == [("metrics.in", 9), ("metrics.other", 9)]
    assert (t.line, t.column) == (7, 5)


def test_malformed_hocon_names_line(tmp_path):
    path = tmp_path / "blueprint.conf"
    path.write_text("blueprint {\n  streamlets {\n    a = m.C\n  \n")
    with pytest.raises(BlueprintError) as caught:
        load_blueprint(path)
    assert caught.value.code == "malformed-blueprint" and "malformed HOCON" in caught.value.message
    assert caught.value.line is not None


def test_unreadable_file_is_a_read_error(tmp_path):
    with pytest.raises(BlueprintReadError, match="No such file"):
        load_blueprint(tmp_path / "missing.yaml")
    with pytest.raises(BlueprintReadError):
        load_blueprint(tmp_path)  # a folder


def test_port_path_parse():
    assert PortPath.parse("stats.in") == PortPath(streamlet="stats", port="in")
    for bad in ("stats", "a.b.c", ".in", "stats.", ""):
        with pytest.raises(ValueError, match="streamlet.port"):
            PortPath.parse(bad)


@given(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True))
def test_port_path_round_trip(streamlet, port):
    assert PortPath.parse(str(PortPath(streamlet=streamlet, port=port))) == PortPath(streamlet=streamlet, port=port)


def test_names():
    assert Topic(id="t").kafka_name("app") == "app.t"
    assert is_kafka_topic_name("a.b_c-1") and not is_kafka_topic_name("a b")
    assert not is_kafka_topic_name("x" * 250) and not is_kafka_topic_name("..")
    assert dns_label_from("__") == "app" and len(dns_label_from("a" * 100)) == 63


def test_import_streamlets_resolves_against_the_blueprint_folder(tmp_path):
    (tmp_path / "loader_test_mod.py").write_text(textwrap.dedent("""
        from verify_fixture_streamlets import Printer as P

        class Mine(P):
            pass
        """))
    (tmp_path / "loader_test_boom.py").write_text("import os\n\nvalue = 1 / 0\n")
    bp = load_blueprint(write(tmp_path, """
        streamlets:
          mine: loader_test_mod.Mine
          boom: loader_test_boom.X
          gone: loader_test_missing.X
          plain: verify_fixture_streamlets.NotAStreamlet
        """))
    classes = import_streamlets(bp)
    assert str(tmp_path) in sys.path
    assert classes["mine"].__name__ == "Mine"
    assert "ZeroDivisionError: division by zero (at loader_test_boom.py:3)" in str(classes["boom"])
    assert "No module named 'loader_test_missing'" in str(classes["gone"])
    assert "is not a Streamlet subclass" in str(classes["plain"])
