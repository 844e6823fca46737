"""Any bytes on an inlet are decoded or found malformed; none can make the JVM allocate more
than a value could hold (streamlets.avro_limits), so the JVM stays up.

The decoding path under test is the one of every inlet (codec.decode_value: Spark's from_avro in
PERMISSIVE mode, in the session the test kit builds with build_spark_session), fed arbitrary
bytes and values whose varints announce strings, bytes, arrays and maps of up to 2 GB.
"""

from __future__ import annotations

import io
import json

import fastavro
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from streamlets import avro_limits
from streamlets.runtime.codec import MALFORMED, RECORD, decode_value
from streamlets.schema import AvroSchema

WIDE = AvroSchema.load({"type": "record", "name": "Wide", "namespace": "limits", "fields": [
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "longs", "type": {"type": "array", "items": "long"}},
    {"name": "tags", "type": {"type": "map", "values": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "names", "type": {"type": "array", "items": "string"}}, {"name": "n", "type": "int"}]}},
]})
FLAT = AvroSchema.load({"type": "record", "name": "Flat", "namespace": "limits", "fields": [
    {"name": "id", "type": "string"}, {"name": "n", "type": "int"}, {"name": "x", "type": ["null", "double"]}]})


def varint(n: int) -> bytes:
    """Avro's zigzag varint of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte, z = z & 0x7F, z >> 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def bytes_schema(schema: dict) -> dict:
    """The schema with strings read as bytes: Java's Avro, unlike fastavro, does not check UTF-8."""
    return json.loads(json.dumps(schema).replace('"string"', '"bytes"'))


def fastavro_rejects(schema: AvroSchema, value: bytes) -> bool:
    try:
        fastavro.schemaless_reader(io.BytesIO(value), fastavro.parse_schema(bytes_schema(schema.schema)), None)
    except Exception:
        return True
    return False


HUGE = st.one_of(st.integers(avro_limits.max_value_bytes() + 1, 2**31 + 16), st.integers(-(2**31), -1))
# A prefix that decodes as WIDE's leading fields, so the huge varint lands on each kind of length.
WIDE_PREFIXES = [b"", varint(1) + b"a", varint(1) + b"a" + varint(0), varint(1) + b"a" + varint(0) + varint(0),
                 varint(1) + b"a" + varint(0) + varint(0) + varint(0) + varint(2)]
crafted = st.builds(lambda prefix, n, tail: prefix + varint(n) + tail, st.sampled_from(WIDE_PREFIXES), HUGE,
                    st.binary(max_size=12))
values = st.lists(st.one_of(st.binary(max_size=80), crafted), min_size=1, max_size=60)


def decode(spark, schema: AvroSchema, batch: list[bytes], *more: AvroSchema) -> list[bool] | list[list[bool]]:
    """Per value: malformed? (one Spark job; a list per schema when `more` schemas are given)."""
    df = spark.createDataFrame([(i, bytearray(v)) for i, v in enumerate(batch)], "i int, value binary")
    for k, s in enumerate((schema, *more)):
        df = decode_value(df, s, permissive=True).withColumnRenamed(MALFORMED, f"m{k}").drop(RECORD)
    rows = sorted(df.drop("value").collect())
    out = [[r[f"m{k}"] for r in rows] for k in range(1 + len(more))]
    return out if more else out[0]


def test_limits_hold_in_the_test_kits_jvm(spark):
    assert avro_limits.limits_hold(spark.sparkContext._jvm)
    args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    assert f"-Dorg.apache.avro.limits.string.maxLength={avro_limits.max_value_bytes()}" in list(args)


def test_values_announcing_gigabytes_are_malformed_and_the_jvm_stays_up(spark):
    """Without the limits a few of these end in OutOfMemoryError: Java heap space (2 GB heap)."""
    batch = [prefix + varint(n) + b"abc" for prefix in WIDE_PREFIXES
             for n in (1_900_000_000, 1_500_000_000, 1_000_000_000, 600_000_000, avro_limits.max_value_bytes() + 1)]
    assert decode(spark, WIDE, batch) == [True] * len(batch)
    assert spark.range(10).agg(F.sum("id")).first()[0] == 45


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batch=values)
def test_arbitrary_bytes_never_stop_the_decoder(spark, batch):
    """Every value fastavro cannot read is malformed for from_avro too, every crafted huge length
    is malformed, and the JVM answers afterwards."""
    for schema, malformed in zip((WIDE, FLAT), decode(spark, WIDE, batch, FLAT)):
        assert len(malformed) == len(batch)
        for value, bad in zip(batch, malformed):
            if fastavro_rejects(schema, value):
                assert bad, (schema.name, value)
    assert spark.range(3).count() == 3


def test_a_valid_value_at_the_ceiling_decodes_and_one_above_is_malformed(spark):
    limit = avro_limits.max_value_bytes()
    at = varint(limit) + b"x" * limit + varint(0) + varint(0) + varint(0) + varint(0) + varint(0) + varint(0)
    above = varint(limit + 1) + b"x" * (limit + 1) + at[len(varint(limit)) + limit:]
    assert not fastavro_rejects(WIDE, at) and not fastavro_rejects(WIDE, above)
    assert decode(spark, WIDE, [at, above]) == [False, True]


def test_the_dead_letter_scans_filter_decodes_a_value_twice_not_once_per_field(spark):
    """The dead-letter scan (deadletter.DeadLetterWriter.scan) filters decode_value's output on
    MALFORMED with nothing in between, so Spark's optimizer inlines from_avro into the filter once
    per reference. The check reads one field that cannot be null (WIDE's `s`): two copies, where
    checking every field for null made seven (one per field, one for the record)."""
    df = spark.createDataFrame([(0, bytearray(varint(1) + b"a"))], "i int, value binary")
    scan = decode_value(df, WIDE, permissive=True).where(F.col(MALFORMED)).drop(RECORD, MALFORMED)
    plan = scan._jdf.queryExecution().optimizedPlan().toString()  # noqa: SLF001
    assert plan.count("from_avro(") == 2
    assert [r.i for r in scan.collect()] == [0]  # a truncated value: malformed, found by the scan
