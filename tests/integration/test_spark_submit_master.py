"""A driver started by spark-submit keeps spark-submit's master and settings: on a cluster the
master is k8s://..., and a session builder's .master("local[*]") used to replace it, so every
streamlet's driver ran its tasks itself and asked Kubernetes for no executor; the sandbox's
defaults (4 shuffle partitions) used to replace the SparkApplication's sparkConf (its state
partitions) too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[2]


def test_a_driver_spark_submit_started_keeps_its_master(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(
        "from streamlets.runtime.spark_session import build_spark_session, launched_by_spark_submit\n"
        "spark = build_spark_session('master-check')\n"
        "print('MASTER', spark.sparkContext.master, launched_by_spark_submit())\n"
        "print('PARTITIONS', spark.conf.get('spark.sql.shuffle.partitions'))\n"
        "spark.stop()\n")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": str(REPO)}
    env.pop("SPARK_MASTER", None)
    proc = subprocess.run([str(submit), "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=7", str(script)],
                          capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "MASTER local[2] True" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "PARTITIONS 7" in proc.stdout, proc.stdout  # not the sandbox's default 4
