"""Real-Time Mode per streamlet (Spark 4.1): the example's delay-alerts filter on a real broker in
real-time mode, with dead letters; and what Real-Time Mode cannot run, refused before any query
starts with one line naming the streamlet and the reason."""

import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import KafkaTransport
from streamlets.schema import decode, encode
from streamlets.trigger import RealTimeModeError, Trigger

from support.kafka import count, produce, read_topic, topics
from support.realtime_app import APP, R, TIMEOUT, Counts, Passthrough, run_config
from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "flight-delays"))
from flight_delays.alerts import DelayAlerts  # noqa: E402

class PyUdf(Streamlet):
    inlet = AvroInlet("in", R)
    out = AvroOutlet("out", R)
    trigger = Trigger.real_time()

    def create_logic(self, ctx):
        double = F.udf(lambda v: v * 2, "long")
        df = ctx.read_stream(self.inlet)
        ctx.write_stream(df.withColumn("v", double("v")), self.out)


class Batches(Streamlet):
    inlet = AvroInlet("in", R)
    trigger = Trigger.real_time()

    def create_logic(self, ctx):
        ctx.start_query(ctx.read_stream(self.inlet).writeStream.foreachBatch(lambda df, i: None), "each")


def flight(i: int, delay: float | None) -> dict:
    return {"flight_id": f"20130101-AA{i}-JFK", "origin": ["JFK", "EWR", "LGA"][i % 3], "dest": "LAX", "carrier": "AA",
            "flight": i, "tailnum": None, "time_hour": 1357048800000, "sched_dep_time": 1357048800000 + i * 60_000,
            "dep_delay": delay, "arr_delay": None, "distance": 2475, "cancelled": delay is None}


def test_delay_alerts_run_in_real_time_mode_with_dead_letters(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "flights", "alerts", "dl", partitions=1)
    schema = DelayAlerts.shape().inlet("in").schema
    delays = [None if i % 7 == 0 else float((i * 37) % 180) for i in range(60)]
    run = run_config(kafka_broker, tmp_path, "alerts", DelayAlerts, {"in": src, "out": out}, dl,
                     config_parameters={"threshold-minutes": 90})
    rt = StreamletRuntime(spark, APP, dl, KafkaTransport(bootstrap))
    try:
        ctx = rt.start_class(DelayAlerts, run)
        [query] = ctx.queries
        # The JVM query runs with Spark's RealTimeTrigger (set with PySpark 4.2's trigger(realTime=...)).
        assert "RealTime" in query._jsq.streamingQuery().trigger().getClass().getSimpleName()
        # Records produced while the query runs: the long-lived tasks pick them up as they arrive.
        produce(bootstrap, src, [(0, encode(schema, flight(i, d))) for i, d in enumerate(delays[:30])])
        produce(bootstrap, src, [(0, b"\xff"), (0, b"not avro")])
        produce(bootstrap, src, [(0, encode(schema, flight(i + 30, d))) for i, d in enumerate(delays[30:])])
        late = [i for i, d in enumerate(delays) if d is not None and d >= 90]
        wait_until(lambda: count(bootstrap, out) >= len(late), timeout=TIMEOUT, what=f"{len(late)} alerts")
        # Dead letters: the observed metric counts them per checkpoint interval and the writer scans
        # that offset range, as in micro-batch mode (a core besides the real-time task does the scan).
        wait_until(lambda: count(bootstrap, dl) >= 2, timeout=TIMEOUT, what="2 dead letters")
        assert rt.failed() == []
    finally:
        rt.stop(timeout=60)
    alerts = [decode(DelayAlerts.shape().outlet("out").schema, m.value()) for m in read_topic(bootstrap, out)]
    assert sorted(a["flight_id"] for a in alerts) == sorted(flight(i, None)["flight_id"] for i in late)
    assert all(a["dep_delay"] >= 90 for a in alerts)
    letters = [decode(DEAD_LETTER_SCHEMA, m.value()) for m in read_topic(bootstrap, dl)]
    assert sorted(d["value"] for d in letters) == sorted([b"\xff", b"not avro"])


@pytest.mark.parametrize("cls, words", [
    (Counts, "a stateful or blocking operator (Aggregate)"),
    (PyUdf, "a Python UDF (ArrowEvalPython)"),  # Spark 4.2 runs Python UDFs Arrow-optimized by default
    (Batches, "writes through foreachBatch"),
])
def test_what_real_time_mode_cannot_run_is_refused_before_start(kafka_broker, spark, tmp_path, cls, words):
    src, out = topics(kafka_broker, "in", "out")
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(kafka_broker.bootstrap_servers))
    active_before = {q.id for q in spark.streams.active}
    try:
        with pytest.raises(RealTimeModeError) as e:
            rt.start_class(cls, run_config(kafka_broker, tmp_path, "rt-x", cls, {"in": src, "out": out}))
        message = str(e.value)
        assert "\n" not in message
        assert message.startswith("streamlet 'rt-x' cannot run query ") and "in real-time mode: " in message
        assert words in message, message
        assert {q.id for q in spark.streams.active} == active_before  # nothing started
    finally:
        rt.stop(timeout=30)


def test_fewer_cores_than_inlet_partitions_is_refused(kafka_broker, spark, tmp_path):
    cores = spark.sparkContext.defaultParallelism
    src, out = topics(kafka_broker, "wide", "out", partitions=cores + 1)
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(kafka_broker.bootstrap_servers))
    run = run_config(kafka_broker, tmp_path, "wide", Passthrough, {"in": src, "out": out}, trigger="real-time 2 seconds")
    try:
        with pytest.raises(RealTimeModeError, match=rf"streamlet 'wide' cannot run query 'out' in real-time mode: its "
                                                    rf"inlets have {cores + 1} Kafka partitions but only {cores} of "
                                                    rf"{cores} cores are free"):
            rt.start_class(Passthrough, run)
        assert rt.queries() == []
    finally:
        rt.stop(timeout=30)


def test_config_trigger_overrides_the_class(kafka_broker, spark, tmp_path):
    """streamlets.<name>.trigger = micro-batch runs the real-time class as micro-batches."""
    bootstrap = kafka_broker.bootstrap_servers
    src, out = topics(kafka_broker, "flights", "alerts")
    schema = DelayAlerts.shape().inlet("in").schema
    produce(bootstrap, src, [(0, encode(schema, flight(i, 120.0 if i % 2 else 5.0))) for i in range(10)])
    run = run_config(kafka_broker, tmp_path, "alerts-mb", DelayAlerts, {"in": src, "out": out},
                     trigger="micro-batch", available_now=True)
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(bootstrap))
    try:
        [query] = rt.start_class(DelayAlerts, run).queries
        assert query.awaitTermination(180)
        assert "RealTime" not in query._jsq.streamingQuery().trigger().getClass().getSimpleName()
    finally:
        rt.stop(timeout=60)
    assert len(read_topic(bootstrap, out)) == 5
