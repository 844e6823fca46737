"""The jars a streamlet's Spark needs beyond PySpark's own, declared once: the Kafka and Avro
connectors of the installed PySpark, and Hadoop's S3A connector (hadoop-aws and the AWS SDK v2's
per-service jars) for a state root on S3 (streamlets.runtime.object_store).

Two places resolve them through Spark's Ivy: a local session (streamlets.runtime.spark_session,
`spark.jars.packages`, cached), and the streamlet image's build (docker/connectors.py, which copies
this file next to itself: it runs before the package is installed, so this module imports nothing
of it), which puts them into $SPARK_HOME/jars so a pod downloads nothing.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

SCALA = "2.13"  # Spark 4 is built for Scala 2.13 only


def spark_version() -> str:
    """The installed PySpark's version (`4.2.0`), read without starting Spark."""
    import pyspark

    return pyspark.__version__


def connector_packages(version: str | None = None) -> list[str]:
    """Maven coordinates of the Kafka source/sink and Avro functions for this Spark."""
    v = version or spark_version()
    return [f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{v}", f"org.apache.spark:spark-avro_{SCALA}:{v}"]


def spark_jars_dir() -> Path:
    """Spark's own jars: $SPARK_HOME/jars, else those of the installed PySpark."""
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"


def hadoop_version() -> str:
    """The version of the Hadoop client in Spark's jars (`hadoop-client-runtime-<version>.jar`: 3.5.0
    for PySpark 4.2.0). RuntimeError if there is none."""
    for jar in spark_jars_dir().glob("hadoop-client-runtime-*.jar"):
        return jar.name[len("hadoop-client-runtime-"):-len(".jar")]
    raise RuntimeError(f"no hadoop-client-runtime jar in {spark_jars_dir()}: cannot tell which hadoop-aws matches")


# The kafka-clients version each Spark release's Kafka connector depends on (spark-parent's
# kafka.version): the exactly-once sink's jar compiles against it (streamlets.runtime.eos_jar).
KAFKA_CLIENTS_FOR_SPARK = {"4.2.0": "3.9.2"}
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


def kafka_clients_version(version: str | None = None) -> str:
    """kafka-clients' version for this Spark (KAFKA_CLIENTS_FOR_SPARK). RuntimeError for a Spark it
    does not know."""
    v = version or spark_version()
    if v not in KAFKA_CLIENTS_FOR_SPARK:
        raise RuntimeError(f"Spark {v}: which kafka-clients its Kafka connector uses is not known; add it to "
                           "streamlets.runtime.jars.KAFKA_CLIENTS_FOR_SPARK (spark-parent's kafka.version)")
    return KAFKA_CLIENTS_FOR_SPARK[v]


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


# The AWS SDK v2 version each Hadoop release is built with (hadoop-project's aws-java-sdk-v2.version)
AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4"}
# What the S3A packages would pull in that Spark ships itself, or that S3A needs not: the SDK's
# all-services bundle (690 MB; the per-service jars replace it), Netty, HTTP client, logging, codec,
# and wildfly-openssl (only for fs.s3a.ssl.channel.mode=openssl). Ivy's glob patterns, group:artifact.
S3A_EXCLUDES = ("software.amazon.awssdk:bundle", "io.netty:*", "org.apache.httpcomponents:*", "commons-logging:*",
                "commons-codec:*", "org.slf4j:*", "org.wildfly.openssl:*")


def s3a_packages() -> list[str]:
    """Maven coordinates of Hadoop's S3A connector for Spark's Hadoop: hadoop-aws and the AWS SDK's
    s3 and s3-transfer-manager (their dependencies follow, less S3A_EXCLUDES). RuntimeError for a
    Hadoop whose SDK version AWS_SDK_FOR_HADOOP does not know."""
    hadoop = hadoop_version()
    sdk = AWS_SDK_FOR_HADOOP.get(hadoop)
    if sdk is None:
        raise RuntimeError(f"Hadoop {hadoop}: which AWS SDK v2 its hadoop-aws needs is not known; add it to "
                           "streamlets.runtime.jars.AWS_SDK_FOR_HADOOP (hadoop-project's aws-java-sdk-v2.version)")
    return [f"org.apache.hadoop:hadoop-aws:{hadoop}", f"software.amazon.awssdk:s3:{sdk}",
            f"software.amazon.awssdk:s3-transfer-manager:{sdk}"]


def connectors_in_spark_home(version: str | None = None, s3a: bool = False) -> bool:
    """Whether Spark's own jars include the connectors (the streamlet image puts them in
    $SPARK_HOME/jars when it is built, docker/connectors.py), and with `s3a` hadoop-aws too: then
    they are on every JVM's class path already, and a session asks for no packages (nothing to
    download, nothing to resolve)."""
    v = version or spark_version()
    names = [f"{coordinate.split(':')[1]}-{v}.jar" for coordinate in connector_packages(v)]
    if s3a:
        names.append(f"hadoop-aws-{hadoop_version()}.jar")
    return all((spark_jars_dir() / name).is_file() for name in names)
