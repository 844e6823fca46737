"""`python -m streamlets.runner --config run.json` with a bad run config: exit 2, one error line.

These fail before Spark starts, so they need neither Spark nor Kafka (the happy path is in
tests/integration/test_sdk_kafka.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamlets.loading import StreamletLoadError, load_streamlet_class

REPO = Path(__file__).resolve().parents[2]


def run_runner(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "streamlets.runner", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


def assert_one_error_line(res: subprocess.CompletedProcess, path: Path) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: cannot read run config {path}")
    return lines[0]


def test_missing_config_file(tmp_path):
    path = tmp_path / "nope.json"
    line = assert_one_error_line(run_runner("--config", str(path)), path)
    assert "No such file" in line


@pytest.mark.parametrize("text, words", [
    ('{"app_id": "a",\n', "line 2 column"),  # invalid JSON
    ('{"app_id": "a"}', "class_name"),  # required fields missing
    ('{"app_id": "a", "streamlet": "s", "class_name": "m.C", "checkpoint_root": "/tmp/x", "available_now": "soon"}',
     "available_now"),
], ids=["invalid-json", "missing-fields", "wrong-type"])
def test_malformed_config_gives_one_line(tmp_path, text, words):
    path = tmp_path / "run.json"
    path.write_text(text)
    line = assert_one_error_line(run_runner("--config", str(path)), path)
    assert words in line


def test_config_argument_is_required():
    res = run_runner()
    assert res.returncode == 2 and "--config" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("name, words", [
    ("nomodule", "is not a class path of the form module.Class"),
    ("no_such_module_xyz.Cls", "cannot import module 'no_such_module_xyz'"),
    ("streamlets.runtime.runner.Nope", "module 'streamlets.runtime.runner' has no class 'Nope'"),
    ("streamlets.runtime.runner.StreamletRuntime", "is not a Streamlet subclass"),
    ("streamlets.Streamlet", "does not implement create_logic"),
])
def test_load_streamlet_class_errors(name, words):
    with pytest.raises(StreamletLoadError, match=words):
        load_streamlet_class(name)
