"""Benchmark: a one-inlet, one-outlet mapping streamlet against the hand-written PySpark job.

    python bench/bench_map.py [--records 1000000] [--rounds 3] [--partitions 2]
                              [--max-offsets-per-trigger N] [--variants baseline,streamlet]
                              [--on-failure quarantine] [--storage RUN_CONFIG]
                              [--security none|mtls|sasl-ssl] [--registry]

Both jobs read the same Kafka topic of Avro-encoded flight events (12 fields: strings, ints,
nullable strings and doubles, timestamp-millis, boolean), add `dep_delay_hours` (dep_delay / 60)
and write Avro records of the same output schema, keyed by flight_id, to a fresh output topic,
with Trigger.AvailableNow and a fresh checkpoint. One SparkSession (local[2]) runs everything;
the jobs run one at a time: one untimed warm-up run of each on the whole input, then --rounds
rounds, the order rotating each round (with two jobs: alternating which goes first).

- baseline: Kafka source -> from_avro (FAILFAST, the default) -> withColumn -> to_avro + key ->
  Kafka sink: what one writes by hand.
- streamlet: `Mapper`, a Streamlet started by StreamletRuntime (dead-letter handling: from_avro
  PERMISSIVE, an observed metric counting malformed values, a filter; progress listener), with
  exactly-once outlets (the default: the tasks write in Kafka transactions, the driver commits
  them with the batch; streamlets.runtime.exactly_once).
- streamlet-alo (`--variants streamlet-alo`): the same with delivery at-least-once (Spark's Kafka sink).
- streamlet-metrics, streamlet-alo-metrics (`--variants ...`): the same streamlets serving their
  Prometheus endpoint as a driver pod does (streamlets.driver.serve_metrics), scraped every second
  while they run; with the plain variant in the same run, the ratio to it is what metrics cost.

Each run is timed from start (building the query) to awaitTermination (wall clock); records/s is
records / seconds. The CPU seconds the Spark JVM and this Python process used meanwhile are
printed too: on a shared machine they vary less than wall time. Every run is checked: its output topic must hold exactly --records records,
and samples from each output partition (start, middle, end) must decode (fastavro) to the mapped
values of the input records they came from, with the Kafka key = flight_id.

`--storage RUN_CONFIG`: every job's checkpoint under the `storage.checkpoints` root of that run
config (an object store, `s3a://bucket/prefix`, with its `storage.s3a.*` settings and the
credentials of the environment: streamlets.runtime.object_store) instead of the temporary folder.

`--security mtls|sasl-ssl`: the broker's client listener is TLS (with client certificates) or
SCRAM-SHA-512 over TLS, and every job connects through it (the hand-written jobs with the Kafka
client's own kafka.security.protocol and ssl.* options). `--registry`: the topics carry the schema
registry's wire format (Apicurio Registry started here): the streamlet with registry topics
(runtime.schema_registry: each value's writer schema resolved in the JVM), the baseline by hand
(the 5-byte header cut off, the one writer schema known; the out subject's id put before to_avro).

The printed ratio is median streamlet records/s / median baseline records/s (goal >= 0.95).
Results also go to bench/results/map.json. `--variants all` adds intermediate hand-written jobs
that isolate what each part of the streamlet's data path costs (see bench/README.md).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):  # run as a script from anywhere: the repo's packages first
    if p not in sys.path:
        sys.path.insert(0, p)

import fastavro  # noqa: E402

from flight_workload import (  # noqa: E402
    FLIGHT_EVENT, KEY_FIELD, MAPPED_FLIGHT, epoch_millis, expected_output, flight_record, record_index)
from map_jobs import DEAD_LETTERS, DEFAULT_VARIANTS, JOBS, Job  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Kafka: fill the input topic, check an output topic


def produce_records(bootstrap, topic: str, n: int, partitions: int, start: int = 0, prefix: bytes = b"") -> float:
    """Write records start..start+n-1 to `topic` (record i to partition i % partitions), each value
    `prefix` (the registry's wire-format header) and the Avro encoding; seconds taken."""
    from confluent_kafka import Producer

    from streamlets.kafka_logging import client_config

    parsed = fastavro.parse_schema(FLIGHT_EVENT)
    producer = Producer(client_config({
        "bootstrap.servers": bootstrap,
        "linger.ms": 50,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "acks": "1",
        "enable.idempotence": False,
        "compression.type": "none",
    }))
    t0 = time.perf_counter()
    buf = io.BytesIO()
    for i in range(start, start + n):
        rec = flight_record(i)
        buf.seek(0)
        buf.truncate()
        buf.write(prefix)
        fastavro.schemaless_writer(buf, parsed, rec)
        while True:
            try:
                producer.produce(topic, buf.getvalue(), rec["flight_id"].encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records left unsent to {topic}")
    return time.perf_counter() - t0


def committed_count(bootstrap, topic: str, ends: dict[int, int]) -> int:
    """Records a read_committed consumer reads from `topic` (below `ends`)."""
    from confluent_kafka import Consumer, TopicPartition

    from streamlets.kafka_logging import client_config

    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "bench-count", "enable.auto.commit": False,
                                       "isolation.level": "read_committed", "fetch.max.bytes": 52428800}))
    count = 0
    try:
        for p, end in ends.items():
            consumer.assign([TopicPartition(topic, p, 0)])
            last = -1
            while last < end - 2:
                msgs = consumer.consume(10_000, timeout=5)
                if not msgs:
                    break
                good = [m for m in msgs if m.error() is None]
                count += len(good)
                last = max([m.offset() for m in good] or [last])
    finally:
        consumer.close()
    return count


def check_output(bootstrap, topic: str, n: int, sample: int = 300, registry=None) -> int:
    """Check `topic` holds exactly n records and that samples decode to the expected mapped records
    (with `registry`, a streamlets.schema_registry.SchemaRegistry: values in its wire format, the
    header naming the schema registered under the topic's subject).

    Samples `sample` records at the start, middle and end of every partition. Returns how many
    records were checked; raises AssertionError on the first difference."""
    from confluent_kafka import Consumer, TopicPartition

    from blueprint.sandbox.kafka_broker import end_offsets
    from streamlets.kafka_logging import client_config
    from streamlets.schema_registry import header, registered

    prefix = b""
    if registry is not None:
        ((_, schema_id, _),) = registered(registry, topic)
        prefix = header(schema_id)

    ends = end_offsets(bootstrap, topic)
    total = sum(ends.values())
    transactional = total != n
    if transactional:  # each commit leaves a marker offset per partition: count the records
        total = committed_count(bootstrap, topic, ends)
    assert total == n, f"{topic}: {total} records, expected {n}"
    parsed = fastavro.parse_schema(MAPPED_FLIGHT)
    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "bench-check",
                                       "enable.auto.commit": False, "isolation.level": "read_committed"}))
    checked = 0
    try:
        for p, end in ends.items():
            starts = sorted({0, max(0, end // 2 - sample // 2), max(0, end - sample)})
            for s in starts:
                want = min(sample, end - s)
                if want <= 0:
                    continue
                consumer.assign([TopicPartition(topic, p, s)])
                got, deadline = 0, time.monotonic() + 30
                last = s - 1
                # transactional output: markers take offsets, so a range holds fewer records
                while got < want and time.monotonic() < deadline and not (transactional and last >= end - 2):
                    for msg in consumer.consume(min(want - got, 500), timeout=1.0):
                        if msg.error() is not None:
                            raise AssertionError(f"{topic}[{p}]: {msg.error()}")
                        raw = msg.value()
                        assert raw[:len(prefix)] == prefix, f"{topic}[{p}]@{msg.offset()}: header {raw[:5]!r}"
                        value = fastavro.schemaless_reader(io.BytesIO(raw[len(prefix):]), parsed, None)
                        record = {k: epoch_millis(v) for k, v in value.items()}
                        i = record_index(record[KEY_FIELD])
                        expected = expected_output(i)
                        assert record == expected, f"{topic}[{p}]@{msg.offset()}: {record} != {expected}"
                        assert msg.key() == expected[KEY_FIELD].encode(), f"{topic}[{p}]@{msg.offset()}: key {msg.key()!r}"
                        got += 1
                        last = msg.offset()
                assert got == want or transactional and got > 0, f"{topic}[{p}]: read {got} of {want} records from offset {s}"
                checked += got
    finally:
        consumer.close()
    return checked


# ---------------------------------------------------------------------------------------------
# Running


def _progress_ms(queries) -> dict[str, int]:
    """Sum over the queries' micro-batches of Spark's own durations (ms), and the batch count."""
    out: dict[str, int] = {"batches": 0}
    for q in queries:
        for p in q.recentProgress:
            out["batches"] += 1
            for k, v in (p.durationMs or {}).items():
                out[k] = out.get(k, 0) + int(v)
    return out


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid`, all threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jvm_pid(spark) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def run_once(job: Job, bootstrap, in_topic: str, out_topic: str, partitions: int, checkpoint: str,
             n: int, check: bool = True) -> dict[str, Any]:
    from blueprint.sandbox.kafka_broker import create_topics

    create_topics(bootstrap, [(out_topic, partitions, {})])
    pid = jvm_pid(job.spark)
    cpu0, py0 = process_cpu_seconds(pid), time.process_time()
    t0 = time.perf_counter()
    queries = job.start(in_topic, out_topic, checkpoint)
    for q in queries:
        q.awaitTermination()
    seconds = time.perf_counter() - t0
    # CPU of the Spark JVM (driver and executor threads) and of this Python process (the driver
    # side of PySpark, listeners): far less sensitive than wall time to other jobs on the machine.
    cpu = process_cpu_seconds(pid) - cpu0 + time.process_time() - py0
    for q in queries:
        if q.exception() is not None:
            raise RuntimeError(f"{job.name}: query {q.name} failed: {q.exception()}")
    spark_ms = _progress_ms(queries)
    job.finish()
    checked = check_output(bootstrap, out_topic, n, registry=job.registry) if check else 0
    return {"seconds": seconds, "rps": n / seconds, "cpu_seconds": cpu, "rpcs": n / cpu, "checked": checked,
            "spark_ms": spark_ms}


def run_quix(bootstrap: str, in_topic: str, out_topic: str, partitions: int, n: int, timeout: float = 1800) -> dict[str, Any]:
    """Quix Streams (quix_peer.quix_map: fastavro decode, the map, encode; one Python process) on
    the whole input topic: seconds from the process's start until the output topic holds n
    records (checked like the Spark jobs'). Benchmark-only dependency: pip install -e .[bench]."""
    import multiprocessing as mp

    from blueprint.sandbox.kafka_broker import create_topics, end_offsets
    from quix_peer import quix_map

    create_topics(bootstrap, [(out_topic, partitions, {})])
    proc = mp.get_context("spawn").Process(target=quix_map, args=(bootstrap, in_topic, out_topic))
    t0 = time.perf_counter()
    proc.start()
    try:
        while sum(end_offsets(bootstrap, out_topic).values()) < n:
            if time.perf_counter() - t0 > timeout or not proc.is_alive():
                raise RuntimeError(f"quix: {sum(end_offsets(bootstrap, out_topic).values())} of {n} records written")
            time.sleep(0.1)
        seconds = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.join(30)
    checked = check_output(bootstrap, out_topic, n)
    return {"seconds": seconds, "rps": n / seconds, "checked": checked}


def delete_topics(bootstrap, topics: list[str]) -> None:
    """Delete finished output topics (only to keep the broker's disk use down: failures are ignored)."""
    from confluent_kafka.admin import AdminClient

    from streamlets.kafka_logging import client_config

    if topics:
        for fut in AdminClient(client_config({"bootstrap.servers": bootstrap})).delete_topics(
                topics, operation_timeout=30).values():
            try:
                fut.exception(60)
            except Exception as e:  # a slow broker under load: the topic just stays
                print(f"  (deleting topics {topics} did not finish: {type(e).__name__})", flush=True)


def start_registry(tmp: Path):
    """Apicurio Registry (tests/support/registry.py) for --registry: (its SchemaRegistry, the
    process, the wire-format header of the input's schema, registered under every input topic's
    subject)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.registry import start_registry as start

    from streamlets.schema import AvroSchema
    from streamlets.schema_registry import SchemaRegistry, header, register

    server, proc = start(tmp / "registry")
    registry = SchemaRegistry(url=server.url)
    schema_id = None
    for topic in ("bench.in", "bench.warmup"):
        schema_id = register(registry, topic, AvroSchema.load(FLIGHT_EVENT))
    assert schema_id is not None
    return registry, proc, header(schema_id)


def parse_variants(text: str) -> list[str]:
    if text == "all":
        return list(JOBS)
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in JOBS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(JOBS)}, all")
    for required in DEFAULT_VARIANTS:
        if required not in names:
            names.append(required)
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python bench/bench_map.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the input topic (default 1000000)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; each runs every variant once (default 3)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the input and output topics (default 2)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                        help="Kafka source maxOffsetsPerTrigger, set identically on every job (default: unset, "
                             "so AvailableNow reads everything in one micro-batch)")
    parser.add_argument("--warmup-records", type=int, default=None, metavar="N",
                        help="warm up on a separate topic of N records (default: one untimed run of each job on the "
                             "whole input topic; a small topic leaves the JIT cold and round 1 about 30%% slow)")
    parser.add_argument("--warmup-runs", type=int, default=1, help="untimed runs of each job before round 1 (default 1)")
    parser.add_argument("--variants", type=parse_variants, default=list(DEFAULT_VARIANTS),
                        help=f"comma-separated jobs to time, or 'all' ({', '.join(JOBS)}); "
                             "baseline and streamlet are always included")
    parser.add_argument("--quix", action="store_true", help="also time Quix Streams on the same topic once per round "
                        "(the Python peer; needs pip install -e .[bench]); prints streamlet / quix")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--java-options", default=None, metavar="OPTS",
                        help="extra JVM options of the Spark driver (one JVM runs every job, so they apply to all "
                             "alike), e.g. --java-options=-XX:-DontCompileHugeMethods")
    parser.add_argument("--explain", action="store_true", help="print each job's physical plan (from the warm-up)")
    parser.add_argument("--output", default=str(HERE / "results" / "map.json"), help="JSON results file")
    parser.add_argument("--on-failure", choices=["stop", "quarantine"], default=None,
                        help="on_failure of the streamlet jobs (streamlets.runtime.quarantine); nothing fails here, so "
                             "quarantine must cost nothing (default: the class's, stop)")
    parser.add_argument("--storage", type=Path, default=None, metavar="RUN_CONFIG",
                        help="a run config whose storage section puts the checkpoints on an object store")
    parser.add_argument("--security", choices=["none", "mtls", "sasl-ssl"], default="none",
                        help="the broker's client listener (blueprint.sandbox.kafka_broker): mtls is TLS with client "
                             "certificates, sasl-ssl SCRAM-SHA-512 over TLS; every job and client connects through it")
    parser.add_argument("--registry", action="store_true",
                        help="topics in the schema registry's wire format, with Apicurio Registry started here "
                             "(tests/support/registry.py): the jobs that can (baseline, streamlet) read and write it")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (broker data, checkpoints)")
    return parser


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    import faulthandler

    args = build_parser().parse_args(argv)
    if args.records <= 0 or args.rounds <= 0 or args.partitions <= 0:
        print("error: --records, --rounds and --partitions must be positive", file=sys.stderr)
        return 2
    unable = [name for name in args.variants if args.registry and not JOBS[name].wire_format]
    if unable:
        print(f"error: --registry: variant(s) {', '.join(unable)} cannot read the wire format", file=sys.stderr)
        return 2
    faulthandler.enable()  # a crash in a native client (librdkafka, py4j) still says where
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics
    from streamlets.runtime.spark_session import build_spark_session

    # Spark's AvroSerializer warns once per task that the schema's non-nullable fields come from
    # nullable columns (true of both jobs); keep the table readable.
    os.environ.setdefault("STREAMLETS_SPARK_LOG_LEVEL", "ERROR")

    variants: list[str] = args.variants
    store = None
    if args.storage is not None:
        from blueprint.sandbox.localconfig import load_storage

        store = load_storage(args.storage, [])
    tmp = Path(tempfile.mkdtemp(prefix="bench-map-"))
    # the checkpoints' root: the object store's (a fresh prefix per run), else the temporary folder
    cp = f"{store.checkpoints.rstrip('/')}/{tmp.name}" if store is not None else str(tmp / "cp")
    broker = KafkaBroker(tmp / "kafka", heap="1g", security=args.security)
    spark = None
    registry_proc = None
    try:
        broker.start()
        bootstrap = broker.connection() if args.security != "none" else broker.bootstrap_servers
        registry, prefix = None, b""
        if args.registry:
            registry, registry_proc, prefix = start_registry(tmp)
        in_topic = "bench.in"
        warm_topic, warm_n = (("bench.warmup", args.warmup_records) if args.warmup_records
                              else (in_topic, args.records))
        topics = {in_topic: args.partitions, warm_topic: args.partitions, DEAD_LETTERS: 1}
        create_topics(bootstrap, [(t, p, {}) for t, p in topics.items()])  # no duplicates: librdkafka crashes on them
        print(f"producing {args.records} records to {in_topic} ({args.partitions} partitions) ...", flush=True)
        produce_s = produce_records(bootstrap, in_topic, args.records, args.partitions, prefix=prefix)
        if warm_topic != in_topic:
            produce_records(bootstrap, warm_topic, warm_n, args.partitions, start=10**9, prefix=prefix)
        print(f"  {produce_s:.1f} s ({args.records / produce_s:,.0f} records/s)", flush=True)

        conf = {"spark.driver.extraJavaOptions": args.java_options} if args.java_options else {}
        spark = build_spark_session("bench-map", conf, master=args.master, store=store)
        jobs = {name: JOBS[name](spark, bootstrap, args.max_offsets_per_trigger, args.on_failure) for name in variants}
        for job in jobs.values():
            job.registry = registry

        print(f"warm-up: {args.warmup_runs} untimed run(s) of each job on {warm_topic} ({warm_n} records) ...",
              flush=True)
        for w in range(args.warmup_runs):
            for name, job in jobs.items():
                out = f"bench.warm.{name}.{w}"
                r = run_once(job, bootstrap, warm_topic, out, args.partitions, f"{cp}/warm-{name}-{w}",
                             warm_n)
                print(f"  {name:<11} {r['seconds']:7.2f} s  (checked {r['checked']} records)", flush=True)
                delete_topics(bootstrap, [out])
        if args.explain:
            explain_jobs(jobs, bootstrap, warm_topic, tmp)

        rounds: list[dict[str, Any]] = []
        load_before = os.getloadavg()
        for rnd in range(args.rounds):
            order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
            row: dict[str, Any] = {"round": rnd + 1, "order": order}
            for name in order:
                out = f"bench.out.{name}.{rnd}"
                r = run_once(jobs[name], bootstrap, in_topic, out, args.partitions,
                             f"{cp}/{name}-{rnd}", args.records)
                row[name] = r
                print(f"  round {rnd + 1} {name:<11} {r['seconds']:7.2f} s {r['rps']:>12,.0f} records/s  "
                      f"cpu {r['cpu_seconds']:6.2f} s  (batches {r['spark_ms']['batches']}, checked {r['checked']})",
                      flush=True)
                delete_topics(bootstrap, [out])
            if args.quix:
                out = f"bench.out.quix.{rnd}"
                r = run_quix(bootstrap, in_topic, out, args.partitions, args.records)
                row["quix"] = r
                print(f"  round {rnd + 1} {'quix':<11} {r['seconds']:7.2f} s {r['rps']:>12,.0f} records/s  "
                      f"(checked {r['checked']})", flush=True)
                delete_topics(bootstrap, [out])
            rounds.append(row)
        load_after = os.getloadavg()

        medians = {name: {k: _median([r[name][k] for r in rounds]) for k in ("seconds", "rps", "cpu_seconds", "rpcs")}
                   for name in variants}
        best = {name: {"seconds": min(r[name]["seconds"] for r in rounds),
                       "rps": max(r[name]["rps"] for r in rounds)} for name in variants}
        ratio = medians["streamlet"]["rps"] / medians["baseline"]["rps"]
        per_round = [r["streamlet"]["rps"] / r["baseline"]["rps"] for r in rounds]
        result = {
            "benchmark": "map",
            "records": args.records,
            "rounds": args.rounds,
            "partitions": args.partitions,
            "max_offsets_per_trigger": args.max_offsets_per_trigger,
            "on_failure": args.on_failure,
            "master": args.master,
            "java_options": args.java_options,
            "security": args.security,
            "registry": args.registry,
            "checkpoints": cp if store is not None else "local",
            "variants": {name: JOBS[name].description for name in variants},
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                        "spark": spark.version, "loadavg_before": load_before, "loadavg_after": load_after},
            "produce_seconds": produce_s,
            "runs": rounds,
            "median": medians,
            "best": best,
            "ratio": ratio,
            "quix": ({"median_rps": _median([r["quix"]["rps"] for r in rounds]),
                      "streamlet_over_quix": medians["streamlet"]["rps"] / _median([r["quix"]["rps"] for r in rounds]),
                      "goal": 5.0} if args.quix else None),
            "ratio_per_round": per_round,
            "ratio_best": best["streamlet"]["rps"] / best["baseline"]["rps"],
            "ratio_paired_median": _median(per_round),
            "cpu_ratio": medians["streamlet"]["rpcs"] / medians["baseline"]["rpcs"],
            "goal": 0.95,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        print_table(result, variants)
        if result["quix"]:
            print(f"Quix Streams: {result['quix']['median_rps']:,.0f} records/s (median); streamlet / quix = "
                  f"{result['quix']['streamlet_over_quix']:.1f} (goal >= 5)")
        out_path = Path(args.output)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"results written to {out_path}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if registry_proc is not None:
            registry_proc.terminate()
        broker.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def explain_jobs(jobs: dict[str, Job], bootstrap: str, topic: str, tmp: Path) -> None:
    """Print the executed physical plan of each job (one more small run each, untimed)."""
    for name, job in jobs.items():
        out = f"bench.explain.{name}"
        from blueprint.sandbox.kafka_broker import create_topics

        create_topics(bootstrap, [(out, 1, {})])
        queries = job.start(topic, out, str(tmp / "cp" / f"explain-{name}"))
        for q in queries:
            q.awaitTermination()
        print(f"\n===== {name}: {JOBS[name].description}")
        for q in queries:
            q.explain()
        job.finish()
        delete_topics(bootstrap, [out])


def print_table(result: dict[str, Any], variants: list[str]) -> None:
    n = result["records"]
    mot = result["max_offsets_per_trigger"]
    print()
    print(f"map benchmark: {n:,} records, {result['partitions']} partitions, {result['master']}, "
          f"maxOffsetsPerTrigger={mot if mot else 'unset'}, Spark {result['machine']['spark']}, "
          f"{'JVM options ' + result['java_options'] + ', ' if result['java_options'] else ''}"
          f"{result['machine']['cpus']} CPUs, load average {result['machine']['loadavg_before'][0]:.1f} at the start")
    head = f"{'round':<7}" + "".join(f"{v + ' s':>14}{'rec/s':>10}{'cpu s':>7}" for v in variants) + f"{'ratio':>7}"
    print(head)
    print("-" * len(head))

    def cells(r: dict[str, Any]) -> str:
        return f"{r['seconds']:>14.2f}{r['rps']:>10,.0f}{r['cpu_seconds']:>7.1f}"

    for row, ratio in zip(result["runs"], result["ratio_per_round"]):
        print(f"{row['round']:<7}" + "".join(cells(row[v]) for v in variants) + f"{ratio:>7.3f}")
    med = result["median"]
    print(f"{'median':<7}" + "".join(cells(med[v]) for v in variants) + f"{result['ratio']:>7.3f}")
    print()
    for v in variants:
        if v != "baseline":
            print(f"  {v:<11} / baseline: records/s {med[v]['rps'] / med['baseline']['rps']:.3f}, "
                  f"records per CPU-second {med[v]['rpcs'] / med['baseline']['rpcs']:.3f}   ({JOBS[v].description})")
    for plain in ("streamlet", "streamlet-alo"):  # what serving and scraping the metrics costs the same job
        with_metrics = f"{plain}-metrics"
        if plain in variants and with_metrics in variants:
            per_round = [row[with_metrics]["rps"] / row[plain]["rps"] for row in result["runs"]]
            print(f"  {with_metrics} / {plain}: records/s {med[with_metrics]['rps'] / med[plain]['rps']:.3f} "
                  f"(medians), per round {', '.join(f'{r:.3f}' for r in per_round)}")
    verdict = "meets" if result["ratio"] >= result["goal"] else "MISSES"
    print(f"\nratio = streamlet records/s / baseline records/s (medians) = {result['ratio']:.3f}  "
          f"({verdict} the goal of {result['goal']})")
    print(f"  median of the per-round ratios: {result['ratio_paired_median']:.3f}; best round of each: "
          f"{result['ratio_best']:.3f}; records per CPU-second (Spark JVM + Python): {result['cpu_ratio']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
