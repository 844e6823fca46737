"""Savepoints on a real stateful streamlet (a per-key aggregation over CSV drop files, local Spark):
take (after a stop and while running), list, inspect, dispose, prune; restore (same code and as a
branch) continues to the full aggregates; changes Spark cannot restore across are refused with the
change named."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from streamlets.state.restore import check_restore, restore_savepoint
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime, transport_for
from streamlets.state.savepoint import (SavepointError, dispose_savepoint, keep_in_savepoint, list_savepoints,
                                  prune_savepoints, read_savepoint, resolve_savepoint, take_savepoint)
from support.counts_app import Counts, expected, run_config, state_rows, write_file

pytestmark = pytest.mark.timeout(600)

FILES = 6


class CountsWithMax(Counts):
    def aggregate(self, df):
        from pyspark.sql import functions as F

        # (max must reach the outlet: an aggregate no column uses is optimized away, state and all)
        return df.groupBy("k").agg(F.count("*").alias("n"), (F.sum("v") + F.max("v")).alias("s"))


class CountsByKeyAndValue(Counts):
    def aggregate(self, df):
        from pyspark.sql import functions as F

        return df.groupBy("k", "v").agg(F.count("*").alias("n"), F.sum("v").alias("s"))


class CountsDeduplicated(Counts):
    def aggregate(self, df):
        return super().aggregate(df.dropDuplicates(["k", "v"]))


def run_until_done(spark, cls, run: StreamletRunConfig) -> None:
    runtime = StreamletRuntime(spark, run.app_id, None, transport_for(run))
    runtime.start_class(cls, run.model_copy(update={"available_now": True}))
    try:
        for q in runtime.queries():
            q.awaitTermination(240)
            assert q.exception() is None, q.exception()
    finally:
        runtime.stop()


@pytest.fixture
def session(spark):
    return spark


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_file(folder, i)
    return folder


def test_keep_only_what_the_last_commit_covers():
    assert keep_in_savepoint("offsets/4", 4) and not keep_in_savepoint("offsets/5", 4)
    assert keep_in_savepoint("commits/.4.crc", 4) and not keep_in_savepoint("commits/.5.crc", 4)
    assert keep_in_savepoint("sources/0/9.compact", 9) and not keep_in_savepoint("sources/0/10.compact", 9)
    # batch 4 commits state version 5
    assert keep_in_savepoint("state/0/2/5.delta", 4) and not keep_in_savepoint("state/0/2/6.delta", 4)
    assert keep_in_savepoint("state/0/2/5_0b1c2d3e-aaaa-bbbb-cccc-0123456789ab.zip", 4)
    assert not keep_in_savepoint("state/0/2/6.changelog", 4)
    assert keep_in_savepoint("state/0/_metadata/metadata", 4) and keep_in_savepoint("state/0/0/_metadata/schema", 4)
    assert keep_in_savepoint("metadata", 4) and keep_in_savepoint("dead-letter-ledger.in.json", 4)
    assert not keep_in_savepoint("offsets/.5.tmp", 4)


def test_take_list_inspect_dispose_prune(session, tmp_path, source):
    run = run_config(tmp_path, "counts", source)
    run_until_done(session, Counts, run)
    root = str(tmp_path / "savepoints")
    sp = take_savepoint(run.checkpoint_root, root, app_id="app", streamlet="counts", cls=Counts, reason="test")
    assert sp["queries"]["out"]["batch_id"] == 2 and sp["queries"]["out"]["stateful"]
    assert sp["queries"]["out"]["pinned_conf"]["spark.sql.shuffle.partitions"] == "3"
    assert sp["streamlet"] == "counts" and sp["reason"] == "test" and len(sp["code_version"]) == 12
    assert set(sp["schema_fingerprints"]) == {"out"}
    assert read_savepoint(sp["path"])["id"] == sp["id"] == resolve_savepoint(sp["id"], root)["id"]
    assert state_rows(session, f"{sp['path']}/queries/out") == expected(3)
    assert not Path(sp["path"], "queries", "out", "offsets", "3").exists()

    time.sleep(1.1)  # ids and creation times are per second
    second = take_savepoint(run.checkpoint_root, root, app_id="app", streamlet="counts", cls=Counts)
    assert [m["id"] for m in list_savepoints(root)] == [sp["id"], second["id"]]
    assert [m["id"] for m in list_savepoints(root, "app", "counts")] == [sp["id"], second["id"]]
    assert list_savepoints(root, "other") == []
    assert prune_savepoints(root, "app", "counts", keep=1) == [sp["path"]]
    assert [m["id"] for m in list_savepoints(root)] == [second["id"]]
    dispose_savepoint(second["path"])
    assert list_savepoints(root) == [] and not Path(second["path"]).exists()
    with pytest.raises(SavepointError, match="is not a savepoint"):
        dispose_savepoint(second["path"])
    with pytest.raises(SavepointError, match="no query checkpoint"):
        take_savepoint(str(tmp_path / "nothing"), root, app_id="app", streamlet="counts", cls=Counts)


def test_savepoint_of_a_running_streamlet_restores_and_branches_to_the_full_result(session, tmp_path, source):
    run = run_config(tmp_path, "counts", source, trigger_interval="200 milliseconds")
    runtime = StreamletRuntime(session, "app", None, transport_for(run))
    runtime.start_class(Counts, run)
    root = str(tmp_path / "savepoints")
    try:
        (query,) = runtime.queries()
        deadline = time.monotonic() + 120
        while (query.lastProgress or {}).get("batchId", -1) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        sp = take_savepoint(run.checkpoint_root, root, app_id="app", streamlet="counts", cls=Counts, reason="running")
        for i in range(3, FILES):  # more input after the savepoint
            write_file(source, i)
        batch = sp["queries"]["out"]["batch_id"]
        assert batch is not None and batch >= 1
        # consistent: the state at the savepoint is the aggregate of the files of its batches
        assert state_rows(session, f"{sp['path']}/queries/out") == expected(batch + 1)
    finally:
        runtime.stop()

    # Every copy keeps the query's `metadata` (its id): Spark 4.2 refuses to start a checkpoint
    # whose offsets or commits have data but whose metadata file is missing (checked below).
    original = json.loads(Path(run.checkpoint_root, "out", "metadata").read_text())["id"]
    assert json.loads(Path(sp["path"], "queries", "out", "metadata").read_text())["id"] == original
    assert sp["queries"]["out"]["query_id"] == original

    # the same application, restored from the savepoint (its checkpoints replaced), runs to the end
    moved = restore_savepoint(sp, run, replace=True)
    assert moved and Path(moved, "out", "metadata").exists()
    assert json.loads(Path(run.checkpoint_root, "out", "metadata").read_text())["id"] == original
    run_until_done(session, Counts, run)
    assert state_rows(session, f"{run.checkpoint_root}/out") == expected(FILES)

    # a branch: a second application from the same savepoint, with a query id of its own
    branch = run_config(tmp_path, "counts", source, app="branch")
    assert check_restore(session, sp, Counts, branch).ok
    restore_savepoint(sp, branch, branch=True)
    ids = {json.loads(Path(r.checkpoint_root, "out", "metadata").read_text())["id"] for r in (run, branch)}
    assert len(ids) == 2
    run_until_done(session, Counts, branch)
    assert state_rows(session, f"{branch.checkpoint_root}/out") == expected(FILES)
    with pytest.raises(SavepointError, match="already has checkpoints"):
        restore_savepoint(sp, branch)

    # what the metadata is kept for: the same copy without it does not start on Spark 4.2
    bare = run_config(tmp_path, "counts", source, app="bare")
    restore_savepoint(sp, bare)
    Path(bare.checkpoint_root, "out", "metadata").unlink()
    with pytest.raises(Exception, match="STREAMING_CHECKPOINT_MISSING_METADATA_FILE"):
        run_until_done(session, Counts, bare)


@pytest.mark.parametrize("cls, words", [
    (CountsWithMax, ["value schema", "changed", "max"]),
    (CountsByKeyAndValue, ["key schema", "changed"]),
    (CountsDeduplicated, ["stateful operators changed", "dedupe"]),
], ids=["aggregate-added", "grouping-changed", "operator-added"])
def test_changes_spark_cannot_restore_across_are_refused(session, tmp_path, source, cls, words):
    run = run_config(tmp_path, "counts", source)
    run_until_done(session, Counts, run)
    sp = take_savepoint(run.checkpoint_root, str(tmp_path / "sp"), app_id="app", streamlet="counts", cls=Counts)
    same = check_restore(session, sp, Counts, run_config(tmp_path, "counts", source, app="same"))
    assert same.ok, same.problems
    result = check_restore(session, sp, cls, run_config(tmp_path, "counts", source, app="changed"))
    assert not result.ok
    (problem,) = result.problems
    for word in words:
        assert word in problem, problem
    assert "If you want to force" not in problem and "=== Streaming Query ===" not in problem
    # the check touched neither the savepoint nor the new streamlet's checkpoint folder
    assert read_savepoint(sp["path"])["queries"]["out"]["batch_id"] == 2
    assert Path(sp["path"], "queries", "out", "commits", "2").exists()
    # (its scratch copy sat next to where the checkpoints go, and is gone)
    assert not (tmp_path / "ck" / "changed" / "counts").exists()
    assert not list((tmp_path / "ck" / "changed").glob("*restore-check*"))


class SeededCounts(Counts):
    """Counts written to fold imported state in: partial aggregates (n, s) from the export are
    summed with the new rows' (1, v)."""

    def create_logic(self, ctx) -> None:
        from pyspark.sql import functions as F

        rows = (ctx.spark.readStream.schema("k STRING, v INT").option("header", True).option("maxFilesPerTrigger", 1)
                .csv(str(ctx.mounted_path(self.source))).select("k", F.lit(1).cast("long").alias("n"), F.col("v").cast("long").alias("s")))
        seed = ctx.initial_state("out")
        if seed is not None:
            rows = rows.unionByName(seed.select(F.col("key_k").alias("k"), F.col("value_count").alias("n"),
                                                F.col("value_sum").alias("s")))
        agg = rows.groupBy("k").agg(F.sum("n").alias("n"), F.sum("s").alias("s"))
        ctx.write_stream(agg, self.outlet, output_mode="update")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_streamlet_without_checkpoints_continues_from_imported_state(session, tmp_path, source, fmt):
    from streamlets.state.export import export_state

    run = run_config(tmp_path, "counts", source)
    run_until_done(session, Counts, run)  # files 0-2
    export = tmp_path / "export"
    assert export_state(session, run.checkpoint_location("out"), str(export), fmt)["batch_id"] == 2

    later = tmp_path / "later"  # the new streamlet sees only the files after the export
    later.mkdir()
    for i in range(3, FILES):
        write_file(later, i)
    seeded = run_config(tmp_path, "counts", later, app="seeded", initial_state={"out": str(export)})
    assert not Path(seeded.checkpoint_root).exists()
    run_until_done(session, SeededCounts, seeded)
    final = {r.key.k: (r.value[0], r.value[1]) for r in session.read.format("statestore").load(f"{seeded.checkpoint_root}/out").collect()}
    assert final == expected(FILES)

    # a restart keeps the setting: the export is not folded in twice
    write_file(later, FILES)
    run_until_done(session, SeededCounts, seeded)
    final = {r.key.k: (r.value[0], r.value[1]) for r in session.read.format("statestore").load(f"{seeded.checkpoint_root}/out").collect()}
    assert final == expected(FILES + 1)


def test_driver_start_acts_on_upgrade_settings_once(session, tmp_path, source):
    """What a driver does before starting (streamlets.state.prepare.prepare_checkpoints): upgrade mode
    stateless moves the checkpoints aside when the token changes; restore_from restores once, and
    refuses a savepoint the code cannot restore across."""
    from streamlets.errors import StreamletError
    from streamlets.state.prepare import prepare_checkpoints

    run = run_config(tmp_path, "counts", source)
    run_until_done(session, Counts, run)
    sp = take_savepoint(run.checkpoint_root, str(tmp_path / "sp"), app_id="app", streamlet="counts", cls=Counts)
    root = Path(run.checkpoint_root)

    reset = run.model_copy(update={"reset_state_token": "t1"})
    assert prepare_checkpoints(session, Counts, reset) == [f"checkpoints moved to {root}.reset-t1 (upgrade mode stateless)"]
    assert not root.exists() and Path(f"{root}.reset-t1/out/commits/2").exists()
    assert prepare_checkpoints(session, Counts, reset) == []  # the same token: nothing

    with pytest.raises(StreamletError, match="key schema"):
        prepare_checkpoints(session, CountsByKeyAndValue, run.model_copy(update={"restore_from": sp["path"]}))
    restoring = run.model_copy(update={"restore_from": sp["path"]})
    (done,) = prepare_checkpoints(session, Counts, restoring)
    assert done.startswith(f"restored from {sp['path']}") and Path(root, "out", "commits", "2").exists()
    assert prepare_checkpoints(session, Counts, restoring) == []  # once
    run_until_done(session, Counts, restoring)
    assert state_rows(session, f"{root}/out") == expected(3)
