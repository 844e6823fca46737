"""A driver on a Spark master with executors of their own (`local-cluster[3,1,1024]`: a standalone
master and three workers, each executor a JVM), a stateful streaming query (a count per key, its
state in the state store of the checkpoint), and ExecutorControl changing the executors between
micro-batches: 3 -> 1 -> 2. Prints one JSON line per step; tests/integration/test_executor_control.py
reads them.

    python scale_stateful.py WORKDIR
"""

import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from streamlets.runtime.executors import ExecutorControl

work = Path(sys.argv[1])
source, checkpoint = work / "source", work / "checkpoint"
source.mkdir(parents=True, exist_ok=True)
spark = (SparkSession.builder.master("local-cluster[3,1,1024]").appName("scale-stateful")
         .config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "6").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
control = ExecutorControl(spark)


def say(**fields) -> None:
    print("STEP " + json.dumps(fields), flush=True)


def wait_count(n: int, timeout: float = 180) -> float:
    started = time.monotonic()
    while control.count() != n and time.monotonic() - started < timeout:
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)


def write(batch: int, keys: int = 20, per_key: int = 5) -> None:
    rows = [{"k": f"k{k:02d}", "v": batch} for k in range(keys) for _ in range(per_key + batch)]
    spark.createDataFrame(rows).coalesce(1).write.mode("overwrite").json(str(work / "staging"))
    (part,) = (work / "staging").glob("part-*.json")
    part.rename(source / f"batch-{batch}.json")


say(step="start", supported=control.supported(), cores=control.cores(), waited=wait_count(3),
    executors=[e.id for e in control.executors()])
counts = (spark.readStream.schema("k string, v long").json(str(source)).groupBy("k").count())
query = (counts.writeStream.outputMode("complete").format("memory").queryName("counts")
         .option("checkpointLocation", str(checkpoint)).start())
for batch, total in enumerate((3, 1, 2, 3)):
    write(batch)
    query.processAllAvailable()
    result = {r["k"]: r["count"] for r in spark.sql("select * from counts").collect()}
    # the state tasks of this batch ran on these executors (the state store's loaded instances)
    say(step="batch", batch=batch, executors=control.count(), counts=result)
    applied = control.set_total(total, timeout=60)
    say(step="scaled", to=total, result=applied, waited=wait_count(total), executors=[e.id for e in control.executors()])
query.stop()
spark.stop()
