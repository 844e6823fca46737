"""Benchmark: end-to-end latency, produce -> receipt of the mapped record, one hop through a map.

    python bench/bench_latency.py [--rates 1000,10000] [--seconds 20] [--partitions 2]
                                  [--variants baseline-mb,baseline-rt,streamlet-mb,streamlet-rt,quix]
                                  [--master local[3]] [--checkpoint-interval "5 seconds"]

One Kafka broker (started here) and one SparkSession serve every variant; each variant gets
fresh topics. A producer process sends the flight events of bench_map (Avro, 12 fields) at a
steady rate (ticks of 1 ms, linger.ms 0) for --seconds, keyed by flight_id; a consumer process
reads the output topic and notes when each mapped record arrives. Latency = receipt time -
the time the record was handed to the producer (both on this machine's clock, time.time()).
Before the measured window the variant runs until a warm-up record has come through.

Variants (the map is bench_map's: add dep_delay_hours):
- baseline-mb: hand-written PySpark job, Kafka -> from_avro -> map -> to_avro -> Kafka, default trigger
- baseline-rt: the same query with Spark 4.1's Real-Time Mode trigger (update mode)
- streamlet-mb: bench_map's Mapper started by StreamletRuntime, default (micro-batch) trigger,
  exactly-once outlet (one Kafka transaction per micro-batch: consumers see a batch when it commits)
- streamlet-mb-alo: the same with `delivery = at-least-once` (Spark's Kafka sink): the latency
  exactly-once costs is streamlet-mb against this
- streamlet-rt: the Mapper with `trigger="real-time <interval>"` (streamlets.trigger)
- quix: Quix Streams (fastavro decode, map, encode) in one Python process: the Python peer.
  Benchmark-only: `pip install -e .[bench]` (never a runtime dependency).

Printed: p50, p90, p99 and max in ms per variant and rate, the records received of those sent,
and ratios to the hand-written job of the same trigger. Results go to bench/results/latency.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_map import FLIGHT_EVENT, KEY_FIELD, MAPPED_FLIGHT, Mapper, flight_record, spark_map, _encode  # noqa: E402

VARIANTS = ("baseline-mb", "baseline-rt", "streamlet-mb", "streamlet-mb-alo", "streamlet-rt", "quix")
WARMUP_KEY_OFFSET = 10**9


# --- producer and consumer processes ------------------------------------------------------------

def _producer(bootstrap: str, topic: str, rate: int, seconds: float, start_index: int, out_q) -> None:
    import fastavro
    from confluent_kafka import Producer

    parsed = fastavro.parse_schema(FLIGHT_EVENT)
    import io

    def encode(i: int) -> tuple[bytes, bytes]:
        rec = flight_record(i)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        return rec[KEY_FIELD].encode(), buf.getvalue()

    n = int(rate * seconds)
    payloads = [encode(start_index + i) for i in range(n)]  # encoded before the clock starts
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    sent = [0.0] * n
    t0 = time.time()
    i = 0
    while i < n:
        due = min(n, int((time.time() - t0) * rate) + 1)
        while i < due:
            key, value = payloads[i]
            sent[i] = time.time()
            while True:
                try:
                    producer.produce(topic, value=value, key=key)
                    break
                except BufferError:
                    producer.poll(0.001)
            i += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(60)
    out_q.put(sent)


def _consumer(bootstrap: str, topic: str, partitions: int, expected: int, start_index: int, timeout: float,
              ready, out_q) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "isolation.level": "read_committed",  # as inlets read (librdkafka's default too)
                  "fetch.wait.max.ms": 1, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    ready.set()
    received: dict[int, float] = {}
    deadline = time.time() + timeout
    while len(received) < expected and time.time() < deadline:
        msg = c.poll(0.05)
        if msg is None or msg.error() is not None:
            continue
        now = time.time()
        idx = int(msg.key().decode().rsplit("-", 1)[1]) - start_index
        if 0 <= idx < expected and idx not in received:
            received[idx] = now
    c.close()
    out_q.put(received)


def _quix(bootstrap: str, in_topic: str, out_topic: str) -> None:
    """The map in Quix Streams: bytes in, fastavro decode, map, fastavro encode, bytes out."""
    import io

    import fastavro
    from quixstreams import Application

    reader, writer = fastavro.parse_schema(FLIGHT_EVENT), fastavro.parse_schema(MAPPED_FLIGHT)

    def mapped(value: bytes) -> bytes:
        rec = fastavro.schemaless_reader(io.BytesIO(value), reader, None)
        rec["dep_delay_hours"] = None if rec["dep_delay"] is None else rec["dep_delay"] / 60.0
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, rec)
        return buf.getvalue()

    import tempfile

    app = Application(broker_address=bootstrap, consumer_group=f"quix-{uuid.uuid4().hex[:8]}",
                      state_dir=tempfile.mkdtemp(prefix="bench-quix-"),
                      auto_offset_reset="earliest", producer_extra_config={"linger.ms": 0},
                      consumer_extra_config={"fetch.wait.max.ms": 1})
    src = app.topic(in_topic, value_deserializer="bytes", key_deserializer="bytes")
    dst = app.topic(out_topic, value_serializer="bytes", key_serializer="bytes")
    app.dataframe(src).apply(mapped).to_topic(dst)
    app.run()


# --- the Spark variants --------------------------------------------------------------------------

def start_spark_variant(spark, name: str, bootstrap: str, in_topic: str, out_topic: str, checkpoint: str,
                        interval: str):
    """Start the variant's query; returns a stop() callable."""
    from streamlets.trigger import Trigger

    if name.startswith("baseline"):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", in_topic).option("startingOffsets", "earliest").load())
        records = src.select(from_avro(F.col("value"), json.dumps(FLIGHT_EVENT)).alias("r")).select("r.*")
        writer = (_encode(spark_map(records)).writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", out_topic).option("checkpointLocation", checkpoint))
        if name.endswith("rt"):
            writer = Trigger.real_time(interval).apply(writer.outputMode("update"))
        q = writer.start()
        return lambda: q.stop()
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets.runtime.runner import StreamletRuntime
    from streamlets.runtime.transport import KafkaTransport

    run = StreamletRunConfig(app_id="bench", streamlet=f"mapper-{uuid.uuid4().hex[:6]}",
                             class_name=f"{Mapper.__module__}.Mapper", topics={"in": in_topic, "out": out_topic},
                             bootstrap_servers=bootstrap, checkpoint_root=checkpoint, dead_letter_topic="bench.dl",
                             trigger=f"real-time {interval}" if name.endswith("rt") else None,
                             delivery="at-least-once" if name.endswith("alo") else "exactly-once")
    rt = StreamletRuntime(spark, "bench", "bench.dl", KafkaTransport(bootstrap))
    rt.start_class(Mapper, run)
    return lambda: rt.stop(timeout=30)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q / 100 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def measure(bootstrap: str, in_topic: str, out_topic: str, partitions: int, rate: int, seconds: float,
            start_index: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q_sent, q_recv, ready = ctx.Queue(), ctx.Queue(), ctx.Event()
    n = int(rate * seconds)
    consumer = ctx.Process(target=_consumer, args=(bootstrap, out_topic, partitions, n, start_index, seconds + 90,
                                                   ready, q_recv))
    consumer.start()
    ready.wait(60)
    producer = ctx.Process(target=_producer, args=(bootstrap, in_topic, rate, seconds, start_index, q_sent))
    producer.start()
    sent = q_sent.get(timeout=seconds + 300)
    received = q_recv.get(timeout=seconds + 300)
    producer.join(30)
    consumer.join(30)
    lat = sorted((received[i] - sent[i]) * 1000 for i in received)
    return {"sent": n, "received": len(received), "p50": percentile(lat, 50), "p90": percentile(lat, 90),
            "p99": percentile(lat, 99), "max": lat[-1] if lat else float("nan")}


def warm_up(bootstrap: str, in_topic: str, out_topic: str, partitions: int, timeout: float = 300) -> None:
    """Send 200 records (rate 200/s) and wait until all came through: the query is running and warm."""
    r = measure(bootstrap, in_topic, out_topic, partitions, 200, 1.0, WARMUP_KEY_OFFSET)
    if r["received"] < r["sent"]:
        raise RuntimeError(f"warm-up: {r['received']} of {r['sent']} records came through")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bench_latency.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,10000", help="records/s, comma-separated (default 1000,10000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per variant and rate (default 20)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of every topic (default 2)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--master", default="local[3]", help="Spark master (default local[3]: Real-Time Mode holds "
                        "a core per partition, one more runs the rest)")
    parser.add_argument("--checkpoint-interval", default="5 seconds", help="Real-Time Mode checkpoint interval")
    parser.add_argument("--output", default=str(HERE / "results" / "latency.json"))
    args = parser.parse_args(argv)
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        print(f"error: unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if "quix" in variants:
        try:
            import quixstreams  # noqa: F401
        except ImportError:
            print("error: the quix variant needs Quix Streams: pip install -e .[bench]", file=sys.stderr)
            return 2
    os.environ.setdefault("STREAMLETS_SPARK_LOG_LEVEL", "ERROR")
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics
    from streamlets.runtime.spark_session import build_spark_session

    tmp = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    broker = KafkaBroker(tmp / "kafka", heap="1g").start()
    spark = None
    results: list[dict[str, Any]] = []
    try:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [("bench.dl", 1, {})])
        if any(v != "quix" for v in variants):
            spark = build_spark_session("bench-latency", master=args.master)
        for rate in rates:
            for name in variants:
                tag = f"{name}.{rate}.{uuid.uuid4().hex[:6]}"
                in_topic, out_topic = f"lat.in.{tag}", f"lat.out.{tag}"
                create_topics(bootstrap, [(in_topic, args.partitions, {}), (out_topic, args.partitions, {})])
                proc = None
                if name == "quix":
                    proc = mp.get_context("spawn").Process(target=_quix, args=(bootstrap, in_topic, out_topic))
                    proc.start()
                    stop = proc.terminate
                else:
                    stop = start_spark_variant(spark, name, bootstrap, in_topic, out_topic, str(tmp / "cp" / tag),
                                               args.checkpoint_interval)
                try:
                    warm_up(bootstrap, in_topic, out_topic, args.partitions)
                    r = measure(bootstrap, in_topic, out_topic, args.partitions, rate, args.seconds, 0)
                finally:
                    stop()
                    if proc is not None:
                        proc.join(30)
                r.update(variant=name, rate=rate)
                results.append(r)
                print(f"  {rate:>6}/s {name:<13} p50 {r['p50']:8.1f} ms  p90 {r['p90']:8.1f}  p99 {r['p99']:8.1f}  "
                      f"max {r['max']:8.1f}  ({r['received']}/{r['sent']} received)", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    print()
    print("| rate | variant | p50 ms | p90 ms | p99 ms | max ms | received |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['rate']:,} | {r['variant']} | {r['p50']:,.1f} | {r['p90']:,.1f} | {r['p99']:,.1f} | "
              f"{r['max']:,.1f} | {r['received']:,}/{r['sent']:,} |")
    by = {(r["variant"], r["rate"]): r for r in results}
    for rate in rates:
        for mode in ("mb", "rt"):
            s, b = by.get((f"streamlet-{mode}", rate)), by.get((f"baseline-{mode}", rate))
            if s and b:
                print(f"ratio streamlet-{mode}/baseline-{mode} at {rate}/s: p50 {s['p50'] / b['p50']:.2f}, "
                      f"p99 {s['p99'] / b['p99']:.2f}")
        s, a = by.get(("streamlet-mb", rate)), by.get(("streamlet-mb-alo", rate))
        if s and a:
            print(f"ratio exactly-once/at-least-once streamlet-mb at {rate}/s: p50 {s['p50'] / a['p50']:.2f}, "
                  f"p99 {s['p99'] / a['p99']:.2f}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "latency", "seconds": args.seconds, "partitions": args.partitions,
                               "master": args.master, "checkpoint_interval": args.checkpoint_interval,
                               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                           "loadavg": os.getloadavg()},
                               "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
