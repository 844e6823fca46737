"""A full disk under the sandbox's state folder is named as such, with the folder: one line and
exit status 1, not a generic KafkaException after a minute of client errors. The disk is a
small tmpfs (needs root to mount; skipped otherwise), filled while the sandbox runs."""

from __future__ import annotations

import errno
import os
import signal
import subprocess

import pytest

from sandbox_helpers import NUMBERS, processes_mentioning, start_blueprint, wait_until, write_numbers

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk) -> int:
    """Write into `disk` until it is full; returns the bytes written."""
    written, chunk = 0, b"\0" * (1 << 20)
    with open(disk / "filler", "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                return written


def test_a_full_disk_stops_the_sandbox_with_one_line_naming_the_folder(tmp_path, small_disk):
    write_numbers(tmp_path / "src", files=2, per_file=200)
    conf = tmp_path / "run.conf"
    conf.write_text('streamlets {\n  ingress.volume-mounts.source = "src"\n  files.volume-mounts.output = "out"\n}\n')
    state = small_disk / "state"
    log = tmp_path / "run.log"
    proc = start_blueprint("run", str(NUMBERS / "blueprint.yaml"), "--config", str(conf), "--state-dir", str(state),
                           log=log)
    try:
        wait_until(lambda: (state / "sandbox.json").is_file() or proc.poll() is not None, timeout=300,
                   what="the sandbox to start")
        assert proc.poll() is None, log.read_text()[-3000:]
        assert fill(small_disk) > 0
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        (small_disk / "filler").unlink(missing_ok=True)
        wait_until(lambda: not processes_mentioning(str(state)), timeout=60, what="child JVMs to exit")
    out = log.read_text()
    assert code == 1, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert errors == [errors[0]] and errors[0].startswith(f"error: the disk of the state folder {state} is full ("), out[-3000:]
    assert "Traceback" not in out and "Logging error" not in out and "KafkaException" not in out


def test_a_full_disk_before_the_start_starts_nothing(tmp_path, small_disk):
    fill(small_disk)
    result = subprocess.run([*__import__("sandbox_helpers").blueprint_cmd("run", str(NUMBERS / "blueprint.yaml"),
                                                                            "--state-dir", str(small_disk / "state"))],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: the disk of the state folder {small_disk / 'state'} is full ("), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
