"""streamlets.schema: loading Avro record schemas, fingerprints, and the binary codec."""

import importlib
import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from streamlets import StreamletDefinitionError
from streamlets.runtime.codec import all_null_encoding
from streamlets.schema import AvroSchema, SchemaError, decode, encode

VALUE = {
    "type": "record", "name": "Value", "namespace": "test.sdk",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
               {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}],
}

ADDRESS = {"type": "record", "name": "Address", "namespace": "test.sdk", "fields": [{"name": "city", "type": "string"}]}


def crc64_avro(data: bytes) -> str:
    """The Avro spec's CRC-64-AVRO (Rabin) fingerprint, written out independently, as the
    little-endian hex that fastavro and the single-object encoding use."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp.to_bytes(8, "little").hex()


@pytest.fixture
def import_module(tmp_path, monkeypatch):
    """Write a module (and any side files) into tmp_path and import it under a unique name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    imported = []

    def _import(source: str, **files: str):
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        name = f"sdk_schema_mod_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        imported.append(name)
        return importlib.import_module(name)

    yield _import
    for name in imported:
        sys.modules.pop(name, None)


# --- loading ----------------------------------------------------------------------------------


def test_load_from_dict_and_json_string_agree():
    a = AvroSchema.load(VALUE)
    b = AvroSchema.load(json.dumps(VALUE, indent=2))
    c = AvroSchema.load("\n   " + json.dumps(VALUE))  # leading whitespace is still JSON, not a path
    assert a == b == c
    assert a.name == "test.sdk.Value"
    assert a.field_names == ["id", "name", "tags"]
    assert a.field("name") == {"name": "name", "type": "string"}
    assert a.field("nope") is None
    assert json.loads(a.json) == a.schema


def test_avsc_path_resolves_against_declaring_module(import_module):
    mod = import_module(
        """
        from streamlets import AvroInlet, AvroOutlet, Streamlet

        class FromFile(Streamlet):
            inlet = AvroInlet("in", "schemas/value.avsc")
            out = AvroOutlet("out", "schemas/value.avsc", key="id")

            def create_logic(self, ctx):
                pass
        """,
        **{"schemas/value.avsc": json.dumps(VALUE)},
    )
    inlet = mod.FromFile.shape().inlet("in")
    assert inlet.schema.fingerprint == AvroSchema.load(VALUE).fingerprint
    assert inlet.schema.field_names == ["id", "name", "tags"]
    assert mod.FromFile.shape().outlet("out").schema.fingerprint == inlet.schema.fingerprint
    assert inlet.schema.origin.endswith("schemas/value.avsc")
    assert Path(inlet.schema.origin).is_absolute()


def test_named_types_across_avsc_files_in_one_folder(tmp_path):
    (tmp_path / "test.sdk.Address.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "person.avsc").write_text(json.dumps(
        {"type": "record", "name": "Person", "namespace": "test.sdk",
         "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "test.sdk.Address"}]}))
    s = AvroSchema.load("person.avsc", tmp_path)
    home = s.field("home")["type"]
    # inlined, as Spark's from_avro needs a self-contained schema
    assert isinstance(home, dict) and home["type"] == "record" and home["fields"] == [{"name": "city", "type": "string"}]
    record = {"name": "Ada", "home": {"city": "London"}}
    assert decode(s, encode(s, record)) == record
    # the same absolute path works without base_dir
    assert AvroSchema.load(tmp_path / "person.avsc") == s


def test_named_type_used_twice_across_files(tmp_path):
    (tmp_path / "test.sdk.Address.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "person.avsc").write_text(json.dumps(
        {"type": "record", "name": "Person", "namespace": "test.sdk",
         "fields": [{"name": "home", "type": "test.sdk.Address"},
                    {"name": "work", "type": ["null", "test.sdk.Address"], "default": None}]}))
    s = AvroSchema.load("person.avsc", tmp_path)
    record = {"home": {"city": "London"}, "work": {"city": "Cambridge"}}
    assert decode(s, encode(s, record)) == record


def test_named_type_used_twice_inline():
    s = AvroSchema.load({"type": "record", "name": "Trip", "namespace": "test.sdk", "fields": [
        {"name": "start", "type": ADDRESS}, {"name": "end", "type": "test.sdk.Address"}]})
    record = {"start": {"city": "A"}, "end": {"city": "B"}}
    assert decode(s, encode(s, record)) == record


def test_invalid_json_string_reports_line_and_column():
    with pytest.raises(SchemaError) as e:
        AvroSchema.load('{"type": "record",\n  "name": "X",\n  "fields": [}')
    assert "not valid JSON" in str(e.value)
    assert "line 3 column" in str(e.value)


def test_invalid_json_in_avsc_file_is_a_schema_error_naming_file_line_and_column(tmp_path):
    (tmp_path / "broken.avsc").write_text('{"type": "record",\n "name": "X",\n "fields": [,]}')
    with pytest.raises(SchemaError) as e:
        AvroSchema.load("broken.avsc", tmp_path)
    assert "broken.avsc" in str(e.value) and "line 3 column" in str(e.value)


def test_streamlet_with_broken_avsc_file_is_a_definition_error(import_module):
    with pytest.raises(StreamletDefinitionError, match=r"BrokenFile.*inlet 'in'.*broken\.avsc"):
        import_module(
            """
            from streamlets import AvroInlet, Streamlet

            class BrokenFile(Streamlet):
                inlet = AvroInlet("in", "broken.avsc")
            """,
            **{"broken.avsc": '{"type": "record",\n "fields": [,]}'},
        )


@pytest.mark.parametrize("source", ['"string"', {"type": "enum", "name": "E", "symbols": ["A"]}, '["null", "long"]'])
def test_not_a_record(source):
    with pytest.raises(SchemaError, match="must be an Avro record"):
        AvroSchema.load(source)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(SchemaError) as e:
        AvroSchema.load("schemas/nowhere.avsc", tmp_path)
    assert str(tmp_path / "schemas" / "nowhere.avsc") in str(e.value)
    assert "does not exist" in str(e.value)


def test_unknown_named_type_in_file_names_the_file_and_type(tmp_path):
    (tmp_path / "r.avsc").write_text(json.dumps(
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "test.sdk.Missing"}]}))
    with pytest.raises(SchemaError) as e:
        AvroSchema.load("r.avsc", tmp_path)
    assert "r.avsc" in str(e.value) and "test.sdk.Missing" in str(e.value)


@pytest.mark.parametrize("schema, words", [
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}, "nope"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}, "Default"),
    (42, "not int"),
])
def test_invalid_schemas(schema, words):
    with pytest.raises(SchemaError, match=words):
        AvroSchema.load(schema)


# --- fingerprints -----------------------------------------------------------------------------


def test_fingerprint_is_crc64_avro_of_canonical_form_and_stable():
    s = AvroSchema.load(VALUE)
    assert s.canonical_form == (
        '{"name":"test.sdk.Value","type":"record","fields":[{"name":"id","type":"long"},'
        '{"name":"name","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}}]}'
    )
    assert s.fingerprint == crc64_avro(s.canonical_form.encode())
    assert s.fingerprint == "d6047b6769fab319"  # pinned: a change would re-key every topic's schema id
    from fastavro.schema import fingerprint as fastavro_fingerprint

    assert s.fingerprint == fastavro_fingerprint(s.canonical_form, "CRC-64-AVRO")  # our fast table, same value
    # Stable: independent of key order, docs, defaults and how the schema was given.
    shuffled = {"fields": [{"type": "long", "name": "id", "doc": "the id"}, {"name": "name", "type": "string"},
                           {"name": "tags", "type": {"items": "string", "type": "array"}}],
                "namespace": "test.sdk", "name": "Value", "type": "record", "doc": "changed"}
    assert AvroSchema.load(shuffled).fingerprint == s.fingerprint
    assert AvroSchema.load(json.dumps(VALUE)).fingerprint == s.fingerprint
    changed = dict(VALUE, fields=VALUE["fields"][:2])
    assert AvroSchema.load(changed).fingerprint != s.fingerprint


# --- codec ------------------------------------------------------------------------------------


def test_encode_decode_round_trip():
    s = AvroSchema.load(VALUE)
    record = {"id": -(2**62), "name": "ünïcødé", "tags": ["a", "b"]}
    value = encode(s, record)
    assert value[:1] != b"O"  # no container header ("Obj\x01")
    assert decode(s, value) == record
    parsed = s.parsed()
    assert decode(s, encode(s, record, parsed), parsed) == record


def test_decode_rejects_trailing_bytes_and_truncation():
    s = AvroSchema.load(VALUE)
    value = encode(s, {"id": 1, "name": "x", "tags": []})
    with pytest.raises(ValueError, match="1 trailing bytes"):
        decode(s, value + b"\x00")
    with pytest.raises(Exception):
        decode(s, value[:-2])


def test_encode_rejects_records_not_fitting_the_schema():
    s = AvroSchema.load(VALUE)
    with pytest.raises((ValueError, TypeError)):
        encode(s, {"id": "not a long", "name": "x"})


def test_all_null_encoding():
    nullable = AvroSchema.load({"type": "record", "name": "N", "fields": [
        {"name": "a", "type": ["null", "string"]},
        {"name": "b", "type": ["long", "null"]},  # null is branch 1: zigzag 2
        {"name": "c", "type": ["null", {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}]},
    ]})
    expected = encode(nullable, {"a": None, "b": None, "c": None})
    assert all_null_encoding(nullable) == expected == b"\x00\x02\x00"
    assert decode(nullable, all_null_encoding(nullable)) == {"a": None, "b": None, "c": None}

    not_all = AvroSchema.load({"type": "record", "name": "M", "fields": [
        {"name": "a", "type": ["null", "string"]}, {"name": "b", "type": "long"}]})
    assert all_null_encoding(not_all) is None
    assert all_null_encoding(AvroSchema.load(VALUE)) is None


def test_required_field_is_the_first_that_cannot_be_null():
    from streamlets.runtime.codec import required_field

    mixed = AvroSchema.load({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "string"]},
        {"name": "n", "type": "null"},
        {"name": "n2", "type": {"type": "null"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "b", "type": "long"}]})
    assert required_field(mixed) == "e"
    assert required_field(AvroSchema.load({"type": "record", "name": "S", "fields": [
        {"name": "u", "type": ["int", "string"]}]})) == "u"  # a union without null is never null
    everything_nullable = AvroSchema.load({"type": "record", "name": "N", "fields": [
        {"name": "a", "type": ["null", "string"]}, {"name": "b", "type": ["long", "null"]}]})
    assert required_field(everything_nullable) is None
