"""Dead letters: inlet values that do not decode, sent to a topic with where they came from.

The hot path stays in the JVM: `from_avro` runs in PERMISSIVE mode and an observed metric counts
malformed values per micro-batch (Dataset.observe). Only when a batch reports some does a scan
read that batch's offset range again (a Spark batch query), find the malformed values, describe
each one's decoding error (fastavro) and write them to the dead-letter topic. A ledger next to
the query's checkpoint records how far each inlet topic was scanned, so a streamlet killed
between a micro-batch and its scan rescans the gap when it starts again: nothing is lost.
Dead letters are at-least-once (a scan may repeat after a crash).

The ledger moves at every micro-batch with malformed values, and otherwise at most every
LEDGER_INTERVAL_SECONDS (each move is a file written, one PUT on an object store); a stop
writes what is pending. A streamlet killed in between rescans at most that much input when it
starts again, and finds nothing new in it.
"""

from __future__ import annotations

import ast
import json
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..avro_limits import max_value_bytes
from .checkpoint import committed_batches, dead_letter_ledger, source_offsets
from .codec import MALFORMED, RECORD, decode_value
from .storage import join, storage_for
from ..schema import AvroSchema, decode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..schema_registry import SchemaRegistry

log = logging.getLogger(__name__)

LEDGER_INTERVAL_SECONDS = 10.0
"""How often, at most, an inlet's dead-letter ledger moves forward over micro-batches with no
malformed value (seconds): what a restart may rescan."""

DEAD_LETTER_SCHEMA = AvroSchema.load(
    {
        "type": "record",
        "name": "DeadLetter",
        "namespace": "io.streamlets",
        "doc": "A value read from an inlet's topic that is not a valid Avro encoding of the inlet's schema.",
        "fields": [
            {"name": "app_id", "type": "string"},
            {"name": "streamlet", "type": "string"},
            {"name": "inlet", "type": "string"},
            {"name": "topic", "type": "string"},
            {"name": "partition", "type": "int"},
            {"name": "offset", "type": "long"},
            {"name": "timestamp", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
            {"name": "key", "type": ["null", "bytes"], "default": None},
            {"name": "value", "type": ["null", "bytes"], "default": None, "doc": "the raw value, as read"},
            {"name": "schema_fingerprint", "type": "string", "doc": "CRC-64-AVRO of the inlet's schema"},
            {"name": "error", "type": "string"},
        ],
    }
)


def observation_name(inlet: str) -> str:
    """Name of the observed metric (Dataset.observe) counting an inlet's malformed values."""
    return f"dead-letters:{inlet}"


def counted_records(decoded: "DataFrame", inlet: str) -> "DataFrame":
    """`decoded` (decode_value's, permissive: with MALFORMED) without its malformed values, both
    counted first in the observed metric observation_name(inlet) (Dataset.observe: `records`,
    `malformed`, per micro-batch), which tells the runtime which batches to scan for dead letters.
    The observation costs a micro-batch a few milliseconds (bench/README.md, bench_inlet_decode.py)."""
    from pyspark.sql import functions as F

    observed = decoded.observe(
        observation_name(inlet),
        F.count(F.lit(1)).alias("records"),
        F.sum(F.col(MALFORMED).cast("long")).alias("malformed"),
    )
    return observed.where(~F.col(MALFORMED))


@dataclass(frozen=True)
class InletRead:
    """An inlet read by a streamlet: what a scan needs to re-read and re-decode its values."""

    streamlet: str
    inlet: str
    topic: str
    schema: AvroSchema
    writer: AvroSchema | None = None  # the producer's schema, when it differs
    check_trailing_bytes: bool = False
    registry: "SchemaRegistry | None" = None  # the topic carries the registry's wire format


@dataclass(frozen=True)
class ScanRequest:
    read: InletRead
    checkpoint: str
    start: dict[str, int] | None  # partition -> first offset; None: earliest
    end: dict[str, int]  # partition -> offset after the last one
    malformed: int  # how many the micro-batch reported; 0: only advance the ledger


def _ledger_path(checkpoint: str, inlet: str) -> str:
    return join(checkpoint, dead_letter_ledger(inlet))


def read_ledger(checkpoint: str, inlet: str, spark: "SparkSession | None" = None) -> dict[str, int] | None:
    """The inlet's dead-letter ledger in a query checkpoint (a folder or Hadoop URI, read through
    `spark`'s Hadoop settings: streamlets.runtime.storage): partition (as text) -> the offset up to
    which malformed values were written; None before the first scan."""
    path = _ledger_path(checkpoint, inlet)
    storage = storage_for(path, spark)
    return json.loads(storage.read_text(path)) if storage.exists(path) else None


def write_ledger(checkpoint: str, inlet: str, offsets: dict[str, int], spark: "SparkSession | None" = None) -> None:
    """Replace the inlet's dead-letter ledger with `offsets` (partition -> next offset to scan), whole or not
    at all (Storage.write_text: a temp file renamed locally, one PUT on an object store), creating the
    checkpoint folder if needed."""
    path = _ledger_path(checkpoint, inlet)
    storage_for(path, spark).write_text(path, json.dumps(offsets, sort_keys=True))


def committed_offsets(checkpoint: str, topic: str, spark: "SparkSession | None" = None) -> dict[str, int] | None:
    """End offsets of `topic` in the last committed micro-batch of a query's checkpoint.

    Reads Spark's offset log (`offsets/<batch>`: a version line, the batch metadata, then one
    line per source) for the last batch id in `commits/` (streamlets.runtime.checkpoint). None
    when nothing was committed. A folder or Hadoop URI, read through `spark`'s Hadoop settings.
    """
    storage = storage_for(checkpoint, spark)
    ids = committed_batches(storage, checkpoint)
    if not ids:
        return None
    for offsets in source_offsets(storage, checkpoint, ids[-1]):
        if isinstance(offsets, dict) and topic in offsets:
            return {p: int(o) for p, o in offsets[topic].items()}
    return None


def progress_offsets(value: Any) -> Any:
    """A source's offsets as reported in query progress, parsed: Spark 4.0 reports JSON text,
    PySpark 4.1's progress objects carry Python dicts (StreamingQuery.lastProgress) or their repr
    (SourceProgress built from JSON: `str(dict)`). None when there are none (a first batch)."""
    if value is None or isinstance(value, (dict, list)):
        return value
    text = str(value).strip()
    if not text or text == "null":
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None


def offsets_for(topic: str, offsets: Any) -> dict[str, int] | None:
    """Per-partition offsets of `topic` from a Kafka source's progress offsets (see progress_offsets)."""
    parsed = progress_offsets(offsets)
    if isinstance(parsed, dict) and isinstance(parsed.get(topic), dict):
        return {str(p): int(o) for p, o in parsed[topic].items()}
    return None


class DeadLetterWriter:
    """Scans offset ranges for malformed values and writes them to the dead-letter topic.

    Scans run on one background thread, in the order requested, so that the ledger only moves
    forward. `written` counts dead letters written per (streamlet, inlet).
    """

    def __init__(self, spark: "SparkSession", transport, topic: str | None, app_id: str,
                 ledger_interval: float = LEDGER_INTERVAL_SECONDS) -> None:
        self.spark = spark
        self.transport = transport
        self.topic = topic
        self.app_id = app_id
        self.ledger_interval = ledger_interval
        self.written: dict[tuple[str, str], int] = {}
        self.errors: list[str] = []
        # (checkpoint, inlet) -> end offsets scanned and not yet in its ledger; when it was last written
        self._unwritten: dict[tuple[str, str], dict[str, int]] = {}
        self._written_at: dict[tuple[str, str], float] = {}
        self._queue: queue.Queue[ScanRequest | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="dead-letters", daemon=True)
        self._thread.start()

    def submit(self, request: ScanRequest) -> None:
        """Queue a scan of an offset range for the background thread (scans run in order); returns at once."""
        self._queue.put(request)

    def recover(self, read: InletRead, checkpoint: str) -> None:
        """Before a query starts: rescan what its checkpoint committed beyond the ledger."""
        committed = committed_offsets(checkpoint, read.topic, self.spark)
        if committed is None:
            return
        ledger = read_ledger(checkpoint, read.inlet, self.spark)
        if ledger is not None and all(ledger.get(p, 0) >= o for p, o in committed.items()):
            return
        log.info("dead letters: rescanning %s from %s to %s after a restart", read.topic, ledger, committed)
        # Unknown counts: scan with malformed=-1 so that the range is always read.
        self.submit(ScanRequest(read, checkpoint, ledger, committed, malformed=-1))

    def pending(self) -> int:
        """Scans submitted and not yet done (approximate, for idle checks)."""
        return self._queue.unfinished_tasks

    def drain(self, timeout: float | None = None) -> None:
        """Wait until every submitted scan is done and every ledger written (at most `timeout` seconds)."""
        done = threading.Event()
        self._queue.put(_Barrier(done))  # type: ignore[arg-type]
        done.wait(timeout)

    def close(self) -> None:
        """Stop the background thread after the scans queued so far and the ledgers' last writes,
        waiting at most 60 seconds."""
        self._queue.put(None)
        self._thread.join(timeout=60)

    def _work(self) -> None:
        while True:
            request = self._queue.get()
            try:
                if request is None:
                    self._write_ledgers(due_only=False)
                    return
                if isinstance(request, _Barrier):
                    self._write_ledgers(due_only=False)
                    request.done.set()
                    continue
                self._handle(request)
            finally:
                self._queue.task_done()

    def _handle(self, request: ScanRequest) -> None:
        try:
            if request.malformed != 0:
                n = self.scan(request)
                key = (request.read.streamlet, request.read.inlet)
                self.written[key] = self.written.get(key, 0) + n
        except Exception as e:  # keep the streamlet running; the ledger stays behind for a rescan
            msg = f"dead-letter scan of {request.read.topic} {request.start}..{request.end} failed: {e}"
            log.error(msg)
            self.errors.append(msg)
            return
        ledger = (request.checkpoint, request.read.inlet)
        unwritten = self._unwritten.setdefault(ledger, {})
        for p, o in request.end.items():
            unwritten[p] = max(unwritten.get(p, 0), o)
        if request.malformed != 0:  # what was written to the dead-letter topic is recorded at once
            self._written_at.pop(ledger, None)
        self._write_ledgers(due_only=True)

    def _write_ledgers(self, due_only: bool) -> None:
        """Move the ledgers forward to what was scanned: those last written LEDGER_INTERVAL_SECONDS
        ago or more (or never, or after dead letters) when `due_only`, else all of them."""
        now = time.monotonic()
        for ledger, unwritten in list(self._unwritten.items()):
            last = self._written_at.get(ledger)
            if due_only and last is not None and now - last < self.ledger_interval:
                continue
            checkpoint, inlet = ledger
            try:
                merged = dict(read_ledger(checkpoint, inlet, self.spark) or {})
                for p, o in unwritten.items():
                    merged[p] = max(merged.get(p, 0), o)
                write_ledger(checkpoint, inlet, merged, self.spark)
            except Exception as e:  # kept for the next try; a restart rescans from the ledger on disk
                msg = f"dead-letter ledger of {inlet} in {checkpoint} not written: {e}"
                log.error(msg)
                self.errors.append(msg)
                continue
            del self._unwritten[ledger]
            self._written_at[ledger] = now

    def scan(self, request: ScanRequest) -> int:
        """Write the malformed values of one offset range to the dead-letter topic; returns how many."""
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro
        from pyspark.sql.functions import udf

        read = request.read
        if self.topic is None:
            log.warning("%d malformed value(s) on %s but no dead-letter topic is configured", request.malformed, read.topic)
            return 0
        raw = self.transport.read_range(self.spark, read.topic, request.start, request.end)
        bad = decode_value(raw, read.schema, permissive=True, writer=read.writer,
                           check_trailing_bytes=read.check_trailing_bytes,
                           registry=read.registry).where(F.col(MALFORMED)).drop(RECORD, MALFORMED)
        if read.registry is not None:  # the header, the id, the writer schema: the JVM's reason
            from .schema_registry import problem

            def describe(value):
                return F.coalesce(problem(self.spark, value, read.registry, read.schema),
                                  F.lit(f"decodes as {read.schema.name} only with a different field layout "
                                        "(Spark read it as all nulls)"))
        else:
            describe = udf(_describer(read.writer or read.schema, max_value_bytes()), "string")
        envelope = bad.select(
            F.lit(self.app_id).alias("app_id"),
            F.lit(read.streamlet).alias("streamlet"),
            F.lit(read.inlet).alias("inlet"),
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            F.col("timestamp"),
            F.col("key"),
            F.col("value"),
            F.lit(read.schema.fingerprint).alias("schema_fingerprint"),
            describe(F.col("value")).alias("error"),
        ).cache()
        try:
            n = envelope.count()
            if n:
                out = envelope.select(
                    F.format_string("%s-%d-%d", "topic", "partition", "offset").cast("binary").alias("key"),
                    to_avro(F.struct(*DEAD_LETTER_SCHEMA.field_names), DEAD_LETTER_SCHEMA.json).alias("value"),
                )
                self.transport.write_batch(out, self.topic)
                log.warning("%d malformed value(s) from %s (%s.%s) written to %s", n, read.topic, read.streamlet, read.inlet, self.topic)
            return n
        finally:
            envelope.unpersist()


class _Barrier:
    def __init__(self, done: threading.Event) -> None:
        self.done = done


def _describer(schema: AvroSchema, limit: int | None = None) -> Callable[[bytes | None], str]:
    """A function giving the decoding error of one value (runs on executors, rare path only).

    `limit`: the decoder's length limit (streamlets.avro_limits), named when a value that
    fastavro reads is longer than it."""
    parsed_json = schema.json

    def describe(value: bytes | None) -> str:
        if value is None:
            return "null value (tombstone): a record was expected"
        from streamlets.schema import AvroSchema as _S

        s = _S.load(parsed_json)
        try:
            decode(s, bytes(value))
        except Exception as e:  # the decoder's own words are the most useful error
            return f"not a valid Avro encoding of {s.name}: {type(e).__name__}: {e}"[:1000]
        if limit is not None and len(value) > limit:
            return (f"a string, bytes, array or map of this {s.name} is longer than the decoders' limit of {limit:,} "
                    "(Avro's org.apache.avro.limits.*; raise it with $STREAMLETS_MAX_VALUE_BYTES where topics allow "
                    "larger messages)")
        return f"decodes as {s.name} only with a different field layout (Spark read it as all nulls)"

    return describe
