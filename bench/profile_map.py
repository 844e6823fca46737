"""Where the streamlet's data path spends its time: the map benchmark's plans without Kafka.

    python bench/profile_map.py [--records 1000000] [--rounds 5] [--explain]

The same Avro values as bench_map.py (fastavro-encoded flight events) are cached in Spark's
memory once; then each variant below decodes them, maps, encodes (to_avro + key) and writes to
Spark's `noop` sink, as a batch job, rounds interleaved (the order rotates each round). Kafka
I/O, checkpoints and the streaming engine are left out, so what differs between the variants is
only CPU spent on the plan: each variant adds one piece of the streamlet's inlet to the one
before, so the differences say what each piece costs. Prints seconds per variant and their
cost relative to the baseline.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import fastavro  # noqa: E402

import bench_map as bm  # noqa: E402
import flight_workload as wl  # noqa: E402
import map_jobs  # noqa: E402


def _variants():
    """name -> (description, function raw DataFrame -> Kafka-shaped (key, value) DataFrame)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from streamlets.runtime.codec import MALFORMED, RECORD, decode_value, encode_outlet, record_columns
    from streamlets.runtime.deadletter import observation_name

    schema, out_schema = wl.Mapper.inlet.schema, wl.Mapper.out.schema
    key = (wl.KEY_FIELD,)

    def out(records):
        return encode_outlet(wl.spark_map(records), out_schema, key, "profile")

    def observe(df):
        return df.observe(observation_name("in"), F.count(F.lit(1)).alias("records"),
                          F.sum(F.col(MALFORMED).cast("long")).alias("malformed"))

    def baseline(raw):
        return out(raw.select(from_avro(F.col("value"), schema.json).alias(RECORD)).select(f"{RECORD}.*"))

    def permissive(raw):
        return out(raw.select(from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}).alias(RECORD))
                   .select(f"{RECORD}.*"))

    def observe_only(raw):
        # the observed metric with a constant flag: what CollectMetrics itself costs
        dec = raw.select(from_avro(F.col("value"), schema.json).alias(RECORD), F.lit(False).alias(MALFORMED))
        return out(record_columns(observe(dec), schema))

    def null_check_filter(raw):
        # PERMISSIVE + a filter on "value or record is null" only (no all-fields-null test), no observe
        dec = raw.select(from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}).alias(RECORD), "value")
        dec = dec.withColumn(MALFORMED, F.col("value").isNull() | F.col(RECORD).isNull())
        return out(record_columns(dec.where(~F.col(MALFORMED)), schema))

    def sdk_filter(raw):
        # codec.decode_value + filter, no observe: the filter is pushed below the decoding Project
        dec = decode_value(raw, schema, permissive=True)
        return out(record_columns(dec.where(~F.col(MALFORMED)), schema))

    def sdk_observe_no_allnull(raw):
        dec = raw.select(from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}).alias(RECORD), "value")
        dec = observe(dec.withColumn(MALFORMED, F.col("value").isNull() | F.col(RECORD).isNull()))
        return out(record_columns(dec.where(~F.col(MALFORMED)), schema))

    def sdk_v1(raw):
        # the inlet as codec.decode_value was before the trailing-bytes check (value/record null
        # or all fields null), + observe + filter: to measure what that check costs
        dec = raw.withColumn(RECORD, from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}))
        all_null = F.lit(True)
        for name in schema.field_names:
            all_null = all_null & F.col(f"{RECORD}.`{name}`").isNull()
        dec = dec.withColumn(MALFORMED, F.col("value").isNull() | F.col(RECORD).isNull() | all_null)
        return out(record_columns(observe(dec).where(~F.col(MALFORMED)), schema))

    def trailing_reencode(raw):
        # a possible cheaper trailing-bytes check: the length of to_avro(record) against the
        # value's (one re-encoding per record instead of a per-field length expression)
        from pyspark.sql.avro.functions import to_avro

        dec = raw.withColumn(RECORD, from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}))
        all_null = F.lit(True)
        for name in schema.field_names:
            all_null = all_null & F.col(f"{RECORD}.`{name}`").isNull()
        trailing = F.coalesce(F.length(to_avro(F.col(RECORD), schema.json)) != F.length("value"), F.lit(True))
        dec = dec.withColumn(MALFORMED, F.col("value").isNull() | F.col(RECORD).isNull() | trailing | all_null)
        return out(record_columns(observe(dec).where(~F.col(MALFORMED)), schema))

    def compact_length(raw):
        dec = raw.withColumn(RECORD, from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}))
        return out(record_columns(observe(map_jobs.compact_malformed(dec, schema)).where(~F.col(MALFORMED)), schema))

    def streamlet_path(raw):
        # exactly StreamletContext.read_stream (dead-letter inlet) + write_stream's encode_outlet
        dec = observe(decode_value(raw, schema, permissive=True))
        return out(record_columns(dec.where(~F.col(MALFORMED)), schema))

    return {
        "baseline": ("from_avro FAILFAST -> map -> to_avro (hand-written)", baseline),
        "permissive": ("from_avro PERMISSIVE, no filter", permissive),
        "observe-only": ("FAILFAST + the observed metric (CollectMetrics), no filter", observe_only),
        "nullcheck-filter": ("PERMISSIVE + filter on value/record null only, no observe", null_check_filter),
        "sdk-filter": ("codec.decode_value (as it is now) + the malformed filter, no observe",
                       sdk_filter),
        "sdk-obs-noallnull": ("PERMISSIVE + observe + filter without the all-null test", sdk_observe_no_allnull),
        "sdk-v1": ("decode_value without the trailing-bytes check (as first written) + observe + filter", sdk_v1),
        "trailing-reencode": ("sdk-v1 + trailing-bytes check as length(to_avro(record)) != length(value)",
                              trailing_reencode),
        "compact-length": ("sdk-v1 + the trailing-bytes check as a length expression in two projections "
                           "(zigzag values computed once)", compact_length),
        "streamlet-path": ("the streamlet's inlet exactly (codec.decode_value as it is now) + observe + filter", streamlet_path),
    }


def max_method_size(spark, df) -> int:
    """Bytecode size of the largest method Spark generates for `df`'s plan (whole-stage codegen).

    Above 8000 bytes HotSpot does not JIT-compile a method (-XX:+DontCompileHugeMethods, the
    default): it runs in the bytecode interpreter, many times slower."""
    import re

    text = spark._jvm.org.apache.spark.sql.api.python.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen")
    return max((int(m) for m in re.findall(r"maxMethodCodeSize:(\d+)", text)), default=-1)


def encoded_values(n: int) -> list[bytes]:
    parsed = fastavro.parse_schema(wl.FLIGHT_EVENT)
    out, buf = [], io.BytesIO()
    for i in range(n):
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, wl.flight_record(i))
        out.append(buf.getvalue())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/profile_map.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--variants", default="all", help="comma-separated names, or all")
    parser.add_argument("--explain", action="store_true", help="print each variant's physical plan")
    parser.add_argument("--java-options", default=None,
                        help="extra JVM options of the Spark driver, e.g. -XX:-DontCompileHugeMethods")
    parser.add_argument("--output", default=str(HERE / "results" / "profile_map.json"))
    args = parser.parse_args(argv)

    import pandas as pd

    from streamlets.runtime.spark_session import build_spark_session

    os.environ.setdefault("STREAMLETS_SPARK_LOG_LEVEL", "ERROR")
    conf = {"spark.sql.execution.arrow.pyspark.enabled": "true"}
    if args.java_options:
        conf["spark.driver.extraJavaOptions"] = args.java_options
    spark = build_spark_session("bench-profile-map", conf, master=args.master)
    variants = _variants()
    names = list(variants) if args.variants == "all" else [v.strip() for v in args.variants.split(",")]
    try:
        t0 = time.perf_counter()
        values = encoded_values(args.records)
        raw = spark.createDataFrame(pd.DataFrame({"key": [None] * len(values), "value": values}),
                                    "key binary, value binary").repartition(args.partitions).cache()
        assert raw.count() == args.records
        print(f"{args.records} values cached in {time.perf_counter() - t0:.1f} s", flush=True)

        pid = bm.jvm_pid(spark)

        def run(name: str) -> tuple[float, float]:
            """(wall seconds, CPU seconds of the Spark JVM) of one run of variant `name`."""
            df = variants[name][1](raw)
            c, t = bm.process_cpu_seconds(pid), time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            return time.perf_counter() - t, bm.process_cpu_seconds(pid) - c

        method_sizes = {name: max_method_size(spark, variants[name][1](raw)) for name in names}
        for name in names:  # warm-up, and check that every variant writes the same rows
            run(name)
            run(name)
            kept = variants[name][1](raw).count()
            assert kept == args.records, f"{name} keeps {kept} of {args.records} records"
            sample = variants[name][1](raw).limit(200).collect()
            for row in sample:
                rec = fastavro.schemaless_reader(io.BytesIO(row["value"]), fastavro.parse_schema(wl.MAPPED_FLIGHT), None)
                rec = {k: wl.epoch_millis(v) for k, v in rec.items()}
                assert rec == wl.expected_output(wl.record_index(rec["flight_id"])), name
            if args.explain:
                print(f"\n===== {name}: {variants[name][0]}")
                variants[name][1](raw).explain()
        times: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                wall, cpu = run(name)
                times[name].append(wall)
                cpus[name].append(cpu)
            print(f"  round {r + 1}: " + "  ".join(f"{n} {times[n][-1]:.2f}s/{cpus[n][-1]:.2f}cpu" for n in names),
                  flush=True)
        med = {n: statistics.median(v) for n, v in times.items()}
        med_cpu = {n: statistics.median(v) for n, v in cpus.items()}
        base, base_cpu = med["baseline"], med_cpu["baseline"]
        print(f"\nplan cost without Kafka: {args.records:,} records, {args.partitions} partitions, {args.master}, "
              f"median of {args.rounds} rounds (noop sink); CPU = Spark JVM user+system seconds")
        print(f"{'variant':<19}{'wall s':>8}{'rec/s':>11}{'vs base':>9}{'cpu s':>8}{'rec/cpu-s':>11}{'vs base':>9}"
              f"{'max method':>12}   what")
        for n in names:
            print(f"{n:<19}{med[n]:>8.2f}{args.records / med[n]:>11,.0f}{base / med[n]:>9.3f}"
                  f"{med_cpu[n]:>8.2f}{args.records / med_cpu[n]:>11,.0f}{base_cpu / med_cpu[n]:>9.3f}"
                  f"{method_sizes[n]:>12}   {variants[n][0]}")
        print("max method: bytecode bytes of the largest generated method; above 8000 the JVM does not JIT-compile it")
        result = {"records": args.records, "rounds": args.rounds, "partitions": args.partitions,
                  "master": args.master, "java_options": args.java_options, "max_method_bytes": method_sizes,
                  "seconds": times, "cpu_seconds": cpus, "median": med, "median_cpu": med_cpu,
                  "ratio_vs_baseline": {n: base / med[n] for n in names},
                  "cpu_ratio_vs_baseline": {n: base_cpu / med_cpu[n] for n in names},
                  "loadavg": os.getloadavg(), "cpus": os.cpu_count()}
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"results written to {out}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
