"""Config parameters (Typesafe-Config-style values) and StreamletConfig layering."""

from datetime import timedelta

import pytest

from streamlets import (
    AvroInlet,
    BooleanParameter,
    ConfigError,
    DoubleParameter,
    DurationParameter,
    IntegerParameter,
    MemorySizeParameter,
    RegExpParameter,
    Streamlet,
    StringParameter,
)
from streamlets.config import StreamletConfig
from streamlets.params import parse_duration, parse_memory_size


@pytest.mark.parametrize("text, expected", [
    ("10s", timedelta(seconds=10)),
    ("1500 ms", timedelta(milliseconds=1500)),
    ("2 minutes", timedelta(minutes=2)),
    ("1h", timedelta(hours=1)),
    ("3 days", timedelta(days=3)),
    ("1m", timedelta(minutes=1)),  # m is minutes, as in Typesafe Config
    ("250us", timedelta(microseconds=250)),
    ("0.5 seconds", timedelta(milliseconds=500)),
    ("  7 SECONDS ", timedelta(seconds=7)),
    ("250", timedelta(milliseconds=250)),  # a bare number is milliseconds
    (250, timedelta(milliseconds=250)),
    (1.5, timedelta(microseconds=1500)),
    (timedelta(hours=2), timedelta(hours=2)),
])
def test_durations(text, expected):
    assert parse_duration(text) == expected
    assert DurationParameter("d").parse(text) == expected


@pytest.mark.parametrize("text", ["soon", "10 parsecs", "-5s", "1h30m", "", "s", True, None])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)
    with pytest.raises(ConfigError, match=r"config parameter 'd' \(duration\)"):
        DurationParameter("d").parse(text)


@pytest.mark.parametrize("text, expected", [
    ("512M", 512 * 1024**2),
    ("1 GiB", 1024**3),
    ("100kB", 100_000),
    ("2g", 2 * 1024**3),
    ("1K", 1024),
    ("1Ki", 1024),
    ("3 MB", 3 * 1000**2),
    ("2 megabytes", 2 * 1000**2),
    ("2 mebibytes", 2 * 1024**2),
    ("1.5G", int(1.5 * 1024**3)),
    ("4096", 4096),  # a bare number is bytes
    ("10 bytes", 10),
    (2048, 2048),
])
def test_memory_sizes(text, expected):
    assert parse_memory_size(text) == expected
    assert MemorySizeParameter("m").parse(text) == expected


@pytest.mark.parametrize("text", ["lots", "5 XB", "-1G", "", True, "1 GiB extra"])
def test_bad_memory_sizes(text):
    with pytest.raises(ValueError):
        parse_memory_size(text)
    with pytest.raises(ConfigError, match=r"config parameter 'm' \(memorysize\)"):
        MemorySizeParameter("m").parse(text)


@pytest.mark.parametrize("raw, expected", [
    (True, True), (False, False), ("true", True), ("FALSE", False), ("yes", True), ("no", False),
    ("on", True), ("off", False), (" Yes ", True),
])
def test_booleans(raw, expected):
    assert BooleanParameter("b").parse(raw) is expected


@pytest.mark.parametrize("raw", ["maybe", "1", 1, 0, "", None])
def test_bad_booleans(raw):
    with pytest.raises(ConfigError, match=r"config parameter 'b' \(bool\)"):
        BooleanParameter("b").parse(raw)


@pytest.mark.parametrize("raw, expected", [(3, 3), ("42", 42), (" -7 ", -7), (2.0, 2), (2**31 - 1, 2**31 - 1), (-(2**31), -(2**31))])
def test_integers(raw, expected):
    value = IntegerParameter("n").parse(raw)
    assert value == expected and type(value) is int


@pytest.mark.parametrize("raw", [1.5, "1.5", True, False, "ten", "", None, [1], 2**31, -(2**31) - 1])
def test_bad_integers(raw):
    with pytest.raises(ConfigError, match=r"config parameter 'n' \(int32\)"):
        IntegerParameter("n").parse(raw)


@pytest.mark.parametrize("param, raw, words", [
    (IntegerParameter("distance-threshold"), "abc", "'abc' is not a whole number (examples: 42, -7, 100000)"),
    (IntegerParameter("distance-threshold"), None, "None is not a whole number"),
    (IntegerParameter("distance-threshold"), [1], "[1] is not a whole number"),
    (IntegerParameter("distance-threshold"), "1.5", "'1.5' is not a whole number"),
    (DoubleParameter("ratio"), "abc", "'abc' is not a number (examples: 0.5, 100, -2.5, 1e-3)"),
    (DoubleParameter("ratio"), None, "None is not a number"),
    (DoubleParameter("ratio"), True, "True is not a number"),
])
def test_number_errors_name_the_value_and_examples_not_python(param, raw, words):
    """A bad number says what was given and what is accepted, as the duration error does; never
    Python's own text (`invalid literal for int() with base 10`, `could not convert string to float`)."""
    with pytest.raises(ConfigError) as e:
        param.parse(raw)
    message = str(e.value)
    assert message == f"config parameter {param.key!r} ({param.type_name}): {words}" or message.startswith(
        f"config parameter {param.key!r} ({param.type_name}): {words}"), message
    assert "invalid literal" not in message and "could not convert" not in message and "argument must be" not in message


def test_doubles_and_strings():
    assert DoubleParameter("x").parse("2.5") == 2.5
    assert DoubleParameter("x").parse(3) == 3.0
    with pytest.raises(ConfigError):
        DoubleParameter("x").parse(True)
    with pytest.raises(ConfigError):
        DoubleParameter("x").parse("abc")
    assert StringParameter("s").parse(12) == "12"
    with pytest.raises(ConfigError, match="expected a string"):
        StringParameter("s").parse({"a": 1})


def test_regexp():
    p = RegExpParameter("code", "airport code", pattern=r"[A-Z]{3}")
    assert p.pattern == "[A-Z]{3}"
    assert p.parse("JFK") == "JFK"
    for bad in ("jfk", "JFKX", "XJFK", "JF"):  # the whole value must match
        with pytest.raises(ConfigError, match=r"config parameter 'code' .*does not match the pattern"):
            p.parse(bad)
    assert StringParameter("s").pattern is None


# --- StreamletConfig --------------------------------------------------------------------------


V = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "long"}]}


class Configured(Streamlet):
    inlet = AvroInlet("in", V)
    factor = IntegerParameter("factor", "multiplier", default=2)
    window = DurationParameter("window", "window length", default="10 minutes")
    code = RegExpParameter("code", pattern="[A-Z]{3}")  # no default
    enabled = BooleanParameter("enabled", default=False)
    zero = IntegerParameter("zero", default=0)

    def create_logic(self, ctx):
        pass


def config(**raw) -> StreamletConfig:
    return StreamletConfig("stats", Configured.config_parameters(), raw)


def test_values_layer_over_defaults():
    c = config(code="JFK", factor="5")
    assert c["factor"] == 5
    assert c["window"] == timedelta(minutes=10)
    assert c["code"] == "JFK"
    assert c["enabled"] is False  # a falsy default is still a default
    assert c["zero"] == 0
    assert dict(c) == {"factor": 5, "window": timedelta(minutes=10), "code": "JFK", "enabled": False, "zero": 0}
    assert len(c) == 5
    c2 = config(code="LGA", window="90s", factor=None)  # None: not set, the default applies
    assert c2["window"] == timedelta(seconds=90) and c2["factor"] == 2


def test_indexing_by_parameter_object():
    c = config(code="JFK", factor=7)
    assert c[Configured.factor] == 7
    assert c[Configured.code] == "JFK"
    with pytest.raises(KeyError):
        c["nope"]


def test_unknown_key_lists_declared_keys():
    with pytest.raises(ConfigError) as e:
        config(code="JFK", factr=3, other=1)
    message = str(e.value)
    assert "streamlet 'stats'" in message and "factr, other" in message
    for key in ("factor", "window", "code", "enabled", "zero"):
        assert key in message.split("declared:")[1]


def test_missing_value_without_default():
    with pytest.raises(ConfigError, match=r"streamlet 'stats': config parameter 'code' has no default and no value; "
                                          r"set streamlets\.stats\.config-parameters\.code"):
        config()


@pytest.mark.parametrize("raw, words", [
    ({"code": "JFK", "factor": "many"}, r"streamlet 'stats': config parameter 'factor' \(int32\)"),
    ({"code": "JFK", "factor": 1.5}, r"config parameter 'factor' \(int32\)"),
    ({"code": "jfk"}, r"streamlet 'stats': config parameter 'code' .*does not match"),
    ({"code": "JFK", "window": "forever"}, r"config parameter 'window' \(duration\)"),
    ({"code": "JFK", "enabled": "perhaps"}, r"config parameter 'enabled' \(bool\)"),
])
def test_wrong_type_names_the_key(raw, words):
    with pytest.raises(ConfigError, match=words):
        config(**raw)


def test_no_parameters():
    c = StreamletConfig("plain", (), {})
    assert dict(c) == {}
    with pytest.raises(ConfigError, match="declared: none"):
        StreamletConfig("plain", (), {"x": 1})
