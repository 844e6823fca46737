"""The file-counting streamlet of the savepoint and control-stream tests (tests/integration): rows
(k, v) of the CSV files on its `source` volume, one file per micro-batch -> count and sum per k."""

from __future__ import annotations

import os
from pathlib import Path

from streamlets import AvroOutlet, Streamlet, VolumeMount
from streamlets.runtime.runconfig import StreamletRunConfig

SCHEMA = {"type": "record", "name": "Count", "namespace": "test.sp",
          "fields": [{"name": "k", "type": "string"}, {"name": "n", "type": "long"}, {"name": "s", "type": "long"}]}


class Counts(Streamlet):
    """Rows (k, v) of the CSV files on `source`, one file per micro-batch -> count and sum per k."""

    source = VolumeMount("source", "/mnt/in")
    outlet = AvroOutlet("out", SCHEMA, key="k")

    def aggregate(self, df):
        from pyspark.sql import functions as F

        return df.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))

    def create_logic(self, ctx) -> None:
        df = (ctx.spark.readStream.schema("k STRING, v INT").option("header", True).option("maxFilesPerTrigger", 1)
              .csv(str(ctx.mounted_path(self.source))))
        ctx.write_stream(self.aggregate(df), self.outlet, output_mode="update")


def write_file(folder: Path, i: int) -> None:
    """File `i` (f<i>.csv): one row per key a, b, c, d with v = i * 10 + its index."""
    path = folder / f"f{i:02d}.csv"
    path.write_text("k,v\n" + "".join(f"{k},{i * 10 + j}\n" for j, k in enumerate("abcd")))
    os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes the oldest first


def expected(files: int) -> dict[str, tuple[int, int]]:
    """Key -> (count, sum) after files 0 .. files - 1."""
    return {k: (files, sum(i * 10 + j for i in range(files))) for j, k in enumerate("abcd")}


def state_rows(spark, checkpoint: str) -> dict[str, tuple[int, int]]:
    """Key -> (count, sum) in the aggregation's state store under `checkpoint`."""
    rows = spark.read.format("statestore").load(checkpoint).collect()
    return {r.key.k: (r.value["count"], r.value["sum"]) for r in rows}


def run_config(root: Path, name: str, source: Path, app: str = "app", **kw) -> StreamletRunConfig:
    """Streamlet `name` of `app` reading `source`, checkpoints under `root/ck/app/name`."""
    return StreamletRunConfig(app_id=app, streamlet=name, class_name="x.Counts", checkpoint_root=str(root / "ck" / app / name),
                              volume_mounts={"source": str(source)}, topics={"out": f"{app}.counts"},
                              spark_conf={"spark.sql.shuffle.partitions": "3"}, **kw)
