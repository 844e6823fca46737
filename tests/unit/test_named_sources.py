"""Named streaming sources without Spark: the names, matching a positional checkpoint's sources to
names, the rewrite of its offset log, what a query starts with on each kind of checkpoint, and the
restore check's source comparison (streamlets.sources, streamlets.runtime.named_sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamlets.runtime.checkpoint import pinned_conf, source_entries, source_offsets, state_partitions
from streamlets.runtime.named_sources import NAMED_START, NamedSourcesError, match_positions, start_conf
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.storage import LocalStorage
from streamlets.sources import INITIAL_STATE, INLET, MOUNT, SOURCE_EVOLUTION, source_name
from streamlets.state.restore import check_sources

STORAGE = LocalStorage()
META = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": "3"}}


def write_checkpoint(folder: Path, batches: list[list[str]], *, version: str = "v1", committed: int | None = None,
                     meta: dict | None = None, partitions: int | None = None) -> str:
    """A query checkpoint whose offsets/N has the source lines batches[N]; commits up to `committed`
    (default: every batch); state metadata with `partitions` state partitions when given."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    (folder / "metadata").write_text('{"id":"q"}\n')
    for n, lines in enumerate(batches):
        (folder / "offsets" / str(n)).write_text("\n".join([version, json.dumps(meta or META), *lines]))
        (folder / "offsets" / f".{n}.crc").write_text("crc")
        if committed is None or n <= committed:
            (folder / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for i in range(len(batches[-1]) if batches else 0):
        (folder / "sources" / str(i)).mkdir(parents=True)
        (folder / "sources" / str(i) / "0").write_text("initial offsets")
    if partitions:
        op = folder / "state" / "0" / "_metadata"
        op.mkdir(parents=True)
        (op / "metadata").write_text('v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},'
                                     f'"stateStoreInfo":[{{"storeName":"default","numColsPrefixKey":0,"numPartitions":{partitions}}}]}}')
    return str(folder)


def test_source_names_are_valid_for_spark_and_distinct():
    assert source_name(INLET, "flight-data") == "inlet_flight_data"
    assert source_name(MOUNT, "in") == "mount_in" and source_name(INITIAL_STATE, 0) == "initial_state_0"
    with pytest.raises(ValueError, match="Spark refuses"):
        source_name(INLET, "caf\u00e9")


def test_positions_match_by_position_when_the_sources_are_the_same():
    topics = {"inlet_a": "ta", "inlet_b": "tb"}
    assert match_positions([{"ta": {"0": 3}}, {"tb": {"0": 1}}], ["inlet_a", "inlet_b"], topics) == {0: "inlet_a", 1: "inlet_b"}
    # a file source's offsets say no topic: its position is trusted
    assert match_positions([{"logOffset": 2}], ["mount_in"], {}) == {0: "mount_in"}


def test_positions_match_by_topic_when_inlets_are_added_dropped_or_reordered():
    topics = {"inlet_a": "ta", "inlet_b": "tb", "inlet_c": "tc"}
    old = [{"ta": {"0": 3}}, {"tb": {"0": 1}}]
    assert match_positions(old, ["inlet_c", "inlet_b", "inlet_a"], topics) == {0: "inlet_a", 1: "inlet_b"}
    assert match_positions(old, ["inlet_b", "inlet_a"], topics) == {0: "inlet_a", 1: "inlet_b"}
    assert match_positions(old, ["inlet_a"], topics) == {0: "inlet_a", 1: None}  # b dropped


def test_positions_that_match_neither_way_are_refused():
    with pytest.raises(ValueError, match="not a Kafka source"):
        match_positions([{"logOffset": 2}, {"ta": {"0": 1}}], ["inlet_a"], {"inlet_a": "ta"})
    with pytest.raises(ValueError, match="2 sources"):
        match_positions([{"ta": {"0": 1}}], ["inlet_a", "inlet_a_2", "inlet_b"],
                        {"inlet_a": "ta", "inlet_a_2": "ta", "inlet_b": "tb"})


def test_a_new_checkpoint_starts_named_or_positional():
    assert start_conf(STORAGE, "/nowhere", ["inlet_a"], {}, where="w") == NAMED_START
    assert start_conf(STORAGE, "/nowhere", ["inlet_a", None], {}, where="w") == {}
    assert start_conf(STORAGE, "/nowhere", [], {}, where="w") == {}


def test_a_positional_checkpoint_is_rewritten_to_names(tmp_path):
    cp = write_checkpoint(tmp_path / "q", [['{"ta":{"0":1}}', '{"tb":{"0":2}}'], ['{"ta":{"0":3}}', '{"tb":{"0":2}}']])
    conf = start_conf(STORAGE, cp, ["inlet_c", "inlet_b", "inlet_a"], {"inlet_a": "ta", "inlet_b": "tb", "inlet_c": "tc"},
                      where="w")
    assert conf == NAMED_START  # the pinned partition count is there: not set
    assert source_entries(STORAGE, cp, 1) == [("inlet_a", {"ta": {"0": 3}}), ("inlet_b", {"tb": {"0": 2}})]
    assert source_offsets(STORAGE, cp, 0) == [{"ta": {"0": 1}}, {"tb": {"0": 2}}]
    lines = Path(cp, "offsets", "1").read_text().splitlines()
    assert lines[0] == "v2" and json.loads(lines[1])["conf"] == {"spark.sql.shuffle.partitions": "3", SOURCE_EVOLUTION: "true"}
    assert sorted(p.name for p in Path(cp, "sources").iterdir()) == ["inlet_a", "inlet_b"]
    assert not Path(cp, "offsets", ".1.crc").exists()
    # named now: the next start keeps it, and a dropped inlet's line just stays behind
    assert start_conf(STORAGE, cp, ["inlet_a"], {"inlet_a": "ta"}, where="w") == NAMED_START


def test_a_dropped_source_leaves_the_rewritten_log(tmp_path):
    cp = write_checkpoint(tmp_path / "q", [['{"ta":{"0":1}}', '{"tb":{"0":2}}']])
    start_conf(STORAGE, cp, ["inlet_b"], {"inlet_b": "tb"}, where="w")
    assert source_entries(STORAGE, cp, 0) == [("inlet_b", {"tb": {"0": 2}})]


def test_an_uncommitted_batch_is_replayed_by_position_and_named_later(tmp_path):
    cp = write_checkpoint(tmp_path / "q", [['{"ta":{"0":1}}'], ['{"ta":{"0":3}}']], committed=0)
    assert start_conf(STORAGE, cp, ["inlet_a"], {"inlet_a": "ta"}, where="w") == {}
    assert Path(cp, "offsets", "1").read_text().startswith("v1")
    with pytest.raises(NamedSourcesError, match="planned but not committed"):
        start_conf(STORAGE, cp, ["inlet_a", "inlet_b"], {"inlet_a": "ta", "inlet_b": "tb"}, where="w")
    # a dry run writes nothing: it may replay the batch with the new sources
    assert start_conf(STORAGE, cp, ["inlet_a", "inlet_b"], {"inlet_a": "ta", "inlet_b": "tb"}, where="w",
                      replay_ok=True) == NAMED_START


def test_refusals_name_the_query_and_the_way_across(tmp_path):
    cp = write_checkpoint(tmp_path / "q", [['{"logOffset":1}', '{"ta":{"0":2}}']])
    with pytest.raises(NamedSourcesError, match="streamlet 's', query 'out'.*by position.*start the version"):
        start_conf(STORAGE, cp, ["mount_in"], {}, where="streamlet 's', query 'out'")
    named = write_checkpoint(tmp_path / "n", [['inlet_a:{"ta":{"0":2}}']], version="v2")
    with pytest.raises(NamedSourcesError, match="keys its sources by name.*1 source.*unnamed.*load_named"):
        start_conf(STORAGE, named, ["inlet_a", None], {"inlet_a": "ta"}, where="w")


def test_a_first_run_without_pinned_partitions_starts_with_the_states(tmp_path):
    meta = {**META, "conf": {SOURCE_EVOLUTION: "true"}}  # format 2's first run pins no partition count
    cp = write_checkpoint(tmp_path / "q", [['inlet_a:{"ta":{"0":2}}'], ['inlet_a:{"ta":{"0":4}}']], version="v2",
                          meta=meta, partitions=5, committed=0)
    assert state_partitions(STORAGE, cp) == 5
    # the committed batch gets the state's count pinned; the replayed one starts with it
    assert start_conf(STORAGE, cp, ["inlet_a"], {}, where="w") == {**NAMED_START, "spark.sql.shuffle.partitions": "5"}
    assert pinned_conf(STORAGE, cp, 0)["spark.sql.shuffle.partitions"] == "5"
    assert "spark.sql.shuffle.partitions" not in pinned_conf(STORAGE, cp, 1)
    assert not Path(cp, "offsets", ".0.crc").exists() and Path(cp, "offsets", ".1.crc").exists()
    stateless = write_checkpoint(tmp_path / "s", [['inlet_a:{"ta":{"0":2}}']], version="v2", meta=meta)
    assert start_conf(STORAGE, stateless, ["inlet_a"], {}, where="w") == NAMED_START


def savepoint_of(tmp_path: Path, lines: list[str], version: str) -> dict:
    write_checkpoint(tmp_path / "sp" / "queries" / "out", [lines], version=version)
    return {"path": str(tmp_path / "sp"), "queries": {"out": {"batch_id": 0, "stateful": True}}}


def run_reading(tmp_path: Path, **topics: str) -> StreamletRunConfig:
    return StreamletRunConfig(app_id="app", streamlet="s", class_name="x.S", checkpoint_root=str(tmp_path / "ck"),
                              topics=topics)


def test_the_restore_check_lets_named_inlets_come_and_go(tmp_path):
    sp = savepoint_of(tmp_path, ['inlet_a:{"ta":{"0":2}}', 'inlet_b:{"tb":{"0":1}}'], "v2")
    added = check_sources(sp, run_reading(tmp_path, a="ta", b="tb", c="tc"), ["a", "b", "c"])
    assert added.ok and not added.notes
    dropped = check_sources(sp, run_reading(tmp_path, a="ta"), ["a"])
    assert dropped.ok and "source inlet_b (tb) is not read by the new code" in dropped.notes[0]
    moved = check_sources(sp, run_reading(tmp_path, a="other", b="tb"), ["a", "b"])
    assert not moved.ok and "source inlet_a read Kafka topic ta" in moved.problems[0]


def test_the_restore_check_matches_positional_savepoints_by_topic(tmp_path):
    sp = savepoint_of(tmp_path, ['{"ta":{"0":2}}', '{"tb":{"0":1}}'], "v1")
    assert check_sources(sp, run_reading(tmp_path, c="tc", b="tb", a="ta"), ["c", "b", "a"]).ok
    dropped = check_sources(sp, run_reading(tmp_path, a="ta"), ["a"])
    assert not dropped.ok and "'tb', which no inlet of the new run reads" in dropped.problems[0]
    assert "restore it under the version it was taken with" in dropped.problems[0]


def test_a_second_read_of_a_source_in_one_query_gets_a_number():
    from streamlets import AvroInlet, Streamlet
    from streamlets.runtime.context import StreamletContext

    class Twice(Streamlet):
        inlet = AvroInlet("in-x", {"type": "record", "name": "R", "namespace": "t", "fields": [{"name": "v", "type": "long"}]})

        def create_logic(self, ctx) -> None:
            pass

    ctx = StreamletContext(None, Twice(), StreamletRunConfig(app_id="a", streamlet="s", class_name="x.Twice",  # type: ignore[arg-type]
                                                             checkpoint_root="/tmp/ck"), None)
    assert [ctx.source_name(INLET, "in-x") for _ in range(3)] == ["inlet_in_x", "inlet_in_x_2", "inlet_in_x_3"]
    assert ctx.source_name(MOUNT, "in-x") == "mount_in_x"
