"""Prometheus metrics of running streamlets (prometheus-client), per query, inlet partition and topic.

One `RuntimeCollector` reads a StreamletRuntime when Prometheus scrapes: the progress monitor's
totals (Spark's StreamingQueryProgress, see monitor.py), the runtime's restarts and quarantined
records, and, from Kafka, each topic's last stable offset (`AdminClient.list_offsets`,
read_committed: what a consumer of this platform can read). Nothing runs on the data path; a
scrape costs one list_offsets call per second at most (cached).

Labels: `app`, `streamlet`, `query` (the query name without the streamlet), `inlet`, `topic`
(the Kafka topic name), `partition`. Names, types and units (the README's metrics table):

| metric | type | unit | source |
| --- | --- | --- | --- |
| streamlets_records_in_total | counter | records | numInputRows of each micro-batch |
| streamlets_records_out_total | counter | records | sink.numOutputRows |
| streamlets_batches_total | counter | micro-batches | progress reports |
| streamlets_input_records_per_second | gauge | records/s | inputRowsPerSecond (last batch) |
| streamlets_processed_records_per_second | gauge | records/s | processedRowsPerSecond (last batch that read records) |
| streamlets_batch_duration_seconds | gauge | s | durationMs.triggerExecution (last batch) |
| streamlets_processing_delay_seconds | gauge | s | durationMs.addBatch: the last batch's data processing |
| streamlets_busy_seconds_total | counter | s | durationMs.addBatch of every batch, summed (streamlets.autoscale's busy time) |
| streamlets_batch_overhead_seconds_total | counter | s | the part of busy seconds that was each batch's fixed cost (autoscale.batch_fixed_cost) |
| streamlets_batch_running_seconds | gauge | s | how long the running micro-batch has run (its first Spark stage's submission; 0: none) |
| streamlets_last_progress_timestamp_seconds | gauge | Unix s | when the last progress report arrived |
| streamlets_watermark_timestamp_seconds | gauge | Unix s | eventTime.watermark (queries with one) |
| streamlets_state_rows | gauge | rows | stateOperators.numRowsTotal, summed |
| streamlets_state_memory_bytes | gauge | bytes | stateOperators.memoryUsedBytes, summed |
| streamlets_malformed_records_total | counter | records | values sent to the dead-letter topic |
| streamlets_query_up | gauge | 1/0 | the query is running |
| streamlets_restarts_total | counter | restarts | the runtime restarted the streamlet |
| streamlets_quarantined_records_total | counter | records | poison records (runtime.quarantine) |
| streamlets_executors | gauge | executors | the driver's registered executors (runtime.executors; a local master: 1) |
| streamlets_executor_cores | gauge | task slots | spark.executor.cores (a local master: its parallelism) |
| streamlets_consumer_offset | gauge | offset | next offset the inlet's query will read |
| streamlets_consumer_lag_records | gauge | records | last stable offset minus consumer offset |
| streamlets_topic_end_offset | gauge | offset | a topic partition's last stable offset |

Lag needs no progress report: a stopped or slow streamlet's lag grows as its producers write.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from ..kafka_security import KafkaConnection
    from .runner import StreamletRuntime

log = logging.getLogger(__name__)

QUERY = ["app", "streamlet", "query"]
STREAMLET = ["app", "streamlet"]
INLET = ["app", "streamlet", "inlet", "topic", "partition"]
TOPIC = ["app", "topic", "partition"]

# Per query: (key, type, name, help); counters' names get `_total` in the exposition.
QUERY_FAMILIES: tuple[tuple[str, type[CounterMetricFamily] | type[GaugeMetricFamily], str, str], ...] = (
    ("records_in_total", CounterMetricFamily, "streamlets_records_in", "Records read by the query (numInputRows)."),
    ("records_out_total", CounterMetricFamily, "streamlets_records_out", "Records written by the query's sink."),
    ("batches_total", CounterMetricFamily, "streamlets_batches", "Micro-batches completed."),
    ("input_rate", GaugeMetricFamily, "streamlets_input_records_per_second",
     "Input rate of the last micro-batch (inputRowsPerSecond), records per second."),
    ("processed_rate", GaugeMetricFamily, "streamlets_processed_records_per_second",
     "Processing rate of the last micro-batch that read records (processedRowsPerSecond; a no-data batch, "
     "a stateful query's watermark moving, leaves it), records per second."),
    ("duration", GaugeMetricFamily, "streamlets_batch_duration_seconds",
     "The last micro-batch's duration (durationMs.triggerExecution), seconds."),
    ("delay", GaugeMetricFamily, "streamlets_processing_delay_seconds",
     "The last micro-batch's data processing time (durationMs.addBatch), seconds."),
    ("busy_total", CounterMetricFamily, "streamlets_busy_seconds",
     "Data processing time of every micro-batch since the query started (durationMs.addBatch summed), seconds."),
    ("overhead_total", CounterMetricFamily, "streamlets_batch_overhead_seconds",
     "The part of busy seconds that was each micro-batch's fixed cost, not growing with its records (estimated "
     "from the recent batches' records and addBatch), seconds."),
    ("running", GaugeMetricFamily, "streamlets_batch_running_seconds",
     "How long the running micro-batch has run (since its first Spark stage's submission), seconds; 0: none runs."),
    ("last", GaugeMetricFamily, "streamlets_last_progress_timestamp_seconds", "When the query last reported progress, Unix seconds."),
    ("watermark", GaugeMetricFamily, "streamlets_watermark_timestamp_seconds", "The query's event-time watermark, Unix seconds."),
    ("state_rows", GaugeMetricFamily, "streamlets_state_rows", "Rows in the query's state stores."),
    ("state_memory", GaugeMetricFamily, "streamlets_state_memory_bytes", "Memory used by the query's state stores, bytes."),
    ("malformed", CounterMetricFamily, "streamlets_malformed_records",
     "Inlet values that did not decode, sent to the dead-letter topic."),
    ("up", GaugeMetricFamily, "streamlets_query_up", "1 while the query runs, else 0."),
)


class InletLag(NamedTuple):
    """One inlet topic partition of a streamlet (RuntimeCollector.inlet_lags): the one home of
    lag, for the metrics and for the sandbox's "all input processed"."""

    streamlet: str
    inlet: str
    topic: str
    partition: int | None  # None: the topic's end offsets are not known
    offset: int | None  # the next offset the streamlet's queries read
    lag: int | None  # last stable offset minus `offset`


class TopicOffsets:
    """Last stable offsets of Kafka topic partitions (read_committed end offsets), cached for
    `max_age` seconds. A broker that does not answer within `timeout` seconds leaves the last
    known offsets standing (a scrape never fails for it)."""

    def __init__(self, bootstrap: "str | KafkaConnection", *, max_age: float = 1.0, timeout: float = 2.0) -> None:
        from confluent_kafka.admin import AdminClient

        from ..kafka_logging import client_config

        self._admin = AdminClient(client_config({"bootstrap.servers": bootstrap}))
        self._max_age, self._timeout = max_age, timeout
        self._lock = threading.Lock()
        self._at = 0.0
        self._topics: frozenset[str] = frozenset()
        self._offsets: dict[str, dict[int, int]] = {}

    def end_offsets(self, topics: Iterable[str]) -> dict[str, dict[int, int]]:
        """topic -> partition -> last stable offset, for the topics that exist."""
        wanted = frozenset(topics)
        with self._lock:
            if wanted == self._topics and time.monotonic() - self._at < self._max_age:
                return self._offsets
            try:
                self._offsets = self._fetch(wanted)
                self._topics, self._at = wanted, time.monotonic()
            except Exception as e:  # the broker is away: the last offsets stand
                log.debug("topic offsets: %s", e)
            return self._offsets

    def _fetch(self, topics: frozenset[str]) -> dict[str, dict[int, int]]:
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        meta = self._admin.list_topics(timeout=self._timeout).topics
        partitions = [TopicPartition(t, p) for t in topics if t in meta and meta[t].error is None for p in meta[t].partitions]
        if not partitions:
            return {}
        futures = self._admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions},
                                           isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self._timeout)
        out: dict[str, dict[int, int]] = {}
        for tp, future in futures.items():
            out.setdefault(tp.topic, {})[tp.partition] = future.result(timeout=self._timeout).offset
        return out


class RuntimeCollector(Collector):
    """The metrics of one StreamletRuntime (see the module's table), for a prometheus-client
    registry: `registry.register(RuntimeCollector(runtime, app_id, bootstrap))`. `extra_restarts`
    adds restarts counted outside the runtime (the sandbox's supervisor restarting a streamlet
    is the runtime's restart too, so the sandbox passes none)."""

    def __init__(self, runtime: "StreamletRuntime", app_id: str, bootstrap: "str | KafkaConnection | None") -> None:
        self.runtime = runtime
        self.app_id = app_id
        self.offsets = TopicOffsets(bootstrap) if bootstrap else None

    def describe(self) -> list[Metric]:
        """No metric families up front: everything is collected at scrape time, so registering makes no Kafka
        call."""
        return []  # collected at scrape time; no Kafka call at registration

    def collect(self) -> Iterator[Metric]:
        """The metric families of the module's table, read now: per query from the progress monitor, per
        streamlet from the runtime, inlet lag from Kafka's last stable offsets (prometheus-client calls it
        on each scrape)."""
        app = self.app_id
        query_metrics = {key: kind(name, text, labels=QUERY) for key, kind, name, text in QUERY_FAMILIES}
        runtime = self.runtime
        stats = dict(runtime.monitor.stats)
        active = {q.name: q.isActive for q in runtime.queries()}
        running = self._running(active)
        for name, s in sorted(stats.items()):
            labels = [app, s.streamlet, s.query]
            query_metrics["records_in_total"].add_metric(labels, s.input_rows)
            query_metrics["records_out_total"].add_metric(labels, s.output_rows)
            query_metrics["batches_total"].add_metric(labels, s.batches)
            query_metrics["input_rate"].add_metric(labels, s.input_rate)
            query_metrics["processed_rate"].add_metric(labels, s.processed_rate)
            query_metrics["duration"].add_metric(labels, s.batch_duration_ms / 1000)
            query_metrics["delay"].add_metric(labels, s.add_batch_ms / 1000)
            query_metrics["busy_total"].add_metric(labels, s.busy_seconds)
            query_metrics["overhead_total"].add_metric(labels, s.overhead_seconds)
            query_metrics["running"].add_metric(labels, running.get(name, 0.0))
            if s.last_progress:
                query_metrics["last"].add_metric(labels, s.last_progress)
            watermark = _unix_seconds(s.watermark)
            if watermark:
                query_metrics["watermark"].add_metric(labels, watermark)
            query_metrics["state_rows"].add_metric(labels, s.state_rows)
            query_metrics["state_memory"].add_metric(labels, s.state_memory_bytes)
            query_metrics["malformed"].add_metric(labels, s.malformed)
            query_metrics["up"].add_metric(labels, 1.0 if active.get(name, s.status == "running") else 0.0)
        yield from query_metrics.values()

        restarts = CounterMetricFamily("streamlets_restarts", "Restarts of the streamlet by the runtime (failed "
                                       "queries restarted, poison records quarantined).", labels=STREAMLET)
        quarantined = CounterMetricFamily("streamlets_quarantined_records", "Poison records quarantined to the "
                                          "dead-letter topic.", labels=STREAMLET)
        for streamlet in sorted(runtime.contexts):
            restarts.add_metric([app, streamlet], runtime.restarts.get(streamlet, 0))
            quarantined.add_metric([app, streamlet], runtime.quarantine.counts.get(streamlet, 0))
        yield restarts
        yield quarantined
        yield from self._executors()
        yield from self._kafka(stats)

    def _running(self, active: dict[str, bool]) -> dict[str, float]:
        """Seconds each active query's running micro-batch has run, by query name (monitor:
        running_batch_started, ProgressMonitor.running_batch_seconds). A query whose session does
        not answer is left out."""
        from .monitor import running_batch_started

        out: dict[str, float] = {}
        now = time.time()
        for streamlet, ctx in self.runtime.contexts.items():
            try:
                for q in ctx.queries:
                    if active.get(q.name):
                        started = running_batch_started(ctx.spark, str(q.runId))
                        out[q.name] = self.runtime.monitor.running_batch_seconds(q.name, started, now)
            except Exception as e:  # a session or query stopping: no figure this time
                log.debug("running micro-batch of %s: %s", streamlet, e)
        return out

    def _executors(self) -> Iterator[Metric]:
        """Each streamlet's executors and their task slots (its driver's: streamlets sharing a
        SparkSession report the same). A driver that does not answer leaves them out."""
        from .executors import ExecutorControl

        count = GaugeMetricFamily("streamlets_executors", "Executors the streamlet's driver runs (registered and "
                                  "active; a local master: 1).", labels=STREAMLET)
        cores = GaugeMetricFamily("streamlets_executor_cores", "Task slots per executor (spark.executor.cores; a "
                                  "local master: its parallelism).", labels=STREAMLET)
        for streamlet, ctx in sorted(self.runtime.contexts.items()):
            try:
                control = ExecutorControl(ctx.spark)
                n, c = control.count(), control.cores()
            except Exception as e:  # a session stopping: no figure this time
                log.debug("executors of %s: %s", streamlet, e)
                continue
            count.add_metric([self.app_id, streamlet], n)
            cores.add_metric([self.app_id, streamlet], c)
        yield count
        yield cores

    def _end_offsets(self) -> dict[str, dict[int, int]]:
        """Last stable offsets of every topic the streamlets read or write, and the dead-letter topic."""
        assert self.offsets is not None
        topics = {t for ctx in self.runtime.contexts.values() for t in ctx.run.topics.values()}
        topics |= {ctx.run.dead_letter_topic for ctx in self.runtime.contexts.values() if ctx.run.dead_letter_topic}
        return self.offsets.end_offsets(topics)

    def inlet_lags(self, stats: dict | None = None) -> list[InletLag]:
        """Per inlet topic partition of every streamlet: the next offset its queries read (the
        furthest end offset of their progress reports) and the lag, the topic partition's last
        stable offset minus that. A topic whose end offsets are not known (no broker answer yet)
        gives one row with partition, offset and lag None. Empty without a bootstrap server."""
        if self.offsets is None:
            return []
        if stats is None:
            stats = dict(self.runtime.monitor.stats)
        # one row per (streamlet, inlet, topic), though a streamlet may read an inlet in several queries
        reads = sorted({(name, read.inlet, read.topic) for name, ctx in self.runtime.contexts.items()
                        for read in ctx.inlet_reads()})
        latest = self._end_offsets()
        processed: dict[tuple[str, str], dict[int, int]] = {}  # (streamlet, topic) -> partition -> offset
        for s in stats.values():
            for topic, parts in s.end_offsets.items():
                merged = processed.setdefault((s.streamlet, topic), {})
                for p, off in parts.items():
                    merged[p] = max(merged.get(p, 0), off)
        out = []
        for streamlet, inlet, topic in reads:
            if topic not in latest:
                out.append(InletLag(streamlet, inlet, topic, None, None, None))
                continue
            done = processed.get((streamlet, topic), {})
            for partition, offset in sorted(latest[topic].items()):
                at = done.get(partition, 0)
                out.append(InletLag(streamlet, inlet, topic, partition, at, max(0, offset - at)))
        return out

    def _kafka(self, stats) -> Iterator[Metric]:
        consumer_offset = GaugeMetricFamily("streamlets_consumer_offset", "The next offset the inlet's query reads "
                                            "(its last micro-batch's end offset).", labels=INLET)
        lag = GaugeMetricFamily("streamlets_consumer_lag_records", "Records of the inlet's topic partition not yet "
                                "processed: last stable offset minus consumer offset.", labels=INLET)
        end = GaugeMetricFamily("streamlets_topic_end_offset", "A topic partition's last stable offset "
                                "(read_committed end offset).", labels=TOPIC)
        if self.offsets is not None:
            for row in self.inlet_lags(stats):
                if row.partition is None or row.offset is None or row.lag is None:
                    continue
                labels = [self.app_id, row.streamlet, row.inlet, row.topic, str(row.partition)]
                consumer_offset.add_metric(labels, row.offset)
                lag.add_metric(labels, row.lag)
            for topic, parts in sorted(self._end_offsets().items()):
                for partition, offset in sorted(parts.items()):
                    end.add_metric([self.app_id, topic, str(partition)], offset)
        yield consumer_offset
        yield lag
        yield end


def _unix_seconds(iso: str | None) -> float | None:
    """Spark's watermark text (ISO 8601, UTC) as Unix seconds; None for none or the epoch (no
    watermark yet)."""
    if not iso:
        return None
    try:
        value = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return value or None


def runtime_registry(runtime: "StreamletRuntime", app_id: str, bootstrap: "str | KafkaConnection | None", *,
                     collector: RuntimeCollector | None = None) -> CollectorRegistry:
    """A registry holding the runtime's collector (`collector`, else a new one) and
    prometheus-client's process metrics of this Python process (CPU seconds, resident memory,
    open files)."""
    from prometheus_client import ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector or RuntimeCollector(runtime, app_id, bootstrap))
    ProcessCollector(registry=registry)
    return registry
