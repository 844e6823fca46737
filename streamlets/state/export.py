"""State export: the state of one Structured Streaming checkpoint as files (JSON Lines, Parquet, CSV).

Reads with Spark's own state data sources (Spark 4.0): `state-metadata` lists a checkpoint's
stateful operators and `statestore` reads one operator's store as it was after a committed batch.
Key and value structs are flattened one level into `key_<field>` / `value_<field>` columns.

    export_state(spark, "/ckpt/delay-stats", "/exports/delay-stats-42")   # last committed batch
    read_export(spark, "/exports/delay-stats-42").show()

The value fields are the operator's state, not the query's output: a streaming aggregation keeps
its aggregation buffers, named after the aggregate (`count`, `sum`, `max`; `avg` keeps `sum` and
`count`), not after the output aliases. Paths are local folders (a savepoint's
`queries/<query>` folders included) or Hadoop URIs (s3a://...: checkpoints and exports on an object
store, through the session's Hadoop settings, streamlets.runtime.storage); callers loop over a
savepoint's queries themselves.

The export's format (`_export.json`, the part files) and its readers, read_export and
read_export_stream, are streamlets.state.export_files' (re-exported here).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime.checkpoint import (STATE, CheckpointFormatError, committed_batches, pin_state_partitions, query_checkpoint,
                                  query_id)
from ..runtime.storage import Storage, is_local, join, local_path, storage_for
from .export_files import (CSV_OPTIONS, FORMATS, MANIFEST, MANIFEST_VERSION, TEXT_OPTIONS, ExportedStore, ExportManifest,
                           StateExportError, read_export, read_export_stream, to_csv_columns)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FORMATS", "MANIFEST", "ExportManifest", "ExportedStore", "StateExportError", "ensure_state_store_coordinator",
           "export_state", "last_committed_batch", "read_export", "read_export_stream", "read_raw_state", "read_state",
           "stateful_operators"]

# --- checkpoint files (read by streamlets.runtime.checkpoint) ----------------------------------

def _checkpoint_dir(checkpoint: str | Path, spark: "SparkSession | None" = None) -> tuple[Storage, str]:
    """The storage of a query checkpoint and its path (a local one absolute)."""
    storage = storage_for(str(checkpoint), spark)
    try:
        return storage, query_checkpoint(storage, checkpoint)
    except CheckpointFormatError as e:
        raise StateExportError(str(e)) from None


def last_committed_batch(checkpoint: str | Path, spark: "SparkSession | None" = None) -> int | None:
    """The id of the checkpoint's last committed micro-batch (highest `commits/N`), or None if no
    batch has committed yet.

    A local path, or a Hadoop URI read through `spark`'s Hadoop settings. Raises StateExportError
    if `checkpoint` is not a query checkpoint folder (no `metadata` file or `offsets/` folder).
    """
    storage, path = _checkpoint_dir(checkpoint, spark)
    committed = committed_batches(storage, path)
    return committed[-1] if committed else None


def _committed_batch(storage: Storage, path: str, batch_id: int | None) -> int:
    """`batch_id` (default: the last committed one) after checking that it is still committed."""
    committed = committed_batches(storage, path)
    if not committed:
        raise StateExportError(f"{path}: no committed batch yet (commits/ is empty); let the query finish a batch first")
    if batch_id is None:
        return committed[-1]
    if batch_id in committed:
        return batch_id
    if batch_id > committed[-1]:
        raise StateExportError(
            f"{path}: batch {batch_id} is not committed (committed batches: {committed[0]}..{committed[-1]}); "
            "choose one of those"
        )
    raise StateExportError(
        f"{path}: batch {batch_id} is no longer retained (oldest kept: {committed[0]}); Spark keeps the last "
        "spark.sql.streaming.minBatchesToRetain batches (default 100), raise it on the query to keep more"
    )


# --- reading state ------------------------------------------------------------------------------

def stateful_operators(spark: "SparkSession", checkpoint: str | Path) -> list[dict[str, Any]]:
    """The checkpoint's stateful operators, one dict per state store, from Spark's `state-metadata`
    data source (which reads `state/<operatorId>/_metadata`), ordered by operator id and store:

        {"operator_id": int, "operator_name": str (e.g. "stateStoreSave", "dedupe"),
         "store_name": str ("default" except for joins), "partitions": int,
         "min_batch_id": int, "max_batch_id": int}   # range of batch ids in commits/

    Returns [] for a stateless query (no `state/` folder). Raises StateExportError if the path is
    not a checkpoint, or if `state/` has operator folders whose metadata Spark cannot read
    (Spark then lists no operator at all and only logs a warning).
    """
    storage, path = _checkpoint_dir(checkpoint, spark)
    if not any(name.isdigit() for name in storage.children(join(path, STATE))):
        return []  # stateless: skip a Spark job that would only log "Failed to find operator metadata"
    rows = spark.read.format("state-metadata").load(path).orderBy("operatorId", "stateStoreName").collect()
    if not rows:
        raise StateExportError(
            f"{path}/{STATE} has operator folders but Spark cannot read their metadata (state/<id>/_metadata); "
            "a folder without it (written by an older Spark, or by hand) hides every operator - "
            "see the warning 'Failed to find operator metadata' in the Spark log"
        )
    return [
        {"operator_id": r.operatorId, "operator_name": r.operatorName, "store_name": r.stateStoreName,
         "partitions": r.numPartitions, "min_batch_id": r.minBatchId, "max_batch_id": r.maxBatchId}
        for r in rows
    ]


def _operator(spark: "SparkSession", path: str, operator_id: int, store_name: str) -> dict[str, Any]:
    # Checked before reading: for an unknown operator or store the `statestore` source creates empty
    # state/<op>/<partition>/<store> folders in the checkpoint, which then hide it from state-metadata.
    ops = stateful_operators(spark, path)
    for op in ops:
        if op["operator_id"] == operator_id and op["store_name"] == store_name:
            return op
    known = ", ".join(f"{o['operator_id']}/{o['store_name']}" for o in ops) or "none (stateless query)"
    raise StateExportError(f"{path}: no state store {operator_id}/{store_name!r}; stateful operator/store: {known}")


def ensure_state_store_coordinator(spark: "SparkSession") -> None:
    """Make sure the driver's StateStoreCoordinator exists. Spark 4.1's `statestore` reader asks it
    where state store instances are loaded and fails when no streaming query was ever started in
    this SparkContext; Spark creates it with the session's StreamingQueryManager (`spark.streams`)."""
    spark._jsparkSession.streams()  # noqa: SLF001 (constructing the manager registers the coordinator)


def read_raw_state(spark: "SparkSession", path: str | Path, operator_id: int, store_name: str, batch: int) -> "DataFrame":
    """Spark's `statestore` rows: key (struct), value (struct), partition_id (int). The state's
    partition count is pinned in the committed batches first where Spark left it out
    (runtime.checkpoint.pin_state_partitions), which its reader needs."""
    ensure_state_store_coordinator(spark)
    pin_state_partitions(storage_for(str(path), spark), str(path))
    return (spark.read.format("statestore").option("batchId", batch).option("operatorId", operator_id)
            .option("storeName", store_name).load(str(path)))


def _flatten(raw: "DataFrame") -> "DataFrame":
    """key/value struct fields as top-level `key_<field>` / `value_<field>` columns, then partition_id."""
    from pyspark.sql.types import NullType, StructField, StructType

    cols = []
    for side in ("key", "value"):
        dtype = raw.schema[side].dataType
        if not isinstance(dtype, StructType):
            cols.append(raw[side])
            continue
        struct = raw[side]
        names = [f.name for f in dtype.fields]
        if len(set(names)) < len(names):
            # a name twice (`count(1)` beside `avg`'s buffer, which keeps `sum` and `count`): the later
            # ones get `_2`, `_3`... (a struct cast renames by position)
            unique = [n if not names[:i].count(n) else f"{n}_{names[:i].count(n) + 1}" for i, n in enumerate(names)]
            dtype = StructType([StructField(u, f.dataType, f.nullable) for u, f in zip(unique, dtype.fields, strict=True)])
            struct = struct.cast(dtype)
        # void fields (dropDuplicates keeps value {__dummy__: null}) hold nothing, and no file format stores them
        cols += [struct.getField(f.name).alias(f"{side}_{f.name}")
                 for f in dtype.fields if not isinstance(f.dataType, NullType)]
    return raw.select(*cols, raw["partition_id"])


def read_state(
    spark: "SparkSession",
    checkpoint: str | Path,
    operator_id: int = 0,
    store_name: str = "default",
    batch_id: int | None = None,
) -> "DataFrame":
    """One state store as it was after committing batch `batch_id` (default: the last committed).

    Columns: `key_<field>` for each field of the store's key struct, `value_<field>` for each field
    of its value struct (nested structs stay structs), then `partition_id` (int, the state store
    partition, 0..spark.sql.shuffle.partitions-1 of the query's first run). For a
    `groupBy("k").agg(count("*"), sum("v"))`: key_k, value_count, value_sum, partition_id.

    Reads through Spark's `statestore` data source; the DataFrame is lazy. Raises StateExportError
    if the path is not a checkpoint, the batch is not committed or no longer retained
    (spark.sql.streaming.minBatchesToRetain), or the operator/store does not exist. State files
    missing although the batch is committed surface on the first action, as Spark's
    CANNOT_LOAD_STATE_STORE error.
    """
    storage, path = _checkpoint_dir(checkpoint, spark)
    batch = _committed_batch(storage, path, batch_id)
    _operator(spark, path, operator_id, store_name)
    return _flatten(read_raw_state(spark, path, operator_id, store_name, batch))


# --- export -------------------------------------------------------------------------------------

def _write(table: "DataFrame", dest: str, fmt: str) -> None:
    if fmt == "parquet":
        table.write.parquet(str(dest))
    elif fmt == "jsonl":  # Spark's JSON writer writes JSON Lines; keep nulls so every line has every column
        table.write.options(**TEXT_OPTIONS).option("ignoreNullFields", False).json(str(dest))
    else:
        to_csv_columns(table).write.options(**CSV_OPTIONS).csv(str(dest), header=True)


def _export_store(
    spark: "SparkSession", path: str, batch: int, op: dict[str, Any], out: str, fmt: str
) -> dict[str, Any]:
    """Write one store to `out/op-<id>-<store>/` and return its manifest entry."""
    raw = read_raw_state(spark, path, op["operator_id"], op["store_name"], batch)
    table = _flatten(raw)
    rel = f"op-{op['operator_id']}-{op['store_name']}"
    try:
        rows = table.count()  # loads every partition's state: missing state files fail here, before writing
        _write(table, join(out, rel), fmt)
    except Exception as e:  # pyspark's captured exceptions or Py4JJavaError; only the message tells them apart
        if "CANNOT_LOAD_STATE_STORE" in str(e):
            raise StateExportError(
                f"{path}: state files of operator {op['operator_id']}/{op['store_name']} for batch {batch} are gone; "
                "Spark deletes those older than the last spark.sql.streaming.minBatchesToRetain batches - "
                "export a later batch"
            ) from e
        raise
    return ExportedStore(
        operator_id=op["operator_id"], operator_name=op["operator_name"], store_name=op["store_name"],
        partitions=op["partitions"], rows=rows, path=rel,
        key_schema=raw.schema["key"].dataType.simpleString(),
        value_schema=raw.schema["value"].dataType.simpleString(),
        columns=table.columns,
        spark_schema=table.schema.jsonValue(),  # read_export reads JSON and CSV back with it, so types round-trip
    )


def export_state(
    spark: "SparkSession",
    checkpoint: str | Path,
    out_dir: str | Path,
    fmt: str = "jsonl",
    batch_id: int | None = None,
    operators: list[int] | None = None,
) -> dict[str, Any]:
    """Write every state store of the checkpoint (or of `operators`, a list of operator ids) as it
    was after committing batch `batch_id` (default: the last committed) to `out_dir`, and return
    the manifest, also written to `out_dir/_export.json` (last, so its presence marks a complete export):

        {"version": 1, "checkpoint": abs path, "batch_id": int, "format": fmt,
         "spark_version": str, "created_at": UTC ISO-8601 (seconds), "query_id": id in `metadata`,
         "operators": [{"operator_id", "operator_name", "store_name", "partitions", "rows",
                        "path": "op-<id>-<store>" (relative to out_dir), "key_schema", "value_schema"
                        (Spark simpleString of the raw key/value structs), "columns": [names],
                        "schema": the exported columns' Spark schema (StructType JSON)}]}

    Each store goes to `out_dir/op-<id>-<store>/` with read_state's columns, as Spark part files:
    fmt "jsonl" (DataFrameWriter.json: one JSON object per line), "parquet", or "csv" (with a
    header; struct, array and map columns as JSON text, binary as base64). JSON and CSV write
    timestamps as ISO-8601 text in UTC with microseconds (e.g. 2024-01-03T10:00:00.000000Z).
    `out_dir` is a local folder or Hadoop URI that must not exist or be empty; its manifest is
    written whole or not at all (Storage.write_text).

    Raises StateExportError for an unknown format, a non-empty `out_dir`, a path that is not a
    checkpoint, no committed batch, a batch that is not committed or no longer retained
    (spark.sql.streaming.minBatchesToRetain, which also bounds state files), unknown operator ids,
    or a stateless query.
    """
    import pyspark

    if fmt not in FORMATS:
        raise StateExportError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    local_out = is_local(str(out_dir))
    out = str(local_path(str(out_dir)).expanduser().resolve()) if local_out else str(out_dir).rstrip("/")
    dst = storage_for(out, spark)
    if dst.exists(out) and (local_out and not Path(out).is_dir() or dst.children(out)):
        raise StateExportError(f"{out} already exists and is not empty; choose a new folder for the export")
    storage, path = _checkpoint_dir(checkpoint, spark)
    batch = _committed_batch(storage, path, batch_id)
    ops = stateful_operators(spark, path)
    if not ops:
        raise StateExportError(
            f"{path}: the query is stateless (no stateful operators under state/), there is no state to export"
        )
    if operators is not None:
        known = sorted({o["operator_id"] for o in ops})
        unknown = sorted(set(operators) - set(known))
        if unknown:
            raise StateExportError(f"{path}: no stateful operator {unknown}; its stateful operators: {known}")
        ops = [o for o in ops if o["operator_id"] in operators]

    if local_out:
        Path(out).mkdir(parents=True, exist_ok=True)
    manifest = ExportManifest(
        version=MANIFEST_VERSION, checkpoint=str(path), batch_id=batch, format=fmt,
        spark_version=pyspark.__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        query_id=query_id(storage, path),
        operators=[_export_store(spark, path, batch, op, out, fmt) for op in ops],
    ).as_dict()
    dst.write_text(join(out, MANIFEST), json.dumps(manifest, indent=2) + "\n")  # last: the export is complete
    return manifest


