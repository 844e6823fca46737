"""Progress of running streamlets, from Spark's StreamingQueryListener events.

One listener per SparkSession keeps per-query totals (records in and out, malformed values,
rates), writes each progress report to the streamlet's log, and asks the dead-letter writer to
scan batches that reported malformed values.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent, StreamingQueryProgress

from ..autoscale import FIXED_COST_BATCHES, batch_fixed_cost
from .deadletter import DeadLetterWriter, InletRead, ScanRequest, observation_name, offsets_for, progress_offsets


def progress_from_json(text: str) -> StreamingQueryProgress:
    """A progress report from its JSON (Spark's `StreamingQueryProgress.json()`), shaped like
    PySpark's own conversion (`fromJObject`): sources' offsets as JSON text, and the rates Spark
    leaves out of the JSON when they are NaN or infinite as NaN, at the query's and at each
    source's level. Raises KeyError, TypeError or ValueError on JSON of another shape."""
    j = json.loads(text)
    nan = float("nan")
    for src in j.get("sources") or []:
        for key in ("startOffset", "endOffset", "latestOffset"):
            if isinstance(src.get(key), (dict, list)):
                src[key] = json.dumps(src[key])
        src.setdefault("inputRowsPerSecond", nan)
        src.setdefault("processedRowsPerSecond", nan)
    j.setdefault("inputRowsPerSecond", nan)
    j.setdefault("processedRowsPerSecond", nan)
    return StreamingQueryProgress.fromJson(j)


class _JsonProgressBridge(JStreamingQueryListener):
    """PySpark's py4j bridge for a Python listener, except that a progress event crosses py4j
    once, as its JSON, instead of one py4j call per field, source, sink, map entry and observed
    metric (PySpark's `StreamingQueryProgress.fromJObject`). That conversion ran on the driver's
    cores every micro-batch, between one batch and the next: on 2 cores it made an
    at-least-once streamlet's micro-batch p50 1.5 to 2.8 times the hand-written job's, against
    1.08 and 1.05 with this bridge (bench/README.md). Other events take PySpark's path, and so
    does a report whose JSON cannot be had or read (Spark cannot render some observed values as
    JSON, e.g. TIMESTAMP_NTZ or intervals): counted in `fallbacks`, logged once per query."""

    def __init__(self, pylistener: StreamingQueryListener) -> None:
        super().__init__(pylistener)
        self.fallbacks = 0
        self._logged: set[str] = set()

    def onQueryProgress(self, jevent) -> None:
        try:
            event = QueryProgressEvent(progress_from_json(jevent.progress().json()))
        except Exception as e:  # noqa: BLE001 (Py4JError from the JVM's json(), or JSON of another shape)
            self.fallbacks += 1
            event = QueryProgressEvent.fromJObject(jevent)
            name = event.progress.name or str(event.progress.id)
            if name not in self._logged:
                self._logged.add(name)
                logging.getLogger(__name__).warning(
                    "progress of query %s: its JSON could not be used (%s: %s); PySpark's slower conversion "
                    "is used for it", name, type(e).__name__, e)
        self.pylistener.onQueryProgress(event)


@dataclass
class QueryStats:
    """Totals of one query since this process started it. Rates are records per second."""

    streamlet: str
    query: str
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    # Whether output_rows counts what the query wrote: Spark's sink reported numOutputRows (Kafka,
    # exactly-once outlets, files); False for a foreachBatch sink of the streamlet's own (Spark
    # reports -1), whose rows nobody counts.
    output_counted: bool = False
    malformed: int = 0
    input_rate: float = 0.0
    processed_rate: float = 0.0
    watermark: str | None = None
    state_rows: int = 0
    state_memory_bytes: int = 0
    batch_duration_ms: int = 0  # the last micro-batch, whole (durationMs.triggerExecution)
    add_batch_ms: int = 0  # the last micro-batch's processing of its data (durationMs.addBatch)
    # every micro-batch's addBatch summed, seconds: how busy the query was (the autoscaler's busy time)
    busy_seconds: float = 0.0
    # the part of busy_seconds that was each batch's fixed cost (autoscale.batch_fixed_cost of the
    # recent batches, at most the batch's addBatch), seconds; recent: (records, addBatch seconds)
    overhead_seconds: float = 0.0
    recent_batches: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=FIXED_COST_BATCHES))
    # when the running micro-batch started (Unix s, its first Spark stage seen: running_batch_started), None
    # when none is known to run; cleared by the batch's progress report
    running_since: float | None = None
    # Kafka offsets the query has processed up to (its last batch's end offsets): topic -> partition -> offset
    end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    last_batch_id: int = -1
    last_progress: float = 0.0
    sources_lag: int = 0
    status: str = "starting"
    exception: str | None = None


@dataclass
class StreamletRegistration:
    reads: Callable[[], list[InletRead]]
    checkpoint: Callable[[str], str]


class ProgressMonitor(StreamingQueryListener):
    """Collects QueryStats by query name (`<streamlet>.<query>`)."""

    @property
    def _jlistener(self):
        """The JVM side of this listener (what StreamingQueryManager.addListener registers):
        PySpark's wrapper around _JsonProgressBridge."""
        from pyspark import SparkContext

        if getattr(self, "_jlistenerobj", None) is None:
            self.bridge = _JsonProgressBridge(self)
            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(self.bridge)
        return self._jlistenerobj

    def __init__(self, dead_letters: DeadLetterWriter | None = None) -> None:
        self.stats: dict[str, QueryStats] = {}
        self.dead_letters = dead_letters
        self._streamlets: dict[str, StreamletRegistration] = {}
        self._names: dict[str, str] = {}  # query id -> name
        self._terminated: set[str] = set()  # query ids whose termination event has arrived
        self._lock = threading.Lock()
        self._changed = threading.Condition()

    def register(self, streamlet: str, reads: Callable[[], list[InletRead]], checkpoint: Callable[[str], str]) -> None:
        """Register a started streamlet: `reads()` gives its dead-letter inlet reads, `checkpoint(query)` a
        query's checkpoint folder (for the dead-letter scans of each progress event)."""
        self._streamlets[streamlet] = StreamletRegistration(reads, checkpoint)

    def _entry(self, name: str | None) -> QueryStats:
        name = name or "unnamed"
        streamlet, _, query = name.partition(".")
        with self._lock:
            return self.stats.setdefault(name, QueryStats(streamlet, query or name))

    def seed_end_offsets(self, streamlet: str, query: str, offsets: list) -> None:
        """What a (re)started query had processed before this process: its checkpoint's last
        committed end offsets (one entry per source of `offsets/N`; Kafka's {topic: {partition:
        offset}}, others ignored). Spark reports no progress for a restarted query with nothing new
        to read, so without them its lag (RuntimeCollector.inlet_lags) would be its topics' whole
        end offsets and `blueprint run --exit-when-done` would never be done."""
        stats = self._entry(f"{streamlet}.{query}")
        with self._lock:
            for source in offsets:
                if not isinstance(source, dict):
                    continue
                for topic, parts in source.items():
                    if isinstance(parts, dict):
                        known = stats.end_offsets.setdefault(topic, {})
                        for k, v in parts.items():
                            known[int(k)] = max(known.get(int(k), 0), int(v))

    def running_batch_seconds(self, name: str, started: float | None, now: float) -> float:
        """Seconds the micro-batch of query `name` has been running at `now` (Unix s): from the
        earliest start seen for it (`started`: running_batch_started at this call, None when no job
        of the query runs now, e.g. between two jobs of one batch) until its progress report; 0 when
        none is known to run."""
        stats = self._entry(name)
        with self._lock:
            if started is not None and (stats.running_since is None or started < stats.running_since):
                stats.running_since = started
            return max(0.0, now - stats.running_since) if stats.running_since is not None else 0.0

    def onQueryStarted(self, event) -> None:
        """Spark's listener event: the query's name is recorded by id and its status becomes running."""
        self._names[str(event.id)] = event.name or "unnamed"
        self._entry(event.name).status = "running"

    def onQueryIdle(self, event) -> None:  # part of the listener interface; nothing to record
        """Spark's listener event of a query with no new data; nothing to record."""
        pass

    def onQueryTerminated(self, event) -> None:
        # The event carries only the query id; names were recorded when the query started.
        """Spark's listener event: status failed (with the exception's text) or stopped; wakes those waiting
        for the query to end."""
        stats = self.stats.get(self._names.get(str(event.id), ""))
        if stats is not None:
            stats.status = "failed" if event.exception else "stopped"
            stats.exception = event.exception
        with self._changed:
            self._terminated.add(str(event.id))
            self._changed.notify_all()

    def wait_terminated(self, query_ids: list[str], timeout: float) -> bool:
        """Wait until the termination events of `query_ids` arrived. Spark's listener bus
        delivers a query's events in order and after the fact, so once its termination is seen
        every progress report of the query (and the dead-letter scans they ask for) is in."""
        with self._changed:
            return self._changed.wait_for(lambda: set(query_ids) <= self._terminated, timeout)

    def onQueryProgress(self, event) -> None:
        """Spark's listener event of a finished micro-batch: rates, batch id, state figures and dead-letter
        counts; an error here is logged, never raised into Spark's listener bus."""
        try:
            self._progress(event.progress)
        except Exception:  # a listener error must never reach Spark's listener bus
            logging.getLogger(__name__).exception("progress handling failed")

    def _progress(self, p) -> None:
        stats = self._entry(p.name)
        stats.batches += 1
        stats.input_rows += p.numInputRows
        sink_rows = p.sink.numOutputRows if p.sink is not None else -1
        if p.sink is not None and "noop" in (p.sink.description or "").lower():
            sink_rows = -1  # Spark's noop sink (an unconnected outlet, a dry run): nothing was written
        with self._lock:  # the sink's count, else unknown
            output = sink_rows if sink_rows >= 0 else None
            if sink_rows >= 0:
                stats.output_rows += sink_rows
                stats.output_counted = True
        stats.input_rate = _rate(p.inputRowsPerSecond)
        if p.numInputRows > 0:  # a no-data batch (a stateful query's watermark moving) processes none: its
            stats.processed_rate = _rate(p.processedRowsPerSecond)  # 0 would hide the rate of the data
        stats.watermark = (p.eventTime or {}).get("watermark")
        stats.state_rows = sum(op.numRowsTotal for op in (p.stateOperators or []))
        stats.state_memory_bytes = sum(op.memoryUsedBytes for op in (p.stateOperators or []))
        durations = p.durationMs or {}
        stats.batch_duration_ms = int(durations.get("triggerExecution") or 0)
        stats.add_batch_ms = int(durations.get("addBatch") or 0)
        add_batch = stats.add_batch_ms / 1000
        stats.busy_seconds += add_batch
        stats.recent_batches.append((p.numInputRows, add_batch))
        stats.overhead_seconds += min(add_batch, batch_fixed_cost(stats.recent_batches))
        stats.running_since = None  # the batch that ran is this one
        stats.last_batch_id = p.batchId
        stats.last_progress = time.time()
        stats.status = "running"
        lag = 0
        for src in p.sources or []:
            lag += _lag(src.endOffset, src.latestOffset)
            end = progress_offsets(src.endOffset)
            if isinstance(end, dict):
                for topic, parts in end.items():
                    if isinstance(parts, dict):
                        stats.end_offsets.setdefault(topic, {}).update({int(k): int(v) for k, v in parts.items()})
        stats.sources_lag = lag
        observed = p.observedMetrics or {}
        logging.getLogger(f"streamlets.{stats.streamlet}").info("progress %s", _compact(p, observed, output))
        reg = self._streamlets.get(stats.streamlet)
        if reg is None:
            return
        for read in reg.reads():
            row = observed.get(observation_name(read.inlet))
            if row is None:
                continue
            malformed = int(row["malformed"] or 0)
            stats.malformed += malformed
            if self.dead_letters is None:
                continue
            for src in p.sources or []:
                end = offsets_for(read.topic, src.endOffset)
                if end is not None:
                    start = offsets_for(read.topic, src.startOffset)
                    self.dead_letters.submit(ScanRequest(read, reg.checkpoint(stats.query), start, end, malformed))


def running_batch_started(spark, run_id: str) -> float | None:
    """When the running micro-batch of the query run `run_id` started, Unix seconds: the earliest
    submission of a stage of its running jobs (Spark runs a query's jobs in the job group of its
    run id, StreamExecution.runStream's setJobGroup; Spark's status tracker has the stages, their
    submission in milliseconds). None when no job of it runs now."""
    sc = spark.sparkContext
    tracker = sc._jsc.statusTracker()  # JavaSparkStatusTracker: None for what it no longer holds
    active = [int(j) for j in tracker.getActiveJobIds()]
    if not active:
        return None
    # the group's job ids as one text, not one py4j call per id (up to spark.ui.retainedJobs of them)
    text = str(sc._jvm.java.util.Arrays.toString(tracker.getJobIdsForGroup(run_id)))
    mine = set(active) & {int(j) for j in text.strip("[]").split(",") if j.strip()}
    earliest: float | None = None
    for job in mine:
        info = tracker.getJobInfo(job)
        for stage in (info.stageIds() if info is not None else []):
            stage_info = tracker.getStageInfo(int(stage))
            submitted = stage_info.submissionTime() if stage_info is not None else 0
            if submitted > 0 and (earliest is None or submitted / 1000 < earliest):
                earliest = submitted / 1000
    return earliest


def _rate(value: float | None) -> float:
    """A progress report's rate (records per second); 0 for what Spark leaves out (a first batch's:
    NaN in PySpark's conversion and progress_from_json)."""
    return 0.0 if value is None or math.isnan(value) else float(value)


def _lag(end: str | None, latest: str | None) -> int:
    """Records between what a Kafka source processed and the topic's end, summed over partitions."""
    e, l = progress_offsets(end), progress_offsets(latest)
    if not isinstance(e, dict) or not isinstance(l, dict):
        return 0
    total = 0
    for topic, parts in l.items():
        if isinstance(parts, dict):
            for part, off in parts.items():
                total += max(0, int(off) - int(e.get(topic, {}).get(part, 0)))
    return total


def _compact(p, observed, output: int | None) -> str:
    """The progress log line's JSON; `output`: the batch's records written, null where no one
    counts them (a foreachBatch sink of the streamlet's own: Spark's numOutputRows is -1)."""
    return json.dumps(
        {
            "batch": p.batchId,
            "input": p.numInputRows,
            "output": output,
            "input_rate": round(p.inputRowsPerSecond or 0, 1),
            "processed_rate": round(p.processedRowsPerSecond or 0, 1),
            "duration_ms": (p.durationMs or {}).get("triggerExecution"),
            "watermark": (p.eventTime or {}).get("watermark"),
            "observed": {k: v.asDict() for k, v in observed.items()},
        },
        default=str,  # observed Decimal or datetime values
    )
