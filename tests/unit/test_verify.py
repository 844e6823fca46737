"""The verifier: one minimal blueprint per problem kind yields exactly that problem, at its line."""

import sys
import textwrap
from pathlib import Path

import pytest

from blueprint.loader import load_blueprint
from blueprint.verify import Problem, _incompatibility, verify

FIXTURES = Path(__file__).parent / "fixtures" / "verify_app"
M = "verify_fixture_streamlets"


@pytest.fixture(autouse=True)
def _fixture_modules_on_path(monkeypatch):
    # The blueprints below live in tmp_path; their classes come from the fixture folder.
    monkeypatch.setattr(sys, "path", [str(FIXTURES), *sys.path])


def problems_of(tmp_path: Path, text: str, **files: str) -> list[Problem]:
    for name, source in files.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    path = tmp_path / "blueprint.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n").replace("M.", f"{M}."))
    return verify(load_blueprint(path))


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [(p.code, p.message) for p in problems]
    return problems[0]


def test_sound_fixture_has_only_the_unread_topic_warning():
    [p] = verify(load_blueprint(FIXTURES / "blueprint.yaml"))
    assert (p.severity, p.code, p.line) == ("warning", "topic-without-consumers", 11)


def test_invalid_app_id(tmp_path):
    p = only(problems_of(tmp_path, """
        app-id: Flights_App
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t: {producers: [ingress.out], consumers: [printer.in]}
        """))
    assert (p.severity, p.code, p.line, p.column) == ("error", "invalid-app-id", 1, 9)


def test_invalid_streamlet_name(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          Print_Er: M.Printer
        topics:
          t: {producers: [ingress.out], consumers: [Print_Er.in]}
        """))
    assert (p.code, p.line, p.column) == ("invalid-streamlet-name", 3, 3)
    assert "'Print_Er'" in p.message


@pytest.mark.parametrize("class_path, code, words", [
    ("M.NotAStreamlet", "not-a-streamlet", "is not a Streamlet subclass"),
    ("M.AbstractBase", "abstract-streamlet", "does not implement create_logic"),
    ("M.Nope", "class-not-found", "has no class 'Nope'"),
    ("verify_missing_module.X", "module-not-found", "No module named 'verify_missing_module'"),
    ("verify_boom.X", "import-failed", "RuntimeError: no config here (at verify_boom.py:4)"),
    ("verify_imports_missing.X", "import-failed", "No module named 'not_installed_anywhere' (at verify_imports_missing.py:1)"),
    ("verify_bad_port.Bad", "invalid-port-name", "port names must be DNS labels"),
    ("verify-bad.Path", "invalid-class-path", "is not a class path of the form module.Class"),
    ("verify_init.NeedsArgs", "instantiation-failed", "TypeError"),
])
def test_class_problems(tmp_path, class_path, code, words):
    p = only(problems_of(tmp_path, f"""
        streamlets:
          x: {class_path}
        """,
        verify_boom="import os\n\n\nraise RuntimeError('no config here')\n",
        verify_imports_missing="import not_installed_anywhere\n",
        verify_bad_port="""
            from streamlets import AvroInlet, Streamlet
            class Bad(Streamlet):
                inlet = AvroInlet("In", {"type": "record", "name": "R", "fields": []})
            """,
        verify_init="""
            from streamlets import Streamlet
            class NeedsArgs(Streamlet):
                def __init__(self, path):
                    self.path = path
                def create_logic(self, ctx):
                    pass
            """))
    assert (p.code, p.line, p.column) == (code, 2, 3)
    assert words in p.message and "streamlet 'x'" in p.message


@pytest.mark.parametrize("topic, name, kafka_name", [
    ("t", "bad name!", "bad name!"),
    ("t/1", None, "verify-app.t/1"),  # the default name <app-id>.<topic id>
])
def test_invalid_topic_name(tmp_path, topic, name, kafka_name):
    p = only(problems_of(tmp_path, f"""
        app-id: verify-app
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          {topic}:
            producers: [ingress.out]
            consumers: [printer.in]
            {f"name: '{name}'" if name else ""}
        """))
    assert (p.code, p.line, p.column) == ("invalid-topic-name", 6, 3)
    assert repr(kafka_name) in p.message


def test_malformed_port_path(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t:
            producers: [ingress.out]
            consumers: [printer.in, printer]
        """))
    assert (p.code, p.line, p.column) == ("malformed-port-path", 7, 29)
    assert "streamlet.inlet" in p.hint


def test_unknown_streamlet(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t:
            producers: [ingress.out]
            consumers:
              - printer.in
              - printr.in
        """))
    assert (p.code, p.line, p.column) == ("unknown-streamlet", 9, 9)
    assert "did you mean 'printer'" in p.hint


def test_unknown_port_suggests_the_nearest(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t:
            producers: [ingress.out]
            consumers: [printer.inn]
        """))
    # printer.in is not reported as unconnected as well: the hint names it.
    assert (p.code, p.line, p.column) == ("unknown-port", 7, 17)
    assert "no inlet 'inn'" in p.message and "did you mean 'in'" in p.hint


def test_port_in_the_wrong_role(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t:
            producers: [ingress.out, printer.in]
            consumers: [printer.in]
        """))
    assert (p.code, p.line, p.column) == ("wrong-port-role", 6, 30)
    assert "`printer.in` is an inlet" in p.message and "consumers" in p.hint


def test_unconnected_inlet_names_streamlet_dot_inlet(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
          lonely: M.Printer
        topics:
          t: {producers: [ingress.out], consumers: [printer.in]}
        """))
    assert (p.severity, p.code, p.line, p.column) == ("error", "unconnected-inlet", 4, 3)
    assert "`lonely.in`" in p.message


def test_unconnected_outlet_is_a_warning(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
        """))
    assert (p.severity, p.code, p.line) == ("warning", "unconnected-outlet", 2)
    assert "`ingress.out`" in p.message


def test_port_on_many_topics(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          one: M.Printer
          two: M.Printer
        topics:
          a: {producers: [ingress.out], consumers: [one.in]}
          b: {producers: [ingress.out], consumers: [two.in]}
        """))
    assert (p.code, p.line, p.column) == ("port-on-many-topics", 7, 19)
    assert "`ingress.out` is bound to 2 topics ('a', 'b')" in p.message


def test_incompatible_schema_names_the_field(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          broken: M.BrokenReader
        topics:
          t:
            producers: [ingress.out]
            consumers: [broken.in]
        """))
    assert (p.code, p.line, p.column) == ("incompatible-schema", 7, 17)
    assert "field 'delay' is string in the reader but int in the writer" in p.message
    assert "`broken.in`" in p.message and "`ingress.out`" in p.message


def test_a_reader_may_lag_a_compatible_evolution_in_the_direction_data_flows(tmp_path):
    # The evolved schema (a field added with a default) reads v1: sound, no warning.
    assert problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          evolved: M.EvolvedReader
        topics:
          t: {producers: [ingress.out], consumers: [evolved.in]}
        """) == []


def test_empty_topic(tmp_path):
    p = only(problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
        topics:
          t: {producers: [ingress.out], consumers: [printer.in]}
          spare: {}
        """))
    assert (p.severity, p.code, p.line) == ("warning", "empty-topic", 6)


def test_problems_come_grouped_then_in_file_order(tmp_path):
    problems = problems_of(tmp_path, """
        streamlets:
          ingress: M.Ingress
          broken: M.BrokenReader
          printer: M.Printer
        topics:
          t:
            producers: [ingress.out]
            consumers: [broken.in, nobody.in]
        """)
    assert [(p.group, p.code, p.line) for p in problems] == [
        ("ports", "unconnected-inlet", 4), ("ports", "unknown-streamlet", 8), ("schemas", "incompatible-schema", 8)]


RECORD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


def record(*fields, name="R"):
    return {"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}, *fields]}


@pytest.mark.parametrize("reader, words", [
    (record({"name": "b", "type": "string"}), "field 'b' of the reader has no default"),
    (record(name="S"), "has another name"),
    (record({"name": "loc", "type": record(name="Loc")}), "field 'loc' of the reader has no default"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "boolean"}]},
     "field 'a' is boolean in the reader but int in the writer"),
])
def test_incompatibility_descriptions(reader, words):
    assert words in _incompatibility(reader=reader, writer=RECORD)


def test_widening_and_defaults_are_compatible():
    wider = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                       {"name": "b", "type": "string", "default": ""}]}
    assert _incompatibility(reader=wider, writer=RECORD) is None


def test_nested_field_path():
    inner_w = {"type": "record", "name": "Loc", "fields": [{"name": "lat", "type": "double"}]}
    inner_r = {"type": "record", "name": "Loc", "fields": [{"name": "lat", "type": "string"}]}
    writer = {"type": "record", "name": "R", "fields": [{"name": "loc", "type": inner_w}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "loc", "type": inner_r}]}
    assert "field 'loc.lat' is string in the reader but double" in _incompatibility(reader=reader, writer=writer)
