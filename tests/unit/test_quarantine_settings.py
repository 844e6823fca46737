"""streamlets.runtime.quarantine without Spark: the user's exception out of Spark's text, bisection,
the ledger; the on-failure setting through the local config, the deploy config, the CRD and the
operator's run config; the supervisor's exit descriptions."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprint.cli import app as blueprint_cli
from blueprint.sandbox.localconfig import LocalConfigError, load_settings
from blueprint.sandbox.supervisor import Tries, exit_description
from streamlets.runtime.failures import user_exception
from streamlets.runtime.quarantine import NotIsolable, _split, add_to_ledger, bisect, read_ledger

ROOT = Path(__file__).resolve().parents[2]
BLUEPRINT = ROOT / "examples" / "flight-delays" / "blueprint.yaml"

SPARK_TEXT = """[STREAM_FAILED] Query enrich.out [id = 5b1, runId = 9c2] terminated with exception: Job aborted due to \
stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 7) (10.0.0.1 \
executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main
    process()
  File "/usr/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/util.py", line 83, in wrapper
    return f(*args, **kwargs)
  File "/home/me/app/enrich.py", line 42, in check
    raise ValueError(f"bad flight {fid}")
ValueError: bad flight 20130101-UA1545-EWR

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.sql.execution.python.PythonUDFRunner$$anon$2.read(PythonUDFRunner.scala:94)
"""


def test_user_exception_from_spark_wrapper():
    line = user_exception(SPARK_TEXT)
    assert line == "ValueError: bad flight 20130101-UA1545-EWR (at /home/me/app/enrich.py:42, in check)"


def test_user_exception_module_qualified_type_and_no_user_frame():
    text = ("PythonException: Traceback (most recent call last):\n"
            '  File "/x/site-packages/pyspark/worker.py", line 5, in main\n'
            "app.errors.PoisonError: cannot enrich\n\tat org.apache.X")
    assert user_exception(text) == "app.errors.PoisonError: cannot enrich (at /x/site-packages/pyspark/worker.py:5, in main)"


def test_user_exception_without_traceback_is_the_first_line():
    assert user_exception("\norg.apache.kafka.common.errors.TimeoutException: Timed out\n\tat x") == \
        "org.apache.kafka.common.errors.TimeoutException: Timed out"
    assert user_exception(None) == ""


def _fails(bad: set[tuple[int, int]], calls: list):
    def fails(intervals):
        calls.append(intervals)
        hit = sorted((p, o) for p, lo, hi in intervals for (bp, o) in bad if bp == p and lo <= o < hi)
        return f"ValueError: {hit}" if hit else None
    return fails


def test_bisect_finds_three_records_in_three_partitions():
    bad = {(0, 5), (1, 299), (2, 0)}
    calls: list = []
    found = bisect([(0, 0, 300), (1, 0, 300), (2, 0, 300)], _fails(bad, calls))
    assert sorted(found) == [(0, 5, 6), (1, 299, 300), (2, 0, 1)]
    assert found[(1, 299, 300)] == "ValueError: [(1, 299)]"
    assert len(calls) <= 3 * 12  # about k * log2(n), far below one probe per record


def test_bisect_ranges_not_starting_at_zero_and_one_record():
    assert list(bisect([(3, 1000, 1001)], _fails({(3, 1000)}, []))) == [(3, 1000, 1001)]
    assert list(bisect([(0, 10, 13), (1, 7, 9)], _fails({(1, 8)}, []))) == [(1, 8, 9)]


def test_bisect_refuses_a_failure_of_several_records_together():
    def together(intervals):  # fails only when both 2 and 7 are in
        offsets = {o for _, lo, hi in intervals for o in range(lo, hi)}
        return "boom" if {2, 7} <= offsets else None

    with pytest.raises(NotIsolable):
        bisect([(0, 0, 10)], together)
    with pytest.raises(NotIsolable):
        bisect([(0, 5, 5)], together)


def test_split_halves_by_records():
    a, b = _split([(0, 0, 3), (1, 10, 15)])
    assert a == [(0, 0, 3), (1, 10, 11)] and b == [(1, 11, 15)]


def test_ledger_round_trip_without_duplicates(tmp_path):
    root = str(tmp_path / "checkpoints" / "app" / "enrich")
    assert read_ledger(root) == []
    rec = {"query": "out", "inlet": "flights", "topic": "t", "partition": 1, "offset": 7, "batch": 0, "error": "E", "time": 1.0}
    add_to_ledger(root, [rec])
    add_to_ledger(root, [rec, {**rec, "offset": 8}])
    assert [(r["partition"], r["offset"]) for r in read_ledger(root)] == [(1, 7), (1, 8)]
    (tmp_path / "checkpoints" / "app" / "enrich" / "quarantine-ledger.json").write_text("{not json")
    with pytest.raises(ValueError, match="quarantine-ledger.json: damaged"):
        read_ledger(root)


def test_on_failure_in_the_local_config(tmp_path):
    conf = tmp_path / "run.conf"
    conf.write_text("streamlets { enrich.on-failure = quarantine }\n")
    settings = load_settings(conf, ["streamlets.stats.on-failure=stop"], ["enrich", "stats"])
    assert settings["enrich"].on_failure == "quarantine" and settings["stats"].on_failure == "stop"
    with pytest.raises(LocalConfigError, match=r"'skip' is not an on-failure mode \(one of stop, quarantine\)"):
        load_settings(None, ["streamlets.enrich.on-failure=skip"], ["enrich"])


def test_on_failure_through_build_crd_and_the_drivers_run_config(tmp_path):
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets_operator import render

    conf = tmp_path / "deploy.conf"
    conf.write_text("streamlets { enrich.on-failure = quarantine }\n")
    result = CliRunner().invoke(blueprint_cli, ["build", str(BLUEPRINT), "--image", "r/fd:1", "--kafka", "k:9092",
                                                "--conf", str(conf)])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.stdout)
    enrich = next(s for s in body["spec"]["streamlets"] if s["name"] == "enrich")
    stats = next(s for s in body["spec"]["streamlets"] if s["name"] == "stats")
    assert enrich["onFailure"] == "quarantine" and "onFailure" not in stats
    assert StreamletRunConfig(**render.run_config(body["spec"], enrich)).on_failure == "quarantine"
    assert StreamletRunConfig(**render.run_config(body["spec"], stats)).on_failure is None
    crd = yaml.safe_load((ROOT / "blueprint" / "crds" / "streamlets.io_streamletapplications.yaml").read_text())
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["streamlets"]["items"]["properties"]
    assert props["onFailure"]["enum"] == ["stop", "quarantine"]


def test_bad_on_failure_in_a_deploy_config_is_one_problem(tmp_path):
    conf = tmp_path / "deploy.conf"
    conf.write_text("streamlets { enrich.on-failure = skip }\n")
    result = CliRunner().invoke(blueprint_cli, ["build", str(BLUEPRINT), "--image", "r/fd:1", "--kafka", "k:9092",
                                                "--conf", str(conf)])
    assert result.exit_code != 0
    assert "streamlets.enrich.on-failure" in result.output and "not an on-failure mode" in result.output


def test_on_failure_declared_on_the_class_is_checked():
    from streamlets import Streamlet
    from streamlets.errors import StreamletDefinitionError

    class Fine(Streamlet):
        on_failure = "quarantine"

        def create_logic(self, ctx):
            pass

    assert Fine.on_failure == "quarantine"
    with pytest.raises(StreamletDefinitionError, match="on_failure must be 'stop' or 'quarantine'"):
        class Wrong(Streamlet):
            on_failure = "retry"

            def create_logic(self, ctx):
                pass


def test_exit_descriptions_and_tries_window():
    assert exit_description(-signal.SIGKILL) == "signal SIGKILL"
    assert exit_description(1) == "exit code 1"
    t = Tries()
    assert [t.add(0, 10), t.add(5, 10), t.add(14, 10), t.add(30, 10)] == [1, 2, 2, 1]
