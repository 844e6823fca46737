"""ExecutorControl (streamlets.runtime.executors, the autoscaler's in-place path) on a master whose
executors are JVMs of their own, `local-cluster[3,1,1024]` (Spark's standalone master and three
workers in one process tree): between micro-batches of a stateful query the executors go 3 -> 1 ->
2 -> 3, and every batch's counts, kept in the state store of the checkpoint, equal the input's; a
removed executor's state partitions load again wherever the next batch's tasks run. The same calls
on Kubernetes (pods): tests/e2e/test_flight_delays_claim.py. Local mode: test_control_stream.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "apps" / "executors" / "scale_stateful.py"


def test_executors_change_in_place_between_batches_and_state_is_kept(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_MASTER", None)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=600,
                          env=env, cwd=tmp_path)
    steps = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("STEP ")]
    assert proc.returncode == 0 and steps, proc.stdout[-3000:] + proc.stderr[-3000:]
    start, *rest = steps
    assert start["supported"] and start["cores"] == 1 and len(start["executors"]) == 3, start
    batches = [s for s in rest if s["step"] == "batch"]
    scaled = [s for s in rest if s["step"] == "scaled"]
    # the counts of every batch: 20 keys, batch b adds 5 + b records of each (scale_stateful.write)
    assert [set(b["counts"].values()) for b in batches] == [{5}, {11}, {18}, {26}], batches
    assert all(len(b["counts"]) == 20 for b in batches)
    # each change took effect, and the next batch ran on that many executors
    assert [s["to"] for s in scaled] == [3, 1, 2, 3]
    assert [len(s["executors"]) for s in scaled] == [3, 1, 2, 3], scaled
    assert [b["executors"] for b in batches[1:]] == [3, 1, 2]
    assert scaled[1]["result"].startswith("3 -> 1 executor(s): removed idle "), scaled[1]
    assert scaled[2]["result"] == "1 -> 2 executor(s) requested" and scaled[3]["result"] == "2 -> 3 executor(s) requested"
    assert len(set(scaled[1]["executors"]) & set(scaled[3]["executors"])) == 1  # the new ones are new JVMs
