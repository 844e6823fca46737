"""Files in and out: the ingress and egress streamlets most applications start and end with.

`FileIngress` reads the files dropped in a volume mount's folder as a stream (Spark's file
source) and writes their rows to its outlet; `JsonLinesEgress` writes each micro-batch of its
inlet to one JSON Lines file in a volume mount's folder, replacing the file when Spark replays
the batch, so the folder holds every batch exactly once. They are what Kafka Connect's
FileStreamSource and FileStreamSink and Quix Streams' FileSource and FileSink are to those
platforms. A subclass declares its ports and mount and sets a few class attributes:

    class Orders(FileIngress):
        source = VolumeMount("source", "/mnt/orders", "ReadOnlyMany")
        outlet = AvroOutlet("out", "schemas/order.avsc", key="customer")
        file_schema = "id LONG, customer STRING, amount DOUBLE, placed_at TIMESTAMP"

    class Totals(JsonLinesEgress):
        inlet = AvroInlet("in", "schemas/total.avsc")
        output = VolumeMount("output", "/mnt/output")
        subfolder = "totals"
        latest_by = ("customer",)    # keep each batch's newest row per customer...
        version = "updated_at"       # ...newest by this column
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import StreamletError
from .ports import AvroInlet, AvroOutlet
from .sources import MOUNT, load_named, source_name
from .streamlet import Streamlet
from .volumes import VolumeMount

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .logic import LogicContext

# Spark's file source options the ingress sets unless file_options says otherwise: CSV files
# have a header row; a malformed file stops the query (named in its error) instead of reading
# nulls or dropping rows (DataStreamReader's `mode`, PERMISSIVE by default in Spark).
INGRESS_DEFAULTS: Mapping[str, Mapping[str, str]] = {"csv": {"header": "true", "mode": "FAILFAST"},
                                                     "json": {"mode": "FAILFAST"}}


def _single(cls: type[Streamlet], what: str, items: Sequence[Any]) -> Any:
    if len(items) != 1:
        found = ", ".join(repr(getattr(i, "name", i)) for i in items) or "none"
        raise StreamletError(f"{cls.class_name()}: a {cls.__mro__[1].__name__} declares exactly one {what} "
                             f"(found: {found})")
    return items[0]


def read_files(ctx: "LogicContext", mount: VolumeMount | str, schema: str, *, file_format: str = "csv",
               files_per_trigger: int | None = None, options: Mapping[str, Any] | None = None) -> "DataFrame":
    """A streaming DataFrame of the files in a volume mount's folder (Spark's file source,
    `spark.readStream.format(file_format)`): columns as `schema` declares them (Spark DDL, e.g.
    "id LONG, name STRING"), the oldest file first; files arriving later are read as they come.
    File names starting with `.` or `_` are skipped (Spark's rule), so write a file under such a
    name and rename it when complete. `files_per_trigger`: at most that many files per
    micro-batch (Spark's `maxFilesPerTrigger`; None: every new file). `options` come on top of
    INGRESS_DEFAULTS (CSV: a header row; CSV and JSON: FAILFAST, a malformed file fails the query).
    `file_format`: any format of Spark's file source (csv, json, parquet, orc, text). The source is
    named `mount_<mount>` in the query's checkpoint (streamlets.sources)."""
    merged: dict[str, Any] = {**INGRESS_DEFAULTS.get(file_format, {}), **(options or {})}
    if files_per_trigger is not None:
        merged["maxFilesPerTrigger"] = files_per_trigger
    reader = ctx.spark.readStream.format(file_format).schema(schema)
    for key, value in merged.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    name = mount if isinstance(mount, str) else mount.name
    return load_named(ctx.spark, reader, source_name(MOUNT, name), str(ctx.mounted_path(mount)))


class FileIngress(Streamlet):
    """Reads the files dropped in its one `ReadOnlyMany` volume mount (read_files) and writes their
    rows, through `transform`, to its one outlet. Class attributes: `file_schema` (Spark DDL of the
    files' columns; required), `file_format` ("csv"), `file_options` (Spark's file source options,
    on top of INGRESS_DEFAULTS), `files_per_trigger` (Spark's maxFilesPerTrigger; None: every new
    file in the next micro-batch). The files' rows reach the outlet in the order Spark reads the
    files (oldest first). Raises StreamletError at start if the ports, mount or schema are missing."""

    file_format: ClassVar[str] = "csv"
    file_schema: ClassVar[str] = ""
    file_options: ClassVar[Mapping[str, Any]] = {}
    files_per_trigger: ClassVar[int | None] = None

    @classmethod
    def is_abstract(cls) -> bool:
        """True for FileIngress itself (a base: subclasses set file_schema and the outlet), else as
        Streamlet.is_abstract."""
        return cls is FileIngress or super().is_abstract()

    def transform(self, ctx: "LogicContext", files: "DataFrame") -> "DataFrame":
        """The outlet's records from the files' rows; by default the columns named as the
        outlet's fields, in schema order (a missing one fails the start with Spark's message)."""
        outlet = _single(type(self), "outlet", self.shape().outlets)
        return files.select(*outlet.schema.field_names)

    def create_logic(self, ctx: "LogicContext") -> None:
        """One streaming query: the files of the single ReadOnlyMany volume mount, read with file_schema and
        file_format (Spark's file source; files_per_trigger is its maxFilesPerTrigger), through transform
        into the single outlet. Raises StreamletError if the class has no single outlet or such mount, or
        no file_schema."""
        cls = type(self)
        outlet: AvroOutlet = _single(cls, "outlet", self.shape().outlets)
        mount = _single(cls, "ReadOnlyMany volume mount",
                        [m for m in cls.volume_mounts() if m.read_only])
        if not cls.file_schema:
            raise StreamletError(f"{cls.class_name()}: set file_schema, the files' columns in Spark DDL "
                                 f"(e.g. \"id LONG, name STRING\")")
        files = read_files(ctx, mount, cls.file_schema, file_format=cls.file_format,
                           files_per_trigger=cls.files_per_trigger, options=cls.file_options)
        ctx.write_stream(self.transform(ctx, files), outlet)


def iso_utc(moment: datetime) -> str:
    """ISO 8601 text in UTC ending in `Z`, in milliseconds ("2013-01-01T10:00:00.000Z"), or in
    microseconds where the moment has them. A naive datetime is taken as local time (PySpark's
    form of Spark's TIMESTAMP)."""
    utc = moment.astimezone(timezone.utc)
    spec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    return utc.isoformat(timespec=spec).replace("+00:00", "Z")


def json_value(value: Any) -> Any:
    """A value of a Spark row as JSON holds it: timestamps as iso_utc text, dates as "YYYY-MM-DD",
    decimals as their exact text, bytes as base64 text, structs and maps as objects, arrays as
    lists; strings, numbers, booleans and null as they are."""
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if hasattr(value, "asDict"):  # a pyspark Row (a struct)
        return json_value(value.asDict())
    return value


def latest_per_key(rows: Iterable[Mapping[str, Any]], key: Sequence[str], version: str | None) -> list[Mapping[str, Any]]:
    """The newest row of each `key` (by the `version` column; None: the last one), in key order.
    Among rows of equal version the later one wins (Spark's collect keeps a Kafka partition's
    order, and one key's versions are in one partition)."""
    latest: dict[tuple, Mapping[str, Any]] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        if k not in latest or version is None or row[version] >= latest[k][version]:
            latest[k] = row
    return [latest[k] for k in sorted(latest, key=lambda k: tuple((v is not None, v) for v in k))]  # nulls first


def batch_file(folder: Path, batch_id: int) -> Path:
    """The file of one micro-batch: `<folder>/batch-<id, 8 digits>.jsonl`."""
    return folder / f"batch-{batch_id:08d}.jsonl"


def write_batch_file(folder: Path, batch_id: int, records: Iterable[Mapping[str, Any]]) -> Path | None:
    """Write `records` (json_value applied to each value) to the batch's file as JSON Lines, one
    compact object per line in the records' key order; None (no file) when there are none. The
    file is written under a hidden name (`.` prefix), flushed to disk and renamed over the final
    name (os.replace): a reader never sees half a file, and a batch Spark replays after a failure
    (same id) replaces its own file. Raises OSError from the file system."""
    lines = [json.dumps({k: json_value(v) for k, v in r.items()}, separators=(",", ":")) + "\n" for r in records]
    if not lines:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = batch_file(folder, batch_id)
    tmp = folder / f".{path.name}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


class JsonLinesEgress(Streamlet):
    """Writes each micro-batch of its one inlet to one JSON Lines file (write_batch_file) in the
    `subfolder` of its one writable volume mount: `batch-<id>.jsonl` (query `<streamlet>.<query>`), one object per record with
    the inlet's fields in schema order (values as json_value gives them; local timestamps,
    TIMESTAMP_NTZ, as their text without a zone). Exactly-once per batch:
    a replayed batch replaces its own file. With `latest_by` (key columns) a batch keeps the newest
    record per key by the `version` column (latest_per_key), in key order: what an upserting
    (update-mode) stream's reader wants. Each batch is collected to the driver: meant for batches
    of up to some hundred thousand records; for more, use Spark's own file sink
    (`ctx.start_query(df.writeStream.format("parquet")...)`). Raises StreamletError at start if
    the inlet or mount is missing."""

    subfolder: ClassVar[str] = ""
    query: ClassVar[str] = "files"
    latest_by: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str | None] = None

    @classmethod
    def is_abstract(cls) -> bool:
        """True for JsonLinesEgress itself (a base: subclasses declare the inlet and mount), else as
        Streamlet.is_abstract."""
        return cls is JsonLinesEgress or super().is_abstract()

    def create_logic(self, ctx: "LogicContext") -> None:
        """One streaming query: the single inlet's records as JSON lines (Spark's json file sink, timestamps
        as epoch microseconds) in the single writable volume mount, under `subfolder` when set. Raises
        StreamletError if the class has no single inlet or writable mount."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import TimestampNTZType, TimestampType

        cls = type(self)
        inlet: AvroInlet = _single(cls, "inlet", self.shape().inlets)
        mount = _single(cls, "writable volume mount",
                        [m for m in cls.volume_mounts() if not m.read_only])
        folder = ctx.mounted_path(mount) / cls.subfolder if cls.subfolder else ctx.mounted_path(mount)
        records = ctx.read_stream(inlet)
        # Timestamps leave the JVM as epoch microseconds: exact, and independent of the session's
        # and the Python process's time zones (PySpark's datetimes are naive local times).
        instants = [f.name for f in records.schema.fields if isinstance(f.dataType, TimestampType)]
        # Local timestamps (TIMESTAMP_NTZ: Avro's local-timestamp-*) have no zone to convert: their text as it is.
        local = [f.name for f in records.schema.fields if isinstance(f.dataType, TimestampNTZType)]
        micros = records.select(*[F.unix_micros(c).alias(c) if c in instants
                                  else F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias(c) if c in local
                                  else F.col(c) for c in records.columns])

        def write(batch: "DataFrame", batch_id: int) -> None:
            rows: list[Mapping[str, Any]] = [r.asDict() for r in batch.collect()]
            if cls.latest_by:
                rows = latest_per_key(rows, cls.latest_by, cls.version)
            write_batch_file(folder, batch_id, ({c: _instant(r[c]) if c in instants else r[c] for c in r} for r in rows))

        ctx.start_query(micros.writeStream.foreachBatch(write), cls.query)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _instant(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=micros)
