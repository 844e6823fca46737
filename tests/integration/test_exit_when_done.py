"""`blueprint run --exit-when-done`: "done" means every streamlet running and every inlet read to the
end of its topic (issue 32). The numbers application (files -> a multiplier whose Python UDF raises
on one record -> files), 300 records, on the session's Kafka broker."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer

from support.sandbox import NUMBERS, read_jsonl, run_blueprint, write_numbers

from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.schema import decode

BLUEPRINT = str(NUMBERS / "blueprint.yaml")
POISON = 150


def _dead_letters(bootstrap: str, topic: str) -> list[dict]:
    from blueprint.sandbox.kafka_broker import end_offsets

    total = sum(end_offsets(bootstrap, topic).values())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t{time.time()}", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    letters, deadline = [], time.time() + 30
    while time.time() < deadline and len(letters) < total:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            letters.append(decode(DEAD_LETTER_SCHEMA, msg.value()))
    consumer.close()
    return letters


def test_failed_streamlet_ends_the_run_with_exit_1_and_quarantine_completes_it(tmp_path, kafka_broker, monkeypatch):
    """Without quarantine: the multiplier fails on record 150 and is restarted twice, after 2 s and
    4 s (waits longer than --idle-seconds: in the second one the run used to call itself done, exit
    0), fails a third time: exit 1 with one error line naming the query and the user's exception,
    never "all input processed", nothing quarantined (what test_quarantine.py proved on flight-delays
    before this test took its place). The same state again with `on-failure = quarantine`: exit 0, 299 records in the
    sink, the poison record in the dead letters."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(NUMBERS), os.environ.get("PYTHONPATH", "")]))
    records = write_numbers(tmp_path / "src", files=3, per_file=100)
    conf = tmp_path / "run.conf"
    conf.write_text('streamlets {\n  ingress.volume-mounts.source = "src"\n  files.volume-mounts.output = "out"\n'
                    f"  multiply.config-parameters.poison-id = {POISON}\n}}\n")
    bootstrap = kafka_broker.bootstrap_servers
    args = ("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(tmp_path / "state"), "--kafka", bootstrap,
            "--exit-when-done", "--idle-seconds", "1")

    failed = run_blueprint(*args, "--restart-backoff", "2", "--max-restarts", "2", cwd=tmp_path)
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out[-4000:]
    assert "all input processed" not in out, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and errors[0].startswith("error: query multiply.out failed (restarted 2 times"), out[-4000:]
    assert f"PoisonNumber: cannot multiply number {POISON}" in errors[0] and "numbers_app.py:" in errors[0], errors[0]
    assert "PythonException" not in errors[0]  # the user's exception, not Spark's wrapper
    assert not (tmp_path / "state" / "checkpoints" / "numbers" / "multiply" / "quarantine-ledger.json").exists()
    assert "restarting streamlet multiply in 4 s (try 2 of 2" in out
    written = read_jsonl(tmp_path / "out")
    assert len(written) < len(records) and POISON not in {r["id"] for r in written}
    assert "Traceback" not in out

    done = run_blueprint(*args, "streamlets.multiply.on-failure=quarantine", cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "all input processed" in out
    written = read_jsonl(tmp_path / "out")
    assert len(written) == len(records) - 1
    assert sorted((r["id"], r["value"]) for r in written) == \
        sorted((r["id"], r["value"] * 2) for r in records if r["id"] != POISON)
    letters = _dead_letters(bootstrap, "numbers.dead-letters")
    assert [(l["streamlet"], l["inlet"], l["topic"]) for l in letters] == [("multiply", "in", "numbers.raw")], letters
    assert f"PoisonNumber: cannot multiply number {POISON}" in letters[0]["error"]

    # Run again on the same state with nothing new to read: Spark reports no progress for such a
    # query, so what it had processed comes from its checkpoint (ProgressMonitor.seed_end_offsets):
    # done at once, not waiting for --timeout as it did.
    again = run_blueprint(*args, "streamlets.multiply.on-failure=quarantine", "--timeout", "240", cwd=tmp_path)
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "all input processed" in out and "--timeout" not in out, out[-4000:]
    assert len(read_jsonl(tmp_path / "out")) == len(records) - 1
