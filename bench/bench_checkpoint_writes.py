"""Benchmark: what one checkpoint file write costs on the local file system, per Spark checkpoint
file manager.

    python bench/bench_checkpoint_writes.py [--writes 200] [--rounds 3] [--bytes 400]

Every micro-batch of a streaming query writes two small files to its checkpoint before its
output is final: the offsets log entry (`offsets/<batch>`, Spark's `walCommit` duration) and the
commit log entry (`commits/<batch>`, `commitOffsets`); a stateful query also writes its state
store's files. Spark writes each through a CheckpointFileManager's `createAtomic` (a temporary
file renamed into place on close). The managers timed here, each on a fresh folder under /tmp:

- filecontext: `FileContextBasedCheckpointFileManager`, what Spark uses for `file:` paths by
  default (`CheckpointFileManager.create`, no `spark.sql.streaming.checkpointFileManagerClass`
  set). The baseline.
- filesystem: `FileSystemBasedCheckpointFileManager`, Spark's fallback for file systems without
  Hadoop's FileContext API.
- streamlets: `streamlets.checkpoint.LocalCheckpointFileManager` (jvm/streamlets-checkpoint), what
  every session of ours uses for local folders (streamlets.runtime.checkpoint): java.nio, no process.
- python: the same write and rename from this Python process (`os.write`, `os.rename`), no JVM:
  what the file system itself costs.

Per manager and round: milliseconds per `createAtomic` + write of --bytes + close, and the CPU
seconds of processes the JVM started and waited for per write (its `cutime` + `cstime` in
/proc/<pid>/stat): Hadoop's local file system sets each new file's permissions by starting
`chmod` when its native library (libhadoop) is not loaded, which PySpark does not ship. The
ratio printed is filecontext's median ms over each manager's. Results go to
bench/results/checkpoint_writes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from streamlets.runtime.checkpoint_file_manager import FILE_MANAGER_CLASS, file_manager_jar  # noqa: E402

SPARK = "org.apache.spark.sql.execution.streaming.checkpointing."
MANAGERS = {
    "filecontext": SPARK + "FileContextBasedCheckpointFileManager",
    "filesystem": SPARK + "FileSystemBasedCheckpointFileManager",
    "streamlets": FILE_MANAGER_CLASS,
}
VARIANTS = [*MANAGERS, "python"]


def children_cpu_seconds(pid: int) -> float:
    """CPU seconds of the waited-for children of `pid` (cutime + cstime, /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def time_manager(spark, cls: str, folder: Path, writes: int, data: bytes) -> dict[str, float]:
    """ms per createAtomic + write + close through Spark's manager `cls`, and the JVM's child
    CPU seconds per write."""
    jvm = spark._jvm
    root = jvm.org.apache.hadoop.fs.Path(str(folder))
    constructor = jvm
    for part in cls.split("."):  # py4j's view of the class, package by package
        constructor = getattr(constructor, part)
    manager = constructor(root, spark._jsc.hadoopConfiguration())
    manager.mkdirs(root)
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    payload = bytearray(data)
    child0 = children_cpu_seconds(pid)
    t0 = time.perf_counter()
    for i in range(writes):
        out = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(root, str(i)), False)
        out.write(payload)
        out.close()
    ms = (time.perf_counter() - t0) / writes * 1000
    return {"ms": ms, "child_cpu_ms": (children_cpu_seconds(pid) - child0) / writes * 1000}


def time_python(folder: Path, writes: int, data: bytes) -> dict[str, float]:
    """ms per write of a temporary file and its rename into place, from this process."""
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    for i in range(writes):
        tmp = folder / f".{i}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, folder / str(i))
    return {"ms": (time.perf_counter() - t0) / writes * 1000, "child_cpu_ms": 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bench_checkpoint_writes.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=200, help="files written per manager and round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each times every manager once (default 3)")
    parser.add_argument("--bytes", type=int, default=400, help="bytes per file (default 400: an offsets log entry "
                        "of a query with one Kafka source of two partitions is about that)")
    parser.add_argument("--output", default=str(HERE / "results" / "checkpoint_writes.json"))
    args = parser.parse_args(argv)
    if args.writes <= 0 or args.rounds <= 0 or args.bytes < 0:
        print("error: --writes and --rounds must be positive, --bytes not negative", file=sys.stderr)
        return 2

    from pyspark.sql import SparkSession

    jar = file_manager_jar()
    if jar is None:
        print("error: the streamlets-checkpoint jar cannot be built here (no javac)", file=sys.stderr)
        return 2
    # Spark's defaults otherwise (not build_spark_session's): only the managers differ
    spark = (SparkSession.builder.master("local[1]").appName("bench-checkpoint-writes")
             .config("spark.ui.enabled", "false").config("spark.jars", str(jar)).getOrCreate())
    native = bool(spark._jvm.org.apache.hadoop.util.NativeCodeLoader.isNativeCodeLoaded())
    data = b"x" * args.bytes
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
        for rnd in range(args.rounds):
            row: dict[str, Any] = {"round": rnd + 1}
            for name in VARIANTS[rnd % len(VARIANTS):] + VARIANTS[:rnd % len(VARIANTS)]:
                folder = Path(tmp) / f"{name}-{rnd}"
                if name == "python":
                    row[name] = time_python(folder, args.writes, data)
                else:
                    row[name] = time_manager(spark, MANAGERS[name], folder, args.writes, data)
                shutil.rmtree(folder, ignore_errors=True)
                print(f"  round {rnd + 1} {name:<12} {row[name]['ms']:8.2f} ms per write  "
                      f"child processes' CPU {row[name]['child_cpu_ms']:6.2f} ms per write", flush=True)
            runs.append(row)
    spark.stop()

    median = {name: statistics.median(r[name]["ms"] for r in runs) for name in VARIANTS}
    result = {
        "benchmark": "checkpoint_writes",
        "writes": args.writes,
        "rounds": args.rounds,
        "bytes": args.bytes,
        "native_hadoop": native,
        "machine": {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
        "runs": runs,
        "median_ms": median,
        "ratio": {name: median["filecontext"] / median[name] for name in VARIANTS},
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\ncheckpoint writes: {args.writes} files of {args.bytes} bytes per round, {args.rounds} rounds, "
          f"libhadoop {'loaded' if native else 'not loaded'}")
    for name in VARIANTS:
        print(f"  {name:<12} median {median[name]:8.3f} ms per write   filecontext / {name}: "
              f"{result['ratio'][name]:7.1f}")
    print(f"results written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
