"""`blueprint topic tail`: a topic's committed records, decoded with the producer's schema, on a
real broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Producer

from blueprint.sandbox.kafka_broker import create_topics
from streamlets.kafka_logging import client_config
from streamlets.schema import AvroSchema, encode
from support.sandbox import NUMBERS

NUMBER = {"type": "record", "name": "Number", "namespace": "test.numbers",
          "fields": [{"name": "id", "type": "long"}, {"name": "value", "type": "long"}, {"name": "group", "type": "string"}]}


def numbers_app(folder: Path, app_id: str) -> Path:
    """The numbers application under another app id (its topics are `<app id>.<topic id>`: the
    session's broker has the numbers app's own from other tests)."""
    folder.mkdir()
    (folder / "numbers_app.py").write_text((NUMBERS / "numbers_app.py").read_text())
    text = (NUMBERS / "blueprint.yaml").read_text()
    assert text.startswith("app-id: numbers\n")
    (folder / "blueprint.yaml").write_text(text.replace("app-id: numbers\n", f"app-id: {app_id}\n", 1))
    return folder / "blueprint.yaml"


def tail(blueprint: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blueprint.cli", "topic", "tail", str(blueprint), *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_tail_prints_committed_records_decoded_and_names_the_malformed(kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    app_id = f"tail-{uuid.uuid4().hex[:8]}"
    blueprint = numbers_app(tmp_path / "app", app_id)
    topic = f"{app_id}.raw"  # the blueprint's `raw` topic (<app id>.<topic id>)
    create_topics(bootstrap, [(topic, 1, {})])
    schema = AvroSchema.load(NUMBER)
    producer = Producer(client_config({"bootstrap.servers": bootstrap, "transactional.id": f"tail-{uuid.uuid4()}"}))
    producer.init_transactions()
    records = [{"id": i, "value": i * 10, "group": f"g{i}"} for i in range(5)]

    def send(values: list[bytes], commit: bool) -> None:
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, key=b"k", value=v)
        producer.commit_transaction() if commit else producer.abort_transaction()

    send([encode(schema, r) for r in records[:3]], commit=True)
    send([encode(schema, {"id": 99, "value": 0, "group": "aborted"})], commit=False)  # never shown
    send([encode(schema, r) for r in records[3:]] + [b"\xff\xff\xff"], commit=True)

    result = tail(blueprint, "raw", "--kafka", bootstrap, "-n", "4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    # the last 4 offsets of the partition: records 3 and 4, the malformed value and the commit
    # marker (no record): the aborted record and markers never show
    assert [x.get("value") for x in lines[:-1]] == records[3:]
    assert lines[-1]["error"].startswith("not a test.numbers.Number record: ") and "value" not in lines[-1]
    assert {x["partition"] for x in lines} == {0} and all(x["key"] == "k" and x["timestamp"].endswith("Z") for x in lines)
    assert result.stderr.strip() == "1 value(s) did not decode as test.numbers.Number"

    everything = tail(blueprint, "raw", "--kafka", bootstrap, "--from-beginning", cwd=tmp_path)
    values = [json.loads(x).get("value") for x in everything.stdout.splitlines()]
    assert values == [*records, None]

    nosuch = tail(blueprint, "nosuch", "--kafka", bootstrap, cwd=tmp_path)
    assert nosuch.returncode == 2 and nosuch.stderr.strip().startswith("error: ") and "has no topic 'nosuch'" in nosuch.stderr


def test_without_a_running_sandbox_one_line_says_how_to_start_it(tmp_path):
    result = tail(NUMBERS / "blueprint.yaml", "raw", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"error: no running sandbox of 'numbers' ({tmp_path / 'state' / 'sandbox.json'} is "
                                     "missing): start it with `blueprint run`, or give --kafka or --state-dir")
