"""Benchmark: savepoint time and state export rows per second against state size.

    python bench/bench_savepoint.py [--keys 10000,100000,1000000] [--rounds 3] [--batches 3]

For each size, a stateful query (`groupBy(k).agg(count, sum)`, HDFS-backed state store, 4 state
partitions) runs `--batches` micro-batches over Parquet files of `keys` distinct keys each (the
same keys every batch, so the state holds `keys` rows and a delta file per batch and partition).
Timed on its checkpoint:

- savepoint: `streamlets.state.savepoint.take_savepoint` (list, filter the committed prefix, copy,
  manifest);
- baseline, in the same run: a plain copy of the whole checkpoint folder (`shutil.copytree`);
- export: `streamlets.state.export.export_state` as JSON Lines and as Parquet (Spark's state
  data source; the session is warm), in state rows per second.

Printed per size: checkpoint MB and files, medians of each, the ratio savepoint/copy.
Results: bench/results/savepoint.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlets import AvroInlet, Streamlet  # noqa: E402


class Aggregate(Streamlet):
    """Stand-in for the manifest's class fields (code version, fingerprints)."""

    inlet = AvroInlet("in", {"type": "record", "name": "R", "fields": [{"name": "k", "type": "long"}]})

    def create_logic(self, ctx) -> None:  # the benchmark builds its query by hand
        pass


def build_checkpoint(spark, folder: Path, keys: int, batches: int) -> Path:
    from pyspark.sql import functions as F

    data = folder / "data"
    for b in range(batches):
        spark.range(keys).select(F.col("id").alias("k"), (F.col("id") % 97 + b).alias("v")) \
            .coalesce(1).write.parquet(str(data / f"b{b}"))
    src = spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1).parquet(str(data / "*"))
    checkpoint = folder / "checkpoints" / "out"
    q = (src.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s")).writeStream.format("noop")
         .outputMode("update").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination()
    return checkpoint


def size_of(folder: Path) -> tuple[float, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6, len(files)


def write_results(name: str, results: list[dict]) -> None:
    """bench/results/<name>.json"""
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="10000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args(argv)

    from streamlets.state.savepoint import take_savepoint
    from streamlets.runtime.spark_session import build_spark_session
    from streamlets.state.export import export_state

    spark = build_spark_session("bench-savepoint", {"spark.sql.shuffle.partitions": "4"}, master="local[2]")
    results = []
    print(f"{'state rows':>10} {'MB':>7} {'files':>6} {'savepoint s':>12} {'copy s':>8} {'ratio':>6} "
          f"{'jsonl rows/s':>13} {'parquet rows/s':>15}", flush=True)
    for keys in (int(k) for k in args.keys.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            checkpoint = build_checkpoint(spark, tmp, keys, args.batches)
            mb, files = size_of(checkpoint)
            sp_s, copy_s, jsonl_rps, parquet_rps = [], [], [], []
            for rnd in range(args.rounds):
                copy_s.append(timed(lambda: shutil.copytree(checkpoint, tmp / f"copy-{rnd}")))
                sp_s.append(timed(lambda: take_savepoint(str(checkpoint.parent), str(tmp / "savepoints"), app_id="bench",
                                                         streamlet="agg", cls=Aggregate, reason="bench")))
                for fmt, out in (("jsonl", jsonl_rps), ("parquet", parquet_rps)):
                    manifest = {}
                    seconds = timed(lambda: manifest.update(export_state(spark, str(checkpoint), str(tmp / f"{fmt}-{rnd}"), fmt)))
                    rows = sum(op["rows"] for op in manifest["operators"])
                    if rows != keys:
                        raise SystemExit(f"export of {keys} keys wrote {rows} rows")
                    out.append(rows / seconds)
            row = {"keys": keys, "checkpoint_mb": mb, "files": files, "savepoint_seconds": sp_s, "copy_seconds": copy_s,
                   "jsonl_rows_per_second": jsonl_rps, "parquet_rows_per_second": parquet_rps}
            results.append(row)
            s, c = statistics.median(sp_s), statistics.median(copy_s)
            print(f"{keys:>10,} {mb:>7.1f} {files:>6} {s:>12.3f} {c:>8.3f} {s / c:>6.2f} "
                  f"{statistics.median(jsonl_rps):>13,.0f} {statistics.median(parquet_rps):>15,.0f}", flush=True)
    spark.stop()
    write_results("savepoint", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
