"""The test kit on real local Spark: rows in, Avro through from_avro/to_avro, rows out."""

import pytest
from pyspark.sql import functions as F

from streamlets import (
    AvroInlet,
    AvroOutlet,
    ConfigError,
    IntegerParameter,
    RegExpParameter,
    SchemaMismatchError,
    Streamlet,
)
from streamlets.testkit import run_streamlet

READING = {"type": "record", "name": "Reading", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "sensor", "type": "string"},
    {"name": "value", "type": "double"}, {"name": "note", "type": ["null", "string"], "default": None}]}
LABELLED = {"type": "record", "name": "Labelled", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "label", "type": "string"}, {"name": "scaled", "type": "long"}]}

SEEN: dict = {}

class Scale(Streamlet):
    """Doubles `value` and upper-cases `sensor`."""

    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", READING, key="sensor")

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("value", F.col("value") * 2).withColumn("sensor", F.upper("sensor")), self.out)


class ScaleUnkeyed(Scale):
    out = AvroOutlet("out", READING)  # same port, no partition key


class Label(Streamlet):
    """Labels records with a configured prefix and multiplies ids by a configured factor."""

    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", LABELLED, key=["id", "label"])
    prefix = RegExpParameter("prefix", "label prefix", pattern="[a-z]+-", default="x-")
    factor = IntegerParameter("factor", "id multiplier", default=1)

    def create_logic(self, ctx):
        SEEN["config"] = dict(ctx.config)  # create_logic runs on the driver, in this process
        df = ctx.read_stream(self.inlet)
        out = df.select("id", F.concat(F.lit(ctx.config[self.prefix]), F.col("sensor")).alias("label"),
                        (F.col("id") * ctx.config[self.factor]).alias("scaled"), F.lit("extra").alias("ignored"))
        ctx.write_stream(out, self.out)


class MissingField(Streamlet):
    """Forgets the `value` column of its outlet's schema."""

    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", READING)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet).drop("value"), self.out)


def reading(i: int, note=None) -> dict:
    return {"id": i, "sensor": f"s{i % 3}", "value": i / 4, "note": note}


def test_mapping_streamlet_two_batches_unkeyed(spark, tmp_path):
    batches = [{"in": [reading(i, "n") for i in range(5)]}, {"in": [reading(i) for i in range(5, 12)]}]
    result = run_streamlet(ScaleUnkeyed, batches, spark=spark, workdir=tmp_path)
    expected = [dict(r, value=r["value"] * 2, sensor=r["sensor"].upper()) for b in batches for r in b["in"]]
    assert sorted(result["out"], key=lambda r: r["id"]) == expected
    assert result.keys["out"] == [None] * 12


def test_mapping_streamlet_two_batches(spark, tmp_path):
    batches = [{"in": [reading(i, "n") for i in range(5)]}, {"in": [reading(i) for i in range(5, 12)]}]
    result = run_streamlet(Scale, batches, spark=spark, workdir=tmp_path)
    expected = [dict(r, value=r["value"] * 2, sensor=r["sensor"].upper()) for b in batches for r in b["in"]]
    assert sorted(result["out"], key=lambda r: r["id"]) == expected
    # keys are the partition key field, as text; paired with the record they came from
    keyed = sorted(zip(result.keys["out"], result["out"]), key=lambda kr: kr[1]["id"])
    assert [k for k, _ in keyed] == [r["sensor"] for r in expected]
    # (result.progress is not checked: StreamletRuntime.stop() may drop the last progress event,
    # see test_sdk_kafka.py::test_stop_right_after_the_last_batch_still_scans_it)


def test_typed_config_values(spark, tmp_path):
    result = run_streamlet(Label, {"in": [reading(1), reading(2)]}, config={"prefix": "ab-", "factor": "10"},
                           spark=spark, workdir=tmp_path)
    assert SEEN["config"] == {"prefix": "ab-", "factor": 10}
    assert type(SEEN["config"]["factor"]) is int
    assert sorted(result["out"], key=lambda r: r["id"]) == [
        {"id": 1, "label": "ab-s1", "scaled": 10}, {"id": 2, "label": "ab-s2", "scaled": 20}]
    assert sorted(result.keys["out"]) == ["1|ab-s1", "2|ab-s2"]  # composite keys joined with '|'


def test_config_defaults(spark, tmp_path):
    result = run_streamlet(Label, {"in": [reading(3)]}, spark=spark, workdir=tmp_path / "a")
    assert result["out"] == [{"id": 3, "label": "x-s0", "scaled": 3}]


def test_bad_config_value_fails_before_any_query(spark, tmp_path):
    with pytest.raises(ConfigError, match=r"streamlet 'under-test': config parameter 'prefix' .*does not match"):
        run_streamlet(Label, {"in": [reading(3)]}, config={"prefix": "NO"}, spark=spark, workdir=tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_outlet_missing_a_schema_field(spark, tmp_path):
    with pytest.raises(SchemaMismatchError) as e:
        run_streamlet(MissingField, {"in": [reading(1)]}, spark=spark, workdir=tmp_path, name="forgetful")
    message = str(e.value)
    assert "streamlet 'forgetful'" in message and "outlet 'out'" in message
    assert "lacks column(s) value of test.sdk.Reading" in message
    # raised while building the query: nothing was started, nothing written
    assert not (tmp_path / "checkpoints" / "out").exists()
    assert not (tmp_path / "topics" / "out").exists()


def test_unknown_inlet_in_inputs(spark, tmp_path):
    with pytest.raises(ValueError, match="has no inlet"):
        run_streamlet(Scale, {"nope": [reading(1)]}, spark=spark, workdir=tmp_path)


# --- what the test kit raises: what its docstring says, first line first (issue 27, items 4 and 6) ---

FLIGHT = {"type": "record", "name": "Flight", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "arr_delay", "type": ["null", "double"], "default": None}]}
ARRIVED = {"type": "record", "name": "Arrived", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "arr_delay", "type": "double"}]}


class Arrivals(Streamlet):
    """Passes flights on to an outlet whose arr_delay is not nullable: a cancelled flight's null
    cannot be written."""

    inlet = AvroInlet("in", FLIGHT)
    out = AvroOutlet("out", ARRIVED)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet), self.out)


def check_delay(delay):
    """A module-level UDF: Spark's Python workers import this test module to run it (the test
    kit's session gives them the driver's sys.path, where pytest put the tests' folder)."""
    if delay is not None and delay > 600:
        raise ValueError(f"implausible delay {delay}")
    return delay


class Plausible(Streamlet):
    """A Python UDF that raises on one record."""

    inlet = AvroInlet("in", FLIGHT)
    out = AvroOutlet("out", FLIGHT)

    def create_logic(self, ctx):
        check = F.udf(check_delay, "double")
        ctx.write_stream(ctx.read_stream(self.inlet).withColumn("arr_delay", check("arr_delay")), self.out)


def test_a_null_in_a_non_null_outlet_field_names_the_streamlet_query_field_and_fix(spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    from streamlets.errors import StreamletRunError

    with pytest.raises(StreamletRunError) as e:
        run_streamlet(Arrivals, {"in": [{"id": 1, "arr_delay": 5.0}, {"id": 2, "arr_delay": None}]}, spark=spark,
                      workdir=tmp_path)
    message = str(e.value)
    assert "\n" not in message, message  # one line, what matters first
    assert message.startswith("streamlet Arrivals, query out: AVRO_CANNOT_WRITE_NULL_FIELD: a record written to an outlet "
                              "has null in field 'arr_delay', which the outlet's schema declares non-null (double): "
                              'make it nullable in the .avsc (["null", "double"] with "default": null) or filter the nulls'), message
    assert "avroSchema" not in message  # Spark's hint does not apply to an outlet
    assert isinstance(e.value, RuntimeError) and isinstance(e.value.__cause__, StreamingQueryException)
    assert (e.value.streamlet, e.value.query) == ("Arrivals", "out")
    # Spark's warning that every correct application printed (non-nullable Avro, nullable column) is off
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.LogManager.getLogger("org.apache.spark.sql.avro.AvroSerializer").getLevel()
    assert str(level) == "ERROR"


def test_a_user_exception_names_the_users_file_and_line(spark, tmp_path):
    from streamlets.errors import StreamletRunError

    with pytest.raises(StreamletRunError) as e:
        run_streamlet(Plausible, {"in": [{"id": 1, "arr_delay": 5.0}, {"id": 2, "arr_delay": 900.0}]}, spark=spark,
                      workdir=tmp_path)
    message = str(e.value)
    assert "\n" not in message and message.startswith("streamlet Plausible, query out: ValueError: implausible delay 900.0 (at "), message
    assert "test_sdk_testkit.py:" in message and "in check_delay)" in message


def test_a_row_that_does_not_fit_its_inlet_is_a_value_error_naming_inlet_batch_row_and_field(spark, tmp_path):
    with pytest.raises(ValueError) as e:
        run_streamlet(Arrivals, [{"in": [{"id": 1, "arr_delay": 1.0}]}, {"in": [{"id": 2}, {"id": "three"}]}],
                      spark=spark, workdir=tmp_path)
    message = str(e.value)
    assert message.startswith("inlet 'in', batch 1, row 1: the row does not fit the inlet's schema:"), message
    assert "on field id" in message and "'three'" in message
    assert type(e.value) is ValueError  # not fastavro's TypeError


def test_json_lines_egress_writes_instants_in_utc_and_local_timestamps_as_they_are(spark, tmp_path):
    """streamlets.files.JsonLinesEgress: a timestamp leaves the JVM as epoch microseconds (exact,
    whatever the session's or Python's time zone) and is written as ISO 8601 UTC; a local
    timestamp (TIMESTAMP_NTZ) has no zone and is written as its text."""
    from datetime import datetime, timezone

    from streamlets import AvroInlet, VolumeMount
    from streamlets.files import JsonLinesEgress

    schema = {"type": "record", "name": "Moment", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "n", "type": "long"}]}

    class Moments(JsonLinesEgress):
        inlet = AvroInlet("in", schema)
        output = VolumeMount("output", "/mnt/out")
        subfolder = "moments"

    row = {"at": datetime(2013, 1, 1, 10, 0, 0, 5, tzinfo=timezone.utc), "local": datetime(2013, 1, 1, 5, 30), "n": 1}
    run_streamlet(Moments, [{"in": [row]}, {"in": []}], volume_mounts={"output": str(tmp_path)}, spark=spark)
    files = sorted((tmp_path / "moments").iterdir())
    assert [f.name for f in files] == ["batch-00000000.jsonl"]  # an empty batch writes no file
    assert files[0].read_text() == '{"at":"2013-01-01T10:00:00.000005Z","local":"2013-01-01T05:30:00.000000","n":1}\n'
