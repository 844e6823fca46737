"""The streamlets-kafka-eos jar: the exactly-once Kafka sink, written by the executors
(streamlets.runtime.exactly_once; docs/eos-executor-writes.md says how).

Its Java sources live in `jvm/streamlets-kafka-eos/src/main/java`. `eos_jar()` builds it with
runtime.jvm_jars against kafka-clients (Spark's Kafka connector's version: the jar in
$SPARK_HOME/jars or Spark's Ivy cache, else fetched once from Maven Central) and Spark's own jars.
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from pathlib import Path

from ..cache import cache_root
from .jars import MAVEN_CENTRAL, kafka_clients_version, maven_mirrors
from .jvm_jars import JarBuildError, module_jar, sources_of, spark_jars

NAME = "streamlets-kafka-eos"
SOURCES = sources_of(NAME)
KAFKA_CLIENTS = "kafka-clients"
# The Spark data source's short name (DataSourceRegister) and its class.
FORMAT = "streamlets-kafka-eos"
PROVIDER_CLASS = "streamlets.kafka.eos.EosKafkaSink"
TOOL_CLASS = "streamlets.kafka.eos.Tool"

EosJarError = JarBuildError  # the jar cannot be built


def kafka_clients_jar() -> Path:
    """The kafka-clients jar Spark's Kafka connector uses: in $SPARK_HOME/jars (the streamlet
    image), else `<cache>/jvm/deps`'s, else the Ivy cache's (`<cache>/ivy/jars`, from a session's
    connector resolution), else into `<cache>/jvm/deps` from Maven (the first mirror of ~/.m2/settings.xml, else Maven
    Central) on first use: a fresh machine's first session needs it before Ivy ran. Raises
    EosJarError if it cannot be fetched."""
    found = [j for j in spark_jars() if j.name.startswith(KAFKA_CLIENTS + "-")]
    if found:
        return found[-1]
    version = kafka_clients_version()
    target = cache_root() / "jvm" / "deps" / f"{KAFKA_CLIENTS}-{version}.jar"
    ivy = cache_root() / "ivy" / "jars" / f"org.apache.kafka_{KAFKA_CLIENTS}-{version}.jar"
    if not target.is_file() and ivy.is_file():
        return ivy
    if not target.is_file():
        repository = (maven_mirrors() or [MAVEN_CENTRAL])[0].rstrip("/")
        url = f"{repository}/org/apache/kafka/{KAFKA_CLIENTS}/{version}/{KAFKA_CLIENTS}-{version}.jar"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
                shutil.copyfileobj(response, out)
            os.replace(partial, target)  # atomic: a jar there is whole
        except OSError as e:
            partial.unlink(missing_ok=True)
            raise EosJarError(f"{KAFKA_CLIENTS} {version} could not be fetched from {url}: {e}") from e
    return target


def classpath() -> list[Path]:
    """The jars the eos jar compiles and runs against: kafka-clients first, then Spark's."""
    return [kafka_clients_jar(), *spark_jars()]


def eos_jar() -> Path:
    """The jar (runtime.jvm_jars.module_jar). Raises EosJarError (with javac's output) when it
    cannot be built."""
    return module_jar(NAME, classpath())


def built_eos_jar() -> Path | None:
    """eos_jar(), or None when it cannot be built here (no javac, kafka-clients not fetchable)."""
    try:
        return eos_jar()
    except EosJarError:
        return None


def tool_command(*args: str) -> list[str]:
    """`java -cp <eos jar>:<kafka-clients>:<Spark's jars> streamlets.kafka.eos.Tool ARGS`."""
    cp = os.pathsep.join(map(str, [eos_jar(), *classpath()]))
    return ["java", "-cp", cp, TOOL_CLASS, *args]
