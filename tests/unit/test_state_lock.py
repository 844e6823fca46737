"""One owner per state folder (blueprint.sandbox.statelock): a second owner is refused with the
first one's pid and start time, and nothing in the folder is deleted or created."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blueprint.sandbox.statelock import LOCK_FILE, StateFolderBusy, StateLock, clear_state_folder, is_busy

NUMBERS = Path(__file__).resolve().parents[1] / "integration" / "apps" / "numbers"
HOLD = ("import sys, time; from pathlib import Path; from blueprint.sandbox.statelock import StateLock; "
        "StateLock(Path(sys.argv[1]), 'blueprint run').acquire(); print('held', flush=True); time.sleep(600)")


@pytest.fixture
def held(tmp_path):
    """A state folder with files in it, locked by another process (as a running sandbox does)."""
    state = tmp_path / "state"
    (state / "kafka").mkdir(parents=True)
    (state / "kafka" / "meta.properties").write_text("x")
    (state / "logs").mkdir()
    (state / "logs" / "sandbox.log").write_text("y")
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(state)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout.readline().strip() == "held"
    yield state, proc
    proc.kill()
    proc.wait()


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != LOCK_FILE}


def test_a_second_owner_is_refused_with_the_first_ones_pid(held):
    state, proc = held
    assert f"pid {proc.pid}" in is_busy(state)
    with pytest.raises(StateFolderBusy) as e:
        StateLock(state).acquire()
    message = str(e.value)
    assert str(state) in message and f"pid {proc.pid}, started " in message and "blueprint run" in message


def test_the_lock_ends_with_its_process(held):
    state, proc = held
    proc.kill()
    proc.wait()
    assert is_busy(state) is None
    with StateLock(state, "test") as lock:
        assert lock.held
        with pytest.raises(StateFolderBusy, match=f"test \\(pid {os.getpid()}, started "):
            StateLock(state).acquire()  # a second open file of the same process is a second owner too
    assert is_busy(state) is None


@pytest.mark.parametrize("fresh", [False, True])
def test_blueprint_run_on_a_busy_folder_is_refused_and_deletes_nothing(held, fresh):
    state, proc = held
    before = files(state)
    result = subprocess.run([sys.executable, "-m", "blueprint.cli", "run", str(NUMBERS / "blueprint.yaml"),
                             "--state-dir", str(state), *(["--fresh"] if fresh else [])],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: state folder ") and f"(pid {proc.pid}, started " in lines[0]
    assert files(state) == before
    assert sorted(p.name for p in state.iterdir()) == sorted(["kafka", "logs", LOCK_FILE])


def test_state_repartition_in_a_busy_folder_is_refused(held):
    state, proc = held
    checkpoint = state / "checkpoints" / "app" / "s" / "q"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "1").write_text("planned, not committed: the running query's\n")
    before = files(state)
    result = subprocess.run([sys.executable, "-m", "blueprint.cli", "state", "repartition", str(checkpoint), "-n", "2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert f"(pid {proc.pid}, started " in result.stderr and "Traceback" not in result.stderr
    assert files(state) == before


def test_fresh_keeps_only_the_lock_file(tmp_path):
    state = tmp_path / "state"
    with StateLock(state, "test"):
        (state / "kafka").mkdir()
        (state / "kafka" / "x").write_text("x")
        (state / "sandbox.json").write_text("{}")
        clear_state_folder(state)
        assert [p.name for p in state.iterdir()] == [LOCK_FILE]
