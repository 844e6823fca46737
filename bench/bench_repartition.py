"""Benchmark: offline state repartitioning time against state size.

    python bench/bench_repartition.py [--keys 10000,100000,1000000] [--rounds 3] [--batches 3] [--to 8]

For each size, the checkpoint of bench_savepoint.py (`groupBy(k).agg(count, sum)`, HDFS-backed
state store, 4 state partitions, `keys` state rows) is built once. Each round works on a fresh
copy of it (not timed) and times:

- repartition: `streamlets.state.repartition.repartition_checkpoint` from 4 to `--to` partitions
  (the placement check, the state read, the JVM writer, the copy and swap);
- baseline, in the same run: the Parquet state export of the same checkpoint
  (`streamlets.state.export.export_state`), i.e. reading the same state with Spark's state data
  source and writing it once - what the export-and-import alternative starts with.

Each round also checks that the new state is complete and placed by `pmod(hash(key), to)`.
Printed per size: medians, rows per second and the ratio repartition/export.
Results: bench/results/repartition.json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_savepoint import build_checkpoint, size_of, timed, write_results  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="10000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--to", type=int, default=8, help="the new number of state partitions (from 4)")
    args = parser.parse_args(argv)

    from streamlets.state.repartition import repartition_checkpoint
    from streamlets.runtime.spark_session import build_spark_session
    from streamlets.state.export import export_state

    spark = build_spark_session("bench-repartition", {"spark.sql.shuffle.partitions": "4"}, master="local[2]")
    results = []
    print(f"{'state rows':>10} {'MB':>7} {'repartition s':>14} {'export s':>9} {'ratio':>6} {'rows/s':>10}", flush=True)
    for keys in (int(k) for k in args.keys.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            original = build_checkpoint(spark, tmp, keys, args.batches)
            mb, _ = size_of(original)
            rep_s, export_s = [], []
            for rnd in range(args.rounds):
                work = tmp / f"round-{rnd}" / "out"
                shutil.copytree(original, work)
                result = {}
                rep_s.append(timed(lambda: result.update(
                    r=repartition_checkpoint(spark, work, args.to, keep_previous=False))))
                if result["r"].rows != {"0/default": keys}:
                    raise SystemExit(f"repartitioned {result['r'].rows} rows, not {keys}")
                state = spark.read.format("statestore").load(str(work))
                misplaced = state.where(f"pmod(hash(key), {args.to}) != partition_id").count()
                if state.count() != keys or misplaced:
                    raise SystemExit(f"after repartitioning: {state.count()} rows, {misplaced} misplaced")
                export_s.append(timed(lambda: export_state(spark, str(original), str(tmp / f"export-{rnd}"), "parquet")))
            r, e = statistics.median(rep_s), statistics.median(export_s)
            results.append({"keys": keys, "checkpoint_mb": mb, "to_partitions": args.to,
                            "repartition_seconds": rep_s, "export_seconds": export_s})
            print(f"{keys:>10,} {mb:>7.1f} {r:>14.2f} {e:>9.2f} {r / e:>6.2f} {keys / r:>10,.0f}", flush=True)
    spark.stop()
    write_results("repartition", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
