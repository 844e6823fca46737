"""One minimal blueprint per problem kind: `blueprint verify` reports just that problem, at its place.

Every code of blueprint.problems.CODES has a case here (test_every_code_has_a_case), run through
the CLI's JSON report, which is validated against its published schema.
"""

import itertools
import json
import re
import textwrap
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from blueprint.cli import app
from blueprint.problems import CODES, GROUPS

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "blueprint" / "verify-report.schema.json").read_text())
runner = CliRunner()
_ids = itertools.count()

# Streamlets every case may use: K.Source -> K.Sink (same schema), plus variants.
BASE = '''
from streamlets import *

R = {"type": "record", "name": "R", "namespace": "kinds", "fields": [{"name": "a", "type": "int"}]}
R2 = {"type": "record", "name": "R", "namespace": "kinds", "fields": [{"name": "a", "type": "int"},
      {"name": "b", "type": "string", "default": ""}]}
BROKEN = {"type": "record", "name": "R", "namespace": "kinds", "fields": [{"name": "a", "type": "string"}]}
ODD = {"type": "record", "name": "R", "namespace": "1bad", "fields": [{"name": "a", "type": "int"}]}  # fastavro accepts it, the avro package not

DEC2 = {"type": "record", "name": "P", "namespace": "kinds", "fields": [
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}
DEC3 = {"type": "record", "name": "P", "namespace": "kinds", "fields": [
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}}]}

class Source(Streamlet):
    out = AvroOutlet("out", R)
    def create_logic(self, ctx): pass

class DecSource(Streamlet):
    out = AvroOutlet("out", DEC2)
    def create_logic(self, ctx): pass

class DecSink(Streamlet):
    inlet = AvroInlet("in", DEC3)
    def create_logic(self, ctx): pass

class Source2(Streamlet):
    out = AvroOutlet("out", R2)
    def create_logic(self, ctx): pass

class OddSource(Streamlet):
    out = AvroOutlet("out", ODD)
    def create_logic(self, ctx): pass

class Sink(Streamlet):
    inlet = AvroInlet("in", R)
    def create_logic(self, ctx): pass

class BrokenSink(Streamlet):
    inlet = AvroInlet("in", BROKEN)
    def create_logic(self, ctx): pass

class Pipe(Streamlet):
    inlet = AvroInlet("in", R)
    out = AvroOutlet("out", R)
    def create_logic(self, ctx): pass

class Tuned(Streamlet):
    inlet = AvroInlet("in", R)
    window = DurationParameter("window", default="1 minute")
    limit = IntegerParameter("limit")
    data = VolumeMount("data", "/mnt/data")
    def create_logic(self, ctx): pass

class NotAStreamlet:
    pass

class Abstract(Streamlet):
    out = AvroOutlet("out", R)

class NeedsArgs(Streamlet):
    def __init__(self, path):
        self.path = path
    def create_logic(self, ctx): pass
'''

SOUND = """\
streamlets:
  src: K.Source
  sink: K.Sink
topics:
  t: {producers: [src.out], consumers: [sink.in]}
"""


def declares(decl: str) -> str:
    """A module whose class X has no ports (so nothing to connect) and the declaration `decl`."""
    return ("from streamlets import *\nclass X(Streamlet):\n"
            + textwrap.indent(textwrap.dedent(decl).strip(), "    ") + "\n    def create_logic(self, ctx): pass\n")


ONLY_X = "streamlets:\n  x: D.X\n"

# code -> (blueprint, declaration module or None, extra files, config text or None, (line, column), words)
CASES: dict[str, tuple] = {
    "malformed-blueprint": ("streamlets: [a\n", None, {}, None, (2, 1), "malformed YAML"),
    "missing-streamlets": ("topics: {}\n", None, {}, None, (1, 1), "no `streamlets:` section"),
    "empty-streamlets": ("streamlets: {}\n", None, {}, None, (1, 1), "names no streamlet"),
    "unknown-key": (SOUND + "topic: {}\n", None, {}, None, (6, 1), "unknown key 'topic' (did you mean 'topics'?)"),
    "duplicate-key": (SOUND.replace("t: {producers: [src.out], consumers: [sink.in]}",
                                    "t: {producers: [src.out], consumers: [sink.in], partitions: 2, partitions: 3}"),
                      None, {}, None, (5, 66), "'partitions' is given twice"),
    "wrong-type": (SOUND.replace("consumers: [sink.in]}", "consumers: [sink.in], partitions: none}"),
                   None, {}, None, (5, 63), "partitions of topic 't' must be a positive whole number"),
    "invalid-app-id": ("app-id: My_App\n" + SOUND, None, {}, None, (1, 9), "'My_App' is not a DNS label"),
    "duplicate-streamlet": (SOUND.replace("sink: K.Sink", "sink: K.Sink\n  sink: K.Sink"),
                            None, {}, None, (4, 3), "'sink' is given twice (first on line 3)"),
    "invalid-streamlet-name": (SOUND.replace("sink", "Sink_1"), None, {}, None, (3, 3), "'Sink_1' is not a DNS label"),
    "invalid-class-path": (SOUND.replace("K.Sink", "K.Sink()"), None, {}, None, (3, 3), "is not a class path"),
    "module-not-found": (SOUND.replace("K.Sink", "no_such_module.Sink"), None, {}, None, (3, 3), "No module named 'no_such_module'"),
    "class-not-found": (SOUND.replace("K.Sink", "K.Snk"), None, {}, None, (3, 3), "has no class 'Snk'"),
    "ambiguous-class": (SOUND.replace("K.Sink", "TwinSink"), None,
                        {"twin_a": "from streamlets import *\nclass TwinSink(Streamlet):\n    inlet = AvroInlet('in', "
                                   "{'type': 'record', 'name': 'R', 'namespace': 'kinds', 'fields': [{'name': 'a', 'type': 'int'}]})\n"
                                   "    def create_logic(self, ctx): pass\n",
                         "twin_b": "from twin_a import AvroInlet, Streamlet\nclass TwinSink(Streamlet):\n    inlet = AvroInlet('in', "
                                   "{'type': 'record', 'name': 'R', 'namespace': 'kinds', 'fields': [{'name': 'a', 'type': 'int'}]})\n"
                                   "    def create_logic(self, ctx): pass\n"},
                        None, (3, 3), "'TwinSink' is ambiguous: it names twin_a.TwinSink, twin_b.TwinSink"),
    "not-a-streamlet": (SOUND.replace("K.Sink", "K.NotAStreamlet"), None, {}, None, (3, 3), "is not a Streamlet subclass"),
    "abstract-streamlet": (SOUND.replace("K.Sink", "K.Abstract"), None, {}, None,
                           (3, 3), "does not implement create_logic"),
    "import-failed": (SOUND.replace("K.Sink", "boom.Sink"), None, {"boom": "import os\n\nraise RuntimeError('no config here')\n"},
                      None, (3, 3), "RuntimeError: no config here (at boom.py:3)"),
    "instantiation-failed": ("streamlets:\n  x: K.NeedsArgs\n", None, {}, None, (2, 3), "missing 1 required positional argument"),
    "invalid-schema": (ONLY_X, 'out = AvroOutlet("out", {"type": "recrd", "name": "R", "fields": []})', {}, None, (2, 3), "outlet 'out'"),
    "invalid-partition-key": (ONLY_X + "topics:\n  t: {producers: [x.out], managed: false}\n",
                              'out = AvroOutlet("out", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}, key="b")',
                              {}, None, (2, 3), "partition key field 'b' is not a field of R"),
    "invalid-error-handling": (ONLY_X + "topics:\n  t: {consumers: [x.in], managed: false}\n",
                               'inlet = AvroInlet("in", {"type": "record", "name": "R", "fields": []}, error_handling="drop")',
                               {}, None, (2, 3), "error_handling must be one of"),
    "invalid-config-key": (ONLY_X, 'p = StringParameter("max rate")', {}, None, (2, 3), "config parameter 'max rate'"),
    "duplicate-config-key": (ONLY_X, 'p = StringParameter("rate")\nq = StringParameter("rate")', {}, None,
                             (2, 3), "config parameter 'rate': declared twice"),
    "invalid-validation-pattern": (ONLY_X, 'p = RegExpParameter("code", pattern="[A-Z")', {}, None, (2, 3),
                                   "invalid regular expression '[A-Z'"),
    "invalid-default": (ONLY_X, 'p = IntegerParameter("limit", default="ten")', {}, None, (2, 3),
                        "default of config parameter 'limit' (int32)"),
    "invalid-volume-name": (ONLY_X, 'v = VolumeMount("Data_1", "/mnt/data")', {}, None, (2, 3), "volume mount 'Data_1'"),
    "duplicate-volume-name": (ONLY_X, 'v = VolumeMount("data", "/mnt/a")\nw = VolumeMount("data", "/mnt/b")', {}, None,
                              (2, 3), "volume mount 'data': declared twice"),
    "invalid-volume-path": (ONLY_X, 'v = VolumeMount("data", "mnt/data")', {}, None, (2, 3), "is relative"),
    "duplicate-volume-path": (ONLY_X, 'v = VolumeMount("a", "/mnt/data")\nw = VolumeMount("b", "/mnt/data")', {}, None,
                              (2, 3), "path '/mnt/data' is used by another mount"),
    "invalid-access-mode": (ONLY_X, 'v = VolumeMount("data", "/mnt/data", "ReadWriteSometimes")', {}, None, (2, 3),
                            "access mode must be one of"),
    "invalid-port-name": (ONLY_X, 'inlet = AvroInlet("In", {"type": "record", "name": "R", "fields": []})', {}, None,
                          (2, 3), "inlet 'In': port names must be DNS labels"),
    "duplicate-port-name": (ONLY_X, 'a = AvroInlet("in", {"type": "record", "name": "R", "fields": []})\n'
                                    'b = AvroOutlet("in", {"type": "record", "name": "R", "fields": []})', {}, None,
                            (2, 3), "another port has the same name"),
    "malformed-port-path": (SOUND.replace("consumers: [sink.in]", "consumers: [sink.in, sink]"), None, {}, None, (5, 50),
                            "'sink' in consumers is not a port path"),
    "unknown-streamlet": (SOUND.replace("consumers: [sink.in]", "consumers: [sink.in, snk.in]"), None, {}, None, (5, 50),
                          "names no streamlet 'snk'"),
    "unknown-port": (SOUND.replace("consumers: [sink.in]", "consumers: [sink.inn]"), None, {}, None, (5, 41),
                     "has no inlet 'inn'"),
    "wrong-port-role": (SOUND.replace("producers: [src.out]", "producers: [src.out, sink.in]"), None, {}, None, (5, 28),
                        "`sink.in` is an inlet"),
    "port-on-many-topics": (SOUND.replace("  sink: K.Sink\n", "  sink: K.Sink\n  sink2: K.Sink\n")
                            + "  u: {producers: [src.out], consumers: [sink2.in]}\n", None, {}, None, (7, 19), "outlet `src.out` is bound to 2 topics ('t', 'u')"),
    "unconnected-inlet": (SOUND.replace("sink: K.Sink", "sink: K.Sink\n  lonely: K.Sink"), None, {}, None, (4, 3),
                          "inlet `lonely.in` is not connected"),
    "unconnected-outlet": ("streamlets:\n  src: K.Source\n", None, {}, None, (2, 3), "outlet `src.out` is not connected"),
    "invalid-topic-name": (SOUND.replace("t: {", "t: {name: 'bad name', "), None, {}, None, (5, 3),
                           "'bad name' is not a valid Kafka topic name"),
    "duplicate-topic": (SOUND + "  t: {}\n", None, {}, None, (6, 3), "'t' is given twice (first on line 5)"),
    "duplicate-kafka-topic": (SOUND.replace("t: {", "t: {name: shared, ") + "  u: {name: shared, managed: false}\n",
                              None, {}, None, (6, 3), "both resolve to the Kafka topic 'shared'"),
    "topic-without-producers": (SOUND.replace("producers: [src.out], ", "") .replace("  src: K.Source\n", ""),
                                None, {}, None, (4, 3), "topic 't' has consumers but no producers"),
    "topic-without-consumers": (SOUND.replace(", consumers: [sink.in]", "").replace("  sink: K.Sink\n", ""),
                                None, {}, None, (4, 3), "topic 't' has producers but no consumers"),
    "empty-topic": (SOUND + "  spare: {}\n", None, {}, None, (6, 3), "topic 'spare' has no producers and no consumers"),
    "incompatible-schema": (SOUND.replace("K.Sink", "K.BrokenSink"), None, {}, None, (5, 41),
                            "field 'a' is string in the reader but int in the writer"),
    "logical-type-mismatch": (SOUND.replace("K.Source", "K.DecSource").replace("K.Sink", "K.DecSink"), None, {}, None,
                              (5, 41), "field 'amount' is decimal(10,2) in the writer but decimal(10,3) in the reader: "
                                       "the reader scales the written digits by 10^-3 instead of 10^-2: 12.34 would arrive as 1.234"),
    "producers-disagree": (SOUND.replace("src: K.Source", "src: K.Source\n  src2: K.Source2")
                           .replace("producers: [src.out]", "producers: [src.out, src2.out]"), None, {}, None, (6, 28),
                           "outlets `src.out` (kinds.R) and `src2.out` (kinds.R) write different schemas"),
    "uncomparable-schema": (SOUND.replace("K.Source", "K.OddSource"), None, {}, None, (5, 41), "could not be compared"),
    "zero-size-array-items": (ONLY_X + "topics:\n  t: {consumers: [x.in], managed: false}\n",
                              'inlet = AvroInlet("in", {"type": "record", "name": "R", "fields": [{"name": "tags", '
                              '"type": {"type": "array", "items": "null"}}]})', {}, None, (2, 3),
                              "inlet 'in' (R): array tags[] has items that encode to zero bytes"),
    "cycle": ("streamlets:\n  a: K.Pipe\n  b: K.Pipe\ntopics:\n  ab: {producers: [a.out], consumers: [b.in]}\n"
              "  ba: {producers: [b.out], consumers: [a.in]}\n", None, {}, None, (2, 3), "cycle: a -[ab]-> b -[ba]-> a"),
    "malformed-config": (SOUND.replace("K.Sink", "K.Tuned"), None, {}, "streamlets { tuned = [\n", (2, 1), "malformed HOCON"),
    "unknown-config-key": (SOUND.replace("K.Sink", "K.Tuned"), None, {},
                           "streamlets.sink.config-parameters { limit = 5, windw = 2m }\n", (1, 48),
                           "declares no config parameter 'windw'"),
    "invalid-config-value": (SOUND.replace("K.Sink", "K.Tuned"), None, {},
                             "streamlets.sink.config-parameters {\n  limit = 5\n  window = forever\n}\n", (3, 3),
                             "'forever' is not a duration"),
    "missing-config-value": (SOUND.replace("K.Sink", "K.Tuned"), None, {}, "streamlets.sink.spark { spark.x = 1 }\n",
                             (3, 3), "config parameter 'limit' (int32) has no default and no value"),
    "at-least-once-edge": (SOUND, None, {}, "streamlets.src.delivery = at-least-once\n", (1, 16),
                           "at-least-once edge(s) src.out -> t -> sink.in"),
    "invalid-trigger": (ONLY_X, 'trigger = "real-time soon"\n' + 'a = AvroInlet("in", {"type": "record", "name": "R", "fields": []})',
                        {}, None, (2, 3), "'soon' is not a duration"),
    "real-time-unsupported": (SOUND, None, {}, "streamlets.src.trigger = real-time\n", (1, 16),
                              "streamlet 'src' cannot run in real-time mode: it has no inlet"),
    "real-time-too-few-cores": (SOUND, None, {}, "streamlets.sink.trigger = \"real-time 2 seconds\"\ntopics.t.partitions = 3\n",
                                (1, 17), "its inlets' topics have 3 partitions but its executors 1 core(s)"),
    "async-progress-unsupported": (SOUND, None, {}, "streamlets.sink.progress-tracking = async\n", (1, 17),
                                   "streamlet 'sink' cannot use asynchronous progress tracking: it has no outlet"),
}
GROUPS_BY_HEADING = {heading: group for group, heading in GROUPS.items()}
NOT_IN_TABLE = {"unreadable-file", "unreadable-config"}  # exit status 2: tested in test_cli_verify.py
# verify --schema-registry's, which need a registry: tests/integration/test_schema_registry.py
REGISTRY_CODES = {"registry-incompatible", "registry-unreadable-version", "registry-unavailable"}


def test_every_code_has_a_case():
    assert set(CASES) | NOT_IN_TABLE | REGISTRY_CODES == set(CODES)
    assert set(SCHEMA["$defs"]["problem"]["properties"]["code"]["enum"]) == set(CODES)


def test_the_readme_table_is_the_registry():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = [m.groups() for m in re.finditer(r"^\| ([^|]+) \| `([a-z-]+)` \| (error|warning) \| (.*) \|$", readme, re.M)]
    table = {code: (GROUPS_BY_HEADING[group], severity, summary) for group, code, severity, summary in rows}
    assert table == {code: (c.group, c.severity, c.summary) for code, c in CODES.items()}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_kind_alone_gets_its_message_at_its_place(tmp_path, code):
    text, decl, files, config, (line, column), words = CASES[code]
    n = next(_ids)
    base, decl_module = f"kinds_base_{n}", f"kinds_decl_{n}"  # fresh module names: no import cache between cases
    (tmp_path / f"{base}.py").write_text(BASE)
    if decl is not None:
        (tmp_path / f"{decl_module}.py").write_text(declares(decl))
    for name, source in files.items():
        (tmp_path / f"{name}.py").write_text(source)
    path = tmp_path / "blueprint.yaml"
    path.write_text(text.replace("K.", f"{base}.").replace("D.", f"{decl_module}."))
    args = ["verify", str(path), "--format", "json"]
    if config is not None:
        (tmp_path / "deploy.conf").write_text(config)
        args += ["--config", str(tmp_path / "deploy.conf")]

    result = runner.invoke(app, args)

    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    problems = [(p["code"], p["line"], p["column"], p["message"]) for p in report["problems"]]
    assert len(problems) == 1, problems
    [p] = report["problems"]
    assert p["code"] == code
    assert (p["line"], p["column"]) == (line, column), p
    assert words in p["message"], p["message"]
    assert p["severity"] == CODES[code].severity and p["group"] == CODES[code].group
    assert result.exit_code == (1 if p["severity"] == "error" else 0)
    assert report["sound"] is (result.exit_code == 0)
    if p["severity"] == "warning":  # --strict makes every warning fail
        assert runner.invoke(app, args + ["--strict"]).exit_code == 1
