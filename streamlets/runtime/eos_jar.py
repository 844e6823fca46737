"""The streamlets-kafka-eos jar: executor-written exactly-once Kafka outlets (issue 30, a spike).

Its Java sources live in `jvm/streamlets-kafka-eos/src/main/java` (docs/eos-executor-writes.md
says what it does). `eos_jar()` builds it with runtime.jvm_jars against kafka-clients (the
connector jar Spark's Kafka package resolved into the Ivy cache) and Spark's own jars.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..cache import cache_root
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
    image), else the newest in the Ivy cache (`<cache>/ivy/jars`). Raises EosJarError if none."""
    found = [j for j in spark_jars() if j.name.startswith(KAFKA_CLIENTS + "-")]
    found = found or sorted((cache_root() / "ivy" / "jars").glob(f"org.apache.kafka_{KAFKA_CLIENTS}-*.jar"))
    if not found:
        raise EosJarError(f"no {KAFKA_CLIENTS} jar in Spark's jars or {cache_root() / 'ivy' / 'jars'}: "
                          "start one Spark session with the Kafka connector first")
    return found[-1]


def classpath() -> list[Path]:
    """The jars the eos jar compiles and runs against: kafka-clients first, then Spark's."""
    return [kafka_clients_jar(), *spark_jars()]


def eos_jar() -> Path:
    """The jar (runtime.jvm_jars.module_jar). Raises EosJarError (with javac's output) when it
    cannot be built."""
    return module_jar(NAME, classpath())


def tool_command(*args: str) -> list[str]:
    """`java -cp <eos jar>:<kafka-clients>:<Spark's jars> streamlets.kafka.eos.Tool ARGS`."""
    cp = os.pathsep.join(map(str, [eos_jar(), *classpath()]))
    return ["java", "-cp", cp, TOOL_CLASS, *args]
