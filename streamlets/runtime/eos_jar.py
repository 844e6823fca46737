"""The streamlets-kafka-eos jar: executor-written exactly-once Kafka outlets (issue 30, a spike).

Its Java sources live in `jvm/streamlets-kafka-eos/src/main/java` (docs/eos-executor-writes.md
says what it does). `eos_jar()` compiles them with `javac` against kafka-clients (the connector
jar Spark's Kafka package resolved into the Ivy cache) and Spark's own jars, and caches the jar
under `<cache>/jvm/streamlets-kafka-eos-<hash>.jar`, the hash covering the sources and the class
path's jar names: the jar is built once, and again only when a source or a version changes.
A session puts it on `spark.jars` like the connectors (runtime.spark_session).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ..cache import cache_root
from .jars import spark_jars_dir

NAME = "streamlets-kafka-eos"
SOURCES = Path(__file__).resolve().parents[2] / "jvm" / NAME / "src" / "main" / "java"
KAFKA_CLIENTS = "kafka-clients"
# The Spark data source's short name (DataSourceRegister) and its class.
FORMAT = "streamlets-kafka-eos"
PROVIDER_CLASS = "streamlets.kafka.eos.EosKafkaSink"
TOOL_CLASS = "streamlets.kafka.eos.Tool"


class EosJarError(RuntimeError):
    """The jar cannot be built: sources, javac or the kafka-clients jar missing, or javac failed."""


def _spark_jars() -> list[Path]:
    return sorted(spark_jars_dir().glob("*.jar"))


def kafka_clients_jar() -> Path:
    """The kafka-clients jar Spark's Kafka connector uses: in $SPARK_HOME/jars (the streamlet
    image), else the newest in the Ivy cache (`<cache>/ivy/jars`). Raises EosJarError if none."""
    found = [j for j in _spark_jars() if j.name.startswith(KAFKA_CLIENTS + "-")]
    found = found or sorted((cache_root() / "ivy" / "jars").glob(f"org.apache.kafka_{KAFKA_CLIENTS}-*.jar"))
    if not found:
        raise EosJarError(f"no {KAFKA_CLIENTS} jar in Spark's jars or {cache_root() / 'ivy' / 'jars'}: "
                          "start one Spark session with the Kafka connector first")
    return found[-1]


def classpath() -> list[Path]:
    """The jars the eos jar compiles and runs against: kafka-clients first, then Spark's."""
    return [kafka_clients_jar(), *_spark_jars()]


def eos_jar() -> Path:
    """The jar: the one in $SPARK_HOME/jars if an image put it there (named NAME-*.jar), else the
    cache's build for these sources and class path, compiled now if missing. Raises EosJarError
    (with javac's output) when it cannot be built."""
    shipped = [j for j in _spark_jars() if j.name.startswith(NAME + "-")]
    if shipped:
        return shipped[-1]
    sources = sorted(SOURCES.rglob("*.java"))
    if not sources:
        raise EosJarError(f"no Java sources under {SOURCES}")
    cp = classpath()
    digest = hashlib.sha256()
    for src in sources:
        digest.update(str(src.relative_to(SOURCES)).encode() + b"\0" + src.read_bytes())
    for jar in cp:
        digest.update(jar.name.encode())
    target = cache_root() / "jvm" / f"{NAME}-{digest.hexdigest()[:16]}.jar"
    if target.is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise EosJarError("javac not found: install a JDK 17 to build the eos jar")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        classes = Path(tmp) / "classes"
        run = subprocess.run([javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
                              os.pathsep.join(map(str, cp)), *map(str, sources)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise EosJarError(f"javac failed for {SOURCES}:\n{run.stdout}{run.stderr}")
        resources = SOURCES.parent / "resources"
        partial = Path(tmp) / "out.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for root in (classes, resources):
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    archive.write(path, path.relative_to(root).as_posix())
        os.replace(partial, target)  # atomic: concurrent builders each write a whole jar
    return target


def tool_command(*args: str) -> list[str]:
    """`java -cp <eos jar>:<kafka-clients>:<Spark's jars> streamlets.kafka.eos.Tool ARGS`."""
    cp = os.pathsep.join(map(str, [eos_jar(), *classpath()]))
    return ["java", "-cp", cp, TOOL_CLASS, *args]
