"""The sandbox's live progress view: records in and out and rates per streamlet and topic."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from rich.console import Group

from streamlets.runtime.monitor import QueryStats


@dataclass
class TopicRow:
    topic: str
    records: int
    producers: list[str]
    consumers: list[str]
    rate: float = 0.0  # records per second since the previous look


def streamlet_rows(stats: dict[str, QueryStats]) -> dict[str, dict]:
    """Per streamlet: queries, batches, records in/out, rates (records/s), malformed, status.
    `out` is None when none of its queries' sinks counts what it writes (QueryStats.output_counted:
    a foreachBatch sink of its own, such as a file egress)."""
    rows: dict[str, dict] = {}
    for s in stats.values():
        r = rows.setdefault(s.streamlet, {"queries": 0, "batches": 0, "in": 0, "out": None, "in_rate": 0.0,
                                           "rate": 0.0, "malformed": 0, "status": set(), "watermark": None})
        r["queries"] += 1
        r["batches"] += s.batches
        r["in"] += s.input_rows
        if s.output_counted:
            r["out"] = (r["out"] or 0) + s.output_rows
        r["in_rate"] += s.input_rate
        r["rate"] += s.processed_rate
        r["malformed"] += s.malformed
        r["status"].add(s.status)
        if s.watermark and s.watermark != "1970-01-01T00:00:00.000Z":
            r["watermark"] = s.watermark if r["watermark"] is None else min(r["watermark"], s.watermark)
    return rows


def _count(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,}"


def _watermark(value: str | None) -> str:
    """Spark's watermark as shown: whole, with its time zone (`2013-01-01T05:00:00Z`)."""
    return (value or "").replace(".000Z", "Z")


# What each column means (the README's sandbox section says the same).
STREAMLET_COLUMNS = "records in: read from its inlets and sources; records out: written to its outlets (n/a: its own sink, not counted)"
TOPIC_COLUMNS = ("offsets: the topic's end offsets, summed over partitions: its records plus a transaction marker per "
                 "partition each exactly-once task wrote")


def render(stats: dict[str, QueryStats], topics: list[TopicRow], dead_letters: int, elapsed: float,
           faults: dict[str, dict[str, int]] | None = None) -> Group:
    """The streamlet and topic tables; `faults` (per streamlet, and "kafka"): restarts by the
    sandbox's supervisor and records quarantined (streamlets.runtime.quarantine)."""
    faults = faults or {}
    t = Table(title=f"streamlets ({elapsed:.0f} s)", title_justify="left", expand=False)
    for col, justify in [("streamlet", "left"), ("status", "left"), ("batches", "right"), ("records in", "right"),
                         ("records out", "right"), ("in/s", "right"), ("processed/s", "right"),
                         ("malformed", "right"), ("quarantined", "right"), ("restarts", "right"), ("watermark", "left")]:
        t.add_column(col, justify=justify)
    for name, r in sorted(streamlet_rows(stats).items()):
        f = faults.get(name, {})
        t.add_row(name, ",".join(sorted(r["status"])), str(r["batches"]), f"{r['in']:,}", _count(r["out"]),
                  f"{r['in_rate']:,.0f}", f"{r['rate']:,.0f}", str(r["malformed"]), str(f.get("quarantined", 0)),
                  str(f.get("restarts", 0)), _watermark(r["watermark"]))
    kafka = faults.get("kafka", {}).get("restarts", 0)
    tt = Table(title=f"topics (dead letters: {dead_letters}" + (f"; Kafka broker restarts: {kafka}" if kafka else "") + ")",
               title_justify="left")
    for col, justify in [("topic", "left"), ("offsets", "right"), ("offsets/s", "right"), ("from", "left"), ("to", "left")]:
        tt.add_column(col, justify=justify)
    for row in topics:
        tt.add_row(row.topic, f"{row.records:,}", f"{row.rate:,.0f}", ", ".join(row.producers), ", ".join(row.consumers))
    return Group(t, Text(STREAMLET_COLUMNS, style="dim"), tt, Text(TOPIC_COLUMNS, style="dim"))


def plain_line(stats: dict[str, QueryStats], topics: list[TopicRow], elapsed: float,
               faults: dict[str, dict[str, int]] | None = None) -> str:
    """One log line of progress for non-terminal output (CI logs)."""
    faults = faults or {}

    def extra(name: str) -> str:
        f = faults.get(name, {})
        return "".join(f" {k} {f[k]}" for k in ("quarantined", "restarts") if f.get(k))

    parts = [f"{n}: in {r['in']:,} out {_count(r['out'])} ({r['rate']:,.0f}/s){extra(n)}" for n, r in sorted(streamlet_rows(stats).items())]
    tops = [f"{t.topic}={t.records:,}" for t in topics]
    return f"[{elapsed:6.0f}s] " + "; ".join(parts) + " | topic offsets " + " ".join(tops)
