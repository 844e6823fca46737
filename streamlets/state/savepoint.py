"""Savepoints: consistent copies of a streamlet's query checkpoints, kept until disposed.

Spark has no savepoint API; a query's checkpoint is a set of logs keyed by batch id. A savepoint
copies, for each query of the streamlet (each `<checkpoint_root>/<query>` folder), the prefix that
is consistent as of its last committed micro-batch N (`commits/N`):

- `metadata` (the query id), `offsets/0..N`, `commits/0..N`, source logs `sources/*/0..N`;
- state store files of versions up to N + 1 (batch N commits state version N + 1): HDFS-backed
  `<v>.delta` / `<v>.snapshot`, RocksDB `<v>.zip` / `<v>.changelog` and `SSTs/`, and every
  `_metadata` (operator metadata and state schemas);
- the dead-letter ledger.

Files of a running query's next batch (`offsets/N+1`, state version N + 2) are left out, so a
savepoint can be taken while the streamlet runs. Layout:

    <root>/<app>/<streamlet>/<savepoint id>/_savepoint.json     the manifest (written last)
    <root>/<app>/<streamlet>/<savepoint id>/queries/<query>/...  the checkpoint copies

The root is a local folder or any Hadoop file system URI (see streamlets.runtime.storage).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..runtime.checkpoint import (COMMITS, OFFSETS, OPERATOR_METADATA, SOURCES, STATE, committed_batches,  # noqa: F401
                                   pin_state_partitions, pinned_conf, query_folders, query_id, source_offsets)
from ..runtime.storage import Storage, copy_between, join, storage_for
from .errors import StateError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST = "_savepoint.json"
MANIFEST_VERSION = 1
QUERIES = "queries"
_BATCH_LOG = re.compile(r"^\.?(\d+)(\.compact)?(\.crc)?$")
_STATE_FILE = re.compile(r"^\.?(\d+)(_[0-9a-fA-F-]+)?\.(delta|snapshot|zip|changelog)(\.crc)?$")


class SavepointError(StateError):
    """A savepoint cannot be taken, read, restored or disposed; the message says which and why."""


class SavepointQuery(BaseModel):
    """One query's copy in a savepoint (`queries.<query>` of the manifest)."""

    model_config = ConfigDict(extra="allow")

    batch_id: int | None  # the committed micro-batch the copy is consistent with; None: none committed
    query_id: str | None  # the id in the checkpoint's `metadata`
    files: int  # files copied
    stateful: bool  # whether the copy holds state/ files
    pinned_conf: dict[str, str] = {}  # the session settings Spark pinned in offsets/<batch_id>


class SavepointManifest(BaseModel):
    """`_savepoint.json`, written last into a savepoint folder (JSON, keys sorted, indent 2).
    Unknown keys are kept, so a manifest from a newer release reads and writes back unchanged."""

    model_config = ConfigDict(extra="allow")

    version: int = MANIFEST_VERSION
    id: str  # new_savepoint_id(): `sp-YYYYMMDDTHHMMSSZ-xxxxxx`
    app_id: str
    streamlet: str
    class_name: str  # module.qualname of the streamlet class
    code_version: str
    schema_fingerprints: dict[str, str]  # port -> CRC-64-AVRO fingerprint of its schema
    spark_version: str
    created_at: str  # UTC ISO-8601, seconds
    reason: str
    checkpoint_root: str
    queries: dict[str, SavepointQuery]

    def to_json(self) -> str:
        """The manifest as `_savepoint.json` holds it: JSON, keys sorted, indent 2 (unknown keys kept)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True)


def batch_ids(manifest: dict[str, Any]) -> dict[str, int | None]:
    """query -> the committed batch id its copy is consistent with, of a manifest's JSON
    (read_savepoint); None: the query had committed no batch when the savepoint was taken (its
    copy holds the query's id only, and a restore starts it from its first batch)."""
    return {q: e.get("batch_id") for q, e in manifest["queries"].items()}


def keep_in_savepoint(relative: str, batch: int) -> bool:
    """Whether a checkpoint file (path relative to the query folder) belongs to the copy that is
    consistent as of committed batch `batch`."""
    parts = relative.split("/")
    name = parts[-1]
    if name.endswith(".tmp") or name.startswith(".") and name.endswith(".tmp.crc"):
        return False  # a file being written
    if parts[0] in (OFFSETS, COMMITS) or (parts[0] == SOURCES and len(parts) == 3):
        m = _BATCH_LOG.match(name)
        return m is None or int(m.group(1)) <= batch
    if parts[0] == STATE and OPERATOR_METADATA not in parts:
        m = _STATE_FILE.match(name)
        return m is None or int(m.group(1)) <= batch + 1
    return True


# --- manifest -----------------------------------------------------------------------------------

def code_version(cls: type) -> str:
    """The streamlet's code version: its class's `code_version` attribute if set, else the first
    12 hex digits of the SHA-256 of its module's source."""
    explicit = getattr(cls, "code_version", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    try:
        source = inspect.getsource(inspect.getmodule(cls))
    except (OSError, TypeError):
        source = cls.__qualname__
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def schema_fingerprints(cls: type) -> dict[str, str]:
    """Port name -> the CRC-64-AVRO fingerprint (hex) of its schema."""
    shape = cls.shape()
    return {p.name: str(p.schema.fingerprint) for p in (*shape.inlets, *shape.outlets)}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def new_savepoint_id(when: dt.datetime | None = None) -> str:
    """`sp-YYYYMMDDTHHMMSSZ-xxxxxx`: sorts by time, unique."""
    return f"sp-{(when or _now()).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"


# --- take ---------------------------------------------------------------------------------------

def take_savepoint(checkpoint_root: str, savepoint_root: str, *, app_id: str, streamlet: str, cls: type,
                   reason: str = "manual", spark: "SparkSession | None" = None, attempts: int = 3) -> dict[str, Any]:
    """Copy the streamlet's query checkpoints, each as of its last committed micro-batch, to
    `<savepoint_root>/<app_id>/<streamlet>/<id>/` and write the manifest; returns it (with "path").

    Works on a running streamlet: only committed batches are copied. A state file that Spark's
    maintenance deletes during the copy (`spark.sql.streaming.minBatchesToRetain`) makes the copy
    start again (up to `attempts` times). Raises SavepointError if the checkpoint root holds no
    query checkpoint or the copy keeps failing.
    """
    import pyspark

    src = storage_for(checkpoint_root, spark)
    dst = storage_for(savepoint_root, spark)
    queries = query_folders(src, checkpoint_root)
    if not queries:
        raise SavepointError(f"streamlet {streamlet!r}: no query checkpoint under {checkpoint_root} "
                             "(has the streamlet run?)")
    sp_id = new_savepoint_id()
    target = join(savepoint_root, app_id, streamlet, sp_id)
    partial = target + ".inprogress"
    entries: dict[str, SavepointQuery] = {}
    for attempt in range(1, attempts + 1):
        dst.delete(partial)
        try:
            for q in queries:
                entries[q] = _copy_query(src, dst, join(checkpoint_root, q), join(partial, QUERIES, q))
            break
        except Exception as e:  # Python's FileNotFoundError, or Hadoop's through py4j
            if not isinstance(e, FileNotFoundError) and "FileNotFoundException" not in str(e):
                raise
            if attempt == attempts:
                raise SavepointError(f"streamlet {streamlet!r}: checkpoint files kept disappearing while "
                                     f"copying ({e}); is another process cleaning {checkpoint_root}?") from None
    manifest = SavepointManifest(
        version=MANIFEST_VERSION,
        id=sp_id,
        app_id=app_id,
        streamlet=streamlet,
        class_name=f"{cls.__module__}.{cls.__qualname__}",
        code_version=code_version(cls),
        schema_fingerprints=schema_fingerprints(cls),
        spark_version=pyspark.__version__,
        created_at=_now().isoformat(timespec="seconds"),
        reason=reason,
        checkpoint_root=checkpoint_root,
        queries=entries,
    )
    dst.write_text(join(partial, MANIFEST), manifest.to_json())
    dst.rename(partial, target)  # listed only once complete (on object stores the rename is a copy)
    return {**manifest.model_dump(mode="json"), "path": target}


def _copy_query(src: Storage, dst: Storage, checkpoint: str, target: str) -> SavepointQuery:
    batches = committed_batches(src, checkpoint)
    batch = batches[-1] if batches else -1
    files = [f for f in src.files(checkpoint) if keep_in_savepoint(f, batch)]
    for f in files:
        copy_between(src, dst, join(checkpoint, f), join(target, f))
    pin_state_partitions(dst, target)  # a first run's batches in offset log format 2 lack it
    return SavepointQuery(batch_id=batch if batches else None, query_id=query_id(src, checkpoint),
                          files=len(files), stateful=any(f.startswith(f"{STATE}/") for f in files),
                          pinned_conf=pinned_conf(dst, target, batch) if batches else {})


# --- list, inspect, dispose ---------------------------------------------------------------------

def read_savepoint(path: str, spark: "SparkSession | None" = None) -> dict[str, Any]:
    """The manifest of the savepoint at `path` (SavepointManifest's JSON, with "path");
    SavepointError if there is none or it is not a savepoint manifest."""
    manifest = read_manifest(path, spark)
    return {**manifest.model_dump(mode="json"), "path": str(path).rstrip("/")}


def read_manifest(path: str, spark: "SparkSession | None" = None) -> SavepointManifest:
    """The `_savepoint.json` of the savepoint at `path`; SavepointError naming the file if it is
    missing, not JSON, or lacks a field."""
    storage = storage_for(path, spark)
    try:
        return SavepointManifest.model_validate(json.loads(storage.read_text(join(path, MANIFEST))))
    except ValidationError as e:
        problem = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'top level'}: {err['msg']}" for err in e.errors())
        raise SavepointError(f"{path} is not a savepoint: {MANIFEST} is invalid ({problem})") from None
    except (OSError, ValueError) as e:
        raise SavepointError(f"{path} is not a savepoint: cannot read {MANIFEST} ({e})") from None


def list_savepoints(root: str, app_id: str | None = None, streamlet: str | None = None,
                    spark: "SparkSession | None" = None) -> list[dict[str, Any]]:
    """Complete savepoints under `root`, oldest first, optionally of one application or streamlet."""
    storage = storage_for(root, spark)
    out = []
    for app in [app_id] if app_id else storage.children(root):
        for s in [streamlet] if streamlet else storage.children(join(root, app)):
            for sp in storage.children(join(root, app, s)):
                if not sp.endswith(".inprogress") and storage.exists(join(root, app, s, sp, MANIFEST)):
                    out.append(read_savepoint(join(root, app, s, sp), spark))
    return sorted(out, key=lambda m: (m["created_at"], m["id"]))


def resolve_savepoint(ref: str, root: str | None, spark: "SparkSession | None" = None) -> dict[str, Any]:
    """A savepoint named by its path, or by its id under `root`."""
    storage = storage_for(ref if root is None else root, spark)
    if storage.exists(join(ref, MANIFEST)):
        return read_savepoint(ref, spark)
    if root is not None:
        matches = [m for m in list_savepoints(root, spark=spark) if m["id"] == ref]
        if len(matches) == 1:
            return matches[0]
    raise SavepointError(f"no savepoint {ref!r}" + (f" under {root}" if root else "") +
                         " (give its path or its id; `savepoint list` shows them)")


def dispose_savepoint(path: str, spark: "SparkSession | None" = None) -> None:
    """Delete a savepoint (its manifest first, so a half-deleted one is never listed)."""
    read_savepoint(path, spark)
    storage = storage_for(path, spark)
    storage.delete(join(path, MANIFEST))
    storage.delete(path)


def prune_savepoints(root: str, app_id: str, streamlet: str, *, keep: int | None = None,
                     max_age_seconds: float | None = None, spark: "SparkSession | None" = None) -> list[str]:
    """Dispose of the oldest savepoints beyond `keep` and those older than `max_age_seconds`
    (the newest one is always kept); returns the disposed paths."""
    savepoints = list_savepoints(root, app_id, streamlet, spark)
    doomed = set()
    if keep is not None and len(savepoints) > keep:
        doomed |= {m["path"] for m in savepoints[:len(savepoints) - keep]}
    if max_age_seconds is not None:
        now = _now()
        for m in savepoints[:-1]:
            try:
                created = dt.datetime.fromisoformat(m["created_at"])
            except ValueError:  # a time this release cannot read: kept, never pruned by age
                continue
            if created.tzinfo is None:
                created = created.replace(tzinfo=dt.timezone.utc)
            if (now - created).total_seconds() > max_age_seconds:
                doomed.add(m["path"])
    for path in sorted(doomed):
        dispose_savepoint(path, spark)
    return sorted(doomed)
