"""Egress: the latest delay statistics of each micro-batch as JSON Lines files on a volume."""

from __future__ import annotations

from streamlets import AvroInlet, VolumeMount
from streamlets.files import JsonLinesEgress


class DelayStatsFiles(JsonLinesEgress):
    """Writes the delay statistics to the `output` volume as JSON Lines, one file per
    micro-batch (`delay-stats/batch-<id>.jsonl`), keeping the latest version of each
    (origin, window_start) in the batch. Exactly-once: a replayed batch overwrites its file.
    Timestamps are ISO 8601 UTC text in milliseconds ("2013-01-01T10:00:00.000Z")."""

    inlet = AvroInlet("in", "schemas/delay_stats.avsc")
    output = VolumeMount("output", "/mnt/output", "ReadWriteMany")
    subfolder = "delay-stats"
    latest_by = ("origin", "window_start")
    version = "updated_at"
