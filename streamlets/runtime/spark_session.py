"""SparkSession for streamlets: the Kafka and Avro connectors, resolved by Spark from Maven.

The connector versions match the installed PySpark (`spark.jars.packages`); Ivy's cache lives
under the streamlets cache folder so CI and later runs reuse it (`spark.jars.ivy`). If Maven is
reached through a mirror declared in ~/.m2/settings.xml, Spark's resolver is pointed at it
(`spark.jars.repositories`). In the streamlet image (docker/streamlet.Dockerfile) the connectors
are among Spark's own jars ($SPARK_HOME/jars) and nothing is resolved.

A session whose state root is on S3 (streamlets.runtime.object_store, `s3a://`) also gets Hadoop's
S3A connector: `hadoop-aws` of the Hadoop in Spark's jars and the AWS SDK v2's per-service jars
it needs (`s3`, `s3-transfer-manager` and what they depend on: 35 jars, 12 MB), resolved and
cached the same way, never the SDK's `bundle` jar (690 MB). Local runs resolve none of it.

Every JVM it starts bounds Avro's allocations per value (streamlets.avro_limits): the limits go
into spark.driver.extraJavaOptions and spark.executor.extraJavaOptions, which PySpark passes to
spark-submit when it launches the driver JVM.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from .. import avro_limits
from ..cache import cache_root
from . import jvm_jars
from .checkpoint_file_manager import FILE_MANAGER_CLASS, FILE_MANAGER_CONF, file_manager_jar
from .jars import S3A_EXCLUDES, connector_packages, connectors_in_spark_home, maven_mirrors, s3a_packages, spark_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .object_store import ObjectStore


def _manifest(s3a: bool = False) -> Path:
    return cache_root() / f"spark-connectors-{spark_version()}{'-s3a' if s3a else ''}.txt"


def cached_connector_jars(s3a: bool = False) -> list[str] | None:
    """The connector jars resolved by an earlier session (with `s3a`, the S3A connector's too), if
    all are still in the cache.

    Passing them as `spark.jars` skips Ivy's resolution (which checks remote repositories
    even when everything is cached) and saves seconds on every session start.
    """
    manifest = _manifest(s3a)
    if not manifest.is_file():
        return None
    jars = [line.strip() for line in manifest.read_text().splitlines() if line.strip()]
    return jars if jars and all(Path(j).is_file() for j in jars) else None


def own_jars() -> list[Path]:
    """The project's jars every session carries, where they are not among Spark's jars already:
    the exactly-once Kafka sink (runtime.eos_jar), the schema registry UDFs
    (runtime.schema_registry) and the local checkpoint file manager
    (runtime.checkpoint_file_manager); each left out when it cannot be built here (no javac), where
    what needs it says so when it starts."""
    from .eos_jar import built_eos_jar
    from .jvm_jars import built_jars_dir
    from .schema_registry import registry_jar

    return [jar for jar in (built_eos_jar(), registry_jar(), file_manager_jar())
            if jar is not None and jar.parent == built_jars_dir()]


def _remember_connector_jars(resolved: str, s3a: bool = False) -> None:
    """Record the jars Ivy resolved, minus those PySpark already ships (hadoop-client, lz4...)."""
    import pyspark

    shipped = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    jars = []
    for uri in filter(None, resolved.split(",")):
        path = Path(uri.removeprefix("file://"))
        if path.parent == jvm_jars.built_jars_dir():  # ours (runtime.jvm_jars), added on every start
            continue
        if path.name.partition("_")[2] not in shipped:
            jars.append(str(path))
    if jars:
        tmp = _manifest(s3a).with_suffix(".tmp")
        tmp.write_text("\n".join(jars) + "\n")
        os.replace(tmp, _manifest(s3a))


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
    # Wide Avro records make generated methods larger than HotSpot's 8,000-byte JIT limit;
    # without this flag such a method runs interpreted, several times slower.
    "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods",
    "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
}
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


# Class data sharing (JDK's AppCDS, JEP 350): the classes a driver JVM loaded at start, kept in
# one file that later JVMs map instead of loading and verifying each class again.
CLASS_ARCHIVE_OFF = "STREAMLETS_CLASS_ARCHIVE"  # "0": start JVMs without the archive
_CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a stale archive is skipped without a word


def class_archive() -> Path:
    """Where the driver JVM's class archive lives: one per PySpark version and Java runtime
    (a JVM refuses an archive another JDK build or another class path wrote, and then starts as
    without it), under the streamlets cache."""
    import hashlib
    import shutil

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java") or "java"
    real = os.path.realpath(java)
    try:
        stamp = f"{real}:{os.stat(real).st_size}:{os.stat(real).st_mtime_ns}"
    except OSError:
        stamp = real
    key = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    return cache_root() / "cds" / f"spark-{spark_version()}-{key}.jsa"


def class_archive_option() -> str | None:
    """The driver JVM option that maps the class archive (`-XX:SharedArchiveFile`, with
    `-Xshare:auto`: an archive that does not fit is skipped), or None when there is none yet or
    $STREAMLETS_CLASS_ARCHIVE is "0". `python -m streamlets.runtime.spark_session --resolve`
    (dev/setup) writes the archive; it saves about a third of a driver's start (1 to 3 s)."""
    if os.environ.get(CLASS_ARCHIVE_OFF) == "0":
        return None
    path = class_archive()
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {_CDS_QUIET}" if path.is_file() else None


def launched_by_spark_submit() -> bool:
    """True in a driver that spark-submit started (a driver pod: Spark's PythonRunner hands the
    Python process its JVM through PYSPARK_GATEWAY_PORT). Its master is spark-submit's --master
    (k8s://... on a cluster), which a builder's .master() would replace: the driver would then run
    every task itself in local mode and ask Kubernetes for no executor."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def local_python_workers() -> dict[str, str]:
    """Settings for Spark's Python workers on this machine (a `local` master): this interpreter
    (`spark.pyspark.python`, else PySpark takes `python3` from the PATH, maybe another one) and this
    process's import path beyond the standard library (`spark.executorEnv.PYTHONPATH`, which Spark
    merges with its own paths and $PYTHONPATH). Workers import the modules of the UDFs they run
    (cloudpickle pickles a module-level function by reference), so what the driver imports they
    import too: the blueprint's folder, which the sandbox's loader puts first; pytest's rootdir and
    the application's package under the test kit. A pod's image installs the application instead."""
    stdlib = os.path.realpath(sys.base_prefix)
    paths = [p for p in sys.path if p and os.path.isdir(p)
             and (not os.path.realpath(p).startswith(stdlib + os.sep) or "-packages" in p)]
    out = {"spark.executorEnv.PYTHONPATH": os.pathsep.join(paths)}
    if not os.environ.get("PYSPARK_PYTHON"):
        out["spark.pyspark.python"] = sys.executable
    return out


def build_spark_session(
    app_name: str,
    conf: Mapping[str, str] | None = None,
    master: str | None = None,
    store: "ObjectStore | None" = None,
) -> "SparkSession":
    """Create (or get) the SparkSession with the connectors on its classpath.

    `conf` entries override DEFAULT_CONF (JVM options are appended to the defaults); in a driver
    spark-submit started (launched_by_spark_submit), what spark-submit was given overrides
    DEFAULT_CONF too. `master` defaults to spark-submit's there, else $SPARK_MASTER or local[*].
    The first call on a machine downloads the connector jars (about 10 MB) into the cache.
    Driver and executor JVMs get Avro's allocation limits (avro_limits; AvroLimitsError if
    $STREAMLETS_MAX_VALUE_BYTES is malformed). A JVM that was already running (a driver pod, an
    earlier session) gets them as system properties if Avro has not decoded yet; if it has,
    a warning says the limits do not hold.
    `store`: the state root's object store (streamlets.runtime.object_store): its settings
    (`spark.hadoop.fs.s3a.*`, below `conf`) and, for an s3a:// root, the S3A connector's jars
    (s3a_packages, resolved once and cached); its environment (a credentials file) is set in this
    process first, for the JVM it starts.
    """
    from pyspark.sql import SparkSession

    settings = dict(DEFAULT_CONF)
    if file_manager_jar() is not None:  # checkpoint files in local folders without a chmod process each
        settings[FILE_MANAGER_CONF] = FILE_MANAGER_CLASS
    if launched_by_spark_submit():
        # What spark-submit was given (a SparkApplication's sparkConf: its state partitions,
        # scheduler settings) wins over our defaults, which are the sandbox's; `conf` still wins.
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the JVM spark-submit started: SparkConf reads its properties
        for key, _ in SparkConf().getAll():
            if key not in JAVA_OPTION_KEYS:
                settings.pop(key, None)
    for key in JAVA_OPTION_KEYS:
        settings[key] = avro_limits.with_limits(settings.get(key))
    archive = None if launched_by_spark_submit() else class_archive_option()  # a JVM this call starts
    if archive:
        settings["spark.driver.extraJavaOptions"] += f" {archive}"
    effective_master = master or (None if launched_by_spark_submit() else os.environ.get("SPARK_MASTER", "local[*]"))
    if effective_master and effective_master.startswith("local"):
        settings.update(local_python_workers())
    s3a = store is not None and store.is_s3a
    in_spark_home = connectors_in_spark_home(s3a=s3a)  # the streamlet image: nothing to add
    jars = None if in_spark_home else cached_connector_jars(s3a)
    own = [str(j) for j in own_jars()]
    if jars or own:
        settings["spark.jars"] = ",".join([*(jars or []), *own])
    if not jars and not in_spark_home:
        settings["spark.jars.packages"] = ",".join(connector_packages() + (s3a_packages() if s3a else []))
        if s3a:
            settings["spark.jars.excludes"] = ",".join(S3A_EXCLUDES)
        settings["spark.jars.ivy"] = str(cache_root() / "ivy")
        mirrors = maven_mirrors()
        if mirrors:
            settings["spark.jars.repositories"] = ",".join(mirrors)
    if store is not None:
        settings.update(store.spark_conf())
        os.environ.update(store.environment())
    for key, value in (conf or {}).items():
        # JVM options add up (e.g. the sandbox's log4j file and the JIT flag); others replace.
        settings[key] = f"{settings[key]} {value}" if key in JAVA_OPTION_KEYS and key in settings else value
    builder = SparkSession.builder.appName(app_name)
    if effective_master:
        builder = builder.master(effective_master)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if not avro_limits.apply_to_jvm(spark.sparkContext._jvm):
        import logging

        logging.getLogger(__name__).warning(
            "Avro's allocation limits (%s) do not hold in this JVM: start it with %s", avro_limits.ENV,
            avro_limits.java_options())
    if not jars and "spark.jars.packages" in settings:
        _remember_connector_jars(spark.sparkContext.getConf().get("spark.jars", ""), s3a)
    spark.sparkContext.setLogLevel(os.environ.get("STREAMLETS_SPARK_LOG_LEVEL", "WARN"))
    _quiet_loggers(spark)
    return spark


# Spark loggers whose WARN lines every correct application prints; what they warn of is an error
# of its own when it happens (a null written into a non-null outlet field fails the batch with
# AVRO_CANNOT_WRITE_NULL_FIELD, which streamlets.runtime.failures explains).
QUIET_LOGGERS = {"org.apache.spark.sql.avro.AvroSerializer": "ERROR"}


def _quiet_loggers(spark: "SparkSession") -> None:
    """QUIET_LOGGERS at their levels in the driver's log4j2 (the sandbox's own log4j2 file sets them too)."""
    try:
        jvm = spark.sparkContext._jvm  # noqa: SLF001
        assert jvm is not None  # a classic (py4j) session
        log4j = jvm.org.apache.logging.log4j
        for name, level in QUIET_LOGGERS.items():
            log4j.core.config.Configurator.setLevel(name, log4j.Level.getLevel(level))
    except Exception:  # another logging backend: the lines stay
        pass


def _resolve_main() -> None:
    """`python -m streamlets.runtime.spark_session --resolve [--s3a]`: fetch the connectors (with
    `--s3a` Hadoop's S3A connector too) into the cache."""
    import sys
    import time

    from .object_store import S3A_SCHEME, ObjectStore

    if "--resolve" not in sys.argv[1:]:
        print("usage: python -m streamlets.runtime.spark_session --resolve [--s3a]", file=sys.stderr)
        raise SystemExit(2)
    s3a = "--s3a" in sys.argv[1:]
    start = time.time()
    spark = build_spark_session("resolve-connectors", master="local[1]",
                                store=ObjectStore(f"{S3A_SCHEME}resolve") if s3a else None)
    spark.stop()
    jars = cached_connector_jars(s3a) or []
    print(f"   {len(jars)} connector jars cached, listed in {_manifest(s3a)} ({time.time() - start:.0f} s)")
    archive = class_archive()
    if archive.is_file():
        print(f"   class archive cached: {archive}")
        return
    start = time.time()
    write_class_archive(archive)
    size = archive.stat().st_size / 1e6 if archive.is_file() else 0
    print(f"   class archive for driver JVMs: {archive} ({size:.0f} MB, {time.time() - start:.0f} s)")


def write_class_archive(archive: Path) -> None:
    """Write the driver JVM's class archive: a child Python starts Spark with
    `-XX:ArchiveClassesAtExit`, runs a batch job and a streaming query through Avro (the classes
    every streamlet's start loads), and stops; its JVM writes the archive as it exits, into a
    temporary file renamed into place (two setups at once do not see half a file)."""
    import subprocess

    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    env = {**os.environ, CLASS_ARCHIVE_OFF: "0", "STREAMLETS_ARCHIVE_TO": str(tmp)}
    try:
        subprocess.run([sys.executable, "-c", _ARCHIVE_JOB], env=env, check=True, capture_output=True, timeout=600)
        if tmp.is_file() and tmp.stat().st_size > 0:
            os.replace(tmp, archive)
    except (subprocess.SubprocessError, OSError) as e:  # only slower starts
        print(f"   class archive not written ({e}); driver JVMs start without it")
    finally:
        tmp.unlink(missing_ok=True)


_ARCHIVE_JOB = """
import os, time
from streamlets.runtime.spark_session import build_spark_session
opts = f"-XX:ArchiveClassesAtExit={os.environ['STREAMLETS_ARCHIVE_TO']} -Xlog:cds=off -Xlog:cds+dynamic=off"
spark = build_spark_session("class-archive", {"spark.driver.extraJavaOptions": opts}, master="local[1]")
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql import functions as F
schema = '{"type":"record","name":"r","fields":[{"name":"value","type":"long"}]}'
spark.range(100).select(to_avro(F.struct(F.col("id").alias("value"))).alias("v")).select(from_avro("v", schema)).count()
q = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
     .select(to_avro(F.struct("value")).alias("v")).select(from_avro("v", schema).alias("r")))
q = q.writeStream.format("memory").queryName("archive").start()
deadline = time.time() + 60
while time.time() < deadline and (q.lastProgress is None or q.lastProgress["numInputRows"] == 0):
    time.sleep(0.5)
q.stop()
spark.stop()
"""


if __name__ == "__main__":
    _resolve_main()
