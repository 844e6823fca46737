"""Avro's allocation limits (streamlets.avro_limits): the ceiling, its JVM options and the
schemas whose arrays a value's length does not bound."""

import pytest

from streamlets import avro_limits
from streamlets.runtime.spark_session import DEFAULT_CONF


def test_ceiling_is_kafkas_max_message_size_unless_overridden():
    assert avro_limits.max_value_bytes({}) == 1_048_588
    assert avro_limits.max_value_bytes({"STREAMLETS_MAX_VALUE_BYTES": "8_388_608"}) == 8_388_608
    for bad in ("1MB", "0", "-5", "3000000000"):
        with pytest.raises(avro_limits.AvroLimitsError, match="STREAMLETS_MAX_VALUE_BYTES"):
            avro_limits.max_value_bytes({"STREAMLETS_MAX_VALUE_BYTES": bad})


def test_java_options_set_the_three_properties_before_the_users():
    options = avro_limits.with_limits("-XX:-DontCompileHugeMethods", {"STREAMLETS_MAX_VALUE_BYTES": "2048"}).split()
    assert options == ["-Dorg.apache.avro.limits.string.maxLength=2048", "-Dorg.apache.avro.limits.bytes.maxLength=2048",
                       "-Dorg.apache.avro.limits.collectionItems.maxLength=2048", "-XX:-DontCompileHugeMethods"]
    assert "spark.driver.extraJavaOptions" in DEFAULT_CONF and "spark.executor.extraJavaOptions" in DEFAULT_CONF


def record(*fields):
    return {"type": "record", "name": "R", "namespace": "t", "fields": [{"name": n, "type": t} for n, t in fields]}


@pytest.mark.parametrize("schema, paths", [
    (record(("a", {"type": "array", "items": "null"})), ["a[]"]),
    (record(("a", {"type": "array", "items": {"type": "fixed", "name": "Z", "size": 0}})), ["a[]"]),
    (record(("a", {"type": "array", "items": {"type": "record", "name": "E", "fields": []}})), ["a[]"]),
    (record(("e", {"type": "record", "name": "E", "fields": [{"name": "n", "type": "null"}]}),
            ("a", {"type": "map", "values": {"type": "array", "items": "E"}})), ["a{}[]"]),
    (record(("a", ["null", {"type": "array", "items": {"type": "array", "items": "null"}}])), ["a[][]"]),
    # every item takes at least a byte: bounded by the value's length
    (record(("a", {"type": "array", "items": ["null", "int"]})), []),
    (record(("a", {"type": "array", "items": {"type": "array", "items": "int"}})), []),
    (record(("a", {"type": "map", "values": "null"})), []),  # keys are strings
    (record(("a", {"type": "array", "items": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "boolean"}]}})), []),
    (record(("n", {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}), ("a", {"type": "array", "items": "Node"})), []),
])
def test_zero_size_arrays(schema, paths):
    assert avro_limits.zero_size_arrays(schema) == paths


def test_dead_letter_error_names_the_limit_for_a_value_above_it():
    from streamlets.runtime.deadletter import _describer
    from streamlets.schema import AvroSchema, encode

    schema = AvroSchema.load(record(("s", "string")))
    describe = _describer(schema, limit=16)
    assert "longer than the decoders' limit of 16" in describe(encode(schema, {"s": "x" * 20}))
    assert "STREAMLETS_MAX_VALUE_BYTES" in describe(encode(schema, {"s": "x" * 20}))
    assert describe(b"\xff\xff\xff\xff\x0f").startswith("not a valid Avro encoding of t.R: EOFError")
