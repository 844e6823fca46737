"""Benchmark: what an exactly-once outlet costs its driver per micro-batch, at 10,000, 100,000 and
1,000,000 records per batch (issue 30).

    python bench/bench_eos_driver.py [--sizes 10000,100000,1000000] [--batches 3] [--rounds 2]
                                     [--master local-cluster[2,1,2048]]

Writers, each an outlet query from a Kafka topic (values of 100 bytes, 4 partitions, read with
maxOffsetsPerTrigger = the batch size, Trigger.AvailableNow) to a fresh topic:

- executors: the `streamlets-kafka-eos` sink (streamlets.runtime.exactly_once): tasks write in
  their own transactions on the executors; the driver records the decision and commits from
  their commit messages (ids and counts only).
- driver: the writer exactly-once outlets had before issue 30, for contrast: foreachBatch, the
  batch pulled into the driver with DataFrame.toArrow() and produced by one confluent-kafka
  transactional producer in one transaction (LegacyDriverWriter below, its essentials).

Spark runs as local-cluster (executors in JVMs of their own, so the driver's figures are the
driver's alone). Per run: the driver's CPU seconds (its JVM and this Python process, from /proc)
divided by the batches, and its peak memory (the two processes' peak resident set during the
run, VmHWM reset before it, minus their resident set before it). The ratio of each size's
figures to the smallest size's, per writer, in the same run, is what the issue asks to stay flat
for the executors' writer. Each run's output topic is checked to hold exactly its records.
Results go to bench/results/eos_driver.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
VALUE = b"x" * 100
PARTITIONS = 4


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> None:
    """Reset the process's peak resident set (VmHWM) to its current one (Linux clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LegacyDriverWriter:
    """The driver-side writer exactly-once outlets had before issue 30 (its data path): each
    micro-batch collected into the driver as Arrow and produced in one Kafka transaction."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"legacy-{uuid.uuid4().hex}",
                                  "enable.idempotence": True, "partitioner": "murmur2_random", "linger.ms": 20,
                                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                                  "queue.buffering.max.kbytes": 1_048_576, "compression.type": "lz4"})
        self.producer.init_transactions(30)

    def __call__(self, df, batch_id: int) -> None:
        producer, topic = self.producer, self.topic
        producer.begin_transaction()
        for b in df.select("key", "value").toArrow().to_batches(max_chunksize=10_000):
            for key, value in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                try:
                    producer.produce(topic, value, key)
                except BufferError:
                    producer.poll(0.1)
                    producer.produce(topic, value, key)
            producer.poll(0)
        producer.flush()
        producer.commit_transaction(60)


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 2_000_000, "compression.type": "lz4"})
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, str(i).encode())
                break
            except BufferError:
                p.poll(0.1)
        if i % 100_000 == 0:
            p.poll(0)
    p.flush()


def run(spark, writer: str, bootstrap: str, in_topic: str, size: int, batches: int, tmp: Path) -> dict[str, Any]:
    from blueprint.sandbox.kafka_broker import create_topics, end_offsets
    from streamlets.runtime.exactly_once import ensure_ledger, sink_options
    from streamlets.runtime.transport import KafkaTransport

    app = f"bench-{uuid.uuid4().hex[:6]}"
    out = f"{app}.out"
    create_topics(bootstrap, [(out, PARTITIONS, {})])
    checkpoint = tmp / app
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", in_topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", size)
            .load().selectExpr("CAST(key AS STRING) AS key", "value"))
    if writer == "executors":
        ensure_ledger(KafkaTransport(bootstrap).connection, app)
        options = sink_options(KafkaTransport(bootstrap), app_id=app, streamlet="s", query="out", topic=out,
                               checkpoint=str(checkpoint))
        stream = rows.writeStream.format("streamlets-kafka-eos").options(**options)
    else:
        stream = rows.writeStream.foreachBatch(LegacyDriverWriter(bootstrap, out))
    jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    pids = (jvm, os.getpid())
    before = {p: rss_kib(p) for p in pids}
    for p in pids:
        reset_peak(p)
    cpu0, t0 = sum(cpu_seconds(p) for p in pids), time.monotonic()
    query = stream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{writer} at {size}: {query.exception()}")
    seconds, cpu = time.monotonic() - t0, sum(cpu_seconds(p) for p in pids) - cpu0
    peak = sum(rss_kib(p, "VmHWM") - before[p] for p in pids)
    written = sum(end_offsets(bootstrap, out).values())
    # each batch: its records, plus one commit marker per partition and transaction
    assert written >= size * batches, f"{writer} at {size}: {written} offsets for {size * batches} records"
    planned = len(query.recentProgress)
    return {"writer": writer, "size": size, "batches": batches, "progress_reports": planned, "seconds": seconds,
            "driver_cpu_s_per_batch": cpu / batches, "driver_peak_mib": peak / 1024, "out_offsets": written}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local-cluster[2,1,2048]")
    parser.add_argument("--writers", default="executors,driver")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    writers = args.writers.split(",")

    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics
    from streamlets.runtime.spark_session import build_spark_session

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-eos-") as tmpdir:
        tmp = Path(tmpdir)
        with KafkaBroker(tmp / "kafka") as broker:
            bootstrap = broker.bootstrap_servers
            inputs = {}
            for size in sizes:
                inputs[size] = f"in-{size}"
                create_topics(bootstrap, [(inputs[size], PARTITIONS, {})])
                produce(bootstrap, inputs[size], size * args.batches)
            spark = build_spark_session("bench-eos-driver", {"spark.driver.memory": "3g"}, master=args.master)
            try:
                for writer in writers:  # warm-up: the largest size once each (JIT, heap grown)
                    run(spark, writer, bootstrap, inputs[sizes[-1]], sizes[-1], args.batches, tmp)
                for r in range(args.rounds):
                    order = writers if r % 2 == 0 else list(reversed(writers))
                    for size in sizes:
                        for writer in order:
                            result = run(spark, writer, bootstrap, inputs[size], size, args.batches, tmp)
                            result["round"] = r
                            results.append(result)
                            print(json.dumps(result), flush=True)
            finally:
                spark.stop()
    summary: dict[str, Any] = {}
    print(f"\n{'writer':10} {'records/batch':>14} {'driver CPU s/batch':>19} {'ratio':>6} {'driver peak MiB':>16} {'ratio':>6}")
    for writer in writers:
        base_cpu = base_mem = None
        for size in sizes:
            mine = [x for x in results if x["writer"] == writer and x["size"] == size]
            cpu = statistics.median(x["driver_cpu_s_per_batch"] for x in mine)
            mem = statistics.median(x["driver_peak_mib"] for x in mine)
            base_cpu, base_mem = base_cpu or cpu, base_mem if base_mem is not None else mem
            summary[f"{writer}/{size}"] = {"cpu_s_per_batch": cpu, "cpu_ratio": cpu / base_cpu, "peak_mib": mem,
                                           "peak_growth_mib": mem - base_mem}
            print(f"{writer:10} {size:>14,} {cpu:>19.3f} {cpu / base_cpu:>6.2f} {mem:>16.1f} "
                  f"{'+' if mem >= base_mem else ''}{mem - base_mem:>5.0f}")
    out = HERE / "results" / "eos_driver.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"master": args.master, "batches": args.batches, "rounds": args.rounds,
                               "runs": results, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
