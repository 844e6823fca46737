"""Live figures of an application from its streamlets' Prometheus samples (streamlets.runtime.metrics).

The same samples come in-process in the sandbox (the runtime's registry) and scraped from each
driver's endpoint on a cluster (the operator); either way `fill` sums them per streamlet and per
topic into the views of blueprint.ops.model, and `RateTracker` turns topics' end offsets into
records per second between looks.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .model import ApplicationView


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def samples_of(families: Iterable) -> Iterator[Sample]:
    """Samples of prometheus-client metric families (`registry.collect()`, or
    `prometheus_client.parser.text_string_to_metric_families` of a scraped page)."""
    for family in families:
        for s in family.samples:
            yield Sample(s.name, dict(s.labels), float(s.value))


def parse_text(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (a driver's /metrics page)."""
    from prometheus_client.parser import text_string_to_metric_families

    return list(samples_of(text_string_to_metric_families(text)))


class RateTracker:
    """Records per second of growing counts (topic end offsets), over the looks of the last
    `window` seconds: looking more often than once a second still gives a steady rate."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._seen: dict[tuple[str, ...], deque[tuple[float, float]]] = {}

    def rate(self, key: tuple[str, ...], value: float, now: float | None = None) -> float | None:
        """Per-second growth of the count `value` of `key` (records/s of a topic's end offsets) since the
        oldest look within `window` seconds, or None until looks span half a second; a count that shrinks
        (a recreated topic) starts over. `now`: time.monotonic() by default."""
        now = time.monotonic() if now is None else now
        seen = self._seen.setdefault(key, deque())
        if seen and value < seen[-1][1]:  # a reset (topic recreated): start over
            seen.clear()
        seen.append((now, value))
        while len(seen) > 2 and now - seen[1][0] >= self.window:
            seen.popleft()
        t0, v0 = seen[0]
        return (value - v0) / (now - t0) if now - t0 >= 0.5 else None


def fill(view: ApplicationView, samples: Iterable[Sample], rates: RateTracker | None = None) -> ApplicationView:
    """Put the samples' figures into `view` (its streamlets and topics, found by app id, streamlet
    and Kafka topic name); a streamlet whose status is `unknown` takes `running` or `stopped` from
    streamlets_query_up. Returns the view."""
    per_streamlet: dict[str, dict[str, float]] = {}
    up: dict[str, list[float]] = {}
    lag: dict[tuple[str, str, str], dict[str, float]] = {}  # (streamlet, inlet, topic) -> partition -> lag
    end: dict[str, dict[str, float]] = {}  # topic -> partition -> offset (max of every reporter)
    sums = {"streamlets_records_in_total": "records_in", "streamlets_records_out_total": "records_out",
            "streamlets_input_records_per_second": "input_rate", "streamlets_processed_records_per_second": "processed_rate",
            "streamlets_state_rows": "state_rows", "streamlets_state_memory_bytes": "state_memory_bytes",
            "streamlets_malformed_records_total": "malformed", "streamlets_restarts_total": "restarts",
            "streamlets_quarantined_records_total": "quarantined"}
    largest = {"streamlets_batch_duration_seconds": "batch_duration_seconds", "streamlets_executors": "executors"}
    for s in samples:
        labels = s.labels
        if labels.get("app") != view.app_id:
            continue
        streamlet = labels.get("streamlet", "")
        if s.name in sums:
            figures = per_streamlet.setdefault(streamlet, {})
            figures[sums[s.name]] = figures.get(sums[s.name], 0.0) + s.value
            if s.name == "streamlets_records_in_total":
                figures["queries"] = figures.get("queries", 0.0) + 1
        elif s.name in largest:
            figures = per_streamlet.setdefault(streamlet, {})
            figures[largest[s.name]] = max(figures.get(largest[s.name], 0.0), s.value)
        elif s.name == "streamlets_watermark_timestamp_seconds":
            figures = per_streamlet.setdefault(streamlet, {})
            figures["watermark"] = min(figures.get("watermark", s.value), s.value)
        elif s.name == "streamlets_query_up":
            up.setdefault(streamlet, []).append(s.value)
        elif s.name == "streamlets_consumer_lag_records":
            lag.setdefault((streamlet, labels["inlet"], labels["topic"]), {})[labels["partition"]] = s.value
        elif s.name == "streamlets_topic_end_offset":
            parts = end.setdefault(labels["topic"], {})
            parts[labels["partition"]] = max(parts.get(labels["partition"], 0.0), s.value)

    ints = {"records_in", "records_out", "state_rows", "state_memory_bytes", "malformed", "restarts", "quarantined", "queries",
            "executors"}
    for sv in view.streamlets:
        figures = per_streamlet.get(sv.name, {})
        for key, value in figures.items():
            setattr(sv, key, int(value) if key in ints else value)
        inlet_lag = [sum(parts.values()) for (streamlet, _, _), parts in lag.items() if streamlet == sv.name]
        if inlet_lag:
            sv.lag = int(sum(inlet_lag))
        if sv.status == "unknown" and sv.name in up:
            sv.status = "running" if any(up[sv.name]) else "stopped"
    for tv in view.topics:
        if tv.name in end:
            tv.end_offset = int(sum(end[tv.name].values()))
            if rates is not None:
                rate = rates.rate((view.namespace, view.name, tv.name), tv.end_offset)
                tv.rate = tv.rate if rate is None else rate
        for (streamlet, inlet, topic), parts in lag.items():
            if topic == tv.name:
                tv.lag[f"{streamlet}.{inlet}"] = int(sum(parts.values()))
    if view.dead_letter_topic and view.dead_letter_topic in end:
        view.dead_letters = int(sum(end[view.dead_letter_topic].values()))
    return view
