"""A state export's files: the format export_state writes (`_export.json`, ExportManifest; JSON
Lines, Parquet or CSV part files) and reading one back, as a batch DataFrame (read_export) or as a
stream (read_export_stream, the reader of imported state the runtime uses through
streamlets.runtime.registry for StreamletContext.initial_state).

Writing an export (reading a checkpoint's state with Spark's state data sources) is
streamlets.state.export's job; this module reads no checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import StateError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["CSV_OPTIONS", "FORMATS", "MANIFEST", "MANIFEST_VERSION", "TEXT_OPTIONS", "ExportManifest", "ExportedStore",
           "StateExportError", "csv_text_type", "manifest_entry", "read_csv", "read_export", "read_export_stream",
           "to_csv_columns"]

FORMATS = ("jsonl", "parquet", "csv")
MANIFEST = "_export.json"
MANIFEST_VERSION = 1
# Timestamps as ISO-8601 text in UTC with microseconds, so JSON/CSV files do not depend on the
# session time zone and lose no precision (Spark's default text format stops at milliseconds).
TEXT_OPTIONS = {
    "timeZone": "UTC",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
# RFC 4180 quoting (a quote inside a field is doubled): Spark's CSV default escapes it with a
# backslash, which Python's csv, pandas and spreadsheets misread in the JSON text of struct columns.
CSV_OPTIONS = {**TEXT_OPTIONS, "escape": '"'}


class StateExportError(StateError):
    """State cannot be exported or read back; the message names the path, batch or operator and
    says what to do."""


class ExportedStore(BaseModel):
    """One state store in an export (an entry of `operators` in `_export.json`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    operator_id: int
    operator_name: str
    store_name: str
    partitions: int
    rows: int
    path: str  # "op-<id>-<store>", relative to the export folder
    key_schema: str  # Spark simpleString of the raw key struct
    value_schema: str
    columns: list[str]
    spark_schema: dict[str, Any] = Field(alias="schema")  # the exported columns' StructType JSON


class ExportManifest(BaseModel):
    """`_export.json`, written last into an export folder (JSON, indent 2). Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")

    version: int = MANIFEST_VERSION
    checkpoint: str  # absolute path
    batch_id: int
    format: str  # one of FORMATS
    spark_version: str
    created_at: str  # UTC ISO-8601, seconds
    query_id: str | None  # the id in the checkpoint's `metadata`
    operators: list[ExportedStore]

    def as_dict(self) -> dict[str, Any]:
        """The JSON object written to `_export.json` (and returned by export_state)."""
        return self.model_dump(mode="json", by_alias=True)


# --- CSV: complex columns as text ---------------------------------------------------------------

def csv_text_type(dtype: "DataType") -> str | None:
    """How a column is stored in CSV, which holds only flat values: "json", "base64" or None (as is)."""
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    if isinstance(dtype, (StructType, ArrayType, MapType)):
        return "json"
    return "base64" if isinstance(dtype, BinaryType) else None


def to_csv_columns(df: "DataFrame") -> "DataFrame":
    """`df` with struct, array and map columns as JSON text and binary ones as base64 (csv_text_type),
    as an export writes CSV; read_csv turns them back."""
    from pyspark.sql import functions as F

    def encode(name: str, dtype: "DataType") -> "Column":
        kind = csv_text_type(dtype)
        col = df[name]
        if kind == "json":
            col = F.to_json(col, TEXT_OPTIONS)
        elif kind == "base64":
            col = F.base64(col)
        return col.alias(name)

    return df.select(*(encode(f.name, f.dataType) for f in df.schema.fields))


def read_csv(spark: "SparkSession", where: str, schema: Any) -> "DataFrame":
    """CSV written by to_csv_columns, decoded back to `schema`'s types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    text = StructType([StructField(f.name, StringType() if csv_text_type(f.dataType) else f.dataType)
                       for f in schema.fields])
    df = spark.read.schema(text).options(**CSV_OPTIONS).csv(where, header=True)

    def decode(name: str, dtype: "DataType") -> "Column":
        kind = csv_text_type(dtype)
        col = df[name]
        if kind == "json":
            json_schema: Any = dtype  # a struct, array or map type (pyspark's stubs leave out MapType)
            col = F.from_json(col, json_schema, TEXT_OPTIONS)
        elif kind == "base64":
            col = F.unbase64(col)
        return col.alias(name)

    return df.select(*(decode(f.name, f.dataType) for f in schema.fields))


def manifest_entry(export_dir: str | Path, operator_id: int, store_name: str | None) -> tuple[Path, str, dict[str, Any]]:
    """(export folder, format, the manifest entry of one store as a JSON dict); StateExportError if
    the folder is no finished export (no or an invalid `_export.json`) or does not hold exactly that
    operator/store."""
    root = Path(export_dir).expanduser().resolve()
    if not (root / MANIFEST).is_file():
        raise StateExportError(f"{root} has no {MANIFEST}: not a finished state export; export again into a new folder")
    raw = json.loads((root / MANIFEST).read_text())
    if raw.get("version") != MANIFEST_VERSION:
        raise StateExportError(f"{root}/{MANIFEST}: manifest version {raw.get('version')} is not {MANIFEST_VERSION}")
    try:
        manifest = ExportManifest.model_validate(raw)
    except ValidationError as e:
        problem = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'top level'}: {err['msg']}" for err in e.errors())
        raise StateExportError(f"{root}/{MANIFEST} is not a state export manifest ({problem}); export again") from None
    found = [e.model_dump(mode="json", by_alias=True) for e in manifest.operators
             if e.operator_id == operator_id and store_name in (None, e.store_name)]
    if len(found) != 1:
        stores = ", ".join(f"{e.operator_id}/{e.store_name}" for e in manifest.operators)
        what = "several stores; pass store_name" if found else "no such operator/store"
        wanted = f"{operator_id}/{store_name}" if store_name else str(operator_id)
        raise StateExportError(f"{root}: operator {wanted}: {what} (export has {stores})")
    return root, manifest.format, found[0]


def read_export(
    spark: "SparkSession",
    export_dir: str | Path,
    operator_id: int = 0,
    store_name: str | None = None,
) -> "DataFrame":
    """One state store of an export made by export_state, with the columns and types read_state
    gave (JSON and CSV are read with the schema in the manifest; CSV's JSON/base64 text is decoded).

    `store_name` is needed only when the operator has several stores (stream-stream joins).
    Raises StateExportError if `export_dir` has no `_export.json` (not an export, or an
    unfinished one) or does not hold that operator/store.
    """
    from pyspark.sql.types import StructType

    root, fmt, entry = manifest_entry(export_dir, operator_id, store_name)
    where, schema = str(root / entry["path"]), StructType.fromJson(entry["schema"])
    if fmt == "parquet":
        df = spark.read.parquet(where)
    elif fmt == "jsonl":
        df = spark.read.schema(schema).options(**TEXT_OPTIONS).json(where)
    else:
        df = read_csv(spark, where, schema)
    return df.select(*(df[c] for c in entry["columns"]))


def read_export_stream(
    spark: "SparkSession",
    export_dir: str | Path,
    operator_id: int = 0,
    store_name: str | None = None,
    *,
    source_name: str | None = None,
) -> "DataFrame":
    """One state store of a JSON Lines or Parquet export as a *streaming* DataFrame (Spark's file
    source, with the manifest's schema), for a query that folds imported state into its own:
    union it with the query's input, and the file source reads the export once (its log in the
    checkpoint remembers it on restarts). Same columns as read_export. `source_name`: the
    source's name in the query's checkpoint (streamlets.sources), unnamed if None. Raises
    StateExportError for a CSV export (export as jsonl or parquet) and as read_export does."""
    from pyspark.sql.types import StructType

    from ..sources import load_named

    root, fmt, entry = manifest_entry(export_dir, operator_id, store_name)
    schema, where = StructType.fromJson(entry["schema"]), str(root / entry["path"])
    if fmt == "parquet":
        reader = spark.readStream.format("parquet").schema(schema)
    elif fmt == "jsonl":
        reader = spark.readStream.format("json").schema(schema).options(**TEXT_OPTIONS)
    else:
        raise StateExportError(f"{root}: a {fmt} export cannot be read as a stream; export as jsonl or parquet")
    df = load_named(spark, reader, source_name, where) if source_name else reader.load(where)
    return df.select(*(df[c] for c in entry["columns"]))
