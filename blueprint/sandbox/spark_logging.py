"""Spark's own output in the sandbox: into a log file, out of the progress view."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
# Expected in this setup, said once per query and task: not worth a line each.
logger.avroser.name = org.apache.spark.sql.avro.AvroSerializer
logger.avroser.level = ERROR
logger.fair.name = org.apache.spark.scheduler.FairSchedulableBuilder
logger.fair.level = ERROR
logger.kafkaclients.name = org.apache.kafka
logger.kafkaclients.level = ERROR
"""


def log4j_conf(log_file: Path) -> dict[str, str]:
    """Spark settings sending the driver JVM's log4j2 output to `log_file` (the sandbox's
    `logs/spark.log`, streamlets.runtime.layout), with the log4j2 config file beside it.

    PySpark passes them to spark-submit when it launches the JVM, so the driver's
    `spark.driver.extraJavaOptions` take effect.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    conf = log_file.parent / "log4j2.properties"
    conf.write_text(LOG4J2.format(log=log_file))
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{conf}"}


@contextlib.contextmanager
def jvm_output_to(path: Path) -> Iterator[None]:
    """While the JVM starts, point fds 1 and 2 at `path`: the child keeps them for its life
    (Ivy's resolution report and console logging), the Python process gets its own back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
