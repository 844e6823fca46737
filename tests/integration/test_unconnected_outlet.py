"""An outlet the blueprint connects to no topic: `blueprint verify` warns (unconnected-outlet) and
calls the application sound, so running it must not fail on it. Its query runs with Spark's noop
sink and its records are discarded, as an unconnected outlet in Cloudflow or Akka's Sink.ignore;
the connected outlet of the same streamlet gets its records."""

from __future__ import annotations

import logging
import time

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import FileTransport
from streamlets.schema import decode, encode
from streamlets.testkit import _write_batch

FLIGHT = {"type": "record", "name": "Flight", "namespace": "test.unconnected",
          "fields": [{"name": "id", "type": "long"}, {"name": "distance", "type": "long"}]}


class LongHaul(Streamlet):
    """Flights of 1,000 miles or more to `long`, the others to `short`."""

    inlet = AvroInlet("in", FLIGHT)
    long_ = AvroOutlet("long", FLIGHT)
    short = AvroOutlet("short", FLIGHT)

    def create_logic(self, ctx):
        flights = ctx.read_stream(self.inlet)
        ctx.write_stream(flights.where(F.col("distance") >= 1000), self.long_)
        ctx.write_stream(flights.where(F.col("distance") < 1000), self.short)


def test_an_unconnected_outlet_runs_and_discards_its_records(spark, tmp_path, caplog):
    transport = FileTransport(tmp_path / "topics")
    transport.folder("flights").mkdir(parents=True)
    rows = [{"id": i, "distance": 200 * i} for i in range(10)]
    _write_batch(transport.folder("flights") / "batch-00000.parquet", "flights", [encode(LongHaul.inlet.schema, r) for r in rows])
    run = StreamletRunConfig(app_id="app", streamlet="long-haul", class_name="x.LongHaul",
                             topics={"in": "flights", "long": "long-flights"},  # `short` connected to no topic
                             checkpoint_root=str(tmp_path / "ck"), available_now=True)
    runtime = StreamletRuntime(spark, run.app_id, None, transport)
    caplog.set_level(logging.WARNING, logger="streamlets.long-haul")
    try:
        ctx = runtime.start_class(LongHaul, run)
        assert sorted(q.name for q in ctx.queries) == ["long-haul.long", "long-haul.short"]
        for q in runtime.queries():
            q.awaitTermination(120)
        assert runtime.failed() == []
    finally:
        runtime.stop()
    written = sorted(decode(LongHaul.long_.schema, v)["id"] for _, v in transport.written("long-flights"))
    assert written == [5, 6, 7, 8, 9]  # distance 1,000 and more
    assert not transport.folder("short").exists()
    assert "outlet 'short' is not connected to a topic: query short runs and its records are discarded" in caplog.text


def test_an_unconnected_outlet_of_an_async_streamlet_runs_as_plain_micro_batches(spark, kafka_broker, tmp_path):
    """Asynchronous progress tracking (and Real-Time Mode) refuse Spark's noop sink: the
    unconnected outlet's query runs as plain micro-batches, the connected one as configured."""
    from blueprint.sandbox.kafka_broker import create_topics, end_offsets
    from confluent_kafka import Producer

    from streamlets.runtime.transport import KafkaTransport

    suffix = tmp_path.name[-12:].replace("_", "-").lower()
    src, long_ = f"flights-{suffix}", f"long-{suffix}"
    bootstrap = kafka_broker.bootstrap_servers
    create_topics(bootstrap, [(src, 1, {}), (long_, 1, {})])
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(src, value=encode(LongHaul.inlet.schema, {"id": i, "distance": 200 * i}))
    assert producer.flush(30) == 0
    run = StreamletRunConfig(app_id="app", streamlet="long-haul", class_name="x.LongHaul", topics={"in": src, "long": long_},
                             bootstrap_servers=bootstrap, checkpoint_root=str(tmp_path / "ck"),
                             delivery="at-least-once", progress_tracking="async")
    runtime = StreamletRuntime(spark, run.app_id, None, KafkaTransport(bootstrap))
    try:
        ctx = runtime.start_class(LongHaul, run)
        assert sorted(q.name for q in ctx.queries) == ["long-haul.long", "long-haul.short"]
        deadline = time.monotonic() + 120
        while sum(end_offsets(bootstrap, long_).values()) < 5 and time.monotonic() < deadline:
            assert runtime.failed() == []
            time.sleep(0.5)
        assert sum(end_offsets(bootstrap, long_).values()) == 5
        assert runtime.failed() == [] and all(q.isActive for q in ctx.queries)
    finally:
        runtime.stop()
