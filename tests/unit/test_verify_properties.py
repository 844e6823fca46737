"""Property-based tests of `blueprint verify`: generated blueprints, streamlets and Avro schemas.

Whatever it is given, the verifier ends with exit status 0, 1 or 2, never with an internal
error, and its JSON report matches the published schema and agrees with the exit status.
2,500 generated cases in all: 1,500 generated applications (streamlet modules with random
schemas, parameters and mounts, connected by random topics, in YAML or HOCON) and 1,000
arbitrary texts as blueprint files.
"""

import itertools
import json
import sys
import tempfile
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blueprint.cli import app
from support.profiles import examples

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "blueprint" / "verify-report.schema.json").read_text())
runner = CliRunner()
_ids = itertools.count()
PROPERTY_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# --- Avro schemas ----------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "id", "delay", "when", "x-y", "1bad", "_z", "R", "Flight"])
PRIMITIVES = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string", "nope"])


def avro_types(depth: int = 2):
    simple = st.one_of(
        PRIMITIVES,
        st.builds(lambda t: ["null", t], PRIMITIVES),
        st.builds(lambda n, syms: {"type": "enum", "name": n, "symbols": syms}, NAMES, st.lists(NAMES, max_size=3)),
        st.builds(lambda n, size: {"type": "fixed", "name": n, "size": size}, NAMES, st.integers(-1, 8)),
        st.sampled_from([{"type": "long", "logicalType": "timestamp-millis"},
                         {"type": "int", "logicalType": "date"},
                         {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}]),
    )
    if depth == 0:
        return simple
    return st.one_of(simple,
                     st.builds(lambda t: {"type": "array", "items": t}, avro_types(depth - 1)),
                     st.builds(lambda t: {"type": "map", "values": t}, avro_types(depth - 1)),
                     records(depth - 1))


def records(depth: int = 1):
    field = st.fixed_dictionaries({"name": NAMES, "type": st.deferred(lambda: avro_types(depth))},
                                  optional={"default": st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3),
                                                                 st.booleans())})
    return st.builds(lambda name, ns, fields: {"type": "record", "name": name, **({"namespace": ns} if ns else {}),
                                               "fields": fields},
                     st.sampled_from(["R", "Flight", "Stats", "bad name"]), st.sampled_from([None, "gen", "gen.v2", "9x"]),
                     st.lists(field, max_size=4))


SCHEMAS = st.one_of(records(), st.just({"type": "record", "name": "R", "namespace": "gen",
                                        "fields": [{"name": "a", "type": "int"}]}),
                    st.just("int"), st.just({"type": "record"}))

# --- streamlet modules and blueprints -------------------------------------------------------------

PORT_NAMES = st.sampled_from(["in", "out", "in-2", "Out", "events", "x" * 70, ""])
PARAM = st.one_of(
    st.builds(lambda k, d: f"IntegerParameter({k!r}, default={d!r})", st.sampled_from(["n", "max rate", "n"]),
              st.one_of(st.none(), st.integers(-5, 5), st.just("ten"), st.just(2**40))),
    st.builds(lambda k, p, d: f"RegExpParameter({k!r}, pattern={p!r}, default={d!r})", st.sampled_from(["code", "c.d"]),
              st.sampled_from(["[A-Z]+", "[A-Z", ".*"]), st.sampled_from([None, "ABC", "abc"])),
    st.builds(lambda k, d: f"DurationParameter({k!r}, default={d!r})", st.sampled_from(["window", "w"]),
              st.sampled_from([None, "1 minute", "soon", 500])),
)
MOUNT = st.builds(lambda n, p, m: f"VolumeMount({n!r}, {p!r}, {m!r})", st.sampled_from(["data", "Data", "data"]),
                  st.sampled_from(["/mnt/data", "mnt", "", "/a/../b", "/mnt/data"]),
                  st.sampled_from(["ReadWriteMany", "ReadOnlyMany", "ReadWriteOncePod", "Sometimes"]))


@st.composite
def streamlet_classes(draw, index: int):
    lines = [f"class S{index}(Streamlet):"]
    for i, (role, name, schema) in enumerate(draw(st.lists(
            st.tuples(st.sampled_from(["AvroInlet", "AvroOutlet"]), PORT_NAMES, SCHEMAS), max_size=3))):
        lines.append(f"    p{i} = {role}({name!r}, {schema!r})")
    for i, param in enumerate(draw(st.lists(PARAM, max_size=2))):
        lines.append(f"    c{i} = {param}")
    for i, mount in enumerate(draw(st.lists(MOUNT, max_size=2))):
        lines.append(f"    v{i} = {mount}")
    kind = draw(st.sampled_from(["ok", "ok", "ok", "abstract", "init", "raises"]))
    if kind == "init":
        lines.append("    def __init__(self, x): pass")
    if kind == "raises":
        lines.append("    raise RuntimeError('while defining')")
    if kind != "abstract":
        lines.append("    def create_logic(self, ctx): pass")
    return "\n".join(lines)


@st.composite
def applications(draw):
    """(module source, blueprint text, suffix): a module of streamlet classes and a blueprint naming them."""
    n_classes = draw(st.integers(1, 4))
    classes = [draw(streamlet_classes(i)) for i in range(n_classes)]
    module = "from streamlets import *\n\n" + "\n\n".join(classes) + "\n"
    instance_names = draw(st.lists(st.sampled_from(["a", "b", "c", "ingress", "Bad_Name", "d-1"]), min_size=1,
                                   max_size=5, unique=True))
    streamlets = {name: draw(st.sampled_from([f"MOD.S{i}" for i in range(n_classes)]
                                             + ["MOD.Missing", "no_module.X", "S0", "MOD.S0()"]))
                  for name in instance_names}
    ports = ["in", "out", "in-2", "events", "Out", "nope"]
    port_paths = st.one_of(st.builds(lambda s, p: f"{s}.{p}", st.sampled_from(instance_names + ["ghost"]),
                                     st.sampled_from(ports)),
                           st.sampled_from(["a", "a.b.c", ".out", "a."]))
    topics = draw(st.dictionaries(
        st.sampled_from(["t", "u", "v", "bad topic", "x" * 260]),
        st.fixed_dictionaries({}, optional={
            "producers": st.lists(port_paths, max_size=3), "consumers": st.lists(port_paths, max_size=3),
            "name": st.sampled_from(["shared", "t", "bad name!"]), "partitions": st.sampled_from([1, 3, 0, "x"]),
            "managed": st.booleans(), "unknown": st.just(1)}),
        max_size=4))
    hocon = draw(st.booleans())
    return module, _render(streamlets, topics, hocon), ".conf" if hocon else ".yaml"


def _render(streamlets: dict, topics: dict, hocon: bool) -> str:
    if hocon:
        body = "".join(f"    {k} = {json.dumps(v)}\n" for k, v in streamlets.items())
        tops = "".join(f"    {json.dumps(k)} {json.dumps(v)}\n" for k, v in topics.items())
        return f"blueprint {{\n  streamlets {{\n{body}  }}\n  topics {{\n{tops}  }}\n}}\n"
    lines = ["streamlets:"] + [f"  {k}: {v}" for k, v in streamlets.items()]
    if topics:
        lines.append("topics:")
        lines += [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in topics.items()]
    return "\n".join(lines) + "\n"


def verify_in_process(folder: Path, blueprint_text: str, suffix: str, module: str | None = None):
    n = next(_ids)
    if module is not None:
        name = f"prop_mod_{n}"  # a fresh module name per case: no import cache between cases
        (folder / f"{name}.py").write_text(module)
        blueprint_text = blueprint_text.replace("MOD.", f"{name}.")
    path = folder / f"blueprint{suffix}"
    path.write_text(blueprint_text)
    return runner.invoke(app, ["verify", str(path), "--format", "json"])


def assert_well_behaved(result) -> None:
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    assert "internal error" not in result.stderr, result.stderr
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.stderr.startswith("error: ") and result.stdout == ""
        return
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["sound"] is (result.exit_code == 0)
    assert report["errors"] == sum(p["severity"] == "error" for p in report["problems"])
    assert report["warnings"] == len(report["problems"]) - report["errors"]
    if report["errors"]:
        assert result.exit_code == 1


@settings(max_examples=examples(1500), **PROPERTY_SETTINGS)
@given(applications())
def test_generated_applications_never_crash_the_verifier(application):
    module, text, suffix = application
    with tempfile.TemporaryDirectory() as tmp:
        try:
            assert_well_behaved(verify_in_process(Path(tmp), text, suffix, module))
        finally:
            sys.path[:] = [p for p in sys.path if p != str(Path(tmp).resolve())]


YAMLISH = st.lists(st.sampled_from([
    "streamlets:", "topics:", "app-id:", "  a: m.C", "  b: [x]", "  t: {producers: [a.out]}", "  - a", "{", "}", "[",
    "]", ":", "- ", "  ", "\t", "\"", "'", "#", "&a", "*a", "!!python/object", "blueprint {", "streamlets {", "=",
    "a = b", "${x}", "include \"x\"", "%YAML 1.1", "---", "...", "\x00", "é", "0x10", "~", "null", "yes",
]), max_size=12).map("\n".join)


@settings(max_examples=examples(1000), **PROPERTY_SETTINGS)
@given(st.one_of(YAMLISH, st.text(max_size=80), st.binary(max_size=40).map(lambda b: b.decode("latin-1"))),
       st.sampled_from([".yaml", ".conf"]))
def test_arbitrary_text_never_crashes_the_verifier(text, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        assert_well_behaved(verify_in_process(Path(tmp), text, suffix))
