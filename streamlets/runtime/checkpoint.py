"""Spark's checkpoint format, read in one place: a streamlet's query folders and each query's
logs (`metadata`, `offsets/N`, `commits/N`) on any storage (streamlets.runtime.storage).

A streamlet's checkpoint root holds one folder per query (`<checkpoint_root>/<query>`), the
query's checkpointLocation. In a query folder, Spark writes `metadata` (one JSON line with the
query id), `offsets/N` (a version line, a JSON metadata line with the pinned session settings
under `conf`, then one line per source with its end offsets) and `commits/N` when batch N has
committed.
"""

from __future__ import annotations

import json
from typing import Any

from .storage import Storage, join


def query_folders(storage: Storage, checkpoint_root: str) -> list[str]:
    """Names of the query checkpoints under a streamlet's checkpoint root (folders with `metadata`;
    hidden ones, such as streamlets.state.repartition's work folders, are not queries)."""
    return [q for q in storage.children(checkpoint_root)
            if not q.startswith(".") and storage.exists(join(checkpoint_root, q, "metadata"))]


def committed_batches(storage: Storage, checkpoint: str) -> list[int]:
    """Batch ids with a commit file (`commits/N`), ascending."""
    return sorted(int(n) for n in storage.children(join(checkpoint, "commits")) if n.isdigit())


def query_id(storage: Storage, checkpoint: str) -> str | None:
    try:
        return json.loads(storage.read_text(join(checkpoint, "metadata"))).get("id")
    except (OSError, ValueError):
        return None


def pinned_conf(storage: Storage, checkpoint: str, batch: int) -> dict[str, str]:
    """The session settings Spark pinned in `offsets/N` (shuffle partitions = state partitions,
    state store provider, format versions): they override the session's on restart."""
    lines = storage.read_text(join(checkpoint, "offsets", str(batch))).splitlines()
    try:
        return dict(json.loads(lines[1]).get("conf") or {})
    except (IndexError, ValueError):
        return {}


def source_offsets(storage: Storage, checkpoint: str, batch: int) -> list[Any]:
    """The end offsets of each source in batch N (`offsets/N` after the version and metadata
    lines): for Kafka a {topic: {partition: offset}} mapping."""
    lines = storage.read_text(join(checkpoint, "offsets", str(batch))).splitlines()[2:]
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(line)
    return out
