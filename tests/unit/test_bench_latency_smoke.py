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
