"""A streamlet that reads the control topic itself (ControlInlet) and joins custom commands with its
data, as in the seed's control-stream pattern: a checkpointed operator holds the threshold a
`set-threshold` command sets, and alerts on the readings above it. Real Kafka and local Spark.

Within a micro-batch, commands apply before the readings of the same batch; the threshold is
operator state, so it survives a restart from the checkpoint.
"""

from __future__ import annotations

import sys
import time
import uuid

import pandas as pd
import pytest
from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.control import (CUSTOM_NAME, Command, ControlInlet, ControlListener, await_results, control_topic,
                                results_topic, send_command)
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime, transport_for
from streamlets.schema import AvroSchema, decode, encode

pytestmark = pytest.mark.timeout(600)

# Spark's Python workers cannot import this test module: send _alerts by value.
from pyspark import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

READING = {"type": "record", "name": "Reading", "namespace": "test.alerts",
           "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]}
ALERT = {"type": "record", "name": "Alert", "namespace": "test.alerts",
         "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
                    {"name": "threshold", "type": "double"}]}
DEFAULT_THRESHOLD = 1e9  # no alerts until a threshold is set


def _alerts(key, frames, state):
    """One group holds the threshold (state); commands (kind 0) first, then readings (kind 1)."""
    batch = pd.concat(list(frames), ignore_index=True).sort_values("kind", kind="stable")
    threshold = state.get[0] if state.exists else DEFAULT_THRESHOLD
    out = []
    for row in batch.itertuples(index=False):
        if row.kind == 0:
            threshold = float(row.threshold)
        elif row.value > threshold:
            out.append((row.sensor, float(row.value), threshold))
    state.update((threshold,))
    yield pd.DataFrame(out, columns=["sensor", "value", "threshold"])


class ThresholdAlerts(Streamlet):
    """Alerts on readings above a threshold that operators set at run time with the custom
    command `set-threshold` (arg `threshold`) on the application's control topic."""

    readings = AvroInlet("readings", READING)
    control = ControlInlet("control")
    alerts = AvroOutlet("alerts", ALERT, key="sensor")

    def create_logic(self, ctx):
        from pyspark.sql.streaming.state import GroupStateTimeout

        data = ctx.read_stream(self.readings).select(
            F.lit(1).alias("kind"), "sensor", "value", F.lit(None).cast("double").alias("threshold"))
        commands = (ctx.read_stream(self.control)
                    .where((F.col("command") == "custom") & (F.col("args").getItem(CUSTOM_NAME) == "set-threshold")
                           & (F.col("target").isNull() | (F.col("target") == ctx.name)))
                    .select(F.lit(0).alias("kind"), F.lit(None).cast("string").alias("sensor"),
                            F.lit(None).cast("double").alias("value"),
                            F.col("args").getItem("threshold").cast("double").alias("threshold")))
        alerts = (data.unionByName(commands).withColumn("all", F.lit(0)).groupBy("all")
                  .applyInPandasWithState(_alerts, "sensor string, value double, threshold double",
                                          "threshold double", "append", GroupStateTimeout.NoTimeout))
        ctx.write_stream(alerts, self.alerts)


def _consume(bootstrap: str, topic: str, schema: dict, count: int, timeout: float = 120) -> list[dict]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records, deadline = [], time.monotonic() + timeout
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                records.append(decode(AvroSchema.load(schema), msg.value()))
        time.sleep(2)  # anything beyond `count` would be a wrong alert
        while (msg := consumer.poll(0.5)) is not None:
            if not msg.error():
                records.append(decode(AvroSchema.load(schema), msg.value()))
    finally:
        consumer.close()
    return records


def _produce(bootstrap: str, topic: str, readings: list[tuple[str, float]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for sensor, value in readings:
        producer.produce(topic, key=sensor.encode(), value=encode(AvroSchema.load(READING), {"sensor": sensor, "value": value}))
    assert producer.flush(30) == 0


def _inputs(query) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def _wait_inputs(query, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _inputs(query) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _inputs(query) >= n, f"the query read {_inputs(query)} records, not {n}"


def test_custom_commands_join_the_data_stream_and_survive_a_restart(spark, kafka_broker, tmp_path):
    from blueprint.sandbox.kafka_broker import create_topics

    bootstrap = kafka_broker.bootstrap_servers
    app = f"alerts-{uuid.uuid4().hex[:6]}"
    topics = {"readings": f"{app}.readings", "control": control_topic(app), "alerts": f"{app}.alerts"}
    create_topics(bootstrap, [(t, 1, {}) for t in (*topics.values(), results_topic(app))])
    run = StreamletRunConfig(app_id=app, streamlet="alerts", class_name="test.ThresholdAlerts", topics=topics,
                             bootstrap_servers=bootstrap, checkpoint_root=str(tmp_path / "ck"),
                             trigger_interval="500 milliseconds", spark_conf={"spark.sql.shuffle.partitions": "2"})

    def start():
        runtime = StreamletRuntime(spark, app, None, transport_for(run))
        (query,) = runtime.start_class(ThresholdAlerts, run).queries
        return runtime, query

    runtime, query = start()
    listener = ControlListener(bootstrap, app, lambda: list(runtime.contexts), runtime.control)
    listener.start()
    try:
        assert listener.ready.wait(60)
        setting = Command.custom("set-threshold", args={"threshold": "40"})
        send_command(bootstrap, app, setting)
        _wait_inputs(query, 1)
        _produce(bootstrap, topics["readings"], [("a", 10.0), ("b", 50.0), ("c", 90.0)])
        _wait_inputs(query, 4)
        send_command(bootstrap, app, Command.custom("set-threshold", target="alerts", args={"threshold": "80"}))
        send_command(bootstrap, app, Command.custom("set-threshold", target="another-streamlet", args={"threshold": "0"}))
        _wait_inputs(query, 6)
        _produce(bootstrap, topics["readings"], [("a", 10.0), ("b", 50.0), ("c", 90.0)])
        _wait_inputs(query, 9)
        # the built-in listener leaves custom commands to the streamlet: no result
        assert await_results(bootstrap, app, setting.id, None, 3) == []
    finally:
        listener.stop()
        runtime.stop()

    runtime, query = start()  # from the checkpoint: the threshold (80) is state
    try:
        _produce(bootstrap, topics["readings"], [("d", 85.0), ("e", 70.0)])
        _wait_inputs(query, 2)
    finally:
        runtime.stop()
    alerts = _consume(bootstrap, topics["alerts"], ALERT, 4)
    assert [(r["sensor"], r["value"], r["threshold"]) for r in alerts] == [
        ("b", 50.0, 40.0), ("c", 90.0, 40.0), ("c", 90.0, 80.0), ("d", 85.0, 80.0)]


def test_a_custom_command_needs_a_name_and_built_in_ones_have_none():
    with pytest.raises(ValueError, match="needs a name"):
        Command("custom").record()
    with pytest.raises(ValueError, match="unknown command"):
        Command("set-threshold").record()
    record = Command.custom("set-threshold", args={"threshold": "1"}).record()
    assert (record["command"], record["args"]) == ("custom", {"threshold": "1", CUSTOM_NAME: "set-threshold"})
