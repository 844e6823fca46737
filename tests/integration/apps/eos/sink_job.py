"""A PySpark driver writing text files' lines to Kafka through the streamlets-kafka-eos sink
(tests/integration/test_eos_executor_writes.py starts it as its own process).

Usage: sink_job.py JARS INPUT CHECKPOINT LEDGER_TOPIC GATE BOOTSTRAP TOPIC PREFIX [OPTION=VALUE ...]
The OPTIONs go to the sink. With GATE/fail-task present, the first attempt of every task of
Spark partition 1 fails after writing some rows (Spark retries it: local[2,4]).
Stops when GATE/stop exists."""

import sys
import time
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

jars, source, checkpoint, ledger, gate, bootstrap, topic, prefix = sys.argv[1:9]
options = dict(arg.split("=", 1) for arg in sys.argv[9:])
spark = (SparkSession.builder.master("local[2,4]").config("spark.jars", jars)
         .config("spark.sql.shuffle.partitions", "3").config("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.pyspark.python", sys.executable)  # this interpreter's pyarrow, whatever the PATH's python3
         .getOrCreate())
fail_task = (Path(gate) / "fail-task").exists()
seen: dict = {}


@udf("string", useArrow=True)
def check(value):
    """Pass values on; the first attempt of Spark partition 1's task fails at its 7th row (the
    writer has sent the rows of earlier Arrow batches: spark.sql.execution.arrow.maxRecordsPerBatch=2)."""
    ctx = TaskContext.get()
    key = (ctx.stageId(), ctx.partitionId(), ctx.attemptNumber())
    seen[key] = seen.get(key, 0) + 1
    if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and seen[key] >= 7:
        (Path(gate) / "task-failed").touch()
        raise RuntimeError("a task attempt fails after writing some rows")
    return value


lines = spark.readStream.option("maxFilesPerTrigger", 1).text(source).repartition(3)
if fail_task:
    lines = lines.select(check("value").alias("value"))
writer = (lines.selectExpr("CAST(value AS BINARY) AS value")
          .writeStream.format("streamlets-kafka-eos")
          .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
          .option("transactional.id.prefix", prefix).option("ledger.topic", ledger)
          .option("checkpoint", checkpoint)
          .option("committer", "GatedCommitter").option("gate", gate)
          .option("checkpointLocation", checkpoint).trigger(processingTime="500 milliseconds"))
query = writer.options(**options).start()
while not (Path(gate) / "stop").exists() and query.isActive:
    time.sleep(0.2)
query.stop()
if query.exception() is not None:
    raise SystemExit(f"query failed: {query.exception()}")
