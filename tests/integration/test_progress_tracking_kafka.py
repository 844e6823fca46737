"""Asynchronous progress tracking (streamlets.<name>.progress-tracking = async) on a real broker:
an at-least-once Kafka-to-Kafka streamlet delivers every record with Spark's
AsyncProgressTrackingMicroBatchExecution, and starts again with synchronous tracking on the
checkpoint it left; where it cannot apply, the runner refuses before any query starts."""

import time

import pytest

from streamlets.runtime.checkpoint import planned_batches
from streamlets.runtime.progress_tracking import ProgressTrackingError
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.storage import LocalStorage
from streamlets.runtime.transport import KafkaTransport
from streamlets.schema import decode, encode

from support.kafka import count, produce, read_topic, topics
from support.realtime_app import APP, Counts, Passthrough, run_config
from support.waiting import wait_until

R = Passthrough.shape().inlet("in").schema


def engine(query) -> str:
    return query._jsq.streamingQuery().getClass().getSimpleName()


def test_async_progress_tracking_delivers_every_record_and_a_sync_restart_continues(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out = topics(kafka_broker, "in", "out", partitions=2)
    run = run_config(kafka_broker, tmp_path, "pt", Passthrough, {"in": src, "out": out}, delivery="at-least-once",
                     progress_tracking="async 1500ms")
    assert run.progress_tracking == "async 1500 milliseconds"
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(bootstrap))
    try:
        [query] = rt.start_class(Passthrough, run).queries
        assert engine(query) == "AsyncProgressTrackingMicroBatchExecution"
        # the interval Spark's engine took from the asyncProgressTrackingCheckpointIntervalMs option
        assert query._jsq.streamingQuery().asyncProgressTrackingCheckpointingIntervalMs() == 1500
        for burst in range(8):  # several micro-batches, over more than one checkpoint interval (1.5 s)
            produce(bootstrap, src, [(i % 2, encode(R, {"k": f"k{i}", "v": i})) for i in range(burst * 50, burst * 50 + 50)])
            time.sleep(0.3)
        wait_until(lambda: count(bootstrap, out) >= 400, timeout=60, what="400 records")
        assert rt.failed() == []
    finally:
        rt.stop(timeout=30)
    checkpoint = run.checkpoint_location("out")
    assert planned_batches(LocalStorage(), checkpoint)  # the offset log was written (in the background)

    # The same checkpoint, synchronous: Spark needs offsets/N-1 for the last N, which the
    # asynchronous query may not have written (progress_tracking.bridge_offset_gap).
    sync = run.model_copy(update={"progress_tracking": "sync"})
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(bootstrap))
    try:
        [query] = rt.start_class(Passthrough, sync).queries
        assert engine(query) == "MicroBatchExecution"
        produce(bootstrap, src, [(i % 2, encode(R, {"k": f"k{i}", "v": i})) for i in range(400, 450)])
        wait_until(lambda: {decode(R, m.value())["v"] for m in read_topic(bootstrap, out)} >= set(range(450)),
                   timeout=60, what="all 450 records")
        assert rt.failed() == []
    finally:
        rt.stop(timeout=30)


@pytest.mark.parametrize("cls, settings, words", [
    (Passthrough, {}, "cannot use asynchronous progress tracking: its Kafka outlets are exactly-once"),
    (Counts, {"delivery": "at-least-once", "trigger": "micro-batch"},
     "cannot run query 'out' with asynchronous progress tracking: a stateful or blocking operator (Aggregate)"),
])
def test_where_async_progress_tracking_cannot_apply_nothing_starts(kafka_broker, spark, tmp_path, cls, settings, words):
    src, out = topics(kafka_broker, "in", "out")
    rt = StreamletRuntime(spark, APP, None, KafkaTransport(kafka_broker.bootstrap_servers))
    active_before = {q.id for q in spark.streams.active}
    try:
        with pytest.raises(ProgressTrackingError) as e:
            rt.start_class(cls, run_config(kafka_broker, tmp_path, "pt-x", cls, {"in": src, "out": out},
                                           progress_tracking="async", **settings))
        assert str(e.value).startswith("streamlet 'pt-x' ") and "\n" not in str(e.value)
        assert words in str(e.value), str(e.value)
        assert {q.id for q in spark.streams.active} == active_before
    finally:
        rt.stop(timeout=30)
