"""flight-delays with its state on S3 (a real MinIO, tests/support/minio.py) through `blueprint run`.

The run config's `storage` section puts checkpoints, savepoints and dumps under
`s3a://streamlets/<prefix>` (streamlets.runtime.object_store); the credentials reach the sandbox
through the AWS SDK's environment variables only. One combined test, on every 8th flight of a
month (issue 26's sampling: nothing here depends on the volume):

- January, then February dropped once the first windows are out, and the sandbox SIGKILLed right
  after: a kill mid-run. Re-run: every window equals the batch computation.
- While it runs, a savepoint of `stats` and a state dump are taken (control commands): both land
  on S3, nothing under the state folder.
- Stopped, then March dropped and the sandbox started again with `--restore stats=<the savepoint
  on S3>`: the restore check and copy read S3, and every window of the three months equals the
  batch computation. `blueprint savepoint dispose --config` then deletes the savepoint from S3.
- The secret key appears nowhere in the state folder (logs included) or in what the processes
  printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from support.sandbox import REPO, blueprint_cmd, flight_delays_run_config, processes_mentioning, sigkill, start_blueprint
from support.waiting import wait_until

from streamlets.runtime.object_store import SECRET_KEY_ENV
from streamlets.state.export_files import MANIFEST as EXPORT_MANIFEST
from streamlets.state.savepoint import MANIFEST as SAVEPOINT_MANIFEST

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

EVERY = 8


def same_windows(output: Path, months: list[int]) -> bool:
    return output.exists() and differences(load_results(output), reference_stats(months, EVERY)) == []


def cli(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(blueprint_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_flight_delays_with_checkpoints_and_savepoints_on_s3(tmp_path, minio, monkeypatch):
    for name, value in minio.env().items():  # the children inherit them; no config names them
        monkeypatch.setenv(name, value)
    prefix = f"flight-delays-{uuid.uuid4().hex[:8]}"
    conf = flight_delays_run_config(tmp_path)
    conf.write_text(conf.read_text() + f'storage {{\n  checkpoints = "s3a://{minio.bucket}/{prefix}"\n'
                                       f'  s3a.endpoint = "{minio.endpoint}"\n  s3a.path-style-access = true\n}}\n')
    state = tmp_path / "state"
    args = ("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(state))
    outputs: list[str] = []

    # a kill mid-run: February dropped after January's first windows, SIGKILL a moment later
    prepare(tmp_path / "data", [1], EVERY)
    proc = start_blueprint(*args, log=tmp_path / "run-0.log")
    try:
        wait_until(lambda: proc.poll() is not None or any((tmp_path / "output").rglob("batch-*.jsonl")), timeout=900,
                   what="the first windows", on_timeout=lambda: (tmp_path / "run-0.log").read_text()[-3000:])
        assert proc.poll() is None, (tmp_path / "run-0.log").read_text()[-3000:]
        prepare(tmp_path / "data", [1, 2], EVERY)
        time.sleep(0.3)
    finally:
        sigkill(proc)
    first = load_results(tmp_path / "output")
    wait_until(lambda: not processes_mentioning(str(state)), timeout=60, what="child JVMs to exit")
    checkpoints = f"{prefix}/checkpoints/flight-delays/"
    assert any(k.startswith(f"{checkpoints}stats/out/offsets/") for k in minio.keys(checkpoints))
    assert not (state / "checkpoints").exists() and (state / "kafka").is_dir()  # the broker's data stays local

    # re-run: every window of both months; a savepoint and a state dump of stats, taken on S3
    proc = start_blueprint(*args, log=tmp_path / "run-1.log")
    try:
        wait_until(lambda: proc.poll() is not None or same_windows(tmp_path / "output", [1, 2]), timeout=900,
                   what="January's and February's windows", on_timeout=lambda: (tmp_path / "run-1.log").read_text()[-3000:])
        assert proc.poll() is None, (tmp_path / "run-1.log").read_text()[-3000:]
        for command in ("savepoint", "dump-state"):
            done = cli("control", BLUEPRINT, command, "--streamlet", "stats", "--state-dir", str(state), cwd=tmp_path)
            outputs.append(done.stdout + done.stderr)
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(180) == 0, (tmp_path / "run-1.log").read_text()[-3000:]
    if len(first) >= len(reference_stats([1, 2], EVERY)):
        pytest.fail("the kill came after February was processed: no resume was tested")
    (sp_manifest,) = [k for k in minio.keys(f"{prefix}/savepoints/flight-delays/stats/") if k.endswith(SAVEPOINT_MANIFEST)]
    savepoint = f"s3a://{minio.bucket}/{sp_manifest.rsplit('/', 1)[0]}"
    assert any(k.endswith(f"/stats/out/{EXPORT_MANIFEST}") for k in minio.keys(f"{prefix}/dumps/"))
    assert not (state / "savepoints").exists() and not (state / "dumps").exists()

    # March, restored from the savepoint on S3: every window of the three months
    prepare(tmp_path / "data", [1, 2, 3], EVERY)
    restored = cli(*args, "--exit-when-done", "--restore", f"stats={savepoint}", cwd=tmp_path, timeout=1200)
    outputs.append(restored.stdout + restored.stderr)
    assert restored.returncode == 0, restored.stdout[-3000:] + restored.stderr[-3000:]
    assert f"restored stats from {savepoint}" in " ".join(restored.stdout.split())
    assert same_windows(tmp_path / "output", [1, 2, 3])

    # disposed through the CLI, with the run config's storage section
    disposed = cli("savepoint", "dispose", savepoint, "--config", str(conf), cwd=tmp_path)
    outputs.append(disposed.stdout + disposed.stderr)
    assert disposed.returncode == 0, disposed.stdout + disposed.stderr
    assert minio.keys(sp_manifest.rsplit("/", 1)[0] + "/") == []

    # the secret key: in no file of the state folder (logs, Spark's log included) nor in any output
    assert os.environ[SECRET_KEY_ENV] == minio.secret_key  # what the sandbox had
    leaks = [str(p) for p in [*state.rglob("*"), *tmp_path.glob("run-*.log")]
             if p.is_file() and minio.secret_key.encode() in p.read_bytes()]
    leaks += [f"output {i}" for i, text in enumerate(outputs) if minio.secret_key in text]
    assert leaks == []
