"""The flight-delays example through `blueprint run` with real Kafka and Spark, on a slice of
the real data, checked window by window against an independent batch computation (pandas)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Consumer, Producer

from support.sandbox import (REPO, flight_delays_run_config, processes_mentioning, run_blueprint, sigkill,
                             start_blueprint)
from support.waiting import wait_until

from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.schema import decode

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402


def _run_config(tmp: Path) -> Path:
    return flight_delays_run_config(tmp)


def assert_same_windows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same (origin, window) keys, equal counts and maxima, means equal to 1e-9."""
    assert not actual.empty
    assert differences(actual, expected) == []
    assert len(actual) == len(expected)


def test_windows_equal_batch_computation_with_one_percent_garbage(tmp_path):
    """January 2013 (27,004 flights): 1% garbage values on the flight-events topic go to the
    dead-letter topic, the run completes, and every window equals the batch computation."""
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics

    counts = prepare(tmp_path / "data", [1])
    n_garbage = counts["flights"] // 100
    with KafkaBroker(tmp_path / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [("flight-delays.flight-events", 3, {})])
        producer = Producer({"bootstrap.servers": bootstrap})
        garbage = [f'{{"flight_id": "not-avro-{i}"}}'.encode() for i in range(n_garbage)]
        for i, value in enumerate(garbage):
            producer.produce("flight-delays.flight-events", key=["EWR", "JFK", "LGA"][i % 3], value=value)
        producer.flush()

        result = run_blueprint("run", BLUEPRINT, "--config", str(_run_config(tmp_path)),
                               "--state-dir", str(tmp_path / "state"), "--kafka", bootstrap, "--exit-when-done",
                               timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert_same_windows(load_results(tmp_path / "output"), reference_stats([1]))

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "auto.offset.reset": "earliest"})
        consumer.subscribe(["flight-delays.dead-letters"])
        letters, deadline = [], time.time() + 60
        while len(letters) < n_garbage and time.time() < deadline:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                letters.append(decode(DEAD_LETTER_SCHEMA, msg.value()))
        consumer.close()
    assert sorted(l["value"] for l in letters) == sorted(garbage)
    assert {(l["streamlet"], l["inlet"]) for l in letters} == {("enrich", "flights")}


# SIGKILL-and-rerun runs of the test below; each takes minutes (three sandbox starts on January
# and February): the issue asks for twenty, set STREAMLETS_SIGKILL_RUNS=20 on a quiet machine.
SIGKILL_RUNS = int(__import__("os").environ.get("STREAMLETS_SIGKILL_RUNS", "1"))


@pytest.mark.parametrize("run", range(SIGKILL_RUNS))
def test_two_sigkills_at_random_moments_then_rerun_equals_batch_computation(tmp_path, run):
    """Issue 16: killed with SIGKILL at a random moment after the first windows, re-run and
    killed again at a random moment, re-run to the end: every window equals the batch
    computation (nothing lost, nothing counted twice). Exactly-once outlets (the default) keep a
    killed enrichment batch's partial output away from the statistics' watermark. The moments
    come from a seed per run (printed); run 0's first kill comes 0.3 s after February is dropped,
    so it also covers a kill mid-run with input pending, then a resume."""
    import random

    seed = 1600 + run
    rng = random.Random(seed)
    print(f"seed {seed}")
    # February is dropped once January's first windows are out, so the first kill lands while
    # input is pending (with exactly-once outlets a month reaches the next streamlet in one
    # transaction, so two months dropped together can finish in one batch).
    prepare(tmp_path / "data", [1])
    args = ("run", BLUEPRINT, "--config", str(_run_config(tmp_path)), "--state-dir", str(tmp_path / "state"))
    for attempt in range(2):
        proc = start_blueprint(*args, log=tmp_path / f"run-{attempt}.log")
        try:
            if attempt == 0:
                wait_until(lambda: any((tmp_path / "output").rglob("batch-*.jsonl")), timeout=900,
                           what="the first windows")
                prepare(tmp_path / "data", [1, 2])
            else:  # the restart has begun processing again (a new batch file), or has nothing left
                before = len(list((tmp_path / "output").rglob("batch-*.jsonl")))
                deadline = time.time() + 120
                while time.time() < deadline and len(list((tmp_path / "output").rglob("batch-*.jsonl"))) <= before:
                    time.sleep(1)
            time.sleep(rng.uniform(0, 20))
        finally:
            sigkill(proc)
        if attempt == 0:
            first = load_results(tmp_path / "output")
        wait_until(lambda: not processes_mentioning(str(tmp_path / "state")), timeout=60, what="child JVMs to exit")

    result = run_blueprint(*args, "--exit-when-done", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    expected = reference_stats([1, 2])
    if run == 0:  # its first kill, 0.3 s after February was dropped, finds February pending
        assert len(first) < len(expected), "the first kill came too late to test a resume"
    assert_same_windows(load_results(tmp_path / "output"), expected)
