"""Spark's checkpoint file manager for local folders, ours: how every session writes the files of
its queries' checkpoints (their format: streamlets.runtime.checkpoint).

Spark writes a query's checkpoint files (`offsets/N` and `commits/N` every micro-batch, a
stateful query's state files) through the class in `spark.sql.streaming.checkpointFileManagerClass`
(FILE_MANAGER_CONF). For `file:` paths its default, FileContextBasedCheckpointFileManager, goes
through Hadoop's local file system, which starts a `chmod` process for each new file when
Hadoop's native library is not loaded (PySpark ships none): about 30 ms a file on 2 cores. Ours,
FILE_MANAGER_CLASS (jvm/streamlets-checkpoint), writes with java.nio and starts no process;
other file systems (s3a) get Spark's own manager (bench/bench_checkpoint_writes.py).
spark_session.build_spark_session sets it in every session whose class path has the jar.
"""

from __future__ import annotations

from pathlib import Path

from .jvm_jars import JarBuildError, module_jar, spark_jars

FILE_MANAGER_JAR = "streamlets-checkpoint"  # the jvm module (streamlets.runtime.jvm_jars)
FILE_MANAGER_CLASS = "streamlets.checkpoint.LocalCheckpointFileManager"
FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"


def file_manager_jar() -> Path | None:
    """The jar of FILE_MANAGER_CLASS (in $SPARK_HOME/jars in the streamlet image, else compiled
    against Spark's jars on first use), or None when it cannot be built here (no javac): then
    sessions keep Spark's default manager."""
    try:
        return module_jar(FILE_MANAGER_JAR, spark_jars())
    except JarBuildError:
        return None
