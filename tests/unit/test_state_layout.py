"""The state layout (streamlets.runtime.layout), the system topics (streamlets.runtime.system_topics)
and the frozen run config: one home each, and the paths and names they had before."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streamlets.runtime.layout import StateLayout
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.system_topics import (CONTROL, CONTROL_RESULTS, DEAD_LETTERS, LEDGER_CONFIG, OUTLET_BATCHES,
                                              system_topics)


def test_the_sandbox_state_folder():
    state = StateLayout("/work/.streamlets/app/")
    assert state.checkpoints("app", "stats") == "/work/.streamlets/app/checkpoints/app/stats"
    assert state.checkpoints("app") == "/work/.streamlets/app/checkpoints/app"
    assert state.checkpoints() == "/work/.streamlets/app/checkpoints"
    assert state.savepoints == "/work/.streamlets/app/savepoints"
    assert state.dumps == "/work/.streamlets/app/dumps"
    assert state.volume("stats", "data") == "/work/.streamlets/app/volumes/stats/data"
    assert (state.logs, state.log("stats")) == ("/work/.streamlets/app/logs", "/work/.streamlets/app/logs/stats.log")
    assert state.kafka == "/work/.streamlets/app/kafka"
    assert state.sandbox_info == "/work/.streamlets/app/sandbox.json"
    assert state.lock_file == "/work/.streamlets/app/sandbox.lock"
    assert state.topics == "/work/.streamlets/app/topics"


def test_the_default_sandbox_folder_is_under_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert StateLayout.sandbox_default("fd").root == str((tmp_path / ".streamlets" / "fd").resolve())


def test_a_checkpoint_claim_and_a_uri():
    claim = StateLayout("/checkpoints", checkpoint_folder="")
    assert claim.checkpoints("fd", "stats") == "/checkpoints/fd/stats"
    assert (claim.savepoints, claim.dumps) == ("/checkpoints/savepoints", "/checkpoints/dumps")
    assert StateLayout("", checkpoint_folder="").volume("stats", "data") == "volumes/stats/data"  # a subPath
    assert StateLayout("s3a://bucket/state").savepoints == "s3a://bucket/state/savepoints"


def test_the_run_configs_defaults_follow_the_layout_around_its_checkpoints():
    run = StreamletRunConfig(app_id="fd", streamlet="stats", class_name="m.C", checkpoint_root="s3a://b/ck/fd/stats/")
    assert run.layout() == StateLayout("s3a://b/ck", checkpoint_folder="")
    assert run.layout().checkpoints("fd", "stats") == "s3a://b/ck/fd/stats"
    assert (run.savepoints(), run.state_dumps()) == ("s3a://b/ck/savepoints", "s3a://b/ck/dumps")
    explicit = run.model_copy(update={"savepoint_root": "/sp", "state_dump_root": "/d"})
    assert (explicit.savepoints(), explicit.state_dumps()) == ("/sp", "/d")


def test_the_run_config_is_frozen():
    run = StreamletRunConfig(app_id="fd", streamlet="stats", class_name="m.C", checkpoint_root="/ck/fd/stats")
    with pytest.raises(ValidationError):
        run.dry_run = True  # type: ignore[misc]
    assert run.model_copy(update={"dry_run": True}).dry_run and not run.dry_run


def test_the_system_topics():
    topics = {t.id: t for t in system_topics("fd")}
    assert list(topics) == [DEAD_LETTERS, CONTROL, CONTROL_RESULTS, OUTLET_BATCHES]
    assert {i: t.name for i, t in topics.items()} == {DEAD_LETTERS: "fd.dead-letters", CONTROL: "fd.control",
                                                      CONTROL_RESULTS: "fd.control-results",
                                                      OUTLET_BATCHES: "fd.outlet-batches"}
    assert topics[DEAD_LETTERS].partitions is None  # the deployment's default
    assert all(topics[i].partitions == 1 for i in (CONTROL, CONTROL_RESULTS, OUTLET_BATCHES))
    assert topics[OUTLET_BATCHES].config == LEDGER_CONFIG and not topics[CONTROL].config
