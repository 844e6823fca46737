"""Issue 12: logical types in verify and the run configs, HOCON booleans, ReadWriteOncePod, class-path
suggestions. One test per case; the Spark side is tests/integration/test_logical_types_spark.py."""

import copy
import json
import re
import sys
import textwrap

import pytest

from blueprint.loader import load_blueprint
from streamlets.logical_types import mismatches, same_logical_types
from blueprint.sandbox.run import topic_bindings
from blueprint.verify import verify
from streamlets import AvroInlet, AvroOutlet, Streamlet, VolumeMount
from streamlets.schema import AvroSchema


def record(*fields, name="Payment"):
    return {"type": "record", "name": name, "namespace": "acc",
            "fields": [{"name": n, "type": t} for n, t in fields]}


def decimal(precision, scale):
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def logical(name, underlying="long"):
    return {"type": underlying, "logicalType": name}


def classes(writer, reader, second_writer=None):
    out = {"src": type("Src", (Streamlet,), {"out": AvroOutlet("out", writer), "create_logic": lambda self, ctx: None}),
           "sink": type("Sink", (Streamlet,), {"inlet": AvroInlet("in", reader), "create_logic": lambda self, ctx: None})}
    if second_writer is not None:
        out["src2"] = type("Src2", (Streamlet,), {"out": AvroOutlet("out", second_writer),
                                                   "create_logic": lambda self, ctx: None})
    return out


@pytest.fixture
def topic(tmp_path):
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets:\n  src: m.Src\n  sink: m.Sink\ntopics:\n  payments: {producers: [src.out], consumers: [sink.in]}\n")
    return load_blueprint(path)


def errors(problems):
    return [(p.code, p.message) for p in problems if p.severity == "error"]


# --- verify: logical types on the topic, writer -> reader ---------------------------------------

def test_the_issues_decimal_case_is_an_error_naming_the_field_and_both_scales(topic):
    writer, reader = record(("amount", decimal(10, 2))), record(("amount", decimal(10, 3)))
    assert AvroSchema.load(writer).fingerprint == AvroSchema.load(reader).fingerprint  # why it went unseen

    [(code, message)] = errors(verify(topic, classes(writer, reader)))

    assert code == "logical-type-mismatch"
    assert "topic 'payments': inlet `sink.in`" in message and "outlet `src.out`" in message
    assert "field 'amount' is decimal(10,2) in the writer but decimal(10,3) in the reader" in message
    assert "12.34 would arrive as 1.234" in message


@pytest.mark.parametrize("w, r, words", [
    (decimal(10, 2), decimal(8, 2), "values of more than 8 digits do not fit"),
    (decimal(10, 2), decimal(12, 2), "matches decimals only when precision and scale both match"),
    (logical("timestamp-millis"), logical("timestamp-micros"), "2024-05-01T12:00:00Z would arrive as 1970-01-20T20:16:04.800000Z"),
    (logical("timestamp-micros"), logical("timestamp-millis"), "microseconds since 1970-01-01T00:00 (UTC) would be read as milliseconds"),
    (logical("timestamp-millis"), logical("local-timestamp-millis"), "(UTC) would be read as milliseconds since 1970-01-01T00:00 (local time"),
    (logical("local-timestamp-micros"), logical("timestamp-micros"), "(local time, no time zone) would be read as"),
    (logical("date", "int"), "int", "2024-05-01 would arrive as 19844"),
    ("int", logical("date", "int"), "19844 would arrive as 2024-05-01"),
    (logical("date", "int"), logical("timestamp-millis"), "days since 1970-01-01 would be read as milliseconds"),
    (logical("time-millis", "int"), logical("time-micros"), "milliseconds after midnight would be read as microseconds"),
    ("string", logical("uuid", "string"), "plain string values would be read as UUIDs"),
    ("long", logical("timestamp-millis"), "plain long values would be read as milliseconds"),
    (decimal(6, 2), "bytes", "decimals of scale 2"),
])
def test_logical_types_that_change_meaning_are_errors(topic, w, r, words):
    [(code, message)] = errors(verify(topic, classes(record(("x", w)), record(("x", r)))))
    assert code == "logical-type-mismatch"
    assert "field 'x' is " in message and words in message


@pytest.mark.parametrize("w, r", [
    (decimal(10, 2), decimal(10, 2)),
    (logical("uuid", "string"), "string"),  # SAFE_PAIRS: the UUID's text
    (logical("timestamp-micros"), logical("timestamp-micros")),
    (logical("color", "string"), "string"),  # not a logical type of the specification: ignored
    (logical("date", "long"), "long"),  # date is defined on int only: ignored on long
    ("int", "long"),  # promotions without logical types stay sound
])
def test_same_or_safe_logical_types_are_sound(topic, w, r):
    assert errors(verify(topic, classes(record(("x", w)), record(("x", r))))) == []


def test_fields_inside_unions_arrays_maps_and_records_and_renamed_ones_are_checked():
    inner = {"type": "record", "name": "Leg", "fields": [{"name": "fare", "type": decimal(6, 2)}]}
    writer = record(("legs", {"type": "array", "items": inner}), ("at", ["null", logical("timestamp-millis")]),
                    ("prices", {"type": "map", "values": decimal(5, 1)}), ("day", logical("date", "int")))
    inner3 = {"type": "record", "name": "Leg", "fields": [{"name": "fare", "type": decimal(6, 3)}]}
    reader = {"type": "record", "name": "Payment", "namespace": "acc", "fields": [
        {"name": "legs", "type": {"type": "array", "items": inner3}},
        {"name": "at", "type": [logical("timestamp-micros"), "null"]},
        {"name": "prices", "type": {"type": "map", "values": decimal(5, 1)}},
        {"name": "when", "aliases": ["day"], "type": "int"}]}
    found = {m.field: (str(m.writer), str(m.reader)) for m in mismatches(writer, reader)}
    assert found == {"legs[].fare": ("decimal(6,2)", "decimal(6,3)"), "at": ("timestamp-millis", "timestamp-micros"),
                     "when": ("date", "int without logical type")}


def test_a_recursive_schema_is_walked_once():
    node = lambda scale: {"type": "record", "name": "Node", "fields": [  # noqa: E731
        {"name": "v", "type": decimal(4, scale)}, {"name": "next", "type": ["null", "Node"]}]}
    assert [m.field for m in mismatches(node(1), node(2))] == ["v"]
    assert same_logical_types(node(1), node(1))


def test_producers_that_differ_only_in_logical_types_disagree(tmp_path):
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets:\n  src: m.Src\n  src2: m.Src2\n  sink: m.Sink\n"
                    "topics:\n  payments: {producers: [src.out, src2.out], consumers: [sink.in]}\n")
    a, b = record(("amount", decimal(10, 2))), record(("amount", decimal(10, 3)))
    found = errors(verify(load_blueprint(path), classes(a, a, second_writer=b)))
    assert ("producers-disagree", "topic 'payments': outlets `src.out` and `src2.out` write acc.Payment with different "
            "logical types: field 'amount' is decimal(10,3) in `src2.out` but decimal(10,2) in `src.out`") in found


def test_the_run_config_carries_a_writer_that_differs_only_in_logical_types(topic):
    writer, reader = record(("amount", decimal(10, 2))), record(("amount", decimal(10, 3)))
    _, writers = topic_bindings(topic, "sink", classes(writer, reader))
    assert writers == {"in": writer}  # so the runtime can refuse it (codec.check_logical_types)
    _, same = topic_bindings(topic, "sink", classes(writer, copy.deepcopy(writer)))
    assert same == {}


# --- HOCON booleans ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, managed", [("no", False), ("off", False), ("yes", True), ("on", True),
                                           ('"false"', False), ("true", True)])
def test_managed_takes_hocon_booleans(tmp_path, text, managed):
    path = tmp_path / "blueprint.conf"
    path.write_text(textwrap.dedent(f"""\
        blueprint {{
          streamlets {{ sink = m.Sink }}
          topics {{
            external-in {{
              managed = {text}
              consumers = [sink.in]
            }}
          }}
        }}
        """))
    bp = load_blueprint(path)
    assert bp.load_problems == []
    assert bp.topics["external-in"].managed is managed


def test_managed_refuses_what_is_no_hocon_boolean(tmp_path):
    path = tmp_path / "blueprint.conf"
    path.write_text("streamlets { sink = m.Sink }\ntopics { t { managed = maybe, consumers = [sink.in] } }\n")
    [problem] = load_blueprint(path).load_problems
    assert problem.code == "wrong-type"
    assert problem.message == "managed of topic 't' must be true or false (or yes/no, on/off), not 'maybe'"


def test_yaml_managed_keeps_yamls_booleans(tmp_path):
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets: {sink: m.Sink}\ntopics:\n  t: {managed: no, consumers: [sink.in]}\n"
                    "  u: {managed: 'no', consumers: [sink.in]}\n")
    bp = load_blueprint(path)
    assert bp.topics["t"].managed is False
    assert [p.message for p in bp.load_problems] == ["managed of topic 'u' must be true or false, not 'no'"]


# --- ReadWriteOncePod ------------------------------------------------------------------------------

def test_read_write_once_pod_is_an_access_mode():
    class Store(Streamlet):
        data = VolumeMount("data", "/mnt/data", "ReadWriteOncePod")

        def create_logic(self, ctx):
            pass

    [mount] = Store.descriptor().volume_mounts
    assert mount.access_mode == "ReadWriteOncePod"


def test_a_read_write_once_pod_claim_is_mounted_in_the_driver_only():
    from blueprint.deploy.spec import StreamletSpec
    from streamlets_operator import render

    streamlet = {"name": "store", "volumeMounts": {"data": "store-claim", "shared": "shared-claim"},
                 "descriptor": {"volume_mounts": [
                     {"name": "data", "path": "/mnt/data", "access_mode": "ReadWriteOncePod"},
                     {"name": "shared", "path": "/mnt/shared", "access_mode": "ReadWriteMany"}]}}
    volumes, driver, executor = render._volumes("app", "app-checkpoints", StreamletSpec.model_validate(
        {**streamlet, "className": "store.Store"}))
    assert {"name": "mount-0", "persistentVolumeClaim": {"claimName": "store-claim", "readOnly": False}} in volumes
    assert {"name": "mount-0", "mountPath": "/mnt/data", "readOnly": False} in driver
    assert all(m["name"] != "mount-0" for m in executor)
    assert {"name": "mount-1", "mountPath": "/mnt/shared", "readOnly": False} in executor


# --- class-path suggestions ----------------------------------------------------------------------

@pytest.fixture
def accapp(tmp_path, monkeypatch):
    pkg = tmp_path / "accapp12"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "streamlets.py").write_text(textwrap.dedent("""\
        from streamlets import *
        R = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
        class Ingress(Streamlet):
            out = AvroOutlet("out", R)
            def create_logic(self, ctx): pass
        class Printer(Streamlet):
            inlet = AvroInlet("in", R)
            def create_logic(self, ctx): pass
        """))
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("accapp12")]:
        del sys.modules[name]


@pytest.mark.parametrize("class_path, code, hint", [
    ("accapp12.streamlets.Ingres", "class-not-found", "did you mean 'accapp12.streamlets.Ingress'?"),
    ("accapp12.streamlet.Ingress", "module-not-found", "did you mean 'accapp12.streamlets.Ingress'?"),
    ("Ingres", "class-not-found", "did you mean 'Ingress'?"),
    ("accapp12.streamlets.Zzz", "class-not-found",
     "Streamlet classes in module 'accapp12.streamlets': accapp12.streamlets.Ingress, accapp12.streamlets.Printer"),
])
def test_class_paths_get_the_nearest_names(accapp, class_path, code, hint):
    path = accapp / "blueprint.yaml"
    path.write_text(f"streamlets:\n  a: {class_path}\n  p: accapp12.streamlets.Printer\n"
                    "topics:\n  t: {producers: [a.out], consumers: [p.in]}\n")
    [problem] = [p for p in verify(load_blueprint(path)) if p.severity == "error"]
    assert (problem.code, problem.hint) == (code, hint), problem


def test_a_module_hint_names_only_classes_that_exist(accapp):
    """longhaul.aggregates.X once suggested longhaul.egress.X and longhaul.prepare.X, modules that
    exist but hold no X: a hint names class paths that load, or none."""
    (accapp / "accapp12" / "egress.py").write_text("from accapp12.streamlets import Printer as _P\n")
    (accapp / "accapp12" / "prepare.py").write_text("X = 1\n")
    (accapp / "accapp12" / "final.py").write_text(textwrap.dedent("""\
        from streamlets import *
        class Aggregate(Streamlet):
            out = AvroOutlet("out", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
            def create_logic(self, ctx): pass
        """))
    path = accapp / "blueprint.yaml"
    existing = {"accapp12.final.Aggregate", "accapp12.streamlets.Ingress", "accapp12.streamlets.Printer"}
    for class_path, hint in [
        ("accapp12.aggregates.Aggregate", "did you mean 'accapp12.final.Aggregate'?"),  # the class, elsewhere
        ("accapp12.aggregates.X", None),  # X is no streamlet anywhere: only existing classes, if any
        ("accapp12.streamlet.Printerr", "did you mean 'accapp12.streamlets.Printer' or 'accapp12.streamlets.Ingress'?"),  # nearest that exist
    ]:
        path.write_text(f"streamlets:\n  a: {class_path}\n")
        [problem] = [p for p in verify(load_blueprint(path)) if p.severity == "error"]
        assert problem.code == "module-not-found" and (hint is None or problem.hint == hint), problem
        assert "egress" not in problem.hint and "prepare" not in problem.hint
        assert set(re.findall(r"'([\w.]+)'", problem.hint)) <= existing, problem.hint


def test_a_module_far_from_any_keeps_the_folder_hint(accapp):
    path = accapp / "blueprint.yaml"
    path.write_text("streamlets:\n  p: zzz_nothing_like_it.Zzz\n")
    [problem] = [p for p in verify(load_blueprint(path)) if p.severity == "error"]
    assert problem.code == "module-not-found"
    assert problem.hint == f"class paths resolve against the blueprint's folder {accapp}"
    # a class of that name in some module of the folder is named, however far its module
    path.write_text("streamlets:\n  p: zzz_nothing_like_it.Printer\n")
    [problem] = [p for p in verify(load_blueprint(path)) if p.severity == "error"]
    assert problem.hint == f"Streamlet classes named 'Printer' in {accapp}: accapp12.streamlets.Printer"


def test_one_suggestion_helper_for_ports_keys_and_classes():
    import blueprint.classes
    import blueprint.loader
    import blueprint.verify
    from blueprint import problems

    for module in (blueprint.loader, blueprint.classes, blueprint.verify):
        source = open(module.__file__).read()
        assert "difflib" not in source and "suggest(" in source
    assert problems.suggest("Ingres", ["Ingress", "Egress"], "classes") == "did you mean 'Ingress' or 'Egress'?"
    assert json.dumps(problems.suggest("q", [], "ports")) == '"there are no ports"'
