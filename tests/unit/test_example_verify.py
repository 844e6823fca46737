"""`blueprint verify` on the flight-delays example: sound as shipped; an unconnected inlet is named."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

APP = Path(__file__).resolve().parents[2] / "examples" / "flight-delays"


def verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blueprint.cli", "verify", str(path)], capture_output=True, text=True,
                          timeout=120)


def test_example_blueprint_is_sound():
    result = verify(APP / "blueprint.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sound" in result.stdout


def test_unconnected_inlet_fails_and_is_named(tmp_path):
    app = tmp_path / "flight-delays"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("data", "output", ".streamlets", "__pycache__"))
    bp = yaml.safe_load((app / "blueprint.yaml").read_text())
    bp["topics"]["weather-observations"]["consumers"] = []  # enrich.weather is now read from nowhere
    (app / "blueprint.yaml").write_text(yaml.safe_dump(bp, sort_keys=False))
    result = verify(app / "blueprint.yaml")
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stdout
    assert "enrich.weather" in errors[0] and str(app / "blueprint.yaml") in errors[0]
    assert "Traceback" not in result.stdout + result.stderr
