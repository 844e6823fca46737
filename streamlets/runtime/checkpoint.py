"""Spark's checkpoint format, read in one place: a streamlet's query folders and each query's
logs (`metadata`, `offsets/N`, `commits/N`) on any storage (streamlets.runtime.storage).

A streamlet's checkpoint root holds one folder per query (`<checkpoint_root>/<query>`), the
query's checkpointLocation. In a query folder, Spark writes `metadata` (one JSON line with the
query id), `offsets/N` (a version line, a JSON metadata line with the pinned session settings
under `conf`, then one line per source with its end offsets: by position in format `v1`,
`<source id>:<offsets>` in `v2`, the id a source's name or, unnamed, its position) and
`commits/N` when batch N has committed.

Local folders are read through LocalStorage (`local_checkpoint` checks that a path is a query
checkpoint first). Errors in the files raise CheckpointFormatError; callers name what they were
doing (state export, repartitioning) around it.

Spark writes these files through its checkpoint file manager; how ours writes them in local
folders: streamlets.runtime.checkpoint_file_manager.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ..errors import StreamletError
from .storage import Storage, is_local, join, local_path


# The files and folders of a query checkpoint (Spark's names).
METADATA = "metadata"  # the query id; also the file in an operator's OPERATOR_METADATA folder
OFFSETS = "offsets"  # offsets/N: batch N's planned end offsets and pinned settings
COMMITS = "commits"  # commits/N: batch N committed
SOURCES = "sources"  # sources/<source>/N: a source's own log (Kafka's initial offsets)
STATE = "state"  # state/<operator id>/<partition>/<version>.delta|.snapshot|.zip|.changelog
OPERATOR_METADATA = "_metadata"  # state/<operator id>/_metadata/: metadata (OperatorStateMetadataV1), v2, schemas
OPERATOR_METADATA_V2 = "v2"  # state/<operator id>/_metadata/v2: transformWithState's metadata
OFFSETS_V2 = "v2"  # the version line of an offsets/N that keys its sources by id (named sources)


def dead_letter_ledger(inlet: str) -> str:
    """The name of an inlet's dead-letter ledger in its query checkpoint (streamlets.runtime.deadletter):
    `dead-letter-ledger.<inlet>.json`."""
    return f"dead-letter-ledger.{inlet}.json"


# The work files and folders of a streamlet's checkpoint root (ours, not Spark's); hidden folders
# are never query folders (query_folders).
QUARANTINE_LEDGER = "quarantine-ledger.json"  # <root>/quarantine-ledger.json (streamlets.runtime.quarantine)
QUARANTINE_PROBE = ".quarantine-probe-"  # <root>/.quarantine-probe-<hex>/: a probe's scratch checkpoints
RESTORE_CHECK = ".restore-check-"  # <root>.restore-check-<hex>/ beside the root: a restore's dry run
BEFORE_REPARTITION = ".before-repartition"  # <root>.before-repartition/ or .<query>.before-repartition-<N>/


def scratch_name(prefix: str) -> str:
    """`prefix` and 8 random hex digits: a fresh scratch name (QUARANTINE_PROBE, RESTORE_CHECK)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


class CheckpointFormatError(StreamletError):
    """A path is not a Structured Streaming query checkpoint, or one of its log files cannot be
    read; the message names the path."""


def local_checkpoint(checkpoint: str | Path) -> Path:
    """The absolute local path of a query checkpoint (the folder a query used as its
    checkpointLocation). Raises CheckpointFormatError if it has no `metadata` file or no
    `offsets/` folder."""
    path = Path(checkpoint).expanduser().resolve()
    if not (path / METADATA).is_file() or not (path / OFFSETS).is_dir():
        raise _not_a_checkpoint(path)
    return path


def _not_a_checkpoint(path: str | Path) -> CheckpointFormatError:
    return CheckpointFormatError(f"{path} is not a Structured Streaming checkpoint (no metadata file or offsets/ "
                                 "folder); pass the folder a query used as its checkpointLocation")


def query_checkpoint(storage: Storage, checkpoint: str | Path) -> str:
    """A query checkpoint's path on `storage`: a local one absolute (local_checkpoint), a Hadoop
    URI as given less a trailing '/'. Raises CheckpointFormatError as local_checkpoint does."""
    if not is_local(str(checkpoint)):
        text = str(checkpoint).rstrip("/")
        if not storage.exists(join(text, METADATA)) or not storage.exists(join(text, OFFSETS)):
            raise _not_a_checkpoint(text)
        return text
    return str(local_checkpoint(local_path(str(checkpoint))))


def batch_ids(storage: Storage, log_folder: str) -> list[int]:
    """Batch ids named by a log folder's files (`offsets/`, `commits/`), ascending; skips `.N.crc`
    and temp files; [] for a missing folder."""
    return sorted(int(n) for n in storage.children(log_folder) if n.isdigit())


def offsets_file(checkpoint: str, batch: int) -> str:
    """The path of batch N's offset-log entry, `<checkpoint>/offsets/N`."""
    return join(checkpoint, OFFSETS, str(batch))


def commit_file(checkpoint: str, batch: int) -> str:
    """The path of batch N's commit-log entry, `<checkpoint>/commits/N`."""
    return join(checkpoint, COMMITS, str(batch))


def planned_batches(storage: Storage, checkpoint: str) -> list[int]:
    """Batch ids with an offsets file (`offsets/N`: planned, maybe not committed), ascending."""
    return batch_ids(storage, join(checkpoint, OFFSETS))


def read_log(storage: Storage, path: str) -> tuple[list[str], dict[str, Any]]:
    """A Spark log file (`v1`, then a JSON line, then more lines: `offsets/N`, `commits/N`,
    `state/<op>/_metadata/metadata`): its lines and its JSON line. Raises CheckpointFormatError
    naming the file if it cannot be read or parsed."""
    try:
        lines = storage.read_text(path).splitlines()
        return lines, json.loads(lines[1])
    except (OSError, IndexError, ValueError) as e:
        raise CheckpointFormatError(f"{path} cannot be read ({e}): the checkpoint is damaged") from None


def query_folders(storage: Storage, checkpoint_root: str) -> list[str]:
    """Names of the query checkpoints under a streamlet's checkpoint root (folders with `metadata`;
    hidden ones, such as streamlets.state.repartition's work folders, are not queries)."""
    return [q for q in storage.children(checkpoint_root)
            if not q.startswith(".") and storage.exists(join(checkpoint_root, q, METADATA))]


def committed_batches(storage: Storage, checkpoint: str) -> list[int]:
    """Batch ids with a commit file (`commits/N`), ascending."""
    return batch_ids(storage, join(checkpoint, COMMITS))


def commit_log(storage: Storage, checkpoint: str, batch: int) -> dict[str, Any]:
    """The JSON of `commits/N` (watermark, state unique ids). Raises CheckpointFormatError."""
    return read_log(storage, commit_file(checkpoint, batch))[1]


def offsets_log(storage: Storage, checkpoint: str, batch: int) -> tuple[list[str], dict[str, Any]]:
    """`offsets/N`: its lines (version, metadata JSON, one per source) and its metadata (the
    pinned session settings under `conf`). Raises CheckpointFormatError."""
    return read_log(storage, offsets_file(checkpoint, batch))


def offsets_text(storage: Storage, checkpoint: str, batch: int) -> str:
    """`offsets/N` as written (what identifies the batch Spark planned: streamlets.runtime.exactly_once
    fingerprints it). OSError if it cannot be read."""
    return storage.read_text(offsets_file(checkpoint, batch))


def query_id(storage: Storage, checkpoint: str) -> str | None:
    """The query's id: `metadata` is one JSON line written when the query first started,
    {"id": "<uuid>"}. None if the file is missing or unreadable."""
    try:
        return json.loads(storage.read_text(join(checkpoint, METADATA))).get("id")
    except (OSError, ValueError):
        return None


def pinned_conf(storage: Storage, checkpoint: str, batch: int) -> dict[str, str]:
    """The session settings Spark pinned in `offsets/N` (shuffle partitions = state partitions,
    state store provider, format versions): they override the session's on restart."""
    lines = offsets_text(storage, checkpoint, batch).splitlines()
    try:
        return dict(json.loads(lines[1]).get("conf") or {})
    except (IndexError, ValueError):
        return {}


def source_offsets(storage: Storage, checkpoint: str, batch: int) -> list[Any]:
    """The end offsets of each source in batch N (`offsets/N` after the version and metadata
    lines, in their order, without a `v2` line's source id): for Kafka a {topic: {partition:
    offset}} mapping."""
    return [offsets for _, offsets in source_entries(storage, checkpoint, batch)]


def source_entries(storage: Storage, checkpoint: str, batch: int) -> list[tuple[str | None, Any]]:
    """(source id, end offsets) of each source in batch N: the id is None in a `v1` log (sources
    by position), the source's name or its position (`0`, `1`) in a `v2` log (parse_source_line)."""
    lines = offsets_text(storage, checkpoint, batch).splitlines()
    v2 = bool(lines) and lines[0].strip() == OFFSETS_V2
    return [parse_source_line(line, v2) for line in lines[2:]]


def parse_source_line(line: str, v2: bool) -> tuple[str | None, Any]:
    """One source line of `offsets/N`: (its id in a `v2` log, else None; its offsets as JSON, or
    the text when it is not JSON)."""
    sid = None
    if v2:
        sid, _, line = line.partition(":")
    try:
        return sid, json.loads(line)
    except ValueError:
        return sid, line


def named_by_position(ids: list[str | None]) -> bool:
    """Whether a batch's source ids (source_entries) key its sources by position: a `v1` log (no
    ids) or `v2` ids that are positions (`0`, `1`)."""
    return any(i is None or i.isdigit() for i in ids)


def state_partitions(storage: Storage, checkpoint: str) -> int | None:
    """The number of state partitions of a query checkpoint's stateful operators (their
    `state/<op>/_metadata/metadata`, `numPartitions`), None for a query without state or
    without that file. What Spark 4.2 loads the state with is the `spark.sql.shuffle.partitions`
    pinned in `offsets/N`; a `v2` log does not pin it in the batches of a query's first run."""
    for op in storage.children(join(checkpoint, STATE)):
        try:
            _, meta = read_log(storage, join(checkpoint, STATE, op, OPERATOR_METADATA, METADATA))
        except CheckpointFormatError:
            continue
        for info in meta.get("stateStoreInfo") or []:
            if info.get("numPartitions"):
                return int(info["numPartitions"])
    return None


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"  # the state partitions, pinned in offsets/N


def pin_state_partitions(storage: Storage, checkpoint: str) -> int | None:
    """Pin the state's partition count (state_partitions) as `spark.sql.shuffle.partitions` in each
    committed `offsets/N` that lacks it, as Spark 4.2's offset log format 2 leaves it out of the
    batches of a query's first run: Spark's `statestore` reader fails on such a batch (`None.get`),
    and a restart would load the state with the session's count. Committed batches only: Spark
    never rewrites them, while an uncommitted one may be replayed (and an exactly-once outlet
    identifies it by its text). Returns the count, None for a query without state."""
    partitions = state_partitions(storage, checkpoint)
    if partitions is None:
        return None
    for batch in committed_batches(storage, checkpoint):
        path = offsets_file(checkpoint, batch)
        if not storage.exists(path):
            continue
        lines, meta = read_log(storage, path)
        if SHUFFLE_PARTITIONS in (meta.get("conf") or {}):
            continue
        meta = {**meta, "conf": {**(meta.get("conf") or {}), SHUFFLE_PARTITIONS: str(partitions)}}
        storage.write_text(path, "\n".join([lines[0], json.dumps(meta, separators=(",", ":")), *lines[2:]]))
        storage.delete(join(checkpoint, OFFSETS, f".{batch}.crc"))
    return partitions


def rewrite_sources_by_name(storage: Storage, checkpoint: str, names: dict[int, str | None], conf: dict[str, str]) -> None:
    """Key a positional checkpoint's sources by name: every `offsets/N` becomes a `v2` log whose
    source line at position i is `<names[i]>:<offsets>` (left out when names[i] is None: a source
    the query no longer reads), with `conf` added to its pinned settings; `sources/<i>` (a source's
    own log) moves to `sources/<names[i]>`. Spark's checksum files of the rewritten logs are
    deleted (they would no longer match). The query must not be running."""
    for batch in planned_batches(storage, checkpoint):
        path = offsets_file(checkpoint, batch)
        lines, meta = read_log(storage, path)
        v2 = lines[0].strip() == OFFSETS_V2
        meta = {**meta, "conf": {**(meta.get("conf") or {}), **conf}}
        meta.setdefault("sourceMetadataInfo", {})
        out = [OFFSETS_V2, json.dumps(meta, separators=(",", ":"))]
        for i, line in enumerate(lines[2:]):
            if names.get(i):
                out.append(f"{names[i]}:{line.partition(':')[2] if v2 else line}")
        storage.write_text(path, "\n".join(out))
        storage.delete(join(checkpoint, OFFSETS, f".{batch}.crc"))
    for i, name in names.items():
        if name and storage.exists(join(checkpoint, SOURCES, str(i))):
            storage.rename(join(checkpoint, SOURCES, str(i)), join(checkpoint, SOURCES, name))
