"""progress_from_json: a progress report rebuilt from Spark's JSON has what PySpark's own
conversion gives the monitor, also for the JSON's gaps (a first batch's null start offsets, rates
Spark leaves out when NaN, a state operator without custom metrics)."""

import json
import math

import pytest

from streamlets.runtime.deadletter import progress_offsets
from streamlets.runtime.monitor import ProgressMonitor, progress_from_json

FIRST_BATCH = {
    "id": "0b6c3c1e-7f1c-4a43-9d58-3a9f5b1c2d3e", "runId": "5f0e4a55-1c2b-4f0a-8a61-9d4b1e2c3f4a",
    "name": "enrich.out", "timestamp": "2026-11-24T19:00:00.000Z", "batchId": 0, "batchDuration": 812,
    "numInputRows": 41,  # no inputRowsPerSecond / processedRowsPerSecond: NaN on a first batch
    "durationMs": {"addBatch": 500, "triggerExecution": 812},
    "eventTime": {"watermark": "2013-01-01T05:00:00.000Z"},
    "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 7, "numRowsUpdated": 7,
                        "allUpdatesTimeMs": 3, "numRowsRemoved": 0, "allRemovalsTimeMs": 0, "commitTimeMs": 9,
                        "memoryUsedBytes": 4096, "numRowsDroppedByWatermark": 0, "numShufflePartitions": 4,
                        "numStateStoreInstances": 4}],
    "sources": [{"description": "KafkaV2[Subscribe[flights]]", "startOffset": None,
                 "endOffset": {"flights": {"0": 21, "1": 20}}, "latestOffset": {"flights": {"0": 21, "1": 20}},
                 "numInputRows": 41}],
    "sink": {"description": "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@1", "numOutputRows": 40},
    "observedMetrics": {"dead-letters:in": {"records": 41, "malformed": 1}},
}


def test_a_first_batch_report_reads_like_pysparks():
    p = progress_from_json(json.dumps(FIRST_BATCH))
    assert (p.name, p.batchId, p.numInputRows, p.sink.numOutputRows) == ("enrich.out", 0, 41, 40)
    assert p.durationMs["triggerExecution"] == 812 and p.eventTime["watermark"] == "2013-01-01T05:00:00.000Z"
    [src] = p.sources
    assert progress_offsets(src.startOffset) is None  # null on a first batch, as fromJObject gives it
    assert progress_offsets(src.endOffset) == {"flights": {"0": 21, "1": 20}}
    assert math.isnan(src.inputRowsPerSecond) and math.isnan(p.inputRowsPerSecond)  # not a TypeError
    assert p.stateOperators[0].numRowsTotal == 7 and p.stateOperators[0].customMetrics == {}
    assert p.observedMetrics["dead-letters:in"]["malformed"] == 1


def test_the_monitor_counts_a_report_rebuilt_from_json():
    monitor = ProgressMonitor()
    monitor._progress(progress_from_json(json.dumps(FIRST_BATCH)))
    stats = monitor.stats["enrich.out"]
    assert (stats.batches, stats.input_rows, stats.output_rows, stats.state_rows) == (1, 41, 40, 7)
    assert stats.end_offsets == {"flights": {0: 21, 1: 20}}
    assert stats.batch_duration_ms == 812 and stats.last_batch_id == 0


def test_a_no_data_batch_leaves_the_processed_rate_of_the_last_batch_that_read_records():
    """A stateful query runs a no-data batch when its watermark moves (Spark reports 0 records
    processed at 0/s): the processed rate stays the data batch's; the input rate follows Spark's."""
    monitor = ProgressMonitor()
    data = {**FIRST_BATCH, "inputRowsPerSecond": 80.0, "processedRowsPerSecond": 50.5}
    monitor._progress(progress_from_json(json.dumps(data)))
    no_data = {**FIRST_BATCH, "batchId": 1, "numInputRows": 0, "inputRowsPerSecond": 0.0,
               "processedRowsPerSecond": 0.0, "sources": []}
    monitor._progress(progress_from_json(json.dumps(no_data)))
    stats = monitor.stats["enrich.out"]
    assert (stats.batches, stats.processed_rate, stats.input_rate) == (2, 50.5, 0.0)
    monitor._progress(progress_from_json(json.dumps({**data, "batchId": 2, "processedRowsPerSecond": 7.0})))
    assert stats.processed_rate == 7.0


def test_the_monitor_counts_each_batchs_fixed_cost_apart_once_the_batches_tell_it():
    """Reports whose addBatch is 200 ms plus 1 ms per 10 records: nothing is counted as fixed cost
    until FIXED_COST_MIN_BATCHES batches, then 200 ms of each; busy time holds all of it."""
    from streamlets.autoscale import FIXED_COST_MIN_BATCHES
    monitor = ProgressMonitor()
    sizes = [100, 900, 300, 2000, 50, 1200, 700, 400, 1500, 800, 250, 600]
    for i, rows in enumerate(sizes):
        report = {**FIRST_BATCH, "batchId": i, "numInputRows": rows, "sources": [],
                  "durationMs": {"addBatch": 200 + rows // 10, "triggerExecution": 300 + rows // 10}}
        monitor._progress(progress_from_json(json.dumps(report)))
        stats = monitor.stats["enrich.out"]
        if i < FIXED_COST_MIN_BATCHES - 1:
            assert stats.overhead_seconds == 0.0
    assert stats.overhead_seconds == pytest.approx(0.2 * (len(sizes) - FIXED_COST_MIN_BATCHES + 1))
    assert stats.busy_seconds == pytest.approx(sum(0.2 + r / 10_000 for r in sizes))
