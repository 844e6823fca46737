"""Benchmark: what an inlet's dead-letter handling costs a micro-batch, against the hand-written job.

    python bench/bench_inlet_decode.py [--records 20000] [--per-batch 100] [--rounds 4]
                                       [--variants hand-written,inlet,inlet-every-field,no-count,no-check]

One Kafka broker (started here) and one SparkSession. `--records` flight events (bench/flight_workload,
Avro, 12 fields) are produced once to a 2-partition topic; each variant then maps all of them to a
new topic (Kafka -> decode -> map -> to_avro -> Kafka, Spark's at-least-once Kafka sink) in
micro-batches of `--per-batch` records (`maxOffsetsPerTrigger`, Trigger.AvailableNow). Small batches
make the per-batch cost of the plan (optimizer, code generation, task launch) show. Variants:

- hand-written: from_avro (FAILFAST), as bench_latency's and bench_map's hand-written job;
- inlet: what a streamlet's inlet with error handling "dead-letter" (the default) does
  (StreamletContext.read_stream): decode_value (PERMISSIVE, a malformed value told by a field that
  cannot be null), then deadletter.counted_records (both counted in an observed metric,
  Dataset.observe, and the malformed ones filtered out);
- inlet-every-field: the same, malformed told by every field being null (decode_value before
  stop 52);
- no-count: the inlet's decode and filter without the observed metric;
- no-check: PERMISSIVE decode, no filter and no count: what the decode costs by itself.

Measured per variant: wall seconds and the driver JVM's CPU seconds per micro-batch (local mode:
tasks included), and the medians of Spark's `durationMs` phases. The first round warms the JVM and
is not counted; the order of the variants rotates each round (no variant always first). Prints each
round and the medians, with the ratio to the hand-written job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_latency import cpu_seconds, round_order  # noqa: E402
from flight_workload import FLIGHT_EVENT, encode_mapped, encoded_flight, send, spark_map  # noqa: E402

VARIANTS = ("hand-written", "inlet", "inlet-every-field", "no-count", "no-check")
PHASES = ("triggerExecution", "queryPlanning", "addBatch")


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        send(producer, topic, *encoded_flight(i))
    producer.flush(60)


def decoded(src: Any, variant: str) -> Any:
    """The flight records of the Kafka DataFrame `src`, decoded as `variant` does."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from streamlets.runtime.codec import MALFORMED, RECORD, decode_value, record_columns, sql_name
    from streamlets.runtime.deadletter import counted_records
    from streamlets.schema import AvroSchema

    if variant == "hand-written":
        return src.select(from_avro(F.col("value"), json.dumps(FLIGHT_EVENT)).alias("r")).select("r.*")
    schema = AvroSchema.load(FLIGHT_EVENT)
    df = decode_value(src, schema, permissive=True)
    if variant == "inlet-every-field":
        record = sql_name(RECORD)
        every = " AND ".join(f"{record}.{sql_name(n)} IS NULL" for n in schema.field_names)
        df = df.withColumn(MALFORMED, F.expr(f"value IS NULL OR {record} IS NULL OR ({every})"))
    if variant.startswith("inlet"):
        return record_columns(counted_records(df, "in"), schema)
    if variant == "no-check":
        df = df.withColumn(MALFORMED, F.lit(False))  # the optimizer drops the filter
    return record_columns(df.where(~F.col(MALFORMED)), schema)


def run(spark: Any, bootstrap: str, variant: str, per_batch: int, tmp: Path, jvm: int) -> dict[str, Any]:
    """Map the whole source topic once with `variant`; per micro-batch figures."""
    from blueprint.sandbox.kafka_broker import create_topics

    tag = f"{variant}-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, [(f"out.{tag}", 2, {})])
    src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "src")
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_batch).load())
    cpu0, t0 = cpu_seconds(jvm), time.time()
    query = (encode_mapped(spark_map(decoded(src, variant))).writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", f"out.{tag}")
             .option("checkpointLocation", str(tmp / "cp" / tag)).trigger(availableNow=True).start())
    query.awaitTermination()
    wall, cpu = time.time() - t0, cpu_seconds(jvm) - cpu0
    progress = [p for p in query.recentProgress if p.numInputRows]
    batches = len(progress)
    return {"variant": variant, "batches": batches, "rows": sum(p.numInputRows for p in progress),
            "wall_ms": 1000 * wall / batches, "cpu_ms": 1000 * cpu / batches,
            **{k: statistics.median(p.durationMs.get(k, 0) for p in progress) for k in PHASES}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--per-batch", type=int, default=100, help="maxOffsetsPerTrigger (default 100)")
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds, after one warm-up round (default 4)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or "hand-written" not in variants:
        print(f"error: --variants takes hand-written and any of {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    os.environ.setdefault("STREAMLETS_SPARK_LOG_LEVEL", "ERROR")
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics
    from streamlets.runtime.spark_session import build_spark_session

    tmp = Path(tempfile.mkdtemp(prefix="bench-inlet-decode-"))
    broker = KafkaBroker(tmp / "kafka", heap="1g").start()
    try:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [("src", 2, {})])
        produce(bootstrap, "src", args.records)
        spark = build_spark_session("bench-inlet-decode", master="local[3]",
                                    conf={"spark.sql.streaming.numRecentProgressUpdates": "100000"})
        jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for r in range(args.rounds + 1):
            for v in round_order(variants, r):
                res = run(spark, bootstrap, v, args.per_batch, tmp, jvm)
                if res["rows"] != args.records:
                    print(f"error: {v} read {res['rows']} of {args.records} records", file=sys.stderr)
                    return 1
                label = "warm-up" if r == 0 else f"round {r}"
                print(f"{label} {v:15s} {res['batches']} batches: wall {res['wall_ms']:.1f} ms, driver JVM CPU "
                      f"{res['cpu_ms']:.1f} ms a batch; " + ", ".join(f"{k} {res[k]:g}" for k in PHASES), flush=True)
                if r > 0:
                    results[v].append(res)
        base = statistics.median(x["wall_ms"] for x in results["hand-written"])
        base_cpu = statistics.median(x["cpu_ms"] for x in results["hand-written"])
        print("\n| variant | wall ms a batch (rounds) | median | / hand-written | JVM CPU ms a batch | / hand-written |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for v in variants:
            walls = [x["wall_ms"] for x in results[v]]
            cpu = statistics.median(x["cpu_ms"] for x in results[v])
            print(f"| {v} | {', '.join(f'{w:.1f}' for w in walls)} | {statistics.median(walls):.1f} | "
                  f"{statistics.median(walls) / base:.2f} | {cpu:.1f} | {cpu / base_cpu:.2f} |")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
