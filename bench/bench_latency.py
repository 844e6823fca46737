"""Benchmark: end-to-end latency, produce -> receipt of the mapped record, through one map hop
and through a chain of three (topic -> A -> topic -> B -> topic -> C -> topic).

    python bench/bench_latency.py [--rates 1000,10000] [--seconds 20] [--partitions 2] [--hops 1,3]
                                  [--variants baseline-mb,baseline-rt,streamlet-mb,streamlet-rt,quix]
                                  [--master local[7]] [--checkpoint-interval "5 minutes"] [--rounds 1]
                                  [--jfr DIR]

One Kafka broker (started here) and one SparkSession serve every variant; each variant gets
fresh topics. With --hops 3 every variant runs three maps in a row, each its own query
(streamlet, Quix application) reading the topic the one before writes; the record is timed from
its produce into the first topic to its receipt from the last. A producer process sends the flight events of flight_workload (Avro, 12 fields) at a
steady rate (ticks of --tick-ms, linger.ms 0) for --seconds, keyed by flight_id; a consumer process
reads the output topic and notes when each mapped record arrives. Latency = receipt time -
the time the record was handed to the producer (both on this machine's clock, time.time()).
Before the measured window the variant runs until a warm-up record has come through.

Variants (the map is flight_workload's: add dep_delay_hours):
- baseline-mb: hand-written PySpark job, Kafka -> from_avro -> map -> to_avro -> Kafka, default trigger
- baseline-mb-async: the same with Spark's asynchronous progress tracking (asyncProgressTrackingEnabled)
- baseline-rt: the same query with Spark 4.1's Real-Time Mode trigger (update mode)
- streamlet-mb: flight_workload's Mapper started by StreamletRuntime, default (micro-batch) trigger,
  exactly-once outlet (one Kafka transaction per micro-batch: consumers see a batch when it commits)
- streamlet-mb-alo: the same with `delivery = at-least-once` (Spark's Kafka sink): the latency
  exactly-once costs is streamlet-mb against this
- streamlet-mb-async: the at-least-once Mapper with `progress-tracking = async` (Spark's asynchronous
  progress tracking: offset and commit logs written in the background; streamlets.runtime.progress_tracking)
- streamlet-rt: the Mapper with `trigger="real-time <interval>"` (streamlets.trigger)
- quix: Quix Streams (fastavro decode, map, encode), one Python process per hop: the Python peer.
  Benchmark-only: `pip install -e .[bench]` (never a runtime dependency).

Real-Time Mode holds a core (a task slot) per inlet partition for as long as it runs: the chain's
three real-time hops hold 3 x partitions, hence the default master local[3 x partitions + 1]
(task slots, not CPUs) when --hops has 3, local[partitions + 1] otherwise.

Before the measured rounds each Spark variant runs --warmup-seconds under load, unmeasured: the
driver JVM's compiler warms up its code paths (without it the first round of each run measured that).

Printed: p50, p90, p99 and max in ms per hops, variant and rate, the records received of those
sent, and ratios to the hand-written job of the same trigger. One 20-second window's p50 moves by a
third from run to run on two cores (bench/README.md), so --rounds N runs every variant N times,
their order rotated each round, and gives each ratio per round and its median. For one-hop micro-batch variants
also "visible only at its batch's end": the same run's latencies had each record become visible
only when its micro-batch's addBatch ended (batch_end_bound), a lower bound for any sink that shows
a batch all at once, as the exactly-once outlet's transactions do. For every variant, the CPU
seconds the driver's JVM, the driver's Python process and the broker used in the measured window
(/proc/<pid>/stat), and per micro-batch: on two cores every process competes with the others,
so CPU a batch costs anywhere shows as latency. With --jfr DIR, where the driver JVM's CPU went in each
window, by thread and by frame (Java Flight Recorder: bench/jfr_profile.py). Results go to
bench/results/latency.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import jfr_profile  # noqa: E402
from flight_workload import FLIGHT_EVENT, KEY_FIELD, MAPPED_FLIGHT, Mapper, encode_mapped, encoded_flight, send, spark_map  # noqa: E402
from quix_peer import quix_map  # noqa: E402
from streamlets import AvroInlet, AvroOutlet, Streamlet  # noqa: E402
from streamlets.trigger import DEFAULT_CHECKPOINT_INTERVAL  # noqa: E402

VARIANTS = ("baseline-mb", "baseline-mb-async", "baseline-rt", "streamlet-mb", "streamlet-mb-alo", "streamlet-mb-async",
            "streamlet-rt", "quix")
WARMUP_KEY_OFFSET = 10**9
TICK_SECONDS = 0.005  # the producer's default tick (--tick-ms): one produce request per tick


class MappedMapper(Streamlet):
    """The chain's second and third hops: flight_workload's map again, on its own output (dep_delay_hours
    computed anew)."""

    inlet = AvroInlet("in", MAPPED_FLIGHT)
    out = AvroOutlet("out", MAPPED_FLIGHT, key=KEY_FIELD)

    def create_logic(self, ctx) -> None:
        ctx.write_stream(spark_map(ctx.read_stream(self.inlet)), self.out)


def hop_schema(hop: int) -> dict:
    """What hop `hop` (0-based) reads: flight events first, then the mapped flights of the hop before."""
    return FLIGHT_EVENT if hop == 0 else MAPPED_FLIGHT


def chain_topics(tag: str, hops: int) -> list[str]:
    """The topics of a chain of `hops` maps: lat.<tag>.0 (produced into) ... lat.<tag>.<hops> (consumed)."""
    return [f"lat.{tag}.{i}" for i in range(hops + 1)]


def default_master(hops: list[int], partitions: int) -> str:
    """A task slot per real-time task (partitions per hop, the longest chain), one more for the rest."""
    return f"local[{max(hops) * partitions + 1}]"


# --- producer and consumer processes ------------------------------------------------------------

def _producer(bootstrap: str, topic: str, rate: int, seconds: float, start_index: int, out_q, tick: float) -> None:
    from confluent_kafka import Producer

    n = int(rate * seconds)
    payloads = [encoded_flight(start_index + i) for i in range(n)]  # encoded before the clock starts
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    # The topic's metadata before the clock starts (the benchmark's single broker is also the
    # partitions' leader): otherwise the first records wait for it in the producer, and the first
    # second's latency measures that.
    producer.list_topics(topic, timeout=30)
    sent = [0.0] * n
    t0 = time.time()
    i = 0
    while i < n:
        due = min(n, int((time.time() - t0) * rate) + 1)
        while i < due:
            key, value = payloads[i]
            sent[i] = time.time()
            send(producer, topic, key, value)
            i += 1
        producer.poll(0)
        time.sleep(tick)
    producer.flush(60)
    out_q.put(sent)


def _consumer(bootstrap: str, topic: str, partitions: int, expected: int, start_index: int, timeout: float,
              ready, out_q) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "isolation.level": "read_committed",  # as inlets read (librdkafka's default too)
                  # a long poll, answered as soon as a record is there (fetch.min.bytes 1): polling
                  # every millisecond (fetch.wait.max.ms 1) took broker CPU from the system measured
                  "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    ready.set()
    # Preallocated: a dict growing to millions of entries resizes in place, and each resize holds
    # this process for a few hundred ms, which then shows as latency (at 10,000 records/s, at
    # about 140 and 280 s into the window).
    at = [0.0] * expected
    got = 0
    deadline = time.time() + timeout
    while got < expected and time.time() < deadline:
        # Every record the client hands over in one call is stamped with that call's return: a
        # record's receipt is when the client has it, not when this loop reaches it (a batch made
        # visible at once, as a transaction's commit does, arrives as a burst; stamping each record
        # in turn added this loop's own time per record, tens of ms for a burst of a thousand).
        # poll() returns as soon as a record is there; consume(timeout=0) then takes what the client
        # holds besides, without waiting (with a timeout it would wait for num_messages).
        first = c.poll(0.05)
        now = time.time()
        if first is None:
            continue
        for msg in [first, *c.consume(num_messages=10000, timeout=0)]:
            if msg.error() is not None:
                continue
            idx = int(msg.key().decode().rsplit("-", 1)[1]) - start_index
            if 0 <= idx < expected and not at[idx]:
                at[idx] = now
                got += 1
    c.close()
    out_q.put({i: t for i, t in enumerate(at) if t})


# --- the Spark variants --------------------------------------------------------------------------

PHASES = ("triggerExecution", "latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def batch_phases(queries) -> dict[str, float]:
    """Median ms per micro-batch of each of Spark's durations (StreamingQueryProgress.durationMs)
    over the active queries' recent batches that read records, and their count: where a batch's
    time goes, printed with each variant."""
    import statistics

    runs = [p for q in queries for p in q.recentProgress if p.numInputRows]
    out: dict[str, float] = {"batches": len(runs)}
    for phase in PHASES:
        values = [p.durationMs[phase] for p in runs if phase in (p.durationMs or {})]
        if values:
            out[phase] = statistics.median(values)
    return out


def start_spark_variant(spark, name: str, bootstrap: str, topics: list[str], checkpoint: str, interval: str):
    """Start the variant's queries, one per hop (topics[i] -> topics[i + 1]); returns a stop()
    callable and one that lists the queries."""
    from streamlets.runtime import progress_tracking
    from streamlets.trigger import Trigger

    hops = list(zip(topics[:-1], topics[1:], strict=True))
    if name.startswith("baseline"):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        queries = []
        for i, (in_topic, out_topic) in enumerate(hops):
            src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", in_topic).option("startingOffsets", "earliest").load())
            records = src.select(from_avro(F.col("value"), json.dumps(hop_schema(i))).alias("r")).select("r.*")
            writer = (encode_mapped(spark_map(records)).writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                      .option("topic", out_topic).option("checkpointLocation", f"{checkpoint}/{i}"))
            if name.endswith("rt"):
                writer = Trigger.real_time(interval).apply(writer.outputMode("update"))
            elif name.endswith("async"):
                writer = progress_tracking.apply(writer)
            queries.append(writer.start())
        return (lambda: [q.stop() for q in queries]), (lambda: queries)
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets.runtime.runner import StreamletRuntime
    from streamlets.runtime.transport import KafkaTransport

    rt = StreamletRuntime(spark, "bench", "bench.dl", KafkaTransport(bootstrap))
    streamlet = f"mapper-{uuid.uuid4().hex[:6]}"
    for i, (in_topic, out_topic) in enumerate(hops):
        cls = Mapper if i == 0 else MappedMapper
        run = StreamletRunConfig(app_id="bench", streamlet=f"{streamlet}-{i}", class_name=f"{cls.__module__}.{cls.__name__}",
                                 topics={"in": in_topic, "out": out_topic}, bootstrap_servers=bootstrap,
                                 checkpoint_root=f"{checkpoint}/{i}", dead_letter_topic="bench.dl",
                                 trigger=f"real-time {interval}" if name.endswith("rt") else None,
                                 delivery="at-least-once" if name.endswith(("alo", "async")) else "exactly-once",
                                 progress_tracking="async" if name.endswith("async") else "sync")
        rt.start_class(cls, run)
    return (lambda: rt.stop(timeout=30)), rt.queries


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q / 100 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def measure(bootstrap: str, in_topic: str, out_topic: str, partitions: int, rate: int, seconds: float,
            start_index: int, tick: float = TICK_SECONDS) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q_sent, q_recv, ready = ctx.Queue(), ctx.Queue(), ctx.Event()
    n = int(rate * seconds)
    consumer = ctx.Process(target=_consumer, args=(bootstrap, out_topic, partitions, n, start_index, seconds + 90,
                                                   ready, q_recv))
    consumer.start()
    ready.wait(60)
    producer = ctx.Process(target=_producer, args=(bootstrap, in_topic, rate, seconds, start_index, q_sent, tick))
    producer.start()
    sent = q_sent.get(timeout=seconds + 300)
    received = q_recv.get(timeout=seconds + 300)
    producer.join(30)
    consumer.join(30)
    lat = sorted((received[i] - sent[i]) * 1000 for i in received)
    return {"sent": n, "received": len(received), **latency_stats(lat), "worst_seconds": worst_seconds(sent, received),
            "_times": (sent, received)}


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far, from /proc/<pid>/stat (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_meter(pids: dict[str, int | None]):
    """Start measuring the CPU of the processes `pids` (label -> pid; None left out); the returned
    callable gives each one's CPU seconds since, by label."""
    known = {k: v for k, v in pids.items() if v}
    start = {k: cpu_seconds(v) for k, v in known.items()}
    return lambda: {k: cpu_seconds(v) - start[k] for k, v in known.items()}


def cpu_line(cpu: dict[str, float], batches: int) -> str:
    """The window's CPU seconds per process, and per micro-batch when there were batches."""
    per = (lambda v: f", {v * 1000 / batches:.1f} ms a batch") if batches else (lambda v: "")
    return "CPU in the window: " + ", ".join(f"{k} {v:.1f} s{per(v)}" for k, v in cpu.items())


def latency_stats(sorted_ms: list[float]) -> dict[str, float]:
    """p50, p90, p99, p99.9 and max of latencies in ms (sorted)."""
    return {"p50": percentile(sorted_ms, 50), "p90": percentile(sorted_ms, 90), "p99": percentile(sorted_ms, 99),
            "p99.9": percentile(sorted_ms, 99.9), "max": sorted_ms[-1] if sorted_ms else float("nan")}


def batch_end_bound(sent: list[float], received: dict[int, float], progress: list[Any]) -> dict[str, float] | None:
    """The latency the same run would have shown had each record become visible only when its
    micro-batch's `addBatch` ended, the earliest a sink that shows a batch all at once (a Kafka
    transaction per batch: the exactly-once outlet) can show it: per record, the end of the first
    batch whose `latestOffset` ended after the record was sent, less its send time (ms).

    `progress`: the query's StreamingQueryProgress objects (one query: one hop). A batch's end is
    its trigger's start (`timestamp`) plus `triggerExecution` less `commitOffsets` (Spark writes
    the commit log after addBatch). Taking the first batch that could have read the record makes
    this a lower bound: a record that reached the broker after that batch's offsets were taken
    was in a later one. None without batches covering the window."""
    import bisect
    from datetime import datetime

    batches = []
    for p in progress:
        d = p.durationMs or {}
        if not p.numInputRows or "triggerExecution" not in d:
            continue
        start = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        batches.append((start + d.get("latestOffset", 0) / 1000, start + (d["triggerExecution"] - d.get("commitOffsets", 0)) / 1000,
                        start))
    batches.sort()
    if not batches:
        return None
    offsets_taken = [b[0] for b in batches]
    lat = []
    for i in received:  # records sent before the first batch began may have been in an earlier one: left out
        k = bisect.bisect_left(offsets_taken, sent[i])
        if k < len(batches) and sent[i] >= batches[0][2]:
            lat.append((batches[k][1] - sent[i]) * 1000)
    if len(lat) < len(received) // 2:
        return None
    lat.sort()
    return {**latency_stats(lat), "records": len(lat)}


def worst_seconds(sent: list[float], received: dict[int, float], top: int = 5) -> list[dict[str, Any]]:
    """Where the tail lies: the `top` seconds of the measured window (by send time, from its start)
    with the highest max latency, each with its max and how many of its records took over 50 ms. A
    tail from Real-Time Mode's batch transitions (every checkpoint interval) or a pause shows as a
    few bad seconds; contention for the CPUs spreads it over many."""
    per: dict[int, list[float]] = {}
    t0 = sent[0] if sent else 0.0
    for i, t in received.items():
        per.setdefault(int(sent[i] - t0), []).append((t - sent[i]) * 1000)
    rows = [{"second": s, "max_ms": round(max(v), 1), "over_50ms": sum(x > 50 for x in v), "records": len(v)}
            for s, v in per.items()]
    return sorted(rows, key=lambda r: -r["max_ms"])[:top]


def warm_up(bootstrap: str, in_topic: str, out_topic: str, partitions: int, timeout: float = 300) -> None:
    """Send 200 records (rate 200/s) and wait until all came through: the query is running and warm."""
    r = measure(bootstrap, in_topic, out_topic, partitions, 200, 1.0, WARMUP_KEY_OFFSET)
    if r["received"] < r["sent"]:
        raise RuntimeError(f"warm-up: {r['received']} of {r['sent']} records came through")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python bench/bench_latency.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,10000", help="records/s, comma-separated (default 1000,10000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per variant and rate (default 20)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of every topic (default 2)")
    parser.add_argument("--hops", default="1,3", help="maps in a row, comma-separated: 1 (one hop), 3 (the chain); "
                        "default 1,3")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--master", default=None, help="Spark master (default local[max hops x partitions + 1]: "
                        "Real-Time Mode holds a task slot per partition and hop, one more runs the rest)")
    parser.add_argument("--checkpoint-interval", default=DEFAULT_CHECKPOINT_INTERVAL,
                        help=f"Real-Time Mode checkpoint interval (default {DEFAULT_CHECKPOINT_INTERVAL}, the SDK's and Spark's)")
    parser.add_argument("--tick-ms", type=float, default=TICK_SECONDS * 1000,
                        help=f"the producer sends what is due every this many ms (default {TICK_SECONDS * 1000:g}; each tick is a produce "
                             "request, and 1 ms ticks cost the broker a core's worth of CPU on two cores)")
    parser.add_argument("--warmup-seconds", type=float, default=60.0,
                        help="seconds of load, unmeasured, through each Spark variant before the measured rounds: "
                             "the driver JVM's compiler warms up its code paths (default 60: after 15 it kept getting faster "
                             "for minutes; 0: none)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every variant, rate and hop count this many times, the variants' order rotated each "
                             "round; the ratios are per round and their median (default 1)")
    parser.add_argument("--jfr", metavar="DIR", default=None,
                        help="record each measured window of the driver's JVM with Java Flight Recorder into DIR "
                             "(<window>.jfr) and print where its CPU went, by thread and by frame (bench/jfr_profile.py)")
    parser.add_argument("--output", default=str(HERE / "results" / "latency.json"))
    return parser


def start_quix(bootstrap: str, topics: list[str]):
    """One Quix Streams process per hop; returns a stop() callable."""
    procs = [mp.get_context("spawn").Process(target=quix_map, args=(bootstrap, a, b, hop_schema(i)))
             for i, (a, b) in enumerate(zip(topics[:-1], topics[1:], strict=True))]
    for proc in procs:
        proc.start()

    def stop() -> None:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(30)
    return stop


RATIO_PAIRS = [("streamlet-mb", "baseline-mb"), ("streamlet-mb-alo", "baseline-mb"),
               ("streamlet-mb-async", "baseline-mb-async"), ("streamlet-mb-async", "baseline-mb"),
               ("streamlet-rt", "baseline-rt"), ("streamlet-mb", "streamlet-mb-alo"),
               ("streamlet-mb-async", "streamlet-mb-alo")]


def p50_ratios(results: list[dict[str, Any]]) -> dict[tuple[str, str, int, int], list[float]]:
    """p50 of a over p50 of b for each pair of RATIO_PAIRS both measured, per (a, b, rate, hops):
    one ratio per round (results carry "round", 0 when absent), in round order; each pair's two
    windows come from the same round of the same run."""
    by = {(r["variant"], r["rate"], r["hops"], r.get("round", 0)): r for r in results}
    rounds = sorted({r.get("round", 0) for r in results})
    out: dict[tuple[str, str, int, int], list[float]] = {}
    for rate, hops in dict.fromkeys((r["rate"], r["hops"]) for r in results):
        for a, b in RATIO_PAIRS:
            for n in rounds:
                x, y = by.get((a, rate, hops, n)), by.get((b, rate, hops, n))
                if x and y:
                    out.setdefault((a, b, rate, hops), []).append(x["p50"] / y["p50"])
    return out


def round_order(variants: list[str], round_index: int) -> list[str]:
    """The variants in the order round `round_index` runs them: rotated by the round, so that no
    variant always runs first (right after the warm-ups) or last."""
    k = round_index % len(variants) if variants else 0
    return variants[k:] + variants[:k]


def print_window(r: dict[str, Any], rounds: int) -> None:
    """One measured window's lines, as it ends: latencies, Spark's phases, CPU, JFR, the batch-end
    bound, the worst seconds."""
    where = f"round {r['round'] + 1} " if rounds > 1 else ""
    print(f"  {where}{r['hops']} hop(s) {r['rate']:>6}/s {r['variant']:<18} p50 {r['p50']:8.1f} ms  p90 {r['p90']:8.1f}  "
          f"p99 {r['p99']:8.1f}  p99.9 {r['p99.9']:8.1f}  max {r['max']:8.1f}  ({r['received']}/{r['sent']} received)",
          flush=True)
    if r.get("phases"):
        print("      median ms per batch: " + ", ".join(f"{k} {v:g}" for k, v in r["phases"].items()), flush=True)
    if r.get("cpu"):
        print("      " + cpu_line(r["cpu"], int((r.get("phases") or {}).get("batches") or 0)), flush=True)
    if r.get("jfr"):
        print(textwrap.indent(jfr_profile.describe(r["jfr"]), "      "), flush=True)
    if r.get("batch_end_bound"):
        b = r["batch_end_bound"]
        print(f"      visible only at its batch's end: p50 {b['p50']:.1f} ms ({b['p50'] / r['p50']:.2f}x), "
              f"p99 {b['p99']:.1f} ({b['p99'] / r['p99']:.2f}x), {b['records']} records", flush=True)
    print("      worst seconds: " + ", ".join(f"s{w['second']} max {w['max_ms']:.0f} ms ({w['over_50ms']}/{w['records']} "
                                            f"over 50 ms)" for w in r["worst_seconds"]), flush=True)


def print_table(results: list[dict[str, Any]], rates: list[int], hops_list: list[int]) -> None:
    import statistics

    rounds = len({r.get("round", 0) for r in results})
    print()
    print("| hops | rate | round | variant | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | received |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in sorted(results, key=lambda r: (r["hops"], r["rate"], r.get("round", 0))):
        print(f"| {r['hops']} | {r['rate']:,} | {r.get('round', 0) + 1} | {r['variant']} | {r['p50']:,.1f} | {r['p90']:,.1f} | "
              f"{r['p99']:,.1f} | {r['p99.9']:,.1f} | {r['max']:,.1f} | {r['received']:,}/{r['sent']:,} |")
    by = {(r["variant"], r["rate"], r["hops"]): r for r in results if r.get("round", 0) == 0}
    ratios = p50_ratios(results)
    for hops in hops_list:
        for rate in rates:
            for a, b in RATIO_PAIRS:
                each = ratios.get((a, b, rate, hops))
                if not each:
                    continue
                if rounds == 1:
                    x, y = by[(a, rate, hops)], by[(b, rate, hops)]
                    print(f"ratio {a}/{b}, {hops} hop(s) at {rate}/s: p50 {each[0]:.2f}, p99 {x['p99'] / y['p99']:.2f}")
                else:
                    print(f"ratio {a}/{b}, {hops} hop(s) at {rate}/s: p50 median {statistics.median(each):.2f} "
                          f"over {len(each)} rounds ({', '.join(f'{v:.2f}' for v in each)})")


def run_variant(spark: Any, bootstrap: str, tmp: Path, tag: str, name: str, hops: int, rate: int, seconds: float,
                args: argparse.Namespace, pids: dict[str, int | None] | None = None) -> dict[str, Any]:
    """One measured window of variant `name` on new topics named after `tag`: start it, warm it up,
    measure `seconds` at `rate` records/s, stop it. Spark variants' results carry their batches'
    phases, and with one hop the batch-end bound; `cpu` gives the CPU seconds each process of
    `pids` (label -> pid) used in the measured window."""
    from blueprint.sandbox.kafka_broker import create_topics

    topics = chain_topics(tag, hops)
    create_topics(bootstrap, [(t, args.partitions, {}) for t in topics])
    queries = None
    if name == "quix":
        stop = start_quix(bootstrap, topics)
    else:
        stop, queries = start_spark_variant(spark, name, bootstrap, topics, str(tmp / "cp" / tag),
                                            args.checkpoint_interval)
    try:
        warm_up(bootstrap, topics[0], topics[-1], args.partitions)
        cpu = cpu_meter(pids or {})
        driver = (pids or {}).get("driver JVM")
        recording = jfr_profile.start(driver, tag, Path(args.jfr) / f"{tag}.jfr") if args.jfr and driver else None
        r = measure(bootstrap, topics[0], topics[-1], args.partitions, rate, seconds, 0, args.tick_ms / 1000)
        sent, received = r.pop("_times")
        r["cpu"] = cpu()
        if recording is not None:
            r["jfr"] = jfr_profile.summary(recording.stop())
        if queries is not None:
            r["phases"] = batch_phases(queries())
            if hops == 1:
                busiest = max(queries(), key=lambda q: sum(p.numInputRows for p in q.recentProgress))
                r["batch_end_bound"] = batch_end_bound(sent, received, busiest.recentProgress)
    finally:
        stop()
    return r


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    hops_list = [int(h) for h in args.hops.split(",") if h.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        print(f"error: unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if not hops_list or any(h < 1 for h in hops_list):
        print("error: --hops takes positive numbers of maps, e.g. 1,3", file=sys.stderr)
        return 2
    if args.jfr and not jfr_profile.available():
        print("error: --jfr needs the JDK's jcmd and jfr on PATH", file=sys.stderr)
        return 2
    if "quix" in variants:
        try:
            import quixstreams  # noqa: F401
        except ImportError:
            print("error: the quix variant needs Quix Streams: pip install -e .[bench]", file=sys.stderr)
            return 2
    master = args.master or default_master(hops_list, args.partitions)
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
            # every batch of the measured window, for batch_phases and batch_end_bound (Spark keeps 100);
            # in the context's conf: the streamlets' sessions (SparkSession.newSession) take it from there
            spark = build_spark_session("bench-latency", master=master,
                                        conf={"spark.sql.streaming.numRecentProgressUpdates": "100000"})
        # the processes whose CPU each window reports: with 2 cores busy, CPU anywhere is latency
        pids = {"driver JVM": int(spark._jvm.java.lang.ProcessHandle.current().pid()) if spark is not None else None,
                "driver Python": os.getpid(), "broker": broker.pid}
        warm = dict.fromkeys(v for v in variants if v != "quix") if args.warmup_seconds > 0 else {}
        for name in warm:  # each Spark variant once, in the order given
            w = run_variant(spark, bootstrap, tmp, f"warmup.{name}.{uuid.uuid4().hex[:6]}", name, 1, max(rates),
                            args.warmup_seconds, args, pids)
            print(f"  warm-up ({name}, {args.warmup_seconds:g} s at {max(rates)}/s, not counted): p50 {w['p50']:.1f} ms",
                  flush=True)
        for round_index in range(args.rounds):
            for hops, rate in itertools.product(hops_list, rates):
                for name in round_order(variants, round_index):
                    r = run_variant(spark, bootstrap, tmp, f"{name}.{hops}.{rate}.{uuid.uuid4().hex[:6]}", name, hops,
                                    rate, args.seconds, args, pids)
                    r.update(variant=name, rate=rate, hops=hops, round=round_index)
                    results.append(r)
                    print_window(r, args.rounds)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    print_table(results, rates, hops_list)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "latency", "seconds": args.seconds, "partitions": args.partitions,
                               "hops": hops_list, "master": master, "checkpoint_interval": args.checkpoint_interval,
                               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                           "loadavg": os.getloadavg()},
                               "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
