"""Poison-record quarantine (opt-in per streamlet: `on-failure: quarantine`).

A streamlet declares `on_failure = "quarantine"` on its class, or the deploy config sets
`streamlets.<name>.on-failure = quarantine` (run config field `on_failure`). When one of its
queries fails, `Quarantine.handle`:

1. reads the failed micro-batch's offset ranges from the query's checkpoint (`offsets/N-1` to
   `offsets/N`, batch N not committed);
2. re-runs the streamlet's own logic over those ranges as bounded probes: a fresh scratch
   checkpoint, the Kafka source started at the batch's start offsets and filtered to the records
   under test, Spark's `noop` sink, one micro-batch (the dry-run path of StreamletContext). If
   the whole range does not fail, the failure does not depend on the records (an unreachable
   sink, a lost broker): it is not quarantined and stays a failure;
3. per inlet topic, bisects the range (the other inlets' records stay in) down to single
   records that fail alone;
4. writes each to the dead-letter topic (streamlets.runtime.deadletter.DEAD_LETTER_SCHEMA, the
   raw key and value, its topic, partition and offset, and the user's exception as `error`),
   records it in the quarantine ledger `<checkpoint root>/quarantine-ledger.json`, and restarts
   the streamlet: Spark replays batch N from its offset log and `skip_quarantined` filters the
   ledger's offsets out of the inlet (a Kafka-source filter on partition and offset; no filter
   at all while the ledger is empty, so the data path costs nothing when nothing fails).

Bounded: at most `MAX_PROBES` probe queries per failure and `MAX_ROUNDS` quarantines per
streamlet and run; past either, the failure stands.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..settings import ON_FAILURE as ON_FAILURE_SETTING, QUARANTINE, STOP
from .checkpoint import QUARANTINE_LEDGER, QUARANTINE_PROBE, scratch_name
from .failures import user_exception

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

ON_FAILURE = ON_FAILURE_SETTING.values  # stop, quarantine: streamlets.settings
MAX_PROBES = 200
MAX_ROUNDS = 20

# --- the ledger -----------------------------------------------------------------------------


def ledger_path(checkpoint_root: str) -> str:
    """The quarantine ledger of a streamlet: `<checkpoint_root>/quarantine-ledger.json`
    (checkpoint.QUARANTINE_LEDGER), a local path or a Hadoop URI."""
    return f"{checkpoint_root.rstrip('/')}/{QUARANTINE_LEDGER}"


def read_ledger(checkpoint_root: str, spark: "SparkSession | None" = None) -> list[dict[str, Any]]:
    """Quarantined records of a streamlet: dicts with query, inlet, topic, partition, offset,
    batch, error, time (epoch seconds). Empty when there is no ledger."""
    from .storage import storage_for

    storage = storage_for(checkpoint_root, spark)
    path = ledger_path(checkpoint_root)
    if not storage.exists(path):
        return []
    try:
        return list(json.loads(storage.read_text(path)).get("records") or [])
    except ValueError as e:
        raise ValueError(f"{path}: damaged quarantine ledger ({e}); move it aside to start without quarantined records") from None


def add_to_ledger(checkpoint_root: str, records: list[dict[str, Any]], spark: "SparkSession | None" = None) -> None:
    """Add records (dicts as read_ledger returns) to the streamlet's quarantine ledger, skipping those already
    in it (same topic, partition and offset); rewrites the whole file through the checkpoint root's storage
    (streamlets.runtime.storage), whose errors (OSError) propagate."""
    from .storage import storage_for

    storage = storage_for(checkpoint_root, spark)
    entries = read_ledger(checkpoint_root, spark)
    seen = {(e["topic"], int(e["partition"]), int(e["offset"])) for e in entries}
    entries += [r for r in records if (r["topic"], int(r["partition"]), int(r["offset"])) not in seen]
    storage.write_text(ledger_path(checkpoint_root), json.dumps({"records": entries}, indent=1, sort_keys=True))


def skip_quarantined(raw: "DataFrame", topic: str, ledger: list[dict[str, Any]]) -> "DataFrame":
    """The Kafka source `raw` without the ledger's records of `topic` (unchanged if none)."""
    from pyspark.sql import functions as F

    by_part: dict[int, list[int]] = {}
    for e in ledger:
        if e["topic"] == topic:
            by_part.setdefault(int(e["partition"]), []).append(int(e["offset"]))
    if not by_part:
        return raw
    cond = None
    for p, offsets in sorted(by_part.items()):
        c = (F.col("partition") == p) & F.col("offset").isin(sorted(offsets))
        cond = c if cond is None else cond | c
    return raw.where(~cond)


# --- probes and bisection -------------------------------------------------------------------

Interval = tuple[int, int, int]  # partition, first offset, offset after the last


def _size(intervals: list[Interval]) -> int:
    return sum(hi - lo for _, lo, hi in intervals)


def _split(intervals: list[Interval]) -> tuple[list[Interval], list[Interval]]:
    half = _size(intervals) // 2
    a: list[Interval] = []
    b: list[Interval] = []
    taken = 0
    for p, lo, hi in intervals:
        if taken >= half:
            b.append((p, lo, hi))
        elif taken + (hi - lo) <= half:
            a.append((p, lo, hi))
            taken += hi - lo
        else:
            cut = lo + (half - taken)
            a.append((p, lo, cut))
            b.append((p, cut, hi))
            taken = half
    return a, b


class NotIsolable(Exception):
    """The failure needs several records together (or none): nothing to quarantine."""


def bisect(intervals: list[Interval], fails) -> dict[Interval, str]:
    """Single records (p, o, o+1) of `intervals` that fail alone, with their error; `fails(set)`
    returns the error text of a probe over `set` or None. `intervals` is known to fail.
    Raises NotIsolable when the failure cannot be pinned on single records."""
    found: dict[Interval, str] = {}

    def walk(s: list[Interval], error: str | None, verify: bool) -> bool:
        # error: the probe's error when s was probed and failed; verify: s is only assumed to fail
        if _size(s) == 1:
            if verify:
                error = fails(s)
                if error is None:
                    raise NotIsolable("the failure needs several records together")
            (p, lo, _), = [i for i in s if i[2] > i[1]]
            found[(p, lo, lo + 1)] = error or ""
            return True
        a, b = _split(s)
        ea = fails(a)
        hit_a = walk(a, ea, False) if ea is not None else False
        if hit_a:
            eb = fails(b)
            if eb is not None:
                walk(b, eb, False)
        else:
            walk(b, None, True)  # s fails and a does not: b should (verified at its leaves)
        return True

    if _size(intervals) == 0:
        raise NotIsolable("the failed batch read no records")
    walk(intervals, "", False)
    return found


@dataclass
class FailedBatch:
    batch: int
    start: dict[str, dict[str, int] | None]  # topic -> partition -> first offset (None: earliest)
    end: dict[str, dict[str, int]]  # topic -> partition -> offset after the batch


def failed_batch(spark, checkpoint: str, topics: list[str]) -> FailedBatch | None:
    """The uncommitted last batch of a query checkpoint and its offset ranges per inlet topic."""
    from .checkpoint import committed_batches, planned_batches, source_offsets
    from .storage import storage_for

    storage = storage_for(checkpoint, spark)
    planned = planned_batches(storage, checkpoint)
    if not planned:
        return None
    n = planned[-1]
    if n in committed_batches(storage, checkpoint):
        return None

    def per_topic(batch: int) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for src in source_offsets(storage, checkpoint, batch):
            if isinstance(src, dict):
                for t, parts in src.items():
                    if t in topics and isinstance(parts, dict):
                        out[t] = {str(p): int(o) for p, o in parts.items()}
        return out

    end = per_topic(n)
    before = per_topic(n - 1) if n - 1 in planned else {}
    return FailedBatch(n, {t: before.get(t) for t in end}, end)


class _ProbeTransport:
    """A Kafka source over one failed batch: started at the batch's start offsets, filtered to
    the batch's range, with `keep` narrowing one topic to the records under test."""

    def __init__(self, base, batch: FailedBatch, keep: dict[str, list[Interval]], ledger: list[dict[str, Any]]) -> None:
        self.base, self.batch, self.keep, self.ledger = base, batch, keep, ledger

    def read_stream(self, spark, topic: str, max_offsets_per_trigger=None, *, name: str | None = None):
        from pyspark.sql import functions as F

        from .transport import load_source

        end = self.batch.end.get(topic)
        reader = self.base._reader(spark.readStream).option("subscribe", topic)
        if end is None:  # not an input of the failed query: nothing of it
            return load_source(spark, reader.option("startingOffsets", "latest"), name).where(F.lit(False))
        start = self.batch.start.get(topic)
        starting = json.dumps({topic: {p: (start or {}).get(p, -2) for p in end}}) if start else "earliest"
        raw = load_source(spark, reader.option("startingOffsets", starting), name)
        if topic in self.keep:
            intervals = self.keep[topic]
        else:
            intervals = [(int(p), (start or {}).get(p, 0), o) for p, o in end.items()]
        cond = F.lit(False)
        for p, lo, hi in intervals:
            if hi > lo:
                cond = cond | ((F.col("partition") == p) & (F.col("offset") >= lo) & (F.col("offset") < hi))
        return skip_quarantined(raw.where(cond), topic, self.ledger)

    def write_stream(self, df, topic):
        return df.writeStream

    def __getattr__(self, name):
        return getattr(self.base, name)


class Quarantine:
    """Finds, dead-letters, records and skips the poison records of failed queries of one
    StreamletRuntime. `counts` holds records quarantined per streamlet in this process."""

    def __init__(self, runtime) -> None:
        self.runtime = runtime
        self.counts: dict[str, int] = {}
        self.rounds: dict[str, int] = {}
        self.notes: list[str] = []  # one line per quarantine round, for the terminal
        self._given_up: set[tuple[str, str, int]] = set()  # (streamlet, query, batch) found not isolable

    def enabled(self, streamlet: str) -> bool:
        """Whether `streamlet` runs in this runtime with on-failure mode quarantine (deploy config over the
        class's on_failure, on_failure_of)."""
        ctx = self.runtime.contexts.get(streamlet)
        return ctx is not None and on_failure_of(ctx) == QUARANTINE

    def handle(self, query_name: str, error: str) -> bool:
        """Quarantine the records that make the failed query `query_name` fail and restart its
        streamlet; False (the failure stands) when it is not enabled, not record-dependent, not
        isolable, or the bounds are reached. Never raises for the failure's own reasons."""
        streamlet, _, query = query_name.partition(".")
        if not self.enabled(streamlet):
            return False
        log_ = logging.getLogger(f"streamlets.{streamlet}")
        if self.rounds.get(streamlet, 0) >= MAX_ROUNDS:
            log_.error("quarantine: %d rounds already; the failure stands", MAX_ROUNDS)
            return False
        try:
            found = self._find(streamlet, query)
        except NotIsolable as e:
            log_.error("quarantine of %s not possible: %s; the failure stands", query_name, e)
            return False
        except Exception as e:  # a probe that cannot run must not hide the original failure
            log_.exception("quarantine of %s failed: %s; the failure stands", query_name, e)
            return False
        if not found:
            return False
        ctx = self.runtime.contexts[streamlet]
        self._dead_letter(ctx, found)
        add_to_ledger(ctx.run.checkpoint_root, found, ctx.spark)
        self.counts[streamlet] = self.counts.get(streamlet, 0) + len(found)
        self.rounds[streamlet] = self.rounds.get(streamlet, 0) + 1
        line = (f"quarantined {len(found)} record(s) of {query_name}: "
                + "; ".join(f"{r['topic']}[{r['partition']}]@{r['offset']}: {r['error']}" for r in found[:5])
                + (" ..." if len(found) > 5 else ""))
        self.notes.append(line)
        log_.warning("%s", line)
        self.runtime.restart(streamlet)
        return True

    def _find(self, streamlet: str, query: str) -> list[dict[str, Any]]:
        ctx = self.runtime.contexts[streamlet]
        run = ctx.run
        if not run.bootstrap_servers:
            raise NotIsolable("quarantine needs Kafka inlets (offsets)")
        cls = type(ctx.streamlet)
        inlets = {run.topics[p.name]: p.name for p in cls.shape().inlets if p.name in run.topics}
        batch = failed_batch(ctx.spark, run.checkpoint_location(query), list(inlets))
        if batch is None:
            raise NotIsolable("the query's checkpoint has no uncommitted batch")
        key = (streamlet, query, batch.batch)
        if key in self._given_up:
            raise NotIsolable(f"batch {batch.batch} was looked at before")
        self._given_up.add(key)  # taken back below when records are found
        ledger = read_ledger(run.checkpoint_root, ctx.spark)
        probes = [0]
        log_ = logging.getLogger(f"streamlets.{streamlet}")

        def probe(keep: dict[str, list[Interval]]) -> str | None:
            probes[0] += 1
            if probes[0] > MAX_PROBES:
                raise NotIsolable(f"more than {MAX_PROBES} probe runs")
            return self._probe(ctx, batch, keep, ledger)

        t0 = time.time()
        whole = probe({})
        if whole is None:
            raise NotIsolable("the batch's records do not fail the logic on their own (a sink or connection failure)")
        found: list[dict[str, Any]] = []
        for topic, inlet in inlets.items():
            if topic not in batch.end:
                continue
            start = batch.start.get(topic) or {}
            full = [(int(p), start.get(p, 0), o) for p, o in sorted(batch.end[topic].items(), key=lambda x: int(x[0]))]
            full = [i for i in full if i[2] > i[1]]
            if not full or probe({topic: []}) is not None:
                continue  # the failure stays without this topic's records
            hits = bisect(full, lambda s, t=topic: probe({t: s}))
            for (p, o, _), err in sorted(hits.items()):
                found.append({"query": query, "inlet": inlet, "topic": topic, "partition": p, "offset": o,
                              "batch": batch.batch, "error": user_exception(err), "time": time.time()})
        log_.info("quarantine of %s.%s: %d record(s) in %d probe(s), %.1f s", streamlet, query, len(found), probes[0], time.time() - t0)
        if not found:
            raise NotIsolable("no single inlet record fails on its own")
        self._given_up.discard(key)
        return found

    def _probe(self, ctx, batch: FailedBatch, keep: dict[str, list[Interval]], ledger) -> str | None:
        from .storage import is_local, local_path

        StreamletContext = type(ctx)  # the running streamlet's context class (no import: context imports this module)

        run = ctx.run
        scratch = f"{run.checkpoint_root.rstrip('/')}/{scratch_name(QUARANTINE_PROBE)}"
        probe_run = run.model_copy(update={"checkpoint_root": scratch, "dry_run": True, "dead_letter_topic": None,
                                           "max_offsets_per_trigger": None, "initial_state": {}})
        session = ctx.spark.newSession()
        for key, value in run.spark_conf.items():
            if key.startswith("spark.sql."):
                session.conf.set(key, value)
        # A probe reads a handful of records: one state/shuffle partition instead of hundreds of tasks.
        session.conf.set("spark.sql.shuffle.partitions", "1")
        pctx = StreamletContext(session, type(ctx.streamlet)(), probe_run, _ProbeTransport(ctx.transport, batch, keep, ledger), None)
        try:
            pctx.streamlet.create_logic(pctx)
            error = None
            for q in pctx.queries:
                try:
                    q.awaitTermination()
                except Exception as e:  # the probe's failure is the answer
                    error = error or str(e)
                if error is None and q.exception() is not None:
                    error = str(q.exception())
            return error
        finally:
            for q in pctx.queries:
                try:
                    q.stop()
                except Exception:
                    pass
            if is_local(scratch):
                shutil.rmtree(local_path(scratch), ignore_errors=True)
            else:
                from .storage import storage_for

                storage_for(scratch, ctx.spark).delete(scratch)

    def _dead_letter(self, ctx, found: list[dict[str, Any]]) -> None:
        """Each quarantined record to the dead-letter topic (DEAD_LETTER_SCHEMA), raw key and value."""
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        from .deadletter import DEAD_LETTER_SCHEMA

        topic = self.runtime.dead_letters.topic
        if topic is None:
            logging.getLogger(f"streamlets.{ctx.name}").warning("no dead-letter topic: %d quarantined record(s) only in the ledger", len(found))
            return
        cls = type(ctx.streamlet)
        fingerprints = {p.name: p.schema.fingerprint for p in cls.shape().inlets}
        frames = []
        for r in found:
            raw = ctx.transport.read_range(ctx.spark, r["topic"], {str(r["partition"]): r["offset"]},
                                           {str(r["partition"]): r["offset"] + 1})
            frames.append(raw.select(
                F.lit(ctx.app_id).alias("app_id"), F.lit(ctx.name).alias("streamlet"), F.lit(r["inlet"]).alias("inlet"),
                "topic", "partition", "offset", "timestamp", "key", "value",
                F.lit(fingerprints.get(r["inlet"], "")).alias("schema_fingerprint"),
                F.lit(f"quarantined (on-failure: quarantine): {r['error']}"[:1000]).alias("error")))
        envelope = frames[0]
        for f in frames[1:]:
            envelope = envelope.unionByName(f)
        out = envelope.select(
            F.format_string("%s-%d-%d", "topic", "partition", "offset").cast("binary").alias("key"),
            to_avro(F.struct(*DEAD_LETTER_SCHEMA.field_names), DEAD_LETTER_SCHEMA.json).alias("value"))
        ctx.transport.write_batch(out, topic)


def on_failure_of(ctx) -> str:
    """The streamlet's on-failure mode: the run config's (deploy config) over the class's
    `on_failure` declaration; default "stop"."""
    return ctx.run.on_failure or getattr(type(ctx.streamlet), "on_failure", None) or STOP
