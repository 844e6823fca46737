"""A state folder has one owner: while `blueprint run` of the flight-delays example runs, a second
run on its state folder, with and without --fresh, and `blueprint state repartition` of one of its
checkpoints are refused with one line naming the running sandbox (pid, start time); nothing is
deleted, and the first run's results equal the batch computation."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from support.sandbox import REPO, flight_delays_run_config, processes_mentioning, run_blueprint, start_blueprint
from support.waiting import wait_until

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402


def folders_and_logs(state: Path) -> set[str]:
    """What a deleting second run would take away: every folder (Kafka's partitions, checkpoints)
    and the log files. (Files inside checkpoints come and go as Spark retires old batches.)"""
    return {str(p.relative_to(state)) for p in state.rglob("*") if p.is_dir() or p.suffix == ".log"}


def test_second_run_on_a_busy_state_folder_is_refused_and_the_first_is_unharmed(tmp_path):
    prepare(tmp_path / "data", [1])
    conf = flight_delays_run_config(tmp_path)
    state = tmp_path / "state"
    args = ("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(state))
    first = start_blueprint(*args, "--exit-when-done", log=tmp_path / "first-run.log")
    try:
        checkpoints = state / "checkpoints" / "flight-delays" / "stats"
        wait_until(lambda: (state / "sandbox.json").is_file() and any(checkpoints.glob("*/commits/0"))
                   or first.poll() is not None, timeout=600, what="the first run's first committed batch")
        assert first.poll() is None, (tmp_path / "first-run.log").read_text()[-3000:]
        before = folders_and_logs(state)
        assert {"kafka", "logs/sandbox.log", "checkpoints/flight-delays/stats"} <= before

        for extra in ((), ("--fresh",)):
            second = run_blueprint(*args, *extra, timeout=300)
            assert second.returncode == 1, second.stdout[-2000:] + second.stderr[-2000:]
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert lines[0].startswith(f"error: state folder {state} is in use by blueprint run (pid {first.pid}, started ")
            assert "nothing was changed" in lines[0]
            assert before <= folders_and_logs(state), sorted(before - folders_and_logs(state))

        query = next(p for p in checkpoints.iterdir() if (p / "commits").is_dir())
        refused = run_blueprint("state", "repartition", str(query), "--partitions", "2", timeout=300)
        assert refused.returncode == 1 and f"(pid {first.pid}, started " in refused.stderr, refused.stderr
        assert before <= folders_and_logs(state)

        assert first.wait(timeout=1200) == 0, (tmp_path / "first-run.log").read_text()[-3000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    wait_until(lambda: not processes_mentioning(str(state)), timeout=60, what="child JVMs to exit")
    actual, expected = load_results(tmp_path / "output"), reference_stats([1])
    assert not actual.empty and differences(actual, expected) == [] and len(actual) == len(expected)
