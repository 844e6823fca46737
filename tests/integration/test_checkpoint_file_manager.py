"""The local checkpoint file manager (jvm/streamlets-checkpoint, streamlets.runtime.checkpoint_file_manager) on
Spark 4.2: every session uses it for local folders; it keeps the contract Spark's logs and state
stores rely on (a file appears whole on close or not at all; a file that exists is not replaced
unless asked, with Hadoop's FileAlreadyExistsException; a cancelled file leaves nothing); a
stateful query on it stops and continues from its checkpoint with the batch computation's
answer; and its micro-batches start no process, where Spark's default manager starts `chmod`
for every file it writes (bench/bench_checkpoint_writes.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

from streamlets.runtime.checkpoint_file_manager import FILE_MANAGER_CLASS, FILE_MANAGER_CONF

pytestmark = pytest.mark.timeout(600)


def _path(spark, p: Path):
    return spark._jvm.org.apache.hadoop.fs.Path(str(p))


def _manager(spark, folder: Path):
    return spark._jvm.streamlets.checkpoint.LocalCheckpointFileManager(_path(spark, folder),
                                                                       spark._jsc.hadoopConfiguration())


def _write(manager, spark, p: Path, data: bytes, overwrite: bool = False) -> None:
    out = manager.createAtomic(_path(spark, p), overwrite)
    out.write(bytearray(data))
    out.close()


def test_every_session_uses_it(spark):
    assert spark.conf.get(FILE_MANAGER_CONF) == FILE_MANAGER_CLASS


def test_files_appear_whole_and_are_not_replaced_unless_asked(spark, tmp_path):
    manager = _manager(spark, tmp_path)
    log = tmp_path / "offsets"
    out = manager.createAtomic(_path(spark, log / "0"), False)
    out.write(bytearray(b"first"))
    assert not (log / "0").exists()  # nothing under the final name before close
    out.close()
    assert (log / "0").read_bytes() == b"first"

    again = manager.createAtomic(_path(spark, log / "0"), False)
    again.write(bytearray(b"second"))
    with pytest.raises(Py4JJavaError) as refused:
        again.close()
    assert refused.value.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert (log / "0").read_bytes() == b"first"
    assert sorted(os.listdir(log)) == ["0"]  # no temporary file left behind

    (log / ".0.crc").write_bytes(b"a checksum of Spark's default manager, for other bytes")
    _write(manager, spark, log / "0", b"third", overwrite=True)
    assert sorted(os.listdir(log)) == ["0"]  # the stale checksum file went with the old content
    stream = manager.open(_path(spark, log / "0"))  # through Hadoop's checksummed local file system
    assert bytes(stream.readAllBytes()) == b"third"
    stream.close()

    cancelled = manager.createAtomic(_path(spark, log / "1"), False)
    cancelled.write(bytearray(b"never"))
    cancelled.cancel()
    assert sorted(os.listdir(log)) == ["0"]
    assert not manager.exists(_path(spark, log / "1"))

    _write(manager, spark, log / "2", b"x")
    assert sorted(s.getPath().getName() for s in manager.list(_path(spark, log))) == ["0", "2"]
    manager.delete(_path(spark, log / "2"))
    assert sorted(os.listdir(log)) == ["0"]
    assert list(manager.list(_path(spark, tmp_path / "missing"))) == []


def _children_cpu_seconds(pid: int) -> float:
    """CPU seconds of the processes `pid` started and waited for (cutime + cstime, /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _counts(spark, source: Path, checkpoint: Path) -> dict[str, int]:
    """Run the stateful query (a count per key over the JSON files in `source`, one file per
    micro-batch) to the end of its input (Trigger.AvailableNow); its last complete result."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("k", StringType()), StructField("v", LongType())])
    seen: dict[str, int] = {}

    def keep(batch, _batch_id) -> None:
        seen.clear()
        seen.update({r["k"]: r["n"] for r in batch.collect()})

    counts = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
              .groupBy("k").count().withColumnRenamed("count", "n"))
    query = (counts.writeStream.outputMode("complete").foreachBatch(keep)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return dict(seen)


def test_a_stateful_query_continues_from_its_checkpoint_and_starts_no_process(spark, tmp_path):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    rows = [{"k": f"k{i % 3}", "v": i} for i in range(30)]
    for f in range(3):
        (source / f"{f}.json").write_text("\n".join(json.dumps(r) for r in rows[f * 5:(f + 1) * 5]) + "\n")
    first = _counts(spark, source, checkpoint)
    assert first == {"k0": 5, "k1": 5, "k2": 5}

    for f in range(3, 6):
        (source / f"{f}.json").write_text("\n".join(json.dumps(r) for r in rows[f * 5:(f + 1) * 5]) + "\n")
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    before = _children_cpu_seconds(pid)
    second = _counts(spark, source, checkpoint)  # three more micro-batches, from the checkpoint's state
    children = _children_cpu_seconds(pid) - before
    expected: dict[str, int] = {}
    for r in rows:
        expected[r["k"]] = expected.get(r["k"], 0) + 1
    assert second == expected

    offsets = checkpoint / "offsets"
    assert sorted(int(n) for n in os.listdir(offsets)) == list(range(6))  # no .crc files: written by ours
    assert not [p for p in checkpoint.rglob("*") if p.name.endswith(".crc") or p.name.endswith(".tmp")]
    assert list((checkpoint / "state").rglob("*.delta"))  # the state store's files, through ours too
    # Spark's default manager starts chmod twice per file: about 20 ms of CPU in those processes
    # per file here, over 0.3 s for these three batches' dozen files
    assert children < 0.1, f"the JVM's child processes used {children:.2f} CPU seconds"
