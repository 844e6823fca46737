"""Put Spark's Kafka and Avro connectors, Hadoop's S3A connector and their dependencies into
$SPARK_HOME/jars at image build time, so that a driver or an executor pod downloads nothing when it
starts, whether its state is on a claim or on S3.

Spark resolves them itself (`spark.jars.packages`, its Ivy resolution, with the Ivy cache in a
temporary folder); the jars PySpark already ships (lz4, snappy, the Hadoop client...) are left out,
the others are copied under their usual names (spark-avro_2.13-4.2.0.jar). The coordinates and
exclusions are streamlets.runtime.jars' (copied next to this file by the Dockerfile: the package is
installed later), for the installed PySpark, which then finds them in $SPARK_HOME/jars and asks for
no packages (tests/integration/test_images.py checks both). Run with the venv's python after
PySpark is installed:

    python connectors.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

try:
    from jars import S3A_EXCLUDES, connector_packages, hadoop_version, s3a_packages  # the image build: next to this file
except ImportError:
    from streamlets.runtime.jars import S3A_EXCLUDES, connector_packages, hadoop_version, s3a_packages


def main() -> int:
    start = time.time()
    version = pyspark.__version__
    jars_dir = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    shipped = {p.name for p in jars_dir.glob("*.jar")}
    packages = connector_packages(version) + s3a_packages()
    with tempfile.TemporaryDirectory() as ivy:
        spark = (SparkSession.builder.master("local[1]").appName("resolve-connectors")
                 .config("spark.jars.packages", ",".join(packages))
                 .config("spark.jars.excludes", ",".join(S3A_EXCLUDES))
                 .config("spark.jars.ivy", ivy)
                 .config("spark.ui.enabled", "false")
                 .getOrCreate())
        resolved = spark.sparkContext.getConf().get("spark.jars", "")
        spark.stop()
        added = []
        for uri in filter(None, resolved.split(",")):
            path = Path(uri.removeprefix("file://").removeprefix("file:"))
            name = path.name.partition("_")[2]  # Ivy names them <organisation>_<artifact>-<version>.jar
            if name and name not in shipped:
                shutil.copyfile(path, jars_dir / name)
                added.append(name)
    wanted = [f"{c.split(':')[1]}-{version}.jar" for c in connector_packages(version)]
    wanted.append(f"hadoop-aws-{hadoop_version()}.jar")
    missing = [name for name in wanted if name not in added]
    if missing:
        print(f"connectors: {', '.join(missing)} not resolved (spark.jars = {resolved!r})", file=sys.stderr)
        return 1
    print(f"connectors: {len(added)} jars into {jars_dir} ({time.time() - start:.0f} s): {' '.join(sorted(added))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
