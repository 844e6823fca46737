"""A small application for sandbox tests: JSON-lines files -> doubled numbers -> JSON files."""

import json
import os

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet, VolumeMount

NUMBER = {
    "type": "record", "name": "Number", "namespace": "test.numbers",
    "fields": [{"name": "id", "type": "long"}, {"name": "value", "type": "long"}, {"name": "group", "type": "string"}],
}


class NumberIngress(Streamlet):
    """Reads JSON lines {"id", "value", "group"} from files in the `source` mount."""

    out = AvroOutlet("out", NUMBER, key="group")
    source = VolumeMount("source", "/mnt/numbers", "ReadOnlyMany")

    def create_logic(self, ctx):
        df = (ctx.spark.readStream.schema("id long, value long, group string")
              .option("maxFilesPerTrigger", 1).json(str(ctx.mounted_path(self.source))))
        ctx.write_stream(df, self.out)


class PoisonNumber(ValueError):
    """What the multiplier's Python UDF raises for the `poison-id` record."""


def check_number(number_id: int, poison: int) -> int:
    if number_id == poison:
        raise PoisonNumber(f"cannot multiply number {number_id}")
    return number_id


class Multiplier(Streamlet):
    """Multiplies `value` by the `factor` config parameter; with `poison-id`, its records pass a
    Python UDF that raises on that id (a poison record; Spark's workers import this module)."""

    inlet = AvroInlet("in", NUMBER)
    out = AvroOutlet("out", NUMBER, key="group")
    factor = IntegerParameter("factor", "the multiplier", default=2)
    poison = IntegerParameter("poison-id", "the id the logic fails on (-1: none)", default=-1)

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        poison = ctx.config[self.poison]
        if poison >= 0:
            check = F.udf(lambda i: check_number(i, poison), "long")
            df = df.withColumn("id", check("id"))
        ctx.write_stream(df.withColumn("value", F.col("value") * ctx.config[self.factor]), self.out)


class NumberFiles(Streamlet):
    """Writes each micro-batch as JSON lines `batch-<id>.jsonl` in the `output` mount."""

    inlet = AvroInlet("in", NUMBER)
    output = VolumeMount("output", "/mnt/output")

    def create_logic(self, ctx):
        folder = ctx.mounted_path(self.output)

        def write(batch, batch_id):
            rows = [r.asDict() for r in batch.collect()]
            tmp = folder / f".batch-{batch_id:08d}.tmp"
            tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
            os.replace(tmp, folder / f"batch-{batch_id:08d}.jsonl")

        ctx.start_query(ctx.read_stream(self.inlet).writeStream.foreachBatch(write), "files")
