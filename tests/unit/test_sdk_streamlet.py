"""Streamlet classes: declarations checked at class definition, inheritance, descriptors (no Spark)."""

import json
import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from streamlets import (
    AvroInlet,
    AvroOutlet,
    BooleanParameter,
    DoubleParameter,
    DurationParameter,
    IntegerParameter,
    MemorySizeParameter,
    RegExpParameter,
    Streamlet,
    StreamletDefinitionError,
    StringParameter,
    VolumeMount,
)
from streamlets.schema import AvroSchema

REPO = Path(__file__).resolve().parents[2]

VALUE = {"type": "record", "name": "Value", "namespace": "test.sdk",
         "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
BAD_SCHEMA = {"type": "record", "name": "Bad", "fields": [{"name": "a", "type": "no.such.Type"}]}


def definition_error(body: str) -> str:
    """Define `class Broken(Streamlet)` with `body` and return the StreamletDefinitionError's text."""
    namespace = {"AvroInlet": AvroInlet, "AvroOutlet": AvroOutlet, "Streamlet": Streamlet, "VolumeMount": VolumeMount,
                 "IntegerParameter": IntegerParameter, "StringParameter": StringParameter,
                 "RegExpParameter": RegExpParameter, "DurationParameter": DurationParameter,
                 "MemorySizeParameter": MemorySizeParameter, "BooleanParameter": BooleanParameter,
                 "VALUE": VALUE, "BAD_SCHEMA": BAD_SCHEMA, "__name__": "sdkdefs"}
    source = "class Broken(Streamlet):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    with pytest.raises(StreamletDefinitionError) as e:
        exec(compile(source, "<streamlet>", "exec"), namespace)
    message = str(e.value)
    assert message.startswith("streamlet sdkdefs.Broken: "), message
    return message


@pytest.mark.parametrize("body, expected", [
    ('i = AvroInlet("In_Put", VALUE)', "inlet 'In_Put': port names must be DNS labels"),
    ('o = AvroOutlet("out-" + "x" * 60, VALUE)', "port names must be DNS labels"),
    ('o = AvroOutlet("-out", VALUE)', "outlet '-out': port names must be DNS labels"),
    ('i = AvroInlet("data", VALUE)\no = AvroOutlet("data", VALUE)', "outlet 'data': another port has the same name"),
    ('i = AvroInlet("in", BAD_SCHEMA)', "inlet 'in': invalid Avro schema"),
    ('i = AvroInlet("in", "missing.avsc")', "inlet 'in': schema file"),
    ('i = AvroInlet("in", \'"string"\')', "inlet 'in': a port schema must be an Avro record"),
    ('o = AvroOutlet("out", VALUE, key="nope")', "outlet 'out': partition key field 'nope' is not a field of test.sdk.Value (fields: id, name)"),
    ('o = AvroOutlet("out", VALUE, key=["id", "nope"])', "partition key field 'nope'"),
    ('p = StringParameter("1st")', "config parameter '1st': keys are letters"),
    ('p = StringParameter("a key")', "config parameter 'a key'"),
    ('p = StringParameter("k")\nq = IntegerParameter("k")', "config parameter 'k': declared twice"),
    ('p = IntegerParameter("n", default="ten")', "default of config parameter 'n'"),
    ('p = IntegerParameter("n", default=1.5)', "default of config parameter 'n'"),
    ('p = DurationParameter("d", default="soon")', "default of config parameter 'd' (duration): 'soon' is not a duration"),
    ('p = MemorySizeParameter("m", default="lots")', "default of config parameter 'm' (memorysize)"),
    ('p = BooleanParameter("b", default="maybe")', "default of config parameter 'b' (bool)"),
    ('p = RegExpParameter("r", pattern="[a-z]+", default="ABC")', "default of config parameter 'r' (string): 'ABC' does not match the pattern '[a-z]+'"),
    ('m = VolumeMount("Data", "/mnt/data")', "volume mount 'Data': names must be DNS labels"),
    ('m = VolumeMount("data", "mnt/data")', "volume mount 'data': path 'mnt/data' is relative; mount paths must be absolute"),
    ('m = VolumeMount("data", "")', "volume mount 'data': the path is empty"),
    ('m = VolumeMount("data", "/mnt/../etc")', "volume mount 'data': path '/mnt/../etc' contains '..'"),
    ('m = VolumeMount("data", "/mnt/data/..")', "contains '..'"),
    ('m = VolumeMount("data", "/a")\nn = VolumeMount("data", "/b")', "volume mount 'data': declared twice"),
    ('m = VolumeMount("a", "/mnt/x")\nn = VolumeMount("b", "/mnt/x")', "volume mount 'b': path '/mnt/x' is used by another mount"),
    ('m = VolumeMount("data", "/mnt/data", "ReadWriteSometimes")', "volume mount 'data': access mode must be one of ReadWriteMany, ReadOnlyMany, ReadWriteOnce, ReadWriteOncePod"),
])
def test_definition_errors_name_streamlet_and_part(body, expected):
    assert expected in definition_error(body)


def test_dotted_names_and_dots_inside_paths_are_fine():
    class Fine(Streamlet):
        i = AvroInlet("in-1", VALUE)
        p = StringParameter("a.b-c_d")
        q = StringParameter("x")
        m = VolumeMount("data", "/mnt/my..dir/x.y")

    assert [p.key for p in Fine.config_parameters()] == ["a.b-c_d", "x"]


def test_several_problems_reported_together():
    message = definition_error("""
        i = AvroInlet("Bad_Name", VALUE)
        o = AvroOutlet("out", VALUE, key="nope")
        p = IntegerParameter("n", default="x")
        m = VolumeMount("data", "relative")
    """)
    for expected in ("inlet 'Bad_Name'", "partition key field 'nope'", "config parameter 'n'", "volume mount 'data'"):
        assert expected in message


def test_bad_regex_is_a_definition_error_naming_streamlet_and_key():
    message = definition_error('r = RegExpParameter("code", pattern="[a-")')
    assert "config parameter 'code'" in message


def test_bad_error_handling_is_a_definition_error():
    message = definition_error('i = AvroInlet("in", VALUE, error_handling="drop")')
    assert "inlet 'in'" in message


def test_errors_are_raised_at_definition_not_use():
    # A broken class never exists: the module defining it fails to import.
    with pytest.raises(StreamletDefinitionError):
        class Broken(Streamlet):
            o = AvroOutlet("out", VALUE, key="nope")


# --- inheritance and metadata -----------------------------------------------------------------


class Base(Streamlet):
    """Reads values.

    Long description line.
    """

    inlet = AvroInlet("in", VALUE, description="values in")
    factor = IntegerParameter("factor", "multiplier", default=2)
    data = VolumeMount("data", "/mnt/data", "ReadOnlyMany")


class Child(Base):
    out = AvroOutlet("out", VALUE, key="id")
    factor = IntegerParameter("factor", "overridden", default=3)  # same attribute: the override wins
    window = DurationParameter("window", "window length", default="1500 ms")
    memory = MemorySizeParameter("memory", default="1 GiB")
    code = RegExpParameter("code", pattern="[A-Z]{3}", default="ABC")
    ratio = DoubleParameter("ratio", default=0.5)
    on = BooleanParameter("on", default="yes")

    def create_logic(self, ctx):
        pass


class Grandchild(Child):
    extra = AvroInlet("extra", VALUE, error_handling="fail")


def test_inheritance_of_ports_params_and_mounts():
    assert [p.name for p in Child.shape().inlets] == ["in"]
    assert [p.name for p in Child.shape().outlets] == ["out"]
    assert [p.name for p in Grandchild.shape().inlets] == ["in", "extra"]
    assert Grandchild.shape().inlet("extra").error_handling == "fail"
    assert Grandchild.shape().outlet("out").key == ("id",)
    assert Grandchild.shape().inlet("nope") is None
    assert [(p.key, p.default) for p in Child.config_parameters()][:1] == [("factor", 3)]
    assert [m.name for m in Grandchild.volume_mounts()] == ["data"]
    assert Base.shape().outlets == ()
    assert [p.key for p in Base.config_parameters()] == ["factor"]


def test_defaults_are_parsed_at_definition():
    params = {p.key: p.default for p in Child.config_parameters()}
    assert params == {"factor": 3, "window": timedelta(milliseconds=1500), "memory": 1024**3, "code": "ABC",
                      "ratio": 0.5, "on": True}


def test_is_abstract():
    assert Base.is_abstract()
    assert not Child.is_abstract()
    assert not Grandchild.is_abstract()
    with pytest.raises(NotImplementedError, match="Base does not implement create_logic"):
        Base().create_logic(None)


def test_descriptor_content_is_plain_json():
    d = Grandchild.descriptor()
    data = json.loads(json.dumps(d.model_dump(by_alias=True)))  # serialisable as plain JSON
    assert data["class_name"] == f"{__name__}.Grandchild"
    assert data["runtime"] == "spark"
    assert Base.descriptor().description == "Reads values.\n\nLong description line."
    schema = AvroSchema.load(VALUE)
    assert data["inlets"] == [
        {"name": "in", "schema": schema.schema, "schema_name": "test.sdk.Value", "fingerprint": schema.fingerprint,
         "error_handling": "dead-letter", "description": "values in"},
        {"name": "extra", "schema": schema.schema, "schema_name": "test.sdk.Value", "fingerprint": schema.fingerprint,
         "error_handling": "fail", "description": ""},
    ]
    assert data["outlets"] == [{"name": "out", "schema": schema.schema, "schema_name": "test.sdk.Value",
                                "fingerprint": schema.fingerprint, "key": ["id"], "description": ""}]
    params = {p["key"]: p for p in data["config_parameters"]}
    assert params["factor"] == {"key": "factor", "type": "int32", "description": "overridden", "default": 3, "pattern": None}
    assert params["window"]["default"] == "1500ms" and params["window"]["type"] == "duration"
    assert params["memory"]["default"] == 1024**3 and params["memory"]["type"] == "memorysize"
    assert params["code"] == {"key": "code", "type": "string", "description": "", "default": "ABC", "pattern": "[A-Z]{3}"}
    assert params["on"]["default"] is True and params["ratio"]["default"] == 0.5
    assert data["volume_mounts"] == [{"name": "data", "path": "/mnt/data", "access_mode": "ReadOnlyMany"}]
    assert d.inlet("extra").error_handling == "fail" and d.outlet("out").key == ["id"] and d.outlet("nope") is None


def test_descriptor_duration_default_is_exact():
    class Timed(Streamlet):
        d = DurationParameter("d", default="1001ms")

    assert Timed.descriptor().config_parameters[0].default == "1001ms"


def test_descriptor_without_spark():
    # In a fresh interpreter: importing the SDK, defining streamlets and describing them
    # must not import (let alone start) PySpark.
    code = textwrap.dedent("""
        import sys, json
        import streamlets
        from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet
        V = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "long"}]}
        class S(Streamlet):
            i = AvroInlet("in", V)
            o = AvroOutlet("out", V, key="id")
            n = IntegerParameter("n", default=1)
            def create_logic(self, ctx):
                pass
        json.dumps(S.descriptor().model_dump(by_alias=True))
        assert "pyspark" not in sys.modules, sorted(m for m in sys.modules if m.startswith("pyspark"))
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
