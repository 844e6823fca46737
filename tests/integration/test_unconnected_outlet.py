"""An outlet the blueprint connects to no topic: `blueprint verify` warns (unconnected-outlet) and
calls the application sound, so running it must not fail on it. Its query runs with Spark's noop
sink and its records are discarded, as an unconnected outlet in Cloudflow or Akka's Sink.ignore;
the connected outlet of the same streamlet gets its records."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import FileTransport
from streamlets.schema import decode, encode
from streamlets.testkit import _write_batch

pytestmark = pytest.mark.integration

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
