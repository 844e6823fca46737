"""State export on real Spark: checkpoints of streaming queries, exported and checked against the input.

A CSV file source reads one file per micro-batch (maxFilesPerTrigger=1, files ordered by mtime),
so batch i's state covers files 0..i; the expected state is computed from the files in plain Python.
Export files are read back with json/csv/pandas, not Spark, so the check is independent.
"""

import csv
import json
import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

from streamlets.state.export import (
    StateExportError,
    export_state,
    last_committed_batch,
    read_export,
    read_state,
    stateful_operators,
)

SCHEMA = "k STRING, v INT, ts TIMESTAMP"
KEYS = ["a", "b", "x,y", "c"]  # "x,y" needs CSV quoting
FILES = 3
PARTITIONS = 3
AGG_COLUMNS = ["key_k", "value_count", "value_sum", "value_max", "partition_id"]


def _write_inputs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for i in range(FILES):
        path = folder / f"part-{i}.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["k", "v", "ts"])
            for j in range(i + 2):
                w.writerow([KEYS[(i + j) % len(KEYS)], i * 10 + j, f"2024-01-0{i + 1} 10:0{j}:00.12345{j}"])
        stamp = time.time() - 1000 + i * 10  # increasing mtimes: the file source reads oldest first
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def _run(df, checkpoint: Path, mode: str = "update") -> None:
    query = (df.writeStream.outputMode(mode).format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    assert query.awaitTermination(120), "query did not finish"
    assert query.exception() is None


@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    """Three finished queries over the same files: an aggregation, a dedupe + windowed count, a select."""
    session = spark.newSession()  # own conf; the shared session stays untouched
    session.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    session.conf.set("spark.sql.session.timeZone", "UTC")
    root = tmp_path_factory.mktemp("state-export")
    files = _write_inputs(root / "in")
    def reader():  # a new one each time: DataStreamReader.option changes the reader in place
        return session.readStream.schema(SCHEMA).option("header", True)

    source = reader().option("maxFilesPerTrigger", 1).csv(str(root / "in"))  # one file per batch
    _run(source.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"), F.max("ts").alias("last")),
         root / "agg")
    all_at_once = reader().csv(str(root / "in"))  # one batch: these two only need a final state, and time
    _run(all_at_once.dropDuplicates(["k", "v"]).groupBy(F.window("ts", "1 day"), "k")
         .agg(F.count("*").alias("n"), F.collect_list("v").alias("vs")), root / "windowed")
    _run(all_at_once.select("k", "v"), root / "stateless", mode="append")
    return {"spark": session, "root": root, "files": files, "agg": root / "agg",
            "windowed": root / "windowed", "stateless": root / "stateless"}


# --- expected state, from the input files ---------------------------------------------------------

def _iso(ts) -> str:
    """A timestamp (datetime, pandas Timestamp or ISO text) as UTC ISO-8601 text with microseconds."""
    if isinstance(ts, str):
        return ts
    if ts.tzinfo is not None:
        ts = ts.astimezone(timezone.utc).replace(tzinfo=None)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _input_rows(files: list[Path]) -> list[dict[str, str]]:
    rows = []
    for path in files:
        with path.open(newline="") as f:
            rows += list(csv.DictReader(f))
    return rows


def _expected(files: list[Path], batch: int) -> dict[str, tuple[int, int, str]]:
    """Per key (count, sum of v, max ts) over files 0..batch: what the aggregation state holds."""
    out: dict[str, tuple[int, int, str]] = {}
    for row in _input_rows(files[: batch + 1]):
        ts = _iso(datetime.strptime(row["ts"], "%Y-%m-%d %H:%M:%S.%f"))
        n, s, last = out.get(row["k"], (0, 0, ""))
        out[row["k"]] = (n + 1, s + int(row["v"]), max(last, ts))
    return out


def _state(records) -> dict[str, tuple[int, int, str]]:
    """Exported aggregation rows (dicts) in the shape of _expected; checks partition ids on the way."""
    out = {}
    for r in records:
        assert int(r["partition_id"]) in range(PARTITIONS)
        out[r["key_k"]] = (int(r["value_count"]), int(r["value_sum"]), _iso(r["value_max"]))
    assert len(out) == len(records), "a key appears twice"
    return out


def _export_records(folder: Path, fmt: str) -> list[dict]:
    """The rows of one exported store, read without Spark."""
    if fmt == "parquet":
        return pd.read_parquet(folder).to_dict("records")
    records = []
    for part in sorted(folder.glob("part-*")):
        with part.open(newline="") as f:
            records += [json.loads(line) for line in f] if fmt == "jsonl" else list(csv.DictReader(f))
    return records


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


# --- reading ----------------------------------------------------------------------------------------

def test_last_batch_and_operators(env):
    assert last_committed_batch(env["agg"]) == FILES - 1
    assert stateful_operators(env["spark"], env["agg"]) == [
        {"operator_id": 0, "operator_name": "stateStoreSave", "store_name": "default", "partitions": PARTITIONS,
         "min_batch_id": 0, "max_batch_id": FILES - 1}]
    # The aggregation runs after the dedupe but gets operator id 0: ids are assigned from the sink down.
    assert [(o["operator_id"], o["operator_name"]) for o in stateful_operators(env["spark"], env["windowed"])] == [
        (0, "stateStoreSave"), (1, "dedupe")]
    assert stateful_operators(env["spark"], env["stateless"]) == []
    assert last_committed_batch(env["stateless"]) == 0


@pytest.mark.parametrize("batch", [0, 1, None])
def test_read_state_matches_input(env, batch):
    df = read_state(env["spark"], env["agg"], batch_id=batch)
    # value fields are the aggregation buffers (count, sum, max), not the output aliases n, s, last
    assert df.columns == AGG_COLUMNS
    expected = _expected(env["files"], FILES - 1 if batch is None else batch)
    assert _state([r.asDict() for r in df.collect()]) == expected


# --- export -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_export_last_batch(env, tmp_path, fmt):
    out = tmp_path / "export"
    manifest = export_state(env["spark"], env["agg"], out, fmt=fmt)

    expected = _expected(env["files"], FILES - 1)
    assert json.loads((out / "_export.json").read_text()) == manifest
    assert (manifest["version"], manifest["batch_id"], manifest["format"]) == (1, FILES - 1, fmt)
    assert manifest["checkpoint"] == str(env["agg"].resolve())
    assert manifest["query_id"] == json.loads((env["agg"] / "metadata").read_text())["id"]
    assert manifest["spark_version"] == env["spark"].version
    assert datetime.fromisoformat(manifest["created_at"]).tzinfo is not None
    [op] = manifest["operators"]
    assert op["operator_name"] == "stateStoreSave" and op["store_name"] == "default"
    assert (op["operator_id"], op["partitions"], op["rows"], op["path"]) == (0, PARTITIONS, len(expected), "op-0-default")
    assert op["key_schema"] == "struct<k:string>"
    assert op["value_schema"] == "struct<count:bigint,sum:bigint,max:timestamp>"
    assert op["columns"] == AGG_COLUMNS

    records = _export_records(out / op["path"], fmt)
    assert _state(records) == expected
    if fmt != "parquet":  # text formats: timestamps as ISO-8601 text in UTC, microseconds kept
        assert {r["value_max"] for r in records} == {v[2] for v in expected.values()}
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["value_max"]) for r in records)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_earlier_batch(env, tmp_path, fmt):
    out = tmp_path / "export"
    manifest = export_state(env["spark"], env["agg"], out, fmt=fmt, batch_id=0)
    expected = _expected(env["files"], 0)
    assert expected != _expected(env["files"], FILES - 1)  # the batch really matters
    assert manifest["batch_id"] == 0 and manifest["operators"][0]["rows"] == len(expected)
    assert _state(_export_records(out / "op-0-default", fmt)) == expected


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_read_export_round_trips(env, tmp_path, fmt):
    spark = env["spark"]
    export_state(spark, env["agg"], tmp_path / "export", fmt=fmt, batch_id=1)
    back = read_export(spark, tmp_path / "export")
    state = read_state(spark, env["agg"], batch_id=1)
    assert back.dtypes == state.dtypes
    assert _rows(back) == _rows(state)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_nested_key_and_several_operators_round_trip(env, tmp_path, fmt):
    """Window keys stay structs (JSON text in CSV), collect_list's binary buffer is base64 in CSV,
    and dedupe's empty value ({__dummy__: void}) gives no value column."""
    spark, out = env["spark"], tmp_path / "export"
    manifest = export_state(spark, env["windowed"], out, fmt=fmt)
    assert [(o["operator_id"], o["path"]) for o in manifest["operators"]] == [(0, "op-0-default"), (1, "op-1-default")]
    by_id = {o["operator_id"]: o for o in manifest["operators"]}
    assert by_id[0]["columns"] == ["key_window", "key_k", "value_count", "value_buf", "partition_id"]
    assert by_id[1]["columns"] == ["key_k", "key_v", "partition_id"]
    assert by_id[1]["rows"] == len({(r["k"], r["v"]) for r in _input_rows(env["files"])})

    for op_id in (0, 1):
        back = read_export(spark, out, operator_id=op_id)
        state = read_state(spark, env["windowed"], operator_id=op_id)
        assert back.dtypes == state.dtypes
        assert _rows(back) == _rows(state)
    if fmt == "csv":
        windows = [json.loads(r["key_window"]) for r in _export_records(out / "op-0-default", "csv")]
        assert {"start": "2024-01-01T00:00:00.000000Z", "end": "2024-01-02T00:00:00.000000Z"} in windows

    only_dedupe = export_state(spark, env["windowed"], tmp_path / "only", fmt=fmt, operators=[1])
    assert [o["operator_name"] for o in only_dedupe["operators"]] == ["dedupe"]


# --- errors -----------------------------------------------------------------------------------------

def test_not_a_checkpoint(env, tmp_path):
    with pytest.raises(StateExportError, match=f"{tmp_path}.*not a Structured Streaming checkpoint"):
        export_state(env["spark"], tmp_path, tmp_path / "out")
    with pytest.raises(StateExportError, match="not a Structured Streaming checkpoint"):
        last_committed_batch(env["root"] / "in")


def test_uncommitted_batch(env, tmp_path):
    with pytest.raises(StateExportError, match=rf"batch 99 is not committed \(committed batches: 0\.\.{FILES - 1}\)"):
        export_state(env["spark"], env["agg"], tmp_path / "out", batch_id=99)
    with pytest.raises(StateExportError, match="batch 99 is not committed"):
        read_state(env["spark"], env["agg"], batch_id=99)
    assert not (tmp_path / "out").exists()


def test_existing_out_dir(env, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(StateExportError, match=f"{tmp_path / 'out'} already exists.*choose a new folder"):
        export_state(env["spark"], env["agg"], tmp_path / "out")
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_unknown_format(env, tmp_path):
    with pytest.raises(StateExportError, match="unknown export format 'xml'"):
        export_state(env["spark"], env["agg"], tmp_path / "out", fmt="xml")


def test_stateless_query(env, tmp_path):
    with pytest.raises(StateExportError, match=f"{env['stateless']}.*stateless"):
        export_state(env["spark"], env["stateless"], tmp_path / "out")


def test_unknown_operator_leaves_checkpoint_alone(env):
    state = env["agg"] / "state"
    before = sorted(p.relative_to(state) for p in state.rglob("*"))
    with pytest.raises(StateExportError, match=r"no state store 5/'default'; stateful operator/store: 0/default"):
        read_state(env["spark"], env["agg"], operator_id=5)
    with pytest.raises(StateExportError, match="no state store 0/'left'"):
        read_state(env["spark"], env["agg"], store_name="left")
    # Spark's statestore source would have created state/5/<partition>/ and state/0/<partition>/left
    assert sorted(p.relative_to(state) for p in state.rglob("*")) == before


def test_batch_no_longer_retained(env, tmp_path):
    """Simulated retention on copies of the checkpoint: log entries purged, then state files gone."""
    purged = tmp_path / "purged"
    shutil.copytree(env["agg"], purged)
    for log in ("commits", "offsets"):
        (purged / log / "0").unlink()
    with pytest.raises(StateExportError, match="batch 0 is no longer retained.*minBatchesToRetain"):
        export_state(env["spark"], purged, tmp_path / "out1", batch_id=0)

    no_files = tmp_path / "no-files"
    shutil.copytree(env["agg"], no_files)
    for delta in (no_files / "state" / "0").glob("*/1.delta"):
        delta.unlink()
    with pytest.raises(StateExportError, match="state files of operator 0/default for batch 0 are gone.*minBatchesToRetain"):
        export_state(env["spark"], no_files, tmp_path / "out2", batch_id=0)


def test_read_export_needs_manifest(env, tmp_path):
    with pytest.raises(StateExportError, match="has no _export.json"):
        read_export(env["spark"], tmp_path)
    export_state(env["spark"], env["agg"], tmp_path / "export", fmt="parquet")
    with pytest.raises(StateExportError, match="operator 7: no such operator/store"):
        read_export(env["spark"], tmp_path / "export", operator_id=7)
