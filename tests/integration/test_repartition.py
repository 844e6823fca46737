"""Offline state repartitioning (streamlets.state.repartition) on real Spark checkpoints.

Queries read Parquet files (one folder per step) with trigger availableNow; after each
repartition the query continues on new input, and its output is compared with a batch
computation over all input. Spark's `statestore` reader then shows every key where
`pmod(hash(key), partitions)` puts it, in exactly the new number of partitions.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streamlets.state.repartition import RepartitionError, repartition_checkpoint

SCHEMA = "k BIGINT, s STRING, v BIGINT, ts TIMESTAMP"


@pytest.fixture
def partitions(spark):
    """Set the session's shuffle partitions for a query's first batch; restored afterwards."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    yield lambda n: spark.conf.set("spark.sql.shuffle.partitions", str(n))
    spark.conf.set("spark.sql.shuffle.partitions", before)


def _add_input(spark, folder: Path, step: int, start: int, count: int) -> None:
    (spark.range(start, start + count)
     .selectExpr("id % 997 AS k", "CAST(id % 3 AS STRING) AS s", "id AS v",
                 "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts")
     .write.parquet(str(folder / f"step={step}")))


def _aggregate(df):
    return df.groupBy("k", "s").agg(F.sum("v").alias("total"), F.count("*").alias("n"), F.avg("v").alias("mean"))


def _run_complete(spark, source: Path, checkpoint: Path, name: str) -> list:
    stream = spark.readStream.schema(SCHEMA).parquet(str(source))
    q = (_aggregate(stream).writeStream.format("memory").queryName(name).outputMode("complete")
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    return sorted(spark.table(name).collect())


def _placement(spark, checkpoint: Path, n: int) -> tuple[int, int]:
    """(distinct partition ids holding state, rows not where pmod(hash(key), n) puts them)."""
    state = spark.read.format("statestore").load(str(checkpoint))
    return (state.select("partition_id").distinct().count(),
            state.where(f"pmod(hash(key), {n}) != partition_id").count())


def test_aggregation_state_follows_scale_down_and_up(spark, partitions, tmp_path):
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    partitions(4)
    _add_input(spark, source, 0, 0, 20_000)
    first = _run_complete(spark, source, checkpoint, "rp_first")
    assert len(first) == 997 * 3
    query_id = (checkpoint / "metadata").read_text()
    for step, n in enumerate((3, 8, 1), start=1):
        result = repartition_checkpoint(spark, checkpoint, n)
        assert result.changed and result.to_partitions == n and result.rows == {"0/default": 997 * 3}
        # the rebuilt checkpoint keeps the query's metadata (Spark 4.2 refuses one without it)
        assert (checkpoint / "metadata").read_text() == query_id
        assert Path(result.previous).is_dir()  # the old checkpoint is kept beside it
        conf = json.loads((checkpoint / "offsets" / str(result.batch_id)).read_text().splitlines()[1])["conf"]
        assert conf["spark.sql.shuffle.partitions"] == str(n)
        assert _placement(spark, checkpoint, n) == (n, 0)
        _add_input(spark, source, step, 20_000 + step * 500, 500)
        got = _run_complete(spark, source, checkpoint, f"rp_step{step}")
        want = sorted(_aggregate(spark.read.schema(SCHEMA).parquet(str(source))).collect())
        assert got == want, f"after repartitioning to {n}"
        assert _placement(spark, checkpoint, n) == (n, 0)
    unchanged = repartition_checkpoint(spark, checkpoint, 1)
    assert not unchanged.changed and unchanged.previous is None


def test_watermarked_windows_and_deduplication_continue_after_repartition(spark, partitions, tmp_path):
    """Append mode: windows are emitted once the watermark passes them. Batch N keeps its offsets,
    watermark and commit (only the state files and the pinned count change), so no window is
    emitted twice or lost, and the file sink's log stays contiguous."""
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    partitions(2)

    def run(name: str) -> None:
        stream = (spark.readStream.schema(SCHEMA).parquet(str(source)).withWatermark("ts", "10 seconds")
                  .dropDuplicates(["k", "v", "ts"])
                  .groupBy(F.window("ts", "60 seconds"), "s").agg(F.count("*").alias("n"), F.sum("v").alias("total")))
        q = (stream.writeStream.format("parquet").option("path", str(tmp_path / "out")).outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        assert q.awaitTermination(180) and q.exception() is None

    _add_input(spark, source, 0, 0, 3_000)
    _add_input(spark, source, 1, 0, 1_500)  # duplicates of the first 1,500 rows: dropped
    run("w0")
    result = repartition_checkpoint(spark, checkpoint, 5)
    assert sorted(result.rows) == ["0/default", "1/default"] and all(result.rows.values())
    _add_input(spark, source, 2, 3_000, 3_000)
    _add_input(spark, source, 3, 9_000, 10)  # moves the watermark past every earlier window
    run("w1")
    out = spark.read.parquet(str(tmp_path / "out"))
    distinct = spark.read.schema(SCHEMA).parquet(str(source)).dropDuplicates(["k", "v", "ts"])
    closed = distinct.where("v < 6000")  # windows before the watermark's: all emitted
    want = sorted(closed.groupBy(F.window("ts", "60 seconds"), "s").agg(F.count("*").alias("n"), F.sum("v").alias("total")).collect())
    got = sorted(out.where("window.end <= TIMESTAMP '2024-01-01 01:40:00'").collect())
    assert got == want
    assert out.groupBy("window", "s").count().where("count > 1").count() == 0  # none emitted twice


def test_refusals_name_the_reason_and_change_nothing(spark, partitions, tmp_path):
    partitions(2)
    source = tmp_path / "in"
    _add_input(spark, source, 0, 0, 200)
    stream = spark.readStream.schema(SCHEMA).parquet(str(source))

    # a stream-stream join keeps four stores keyed by join key and index
    join_ckpt = tmp_path / "join"
    left = stream.select("k", "ts", F.col("v").alias("lv")).withWatermark("ts", "1 minute")
    right = stream.select(F.col("k").alias("rk"), F.col("ts").alias("rts"), F.col("v").alias("rv")).withWatermark("rts", "1 minute")
    joined = left.join(right, F.expr("k = rk AND rts BETWEEN ts AND ts + INTERVAL 1 MINUTE"))
    q = (joined.writeStream.format("noop").option("checkpointLocation", str(join_ckpt)).trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    before = sorted(p.relative_to(join_ckpt) for p in join_ckpt.rglob("*"))
    with pytest.raises(RepartitionError, match="keeps 4 state stores .* stream-stream join"):
        repartition_checkpoint(spark, join_ckpt, 3)
    assert sorted(p.relative_to(join_ckpt) for p in join_ckpt.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if "join" in p.name] == ["join"]  # no work folder left

    # RocksDB state
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    try:
        rocks = tmp_path / "rocks"
        q = (_aggregate(stream).writeStream.format("noop").outputMode("update").option("checkpointLocation", str(rocks))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(180) and q.exception() is None
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    with pytest.raises(RepartitionError, match="RocksDBStateStoreProvider; .*HDFS-backed"):
        repartition_checkpoint(spark, rocks, 3)

    # a batch planned but not committed (stopped mid-batch)
    agg = tmp_path / "agg"
    q = (_aggregate(stream).writeStream.format("noop").outputMode("update").option("checkpointLocation", str(agg))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    (agg / "offsets" / "1").write_text((agg / "offsets" / "0").read_text())
    with pytest.raises(RepartitionError, match="batch 1 was planned but not committed"):
        repartition_checkpoint(spark, agg, 3)
    with pytest.raises(RepartitionError, match="at least 1"):
        repartition_checkpoint(spark, agg, 0)
    with pytest.raises(RepartitionError, match="not a Structured Streaming checkpoint"):
        repartition_checkpoint(spark, tmp_path / "in", 3)


def test_cli_repartitions_a_checkpoint_and_refuses_in_one_line(spark, partitions, tmp_path):
    partitions(3)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    _add_input(spark, source, 0, 0, 1_000)
    _run_complete(spark, source, checkpoint, "rp_cli")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "blueprint.cli", "state", "repartition", *args],
                              capture_output=True, text=True, timeout=300)

    done = cli(str(checkpoint), "--partitions", "6")
    assert done.returncode == 0, done.stderr
    assert "3 -> 6 state partitions, 1,000 state rows in 1 operator(s) as of batch 0" in done.stdout
    assert (tmp_path / ".ckpt.before-repartition-0" / "metadata").is_file()
    assert _placement(spark, checkpoint, 6) == (6, 0)
    missing = cli(str(tmp_path / "nowhere"), "--partitions", "2")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("error: ") and len(missing.stderr.strip().splitlines()) == 1, missing.stderr


def test_a_streamlet_is_repartitioned_before_it_starts_and_a_crash_mid_swap_is_finished(spark, partitions, tmp_path):
    """repartition_streamlet (the driver's and the sandbox's): every query of the streamlet, the
    previous checkpoints kept outside its root; a swap a crash left half done is finished first,
    and hidden work folders are never taken for queries (savepoints, the loop itself)."""
    from streamlets.state.repartition import _COMPLETE, repartition_streamlet
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets.state.savepoint import query_folders
    from streamlets.runtime.storage import LocalStorage

    partitions(2)
    source, root = tmp_path / "in", tmp_path / "ck" / "app" / "agg"
    _add_input(spark, source, 0, 0, 2_000)
    _run_complete(spark, source, root / "out", "rp_streamlet_0")
    run = StreamletRunConfig(app_id="app", streamlet="agg", class_name="x.Agg", checkpoint_root=str(root),
                             state_partitions=3)
    (done,) = repartition_streamlet(spark, run)
    assert "query 'out': 2 -> 3 state partitions (2,000 state rows as of batch 0" in done
    assert (tmp_path / "ck" / "app" / "agg.before-repartition" / "out-0" / "metadata").is_file()
    assert repartition_streamlet(spark, run) == []  # already at 3

    # a crash between the two renames: the checkpoint moved aside, the complete build not yet in place
    build = root / ".out.repartition-dead"
    (root / "out").rename(build)
    (build / _COMPLETE).write_text("")
    (root / ".out.repartition-half").mkdir()  # an unfinished build
    (root / ".out.repartition-half" / "metadata").write_text("{}")
    (root / ".out.scratch-half").mkdir()  # and its scratch folder
    assert query_folders(LocalStorage(), str(root)) == []
    assert repartition_streamlet(spark, run.model_copy(update={"state_partitions": 5}))[0].startswith(
        "query 'out': 3 -> 5 state partitions")
    assert sorted(p.name for p in root.iterdir()) == ["out"]
    assert not (root / "out" / _COMPLETE).exists()
    _add_input(spark, source, 1, 5_000, 100)
    got = _run_complete(spark, source, root / "out", "rp_streamlet_1")
    assert got == sorted(_aggregate(spark.read.schema(SCHEMA).parquet(str(source))).collect())
    assert _placement(spark, root / "out", 5) == (5, 0)

    # a query stopped mid-batch is left alone this time, with a line saying so
    last = max(int(p.name) for p in (root / "out" / "commits").iterdir() if p.name.isdigit())
    (root / "out" / "offsets" / str(last + 1)).write_text((root / "out" / "offsets" / str(last)).read_text())
    (deferred,) = repartition_streamlet(spark, run.model_copy(update={"state_partitions": 2}))
    assert f"batch {last + 1} was planned but not committed" in deferred
