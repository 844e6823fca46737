"""Helpers for tests that run `blueprint run` as a user would: in a child process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
NUMBERS = REPO / "tests" / "integration" / "apps" / "numbers"


def blueprint_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "blueprint.cli", *args]


def run_blueprint(*args: str, timeout: float = 600, cwd: Path | None = None,
                  pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """`blueprint ARGS` in a child process; `pythonpath` (an application's folder) first on its PYTHONPATH."""
    env = None
    if pythonpath is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(blueprint_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def start_blueprint(*args: str, log: Path, cwd: Path | None = None) -> subprocess.Popen:
    """Start `blueprint run` in its own process group (so a test can kill all of it)."""
    out = open(log, "w")
    return subprocess.Popen(blueprint_cmd(*args), stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)


def write_numbers(folder: Path, files: int, per_file: int) -> list[dict]:
    """JSON-lines input files for the numbers app; returns every record written."""
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for f in range(files):
        rows = [{"id": f * per_file + i, "value": i, "group": f"g{i % 5}"} for i in range(per_file)]
        tmp = folder / f".n{f:03d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, folder / f"n{f:03d}.json")  # atomic: the file source never sees half a file
        os.utime(folder / f"n{f:03d}.json", (1_700_000_000 + f, 1_700_000_000 + f))
        records.extend(rows)
    return records


def read_jsonl(folder: Path) -> list[dict]:
    rows = []
    for f in sorted(folder.glob("*.jsonl")):
        rows.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return rows


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains `text` (Spark and Kafka JVMs)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = next((l for l in (d / "status").read_text().splitlines() if l.startswith("State:")), "")
            except OSError:
                continue
            if text in cmd and "Z" not in state.split()[1:2]:
                pids.append(int(d.name))
    return pids


def wait_for_ui(proc: subprocess.Popen, state: Path, log: Path, timeout: float = 300) -> str:
    """The base URL of a sandbox started with `--ui` (its sandbox.json's "ui"), once it serves;
    fails with the log's tail if the sandbox exits first."""
    def ui() -> str | None:
        try:
            return json.loads((state / "sandbox.json").read_text()).get("ui")
        except (OSError, ValueError):
            return None

    wait_until(lambda: proc.poll() is not None or ui(), timeout=timeout, what="the sandbox's web view and API")
    assert proc.poll() is None, log.read_text()[-3000:]
    base = ui()
    assert base is not None
    return base


def sigkill(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's main process only, as `kill -9 <pid>` would."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def flight_delays_run_config(tmp: Path) -> Path:
    """`tmp/run.conf` for flight-delays: its ingress folders under `tmp/data`, windows to `tmp/output`."""
    conf = tmp / "run.conf"
    conf.write_text("streamlets {\n"
                    f'  flights.volume-mounts.source = "{tmp}/data/flights"\n'
                    f'  weather.volume-mounts.source = "{tmp}/data/weather"\n'
                    f'  files.volume-mounts.output = "{tmp}/output"\n'
                    "}\n")
    return conf
