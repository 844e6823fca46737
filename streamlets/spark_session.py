"""SparkSession for streamlets: the Kafka and Avro connectors, resolved by Spark from Maven.

The connector versions match the installed PySpark (`spark.jars.packages`); Ivy's cache lives
under the streamlets cache folder so CI and later runs reuse it (`spark.jars.ivy`). If Maven is
reached through a mirror declared in ~/.m2/settings.xml, Spark's resolver is pointed at it
(`spark.jars.repositories`).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def cache_root() -> Path:
    """Folder for every download (Kafka jars, Spark packages): $STREAMLETS_CACHE or ~/.cache/streamlets."""
    return Path(os.environ.get("STREAMLETS_CACHE") or Path.home() / ".cache" / "streamlets")


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def connector_packages(version: str | None = None) -> list[str]:
    """Maven coordinates of the Kafka source/sink and Avro functions for this Spark."""
    v = version or spark_version()
    scala = "2.13"  # Spark 4 is built for Scala 2.13 only
    return [f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{v}", f"org.apache.spark:spark-avro_{scala}:{v}"]


def maven_mirrors(settings: Path | None = None) -> list[str]:
    """Mirror URLs from Maven's settings.xml (~/.m2/settings.xml), blocked mirrors left out."""
    path = settings or Path.home() / ".m2" / "settings.xml"
    if not path.is_file():
        return []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return []
    ns = re.match(r"\{.*\}", root.tag)
    p = ns.group(0) if ns else ""
    urls = []
    for mirror in root.iter(f"{p}mirror"):
        url, blocked = mirror.findtext(f"{p}url"), mirror.findtext(f"{p}blocked")
        if url and (blocked or "").strip().lower() != "true":
            urls.append(url.strip())
    return urls


DEFAULT_CONF: dict[str, str] = {
    # Small state stores and few tasks: streamlets run on a few cores in the sandbox; a
    # cluster deployment overrides these per streamlet (streamlets.<name>.spark).
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.adaptive.enabled": "false",  # AQE does not apply to streaming; keep plans stable
    "spark.driver.memory": "2g",
}


def build_spark_session(
    app_name: str,
    conf: Mapping[str, str] | None = None,
    master: str | None = None,
) -> "SparkSession":
    """Create (or get) the SparkSession with the connectors on its classpath.

    `conf` entries override DEFAULT_CONF. `master` defaults to $SPARK_MASTER or local[*].
    The first call on a machine downloads the connector jars (about 10 MB) into the cache.
    """
    from pyspark.sql import SparkSession

    settings = dict(DEFAULT_CONF)
    settings["spark.jars.packages"] = ",".join(connector_packages())
    settings["spark.jars.ivy"] = str(cache_root() / "ivy")
    mirrors = maven_mirrors()
    if mirrors:
        settings["spark.jars.repositories"] = ",".join(mirrors)
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name).master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMLETS_SPARK_LOG_LEVEL", "WARN"))
    return spark
