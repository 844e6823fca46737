"""The sandbox's figures add up (issue 27, item 5): records out counted where someone counts them
and "n/a" where no one does (a streamlet's own foreachBatch sink, not 0), the progress log line's
"output" (never Spark's -1), the whole watermark with its time zone, and the topics table saying
that it shows offsets (records plus transaction markers)."""

import copy
import json
import logging

from rich.console import Console

from blueprint.sandbox.view import TopicRow, plain_line, render, streamlet_rows
from streamlets.runtime.monitor import ProgressMonitor, progress_from_json

BATCH = {
    "id": "0b6c3c1e-7f1c-4a43-9d58-3a9f5b1c2d3e", "runId": "5f0e4a55-1c2b-4f0a-8a61-9d4b1e2c3f4a",
    "name": "stats.out", "timestamp": "2026-11-24T19:00:00.000Z", "batchId": 3, "batchDuration": 812,
    "numInputRows": 41, "durationMs": {"addBatch": 500, "triggerExecution": 812},
    "eventTime": {"watermark": "2013-01-01T05:00:00.000Z"}, "stateOperators": [],
    "sources": [{"description": "KafkaV2[Subscribe[flights]]", "startOffset": {"flights": {"0": 0}},
                 "endOffset": {"flights": {"0": 41}}, "latestOffset": {"flights": {"0": 41}}, "numInputRows": 41}],
    "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
}


def report(name: str, output_rows: int) -> str:
    b = copy.deepcopy(BATCH)
    b["name"], b["sink"]["numOutputRows"] = name, output_rows
    return json.dumps(b)


def test_records_out_counted_by_the_sink_or_not_at_all(caplog):
    monitor = ProgressMonitor()
    caplog.set_level(logging.INFO)
    monitor._progress(progress_from_json(report("alo.out", 40)))  # Spark's Kafka sink counts
    monitor._progress(progress_from_json(report("stats.out", 12)))  # the exactly-once sink counts too
    monitor._progress(progress_from_json(report("files.files", -1)))  # the egress's own foreachBatch
    lines = {r.name: json.loads(r.getMessage().removeprefix("progress ")) for r in caplog.records
             if r.getMessage().startswith("progress ")}
    assert lines["streamlets.alo"]["output"] == 40
    assert lines["streamlets.stats"]["output"] == 12
    assert lines["streamlets.files"]["output"] is None  # unknown, not -1
    rows = streamlet_rows(monitor.stats)
    assert (rows["alo"]["out"], rows["stats"]["out"], rows["files"]["out"]) == (40, 12, None)
    # the next batch of the exactly-once query counts only its own records
    monitor._progress(progress_from_json(report("stats.out", 5)))
    assert json.loads([r.getMessage() for r in caplog.records if r.name == "streamlets.stats"][-1]
                      .removeprefix("progress "))["output"] == 5
    assert streamlet_rows(monitor.stats)["stats"]["out"] == 17

    topics = [TopicRow("flight-delays.enriched-flights", 80_798, ["enrich.out"], ["stats.in"])]
    console = Console(width=250, record=True)
    console.print(render(monitor.stats, topics, dead_letters=0, elapsed=12))
    shown = console.export_text()
    header = next(line for line in shown.splitlines() if "records out" in line and "┃" in line)
    files_row = next(line for line in shown.splitlines() if line.strip("│ ").startswith("files"))
    column = [c.strip() for c in header.split("┃")].index("records out")
    assert [c.strip() for c in files_row.split("│")][column] == "n/a"  # not 0
    assert "nan" not in shown  # a first batch's rates (Spark leaves them out: NaN) show as 0
    assert "2013-01-01T05:00:00Z" in shown  # whole, with its time zone
    assert "offsets" in shown and "records plus a transaction marker per partition each exactly-once task wrote" in shown
    assert "records out: written to its outlets (n/a: its own sink, not counted)" in shown
    line = plain_line(monitor.stats, topics, 12)
    assert "files: in 41 out n/a" in line and "| topic offsets flight-delays.enriched-flights=80,798" in line


def test_busy_seconds_add_up_every_batch_s_data_processing():
    """streamlets_busy_seconds_total (the autoscaler's busy time): addBatch of every micro-batch, summed."""
    monitor = ProgressMonitor()
    for add_batch in (500, 250, 1250):
        b = json.loads(report("stats.out", -1))
        b["durationMs"]["addBatch"] = add_batch
        monitor._progress(progress_from_json(json.dumps(b)))
    stats = monitor.stats["stats.out"]
    assert stats.busy_seconds == 2.0 and stats.add_batch_ms == 1250
