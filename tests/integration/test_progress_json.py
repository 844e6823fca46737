"""The progress monitor receives each micro-batch's progress as JSON (one py4j call) instead of
PySpark's field-by-field conversion: on a real broker and query, what it reads from the JSON
equals what PySpark's conversion gives, and the streamlet's totals and dead letters come out
of it."""

from pyspark.sql.streaming.listener import StreamingQueryProgress

from streamlets.runtime.deadletter import observation_name, progress_offsets
from streamlets.runtime.monitor import progress_from_json
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import KafkaTransport
from streamlets.schema import encode

from support.kafka import count, produce, topics
from support.realtime_app import APP, Passthrough, run_config
from support.waiting import wait_until

R = Passthrough.shape().inlet("in").schema


def test_progress_from_json_matches_pysparks_conversion_and_counts_dead_letters(kafka_broker, spark, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    src, out, dl = topics(kafka_broker, "in", "out", "dl", partitions=2)
    run = run_config(kafka_broker, tmp_path, "pj", Passthrough, {"in": src, "out": out}, dl, delivery="at-least-once")
    rt = StreamletRuntime(spark, APP, dl, KafkaTransport(bootstrap))
    try:
        [query] = rt.start_class(Passthrough, run).queries
        produce(bootstrap, src, [(i % 2, encode(R, {"k": f"k{i}", "v": i})) for i in range(40)] + [(0, b"\xff")])
        wait_until(lambda: count(bootstrap, out) >= 40 and count(bootstrap, dl) >= 1, timeout=120,
                   what="40 records and 1 dead letter")
        stats = rt.monitor.stats[query.name]
        wait_until(lambda: stats.input_rows >= 41, timeout=30, what="41 records counted")
        assert (stats.input_rows, stats.malformed) == (41, 1)  # from the JSON reports' numInputRows and observed metric
        assert stats.end_offsets == {src: {0: 21, 1: 20}}
        assert rt.failed() == []
        assert rt.monitor.bridge.fallbacks == 0  # every report came as JSON, none through PySpark's conversion

        # the newest progress of a batch that read records: a later batch without data (a
        # processing-time trigger's, on a slow machine) observes no metrics at all
        jprogress = [p for p in query._jsq.recentProgress() if p.numInputRows() > 0][-1]
        ours, pysparks = progress_from_json(jprogress.json()), StreamingQueryProgress.fromJObject(jprogress)
    finally:
        rt.stop(timeout=30)
    assert (ours.name, ours.batchId, ours.numInputRows, ours.durationMs) == \
        (pysparks.name, pysparks.batchId, pysparks.numInputRows, pysparks.durationMs)
    assert ours.sink.numOutputRows == pysparks.sink.numOutputRows
    for a, b in zip(ours.sources, pysparks.sources, strict=True):
        for key in ("startOffset", "endOffset", "latestOffset"):
            assert progress_offsets(getattr(a, key)) == progress_offsets(getattr(b, key))
    name = observation_name("in")
    assert ours.observedMetrics[name].asDict() == pysparks.observedMetrics[name].asDict()
