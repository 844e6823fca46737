"""`blueprint run` end to end, in a child process, with a real Kafka broker and local Spark."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.schema import AvroSchema, decode, encode

from support.sandbox import (
    NUMBERS,
    processes_mentioning,
    read_jsonl,
    run_blueprint,
    sigkill,
    start_blueprint,
    write_numbers,
)
from support.waiting import wait_until

BLUEPRINT = str(NUMBERS / "blueprint.yaml")


def _config(tmp: Path, factor: int = 3) -> Path:
    conf = tmp / "run.conf"
    conf.write_text(
        "streamlets {\n"
        '  ingress.volume-mounts.source = "src"\n'
        '  files.volume-mounts.output = "out"\n'
        f"  multiply.config-parameters.factor = {factor}\n"
        "}\n"
    )
    return conf


def test_run_processes_all_input_and_exits(tmp_path):
    records = write_numbers(tmp_path / "src", files=3, per_file=500)
    result = run_blueprint("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(tmp_path / "state"),
                           "--exit-when-done", "streamlets.multiply.config-parameters.factor=4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all input processed" in result.stdout
    out = read_jsonl(tmp_path / "out")
    assert sorted((r["id"], r["value"]) for r in out) == sorted((r["id"], r["value"] * 4) for r in records)
    logs = tmp_path / "state" / "logs"
    assert {"ingress.log", "multiply.log", "files.log", "spark.log"} <= {p.name for p in logs.iterdir()}
    assert "progress" in (logs / "multiply.log").read_text()


def test_second_run_resumes_from_checkpoints(tmp_path):
    write_numbers(tmp_path / "src", files=2, per_file=300)
    args = ("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(tmp_path / "state"), "--exit-when-done")
    assert run_blueprint(*args).returncode == 0
    first = read_jsonl(tmp_path / "out")
    assert len(first) == 600
    # New input arrives while the application is down: the next run processes only that.
    more = write_numbers(tmp_path / "more", files=1, per_file=200)
    (tmp_path / "more" / "n000.json").rename(tmp_path / "src" / "n900.json")
    result = run_blueprint(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    out = read_jsonl(tmp_path / "out")
    assert len(out) == 800
    assert sorted(r["id"] for r in out) == sorted([r["id"] for r in first] + [r["id"] for r in more])


def test_bad_config_value_is_one_clear_error(tmp_path):
    write_numbers(tmp_path / "src", files=1, per_file=10)
    result = run_blueprint("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(tmp_path / "state"),
                           "streamlets.multiply.config-parameters.factor=lots")
    assert result.returncode == 1
    assert "factor" in result.stderr and "lots" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_garbage_goes_to_dead_letters_and_counts_match(tmp_path):
    """1% garbage values on an inlet's topic: the run completes, the garbage is in the
    dead-letter topic, and every good record is processed exactly as without it."""
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics

    records = write_numbers(tmp_path / "src", files=2, per_file=1000)
    with KafkaBroker(tmp_path / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [("numbers.raw", 2, {})])
        # Garbage first, on the topic the multiplier reads: 1% of the 2,000 good records.
        garbage = [b'{"id": 1, "value": "json, not avro"}', b"\xff", b"\x02", b"not avro at all"] * 5
        producer = Producer({"bootstrap.servers": bootstrap})
        for i, value in enumerate(garbage):
            producer.produce("numbers.raw", key=f"g{i % 5}", value=value)
        producer.flush()
        result = run_blueprint("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(tmp_path / "state"),
                               "--kafka", bootstrap, "--exit-when-done")
        assert result.returncode == 0, result.stdout + result.stderr
        out = read_jsonl(tmp_path / "out")
        assert sorted((r["id"], r["value"]) for r in out) == sorted((r["id"], r["value"] * 3) for r in records)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "auto.offset.reset": "earliest"})
        consumer.subscribe(["numbers.dead-letters"])
        letters, deadline = [], time.time() + 30
        while len(letters) < len(garbage) and time.time() < deadline:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                letters.append(decode(DEAD_LETTER_SCHEMA, msg.value()))
        consumer.close()
    assert len(letters) == len(garbage)
    assert sorted(l["value"] for l in letters) == sorted(garbage)
    assert all(l["topic"] == "numbers.raw" and l["streamlet"] == "multiply" and l["inlet"] == "in" for l in letters)
    assert all(l["error"] and l["offset"] >= 0 for l in letters)
    assert "dead letters: 20" in result.stdout


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path):
    records = write_numbers(tmp_path / "src", files=12, per_file=2000)
    state = tmp_path / "state"
    args = ("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(state))
    proc = start_blueprint(*args, "--trigger", "2 seconds", log=tmp_path / "first.log")
    try:
        # Kill once output has started but input is far from done.
        wait_until(lambda: len(read_jsonl(tmp_path / "out")) > 0, timeout=240, what="first output")
        assert len(read_jsonl(tmp_path / "out")) < len(records)
    finally:
        sigkill(proc)
    # The broker and the Spark driver must not outlive the sandbox.
    wait_until(lambda: not processes_mentioning(str(state)), timeout=60, what="child JVMs to exit")

    result = run_blueprint(*args, "--exit-when-done")
    assert result.returncode == 0, result.stdout + result.stderr
    out = read_jsonl(tmp_path / "out")
    expected = {(r["id"], r["value"] * 3) for r in records}
    assert {(r["id"], r["value"]) for r in out} == expected  # nothing lost
    # Kafka to Kafka is at-least-once: a replayed micro-batch may repeat records, never alter them.
    assert len(out) >= len(expected)


def test_sigint_stops_cleanly(tmp_path):
    """Ctrl-C: queries stop, the broker and the Spark driver exit, status 0."""
    import signal

    write_numbers(tmp_path / "src", files=1, per_file=100)
    state = tmp_path / "state"
    proc = start_blueprint("run", BLUEPRINT, "--config", str(_config(tmp_path)), "--state-dir", str(state),
                           log=tmp_path / "run.log")
    try:
        wait_until(lambda: len(read_jsonl(tmp_path / "out")) == 100, timeout=300, what="the output")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            sigkill(proc)
    log = (tmp_path / "run.log").read_text()
    assert "stopping (signal)" in log and "Traceback" not in log
    wait_until(lambda: not processes_mentioning(str(state)), timeout=30, what="child JVMs to exit")
