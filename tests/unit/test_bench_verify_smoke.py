"""Smoke test of bench/bench_verify.py on a small application: the generated blueprint is sound,
acyclic and as large as asked, and the benchmark runs end to end (the full size runs by hand)."""

import importlib.util
from pathlib import Path

from blueprint.loader import load_blueprint
from blueprint.verify import verify

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_verify.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_verify", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_application_is_sound_and_of_the_asked_size(tmp_path):
    bench = load_bench()
    path, classes = bench.generate(20, 40, tmp_path)
    blueprint = load_blueprint(path)
    assert (len(blueprint.streamlets), len(blueprint.topics)) == (20, 40)
    assert verify(blueprint, classes) == []
    consumers = sum(len(t.consumers) for t in blueprint.topics.values())
    assert 40 <= consumers <= 80


def test_benchmark_runs(capsys):
    bench = load_bench()
    assert bench.main(["--streamlets", "10", "--topics", "20", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "application: 10 streamlets, 20 topics" in out and "goal: verify under 2.0 s -> met" in out
