"""Smoke test of bench/bench_map.py and its workload (bench/flight_workload.py): it imports, parses
its arguments and the workload's data helpers agree.

Runs nothing heavy (no Spark, no Kafka): the benchmark itself is run by hand (bench/README.md).
"""

import io

import fastavro
import pytest

from support.bench import bench_module


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_map") as module:
        yield module


@pytest.fixture(scope="module")
def workload():
    with bench_module("flight_workload") as module:
        yield module


def test_parser_defaults(bench):
    args = bench.build_parser().parse_args([])
    assert (args.records, args.rounds, args.partitions) == (1_000_000, 3, 2)
    assert args.max_offsets_per_trigger is None
    assert args.variants == ["baseline", "streamlet"]


def test_parser_options(bench):
    args = bench.build_parser().parse_args(
        ["--records", "1000", "--rounds", "5", "--partitions", "4", "--max-offsets-per-trigger", "100",
         "--variants", "sdk-path"])
    assert (args.records, args.rounds, args.partitions, args.max_offsets_per_trigger) == (1000, 5, 4, 100)
    assert args.variants == ["sdk-path", "baseline", "streamlet"]
    assert bench.build_parser().parse_args(["--variants", "all"]).variants == list(bench.JOBS)
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--variants", "nope"])


def test_security_and_registry_options(bench, capsys):
    args = bench.build_parser().parse_args(["--security", "mtls", "--registry"])
    assert (args.security, args.registry) == ("mtls", True)
    assert bench.build_parser().parse_args([]).security == "none"
    # only the jobs that read the wire format run with --registry: refused before anything starts
    assert not bench.JOBS["permissive"].wire_format and bench.JOBS["baseline"].wire_format
    assert bench.main(["--registry", "--variants", "permissive"]) == 2
    assert "variant(s) permissive cannot read the wire format" in capsys.readouterr().err


def test_records_round_trip_and_map(workload):
    parsed_in = fastavro.parse_schema(workload.FLIGHT_EVENT)
    parsed_out = fastavro.parse_schema(workload.MAPPED_FLIGHT)
    nulls = set()
    for i in range(0, 5000, 7):
        rec = workload.flight_record(i)
        assert workload.record_index(rec["flight_id"]) == i
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed_in, rec)
        back = fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), parsed_in, None)
        assert {k: workload.epoch_millis(v) for k, v in back.items()} == rec
        out = workload.expected_output(i)
        assert out["dep_delay_hours"] == (None if rec["dep_delay"] is None else rec["dep_delay"] / 60.0)
        fastavro.schemaless_writer(io.BytesIO(), parsed_out, out)  # valid for the output schema
        nulls.update(k for k, v in rec.items() if v is None)
    assert nulls == {"tailnum", "dep_delay", "arr_delay"}  # the data exercises every nullable field


def test_streamlet_ports(workload):
    shape = workload.Mapper.shape()
    assert [p.name for p in shape.inlets] == ["in"] and [p.name for p in shape.outlets] == ["out"]
    assert workload.Mapper.out.key == (workload.KEY_FIELD,)
