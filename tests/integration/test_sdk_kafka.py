"""Streamlets on real Kafka and real Spark: dead letters, their recovery after a crash, schema
evolution, and the runner entry point. One broker and one SparkSession for the whole session
(tests/conftest.py); every test uses topics of its own."""

import io
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import fastavro
from pyspark.sql import functions as F

from blueprint.sandbox.kafka_broker import end_offsets
from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA, read_ledger
from streamlets.runtime.monitor import ProgressMonitor
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.schema import AvroSchema, decode, encode
from streamlets.runtime.transport import KafkaTransport
from support.kafka import produce, read_topic, topics

REPO = Path(__file__).resolve().parents[2]
APP = "sdk-it"

TXN = {"type": "record", "name": "Txn", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "double"}]}
NULLABLE = {"type": "record", "name": "Sparse", "namespace": "test.sdk", "fields": [
    {"name": "a", "type": ["null", "string"], "default": None}, {"name": "b", "type": ["null", "long"], "default": None}]}
ITEM_V1 = {"type": "record", "name": "Item", "namespace": "test.sdk", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "long"}]}
ITEM_V2 = {**ITEM_V1, "fields": [*ITEM_V1["fields"], {"name": "note", "type": "string", "default": ""}]}


class Upper(Streamlet):
    """Upper-cases names and doubles amounts."""

    inlet = AvroInlet("in", TXN, check_trailing_bytes=True)
    out = AvroOutlet("out", TXN, key="id")

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("name", F.upper("name")).withColumn("amount", F.col("amount") * 2), self.out)


class PassSparse(Streamlet):
    inlet = AvroInlet("in", NULLABLE)
    out = AvroOutlet("out", NULLABLE)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet), self.out)


class ItemV1Reader(Streamlet):
    """Declares v1 of Item; its producer may have moved on to v2."""

    inlet = AvroInlet("in", ITEM_V1)
    out = AvroOutlet("out", ITEM_V1)

    def create_logic(self, ctx):
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("value", F.col("value") + 1), self.out)


class ItemV2Reader(Streamlet):
    """Declares v2 of Item; its producer may still write v1."""

    inlet = AvroInlet("in", ITEM_V2)
    out = AvroOutlet("out", ITEM_V2)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet), self.out)


# --- Kafka helpers ----------------------------------------------------------------------------


def await_listener(rt: StreamletRuntime, timeout: float = 60) -> None:
    """Wait until the progress monitor has seen every query terminate: Spark delivers a query's
    events in order, so by then it has also seen (and acted on) every progress report."""
    names = [q.name for q in rt.queries()]
    deadline = time.monotonic() + timeout
    while any(getattr(rt.monitor.stats.get(n), "status", None) not in ("stopped", "failed") for n in names):
        assert time.monotonic() < deadline, {n: rt.monitor.stats.get(n) for n in names}
        time.sleep(0.05)


def run_once(spark, kafka_broker, cls, run: StreamletRunConfig, *, crash_before_scans=False,
             wait_for_listener=True) -> StreamletRuntime:
    """Start `cls` in a fresh StreamletRuntime (available-now), wait for its queries, stop it."""
    rt = StreamletRuntime(spark, run.app_id, run.dead_letter_topic, KafkaTransport(kafka_broker.bootstrap_servers))
    if crash_before_scans:
        # The dead-letter thread ends now: every scan the batches ask for stays undone, as when
        # the process dies between committing a micro-batch and scanning it.
        rt.dead_letters.close()
    try:
        rt.start_class(cls, run)
        for q in rt.queries():
            assert q.awaitTermination(180), f"query {q.name} still running"
        assert rt.failed() == []
        if wait_for_listener:
            # Work around the race in StreamletRuntime.stop() (test_stop_right_after_the_last_batch_
            # still_scans_it): let the listener see the last progress and the termination first.
            await_listener(rt)
    finally:
        rt.stop(timeout=3 if crash_before_scans else 120)
    return rt


def run_config(kafka_broker, tmp_path, name: str, src: str, out: str, dl: str | None, **kw) -> StreamletRunConfig:
    return StreamletRunConfig(app_id=APP, streamlet=name, class_name=f"{__name__}.{name}", topics={"in": src, "out": out},
                              bootstrap_servers=kafka_broker.bootstrap_servers, checkpoint_root=str(tmp_path / name),
                              dead_letter_topic=dl, available_now=True, **kw)


def dead_letters(bootstrap: str, topic: str) -> list[dict]:
    return [dict(decode(DEAD_LETTER_SCHEMA, m.value()), _key=m.key()) for m in read_topic(bootstrap, topic)]


def txn(i: int) -> dict:
    return {"id": i, "name": f"n{i}", "amount": i / 8}


def decodes_as_prefix(schema: AvroSchema, value: bytes | None) -> bool:
    """True if some prefix of `value` is a valid record (what Spark's from_avro accepts)."""
    if value is None:
        return False
    try:
        fastavro.schemaless_reader(io.BytesIO(value), schema.parsed(), None)
        return True
    except Exception:
        return False


# --- dead letters -----------------------------------------------------------------------------


def test_dead_letters_through_kafka(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "txn", "upper", "dl", partitions=2)
    schema = Upper.shape().inlet("in").schema
    good = encode(schema, txn(5))
    garbage = [
        b'{"id": 1}',  # JSON text
        b'{"id": 2, "name": "x"}',
        good[:-3],  # a valid record, truncated
        b"\xff",  # a varint that never ends
        b"",  # empty value
        b"\xff" * 12,  # a varint longer than a long
        b"hello world",  # negative string length
        b"\x02\xfe\xff\xff\xff\x0fab",  # string length far past the end
        b"\x00\x01",  # string length -1
        None,  # a tombstone
    ]
    assert not any(decodes_as_prefix(schema, g) for g in garbage)
    parsed = schema.parsed()
    valid = [(i % 2, encode(schema, txn(i), parsed)) for i in range(1000)]
    values = valid[:400] + [(i % 2, g) for i, g in enumerate(garbage[:5])] + valid[400:] \
        + [(i % 2, g) for i, g in enumerate(garbage[5:])]
    positions = produce(bootstrap, src, values)
    garbage_at = {positions[values.index(v)]: v[1] for v in values if v[1] in garbage}
    assert len(garbage_at) == 10

    run = run_config(kafka_broker, tmp_path, "Upper", src, out, dl, max_offsets_per_trigger=300)
    rt = run_once(spark, kafka_broker, Upper, run)

    records = [decode(schema, m.value(), parsed) for m in read_topic(bootstrap, out)]
    assert len(records) == 1000
    assert sorted(records, key=lambda r: r["id"]) == [
        {"id": i, "name": f"N{i}", "amount": i / 4} for i in range(1000)]

    letters = dead_letters(bootstrap, dl)
    assert len(letters) == 10, [(d["partition"], d["offset"]) for d in letters]
    assert {(d["partition"], d["offset"]): d["value"] for d in letters} == garbage_at
    for d in letters:
        assert d["app_id"] == APP and d["streamlet"] == "Upper" and d["inlet"] == "in" and d["topic"] == src
        assert d["schema_fingerprint"] == schema.fingerprint
        assert d["error"].strip()
        assert d["timestamp"] is not None
        assert d["_key"] == f"{src}-{d['partition']}-{d['offset']}".encode()
    by_value = {d["value"]: d["error"] for d in letters}
    assert "tombstone" in by_value[None]
    assert "not a valid Avro encoding of test.sdk.Txn" in by_value[b"\xff"]

    stats = rt.monitor.stats["Upper.out"]
    assert stats.malformed == 10
    assert stats.input_rows == 1010
    assert stats.batches >= 4  # 1010 records at most 300 per micro-batch
    assert rt.dead_letters.written == {("Upper", "in"): 10}
    assert rt.dead_letters.errors == []
    # the ledger has caught up with everything the query read
    assert read_ledger(run.checkpoint_location("out"), "in") == {str(p): o for p, o in end_offsets(bootstrap, src).items()}


def test_dead_letters_rescanned_after_a_crash(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "txn", "upper", "dl")
    schema = Upper.shape().inlet("in").schema
    garbage = [b"\xff", b"", b"not avro at all", b"\x00\x01", None]
    values = [(0, encode(schema, txn(i))) for i in range(100)] + [(0, g) for g in garbage] \
        + [(0, encode(schema, txn(i))) for i in range(100, 200)]
    produce(bootstrap, src, values)
    run = run_config(kafka_broker, tmp_path, "Upper", src, out, dl)
    ledger_dir = run.checkpoint_location("out")

    # 1. The batches commit, their scans never run.
    crashed = run_once(spark, kafka_broker, Upper, run, crash_before_scans=True)
    assert crashed.monitor.stats["Upper.out"].malformed == 5
    assert len(read_topic(bootstrap, out)) == 200
    assert sum(end_offsets(bootstrap, dl).values()) == 0
    assert read_ledger(ledger_dir, "in") is None

    # 2. Started again on the same checkpoint: nothing new to read, but the gap is rescanned.
    restarted = run_once(spark, kafka_broker, Upper, run)
    letters = dead_letters(bootstrap, dl)
    assert sorted((d["value"] or b"") for d in letters) == sorted(g or b"" for g in garbage)
    assert sorted(d["offset"] for d in letters) == list(range(100, 105))
    assert restarted.dead_letters.errors == []
    assert read_ledger(ledger_dir, "in") == {"0": 205}
    assert len(read_topic(bootstrap, out)) == 200  # the output was not reprocessed

    # 3. Once more: the ledger is up to date, so no rescan and no duplicates.
    run_once(spark, kafka_broker, Upper, run)
    assert sum(end_offsets(bootstrap, dl).values()) == 5


def test_all_null_records_are_not_dead_letters(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "sparse", "sparse-out", "dl")
    schema = PassSparse.shape().inlet("in").schema
    rows = [{"a": None, "b": None}] * 3 + [{"a": "x", "b": None}, {"a": None, "b": 7}, {"a": "y", "b": 8}]
    garbage = [b"\x04", b"\x02", b"\xff"]  # union branch 2 of 2; string branch without length; endless varint
    assert not any(decodes_as_prefix(schema, g) for g in garbage)
    values = [encode(schema, r) for r in rows]
    assert values[0] == b"\x00\x00"
    produce(bootstrap, src, [(0, v) for v in values[:3] + garbage + values[3:]])

    rt = run_once(spark, kafka_broker, PassSparse, run_config(kafka_broker, tmp_path, "PassSparse", src, out, dl))

    got = [decode(schema, m.value()) for m in read_topic(bootstrap, out)]
    assert sorted(got, key=repr) == sorted(rows, key=repr)
    assert sorted(d["value"] for d in dead_letters(bootstrap, dl)) == sorted(garbage)
    assert rt.monitor.stats["PassSparse.out"].malformed == 3


def test_stop_right_after_the_last_batch_still_scans_it(kafka_broker, spark, tmp_path, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    # Spark delivers listener events asynchronously, some 0.2 s after the batch under light load.
    # Make that delay reliably longer than stop() takes, so the race always goes the same way.
    deliver = ProgressMonitor.onQueryProgress

    def slow_delivery(self, event):
        time.sleep(1.5)
        deliver(self, event)

    monkeypatch.setattr(ProgressMonitor, "onQueryProgress", slow_delivery)
    src, out, dl = topics(kafka_broker, "sparse", "sparse-out", "dl")
    produce(bootstrap, src, [(0, b"\x00\x00"), (0, b"\xff")])

    rt = run_once(spark, kafka_broker, PassSparse, run_config(kafka_broker, tmp_path, "PassSparse", src, out, dl),
                  wait_for_listener=False)  # await the query, then stop(): as the test kit and the runner do

    assert rt.monitor.stats["PassSparse.out"].batches >= 1
    assert [d["value"] for d in dead_letters(bootstrap, dl)] == [b"\xff"]


def test_values_with_trailing_bytes_are_dead_letters(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "txn", "upper", "dl")
    schema = Upper.shape().inlet("in").schema
    valid = encode(schema, txn(1))
    trailing = [valid + b"\x00", b'{"id": 1, "name": "x", "amount": 1.5}']
    assert all(decodes_as_prefix(schema, g) for g in trailing)
    produce(bootstrap, src, [(0, valid)] + [(0, g) for g in trailing])

    run_once(spark, kafka_broker, Upper, run_config(kafka_broker, tmp_path, "Upper", src, out, dl))

    got = [decode(schema, m.value()) for m in read_topic(bootstrap, out)]
    assert got == [{"id": 1, "name": "N1", "amount": 0.25}]
    assert sorted(d["value"] for d in dead_letters(bootstrap, dl)) == sorted(trailing)


# --- schema evolution -------------------------------------------------------------------------


def test_consumer_on_v1_reads_values_written_with_v2(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "items", "items-out", "dl")
    v1, v2 = AvroSchema.load(ITEM_V1), AvroSchema.load(ITEM_V2)
    produce(bootstrap, src, [(0, encode(v2, {"id": i, "value": 10 * i, "note": f"note {i}"})) for i in range(20)])

    rt = run_once(spark, kafka_broker, ItemV1Reader,
                  run_config(kafka_broker, tmp_path, "ItemV1Reader", src, out, dl, writer_schemas={"in": ITEM_V2}))

    got = [decode(v1, m.value()) for m in read_topic(bootstrap, out)]
    assert sorted(got, key=lambda r: r["id"]) == [{"id": i, "value": 10 * i + 1} for i in range(20)]
    assert sum(end_offsets(bootstrap, dl).values()) == 0
    assert rt.monitor.stats["ItemV1Reader.out"].malformed == 0


def test_consumer_on_v2_reads_values_written_with_v1_getting_the_default(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "items", "items-out", "dl")
    v1, v2 = AvroSchema.load(ITEM_V1), AvroSchema.load(ITEM_V2)
    produce(bootstrap, src, [(0, encode(v1, {"id": i, "value": i})) for i in range(20)])

    rt = run_once(spark, kafka_broker, ItemV2Reader,
                  run_config(kafka_broker, tmp_path, "ItemV2Reader", src, out, dl, writer_schemas={"in": ITEM_V1}))

    got = [decode(v2, m.value()) for m in read_topic(bootstrap, out)]
    assert sorted(got, key=lambda r: r["id"]) == [{"id": i, "value": i, "note": ""} for i in range(20)]
    assert sum(end_offsets(bootstrap, dl).values()) == 0
    assert rt.monitor.stats["ItemV2Reader.out"].malformed == 0


# --- the runner entry point -------------------------------------------------------------------


def test_runner_entry_point(kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "words", "words-out", "dl")
    module = f"sdk_runner_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "word.avsc").write_text(json.dumps(
        {"type": "record", "name": "Word", "namespace": "test.sdk",
         "fields": [{"name": "id", "type": "long"}, {"name": "word", "type": "string"}]}))
    (tmp_path / f"{module}.py").write_text(textwrap.dedent("""
        from pyspark.sql import functions as F
        from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet

        class Shout(Streamlet):
            inlet = AvroInlet("in", "schemas/word.avsc")
            out = AvroOutlet("out", "schemas/word.avsc", key="word")
            times = IntegerParameter("times", default=1)

            def create_logic(self, ctx):
                df = ctx.read_stream(self.inlet)
                ctx.write_stream(df.withColumn("word", F.repeat(F.upper("word"), ctx.config[self.times])), self.out)
    """))
    schema = AvroSchema.load("schemas/word.avsc", tmp_path)
    produce(bootstrap, src, [(0, encode(schema, {"id": i, "word": f"w{i}"})) for i in range(50)] + [(0, b"\xff")])
    config = tmp_path / "run.json"
    config.write_text(json.dumps({
        "app_id": APP, "streamlet": "shout", "class_name": f"{module}.Shout", "topics": {"in": src, "out": out},
        "bootstrap_servers": bootstrap, "checkpoint_root": str(tmp_path / "checkpoints"), "dead_letter_topic": dl,
        "config_parameters": {"times": 2}, "available_now": True,
        "spark_conf": {"spark.sql.shuffle.partitions": "1"},
    }))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "SPARK_MASTER": "local[1]"}
    res = subprocess.run([sys.executable, "-m", "streamlets.runner", "--config", str(config)], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    got = read_topic(bootstrap, out)
    assert sorted((decode(schema, m.value())["id"], decode(schema, m.value())["word"], m.key()) for m in got) == \
        sorted((i, f"W{i}W{i}", f"W{i}W{i}".encode()) for i in range(50))
    # The malformed value did not stop the driver. Its dead letter is written unless the runner's
    # stop() loses the last progress event (test_stop_right_after_the_last_batch_still_scans_it).
    letters = [(d["streamlet"], d["value"], d["offset"]) for d in dead_letters(bootstrap, dl)]
    assert letters in ([], [("shout", b"\xff", 50)])
    assert (tmp_path / "checkpoints" / "out" / "commits").is_dir()
