"""A schema registry application for tests/integration/test_schema_registry.py: readings written
by another team's producer (Confluent's AvroSerializer, two schema versions) -> scaled readings
read by another team's consumer (Confluent's AvroDeserializer)."""

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet

# What the inlet reads: v1 of the producer lacks `unit` (its default fills it), v2 adds `note`
# (dropped by resolution).
READING = {"type": "record", "name": "Reading", "namespace": "test.registry", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "double"},
    {"name": "unit", "type": "string", "default": "m"}]}
SCALED = {"type": "record", "name": "Scaled", "namespace": "test.registry", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "double"}, {"name": "unit", "type": "string"}]}
# A change of the outlet that BACKWARD compatibility forbids: a new field without a default.
SCALED_V2 = {"type": "record", "name": "Scaled", "namespace": "test.registry", "fields": [
    *SCALED["fields"], {"name": "quality", "type": "int"}]}
# An inlet that cannot read the producer's first version: `unit` without a default.
READING_STRICT = {**READING, "fields": [*READING["fields"][:2], {"name": "unit", "type": "string"}]}


class Scale(Streamlet):
    """Doubles each reading's value."""

    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", SCALED, key="id")

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("value", F.col("value") * 2), self.out)


class ScaleV2(Scale):
    """Scale with an outlet change BACKWARD forbids."""

    out = AvroOutlet("out", SCALED_V2, key="id")

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("value", F.col("value") * 2).withColumn("quality", F.lit(1)), self.out)


class StrictScale(Scale):
    """Scale whose inlet cannot read the producer's first version."""

    inlet = AvroInlet("in", READING_STRICT)
