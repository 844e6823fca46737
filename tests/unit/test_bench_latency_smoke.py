"""Smoke test of bench/bench_latency.py: it imports, parses its arguments, and its chain is wired
hop to hop (the benchmark itself needs a broker and Spark and runs by hand: bench/README.md)."""

import pytest

from support.bench import bench_module


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_latency") as module:
        yield module


def test_parser_defaults(bench):
    args = bench.build_parser().parse_args([])
    assert (args.rates, args.hops, args.partitions, args.master) == ("1000,10000", "1,3", 2, None)
    assert args.variants.split(",") == list(bench.VARIANTS)
    assert {"streamlet-mb-async", "baseline-mb-async"} <= set(bench.VARIANTS)


def test_unknown_variants_and_hops_are_refused(bench, capsys):
    assert bench.main(["--variants", "streamlet-fast"]) == 2
    assert bench.main(["--hops", "0"]) == 2
    assert "unknown variant(s) streamlet-fast" in capsys.readouterr().err


def test_the_chain_is_wired_hop_to_hop(bench):
    topics = bench.chain_topics("t", 3)
    assert topics == ["lat.t.0", "lat.t.1", "lat.t.2", "lat.t.3"]
    assert bench.hop_schema(0) == bench.FLIGHT_EVENT and bench.hop_schema(1) == bench.hop_schema(2) == bench.MAPPED_FLIGHT
    shape = bench.MappedMapper.shape()
    assert shape.inlet("in").schema.json == shape.outlet("out").schema.json  # the mapped flights, again
    assert bench.MappedMapper.out.key == bench.Mapper.out.key


def test_real_time_chain_gets_a_task_slot_per_partition_and_hop(bench):
    assert bench.default_master([1, 3], 2) == "local[7]"
    assert bench.default_master([1], 2) == "local[3]"


def test_worst_seconds_show_where_the_tail_lies(bench):
    sent = [i * 0.001 for i in range(3000)]  # 3 s at 1,000 records/s
    # 100 records of the second second wait half a second (a transition); the rest take 2 ms.
    received = {i: t + (0.5 if 1000 <= i < 1100 else 0.002) for i, t in enumerate(sent)}
    worst = bench.worst_seconds(sent, received, top=2)
    assert worst[0] == {"second": 1, "max_ms": 500.0, "over_50ms": 100, "records": 1000}
    assert worst[1]["max_ms"] == 2.0 and worst[1]["over_50ms"] == 0


def test_batch_end_bound_moves_each_record_to_the_end_of_the_first_batch_that_could_read_it(bench):
    from datetime import datetime, timezone
    from types import SimpleNamespace

    def progress(start: float, latest_offset: int, trigger: int, commit: int, rows: int = 10):
        stamp = datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return SimpleNamespace(numInputRows=rows, timestamp=stamp, durationMs={
            "latestOffset": latest_offset, "triggerExecution": trigger, "commitOffsets": commit})

    t0 = 1_800_000_000.0
    # Batches start at t0 and t0 + 0.1 s; each takes its offsets 5 ms in and ends its addBatch at
    # 50 - 2 ms (commitOffsets after it). A batch without rows (an idle trigger) is left out.
    batches = [progress(t0, 5, 50, 2), progress(t0 + 0.05, 1, 3, 1, rows=0), progress(t0 + 0.1, 5, 50, 2)]
    sent = [t0 + 0.001, t0 + 0.004, t0 + 0.006, t0 + 0.060]
    received = {i: t + 0.010 for i, t in enumerate(sent)}  # each visible 10 ms after its send
    bound = bench.batch_end_bound(sent, received, batches)
    # records 0 and 1 are in batch 0 (its offsets taken at 5 ms): visible at 48 ms; 2 and 3 were sent
    # after that, so the batch at 100 ms is the first that could read them: visible at 148 ms.
    assert bound["records"] == 4
    assert sorted(round(x) for x in (bound["p50"], bound["max"])) == [round(148 - 60), round(148 - 6)]
    assert bench.batch_end_bound(sent, received, [batches[1]]) is None  # no batch with rows: no bound


def test_the_cpu_meter_counts_each_process_own_cpu(bench):
    import os
    import subprocess
    import time

    idle = subprocess.Popen(["sleep", "30"])
    try:
        meter = bench.cpu_meter({"me": os.getpid(), "idle": idle.pid, "absent": None})
        end = time.process_time() + 0.3
        while time.process_time() < end:  # 0.3 s of this process's CPU
            pass
        used = meter()
    finally:
        idle.kill()
        idle.wait()
    assert set(used) == {"me", "idle"}  # a process without a pid is left out
    assert 0.25 <= used["me"] < 5 and used["idle"] < 0.05
    assert bench.cpu_line({"driver JVM": 2.0}, 100) == "CPU in the window: driver JVM 2.0 s, 20.0 ms a batch"
    assert bench.cpu_line({"broker": 1.5}, 0) == "CPU in the window: broker 1.5 s"


def test_jfr_profile_says_which_thread_and_frame_took_the_cpu(tmp_path):
    import shutil
    import subprocess
    import time

    if not shutil.which("java"):
        pytest.skip("no java here")
    with bench_module("jfr_profile") as jfr:
        if not jfr.available():
            pytest.skip("no jcmd/jfr here (a JRE without the JDK's tools)")
        source = tmp_path / "Busy.java"
        source.write_text("public class Busy { static int spin(java.util.Map<String, Integer> m, int i) { "
                          "String k = \"k\" + (i % 5000); m.merge(k, 1, Integer::sum); return k.length(); } "
                          "public static void main(String[] a) throws Exception { Thread t = new Thread(() -> { "
                          "java.util.Map<String, Integer> m = new java.util.HashMap<>(); long n = 0; "
                          "for (int i = 0; ; i++) n += spin(m, i); }, \"spinner 7\"); t.setDaemon(true); t.start(); "
                          "System.out.println(\"up\"); Thread.sleep(120_000); } }")
        proc = subprocess.Popen(["java", str(source)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "up"
            rec = jfr.start(proc.pid, "smoke", tmp_path / "out" / "busy.jfr")
            time.sleep(1.5)
            summary = jfr.summary(rec.stop(), top=3)
        finally:
            proc.kill()
            proc.wait()
    assert summary["samples"] > 20
    thread, samples = summary["threads"][0]
    assert thread == "spinner #" and samples > summary["samples"] / 2  # numbers folded: a pool's threads add up
    assert any(frame.startswith(("java.util.HashMap.", "Busy.", "java.lang.")) for frame, _ in summary["frames"])
    text = jfr.describe(summary)
    assert text.startswith(f"JFR execution samples: {summary['samples']}") and "spinner #" in text


def test_rounds_rotate_the_variants_and_each_ratio_is_taken_within_a_round(bench):
    variants = ["baseline-mb", "streamlet-mb-alo", "streamlet-mb"]
    orders = [bench.round_order(variants, i) for i in range(4)]
    assert [o[0] for o in orders] == ["baseline-mb", "streamlet-mb-alo", "streamlet-mb", "baseline-mb"]
    assert all(sorted(o) == sorted(variants) for o in orders)

    def window(variant, rnd, p50, rate=1000):
        return {"variant": variant, "rate": rate, "hops": 1, "round": rnd, "p50": p50}

    results = [window("baseline-mb", 0, 100.0), window("streamlet-mb", 0, 120.0),
               window("streamlet-mb", 1, 150.0), window("baseline-mb", 1, 100.0),
               window("streamlet-mb", 2, 90.0)]  # round 2 has no hand-written window: no ratio
    ratios = bench.p50_ratios(results)
    assert ratios == {("streamlet-mb", "baseline-mb", 1000, 1): [1.2, 1.5]}
    assert bench.build_parser().parse_args([]).rounds == 1
