"""Egress: the latest delay statistics of each micro-batch as JSON Lines files on a volume."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlets import AvroInlet, Streamlet, VolumeMount

TIMESTAMPS = ("window_start", "window_end", "updated_at")
COLUMNS = ("origin", "window_start", "window_end", "flights", "cancelled", "mean_dep_delay", "max_dep_delay", "updated_at")


def iso_millis(millis: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC text, e.g. "2013-01-01T10:00:00.000Z"."""
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def latest_per_window(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each (origin, window_start) with the greatest updated_at; rows in
    the order of (origin, window_start)."""
    latest: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row["origin"], row["window_start"])
        if key not in latest or row["updated_at"] >= latest[key]["updated_at"]:
            latest[key] = row
    return [latest[k] for k in sorted(latest)]


def batch_file(folder: Path, batch_id: int) -> Path:
    return folder / f"batch-{batch_id:08d}.jsonl"


def write_batch(folder: Path, batch_id: int, rows: list[dict[str, Any]]) -> Path | None:
    """Write `rows` (timestamps as epoch millis) to the batch's file, atomically.

    The name depends only on the batch id, so a batch Spark replays after a failure (same id,
    same rows) replaces its own file: the files hold every batch exactly once. The temporary
    file is hidden ('.' prefix) and renamed over the final name with os.replace.
    """
    if not rows:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = batch_file(folder, batch_id)
    tmp = folder / f".{path.name}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            record = {c: (iso_millis(row[c]) if c in TIMESTAMPS else row[c]) for c in COLUMNS}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


class DelayStatsFiles(Streamlet):
    """Writes the delay statistics to the `output` volume as JSON Lines, one file per
    micro-batch (`delay-stats/batch-<id>.jsonl`), keeping the latest version of each
    (origin, window_start) in the batch. Exactly-once: a replayed batch overwrites its file."""

    inlet = AvroInlet("in", "schemas/delay_stats.avsc")
    output = VolumeMount("output", "/mnt/output", "ReadWriteMany")

    def create_logic(self, ctx) -> None:
        folder = ctx.mounted_path(self.output) / "delay-stats"
        stats = ctx.read_stream(self.inlet).select(
            *[F.unix_millis(c).alias(c) if c in TIMESTAMPS else F.col(c) for c in COLUMNS]
        )  # epoch millis: exact, and independent of the session and Python time zones

        def write(batch: DataFrame, batch_id: int) -> None:
            # Collecting to the driver is fine here: a batch holds at most a few thousand rows
            # (3 airports x the hours whose statistics changed). collect() keeps each Kafka
            # partition's order, and every version of a window is in one partition (the key),
            # so among equal updated_at the later version wins.
            rows = latest_per_window(r.asDict() for r in batch.collect())
            write_batch(folder, batch_id, rows)

        ctx.start_query(stats.writeStream.foreachBatch(write), "files")
