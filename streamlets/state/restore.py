"""Restoring a streamlet from a savepoint: the compatibility check, then the copy.

The check asks Spark itself. The savepoint is copied to a scratch folder with its last commit
removed, and the new code is started on it as a dry run (every sink replaced by Spark's noop
sink, trigger availableNow): Spark re-plans the last committed micro-batch against the saved
state and refuses what it cannot restore across, with its own error classes:

- STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA: stateful operators added, removed
  or reordered;
- STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE / STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE: the state's
  key (grouping columns) or value (aggregates) changed (`spark.sql.streaming.stateStore.stateSchemaCheck`);
- source errors: a source that is not the one the offsets were recorded for.

Before that, two checks of our own: every query that holds state in the savepoint must still be
started by the new code, and the Kafka topics the savepoint's offsets name must be the ones the
new code's inlets read (a branch reads the same topics, or the offsets mean nothing). Sources
the SDK named (streamlets.sources) may come and go: an inlet added, dropped or read in another
order passes (check_sources), and the dry run replays the batch with the new set of sources as
the real start will. A savepoint written before sources were named has its sources matched to
the new names at the start (streamlets.runtime.named_sources), in the dry run's scratch copy too;
what cannot be matched is the dry run's problem, with the way across.

The dry run (trigger once) re-reads the input of that one micro-batch, so the savepoint's source
data must still be retained (Kafka `retention.ms`). Its scratch copy sits next to the streamlet's
checkpoints, where executors can read it too, and is deleted afterwards.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..runtime.runconfig import StreamletRunConfig
from ..runtime.checkpoint import COMMITS, METADATA, RESTORE_CHECK, query_folders, scratch_name, source_entries
from ..runtime.named_sources import kafka_topics
from ..sources import INLET, source_name
from .savepoint import QUERIES, SavepointError
from ..runtime.storage import copy_between, free_name, join, storage_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class RestoreCheck:
    """What the check found: `problems` (refuse if any), `notes` (fine, worth saying)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True if the check found no problem (notes are fine)."""
        return not self.problems


_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+)\]")
_MEANING = {
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA": "the stateful operators changed",
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE": "the state's key schema (grouping or deduplication columns) changed",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE": "the state's value schema (aggregates or state fields) changed",
}


def explain_spark_error(text: str) -> str:
    """Spark's error as one line: what changed, then Spark's own detail (advice to turn the check
    off and the query dump left out)."""
    classes = [c for c in _ERROR_CLASS.findall(text) if c != "STREAM_FAILED"]
    detail = text.split("=== Streaming Query ===")[0]
    detail = re.sub(r"Query \[id = [^\]]*\] terminated with exception: ", "", detail)
    detail = " ".join(line.strip() for line in detail.splitlines()
                      if line.strip() and not line.strip().startswith(("If you want to force", "However, please note")))
    detail = re.sub(r"\s*SQLSTATE: \w+", "", detail)
    meaning = next((_MEANING[c] for c in classes if c in _MEANING), None)
    return f"{meaning}: {detail}" if meaning else detail


def check_sources(savepoint: dict[str, Any], run: StreamletRunConfig, inlets: list[str],
                  spark: "SparkSession | None" = None) -> RestoreCheck:
    """The savepoint's Kafka sources against the new run's inlets (their topics).

    A source the savepoint keys by name (streamlets.sources; `inlet_<inlet>`) must read the topic
    its inlet reads now, or its offsets mean nothing (a problem); an inlet the new code no longer
    has, or a new one, is fine (a note: the dropped source's offsets are left behind, the new one
    starts at the earliest offset). Sources keyed by position (a savepoint written before the
    SDK named its sources) are matched by topic at the start (streamlets.runtime.named_sources):
    a topic of theirs none of the new inlets reads is a problem."""
    storage = storage_for(savepoint["path"], spark)
    topic_of = {source_name(INLET, i): run.topics[i] for i in inlets if i in run.topics}
    reading = set(topic_of.values())
    result = RestoreCheck()
    for q, entry in savepoint["queries"].items():
        if entry.get("batch_id") is None:
            continue
        for sid, offsets in source_entries(storage, join(savepoint["path"], QUERIES, q), entry["batch_id"]):
            topics = kafka_topics(offsets) or set()
            if sid is not None and not sid.isdigit():  # keyed by name
                if sid not in topic_of:
                    result.notes.append(f"query {q!r}: source {sid} ({', '.join(sorted(topics)) or 'not Kafka'}) is not "
                                        "read by the new code: its offsets are left behind")
                elif topics and topic_of[sid] not in topics:
                    result.problems.append(f"query {q!r}: source {sid} read Kafka topic {', '.join(sorted(topics))} in the "
                                           f"savepoint, but reads {topic_of[sid]!r} in the new run: its offsets do not apply")
                continue
            for t in sorted(topics - reading):
                result.problems.append(f"query {q!r}: the savepoint read Kafka topic {t!r}, which no inlet of the new run "
                                       f"reads (its inlets read {', '.join(sorted(reading)) or 'nothing'}); its sources are "
                                       "keyed by position (taken before the SDK named them): to drop an inlet, restore it "
                                       "under the version it was taken with, take a new savepoint and upgrade from that")
    return result


def check_restore(spark: "SparkSession", savepoint: dict[str, Any], cls: type, run: StreamletRunConfig,
                  timeout: float = 300) -> RestoreCheck:
    """Whether the streamlet `cls` with run config `run` can start from `savepoint`. Never raises
    for incompatibilities: they are the result's problems."""
    from ..runtime.runner import StreamletRuntime, transport_for

    result = check_sources(savepoint, run, [p.name for p in cls.shape().inlets], spark)
    if result.problems:
        return result
    src = storage_for(savepoint["path"], spark)
    # The scratch copy sits next to the checkpoints (the claim or URI executors also see).
    scratch = f"{run.checkpoint_root.rstrip('/')}{scratch_name(RESTORE_CHECK)}"
    dst = storage_for(scratch, spark)
    runtime = None
    try:
        def last_commit(q: str, f: str) -> bool:  # uncommitted again: the dry run replays this batch
            batch = savepoint["queries"][q].get("batch_id")
            return batch is not None and f in (f"{COMMITS}/{batch}", f"{COMMITS}/.{batch}.crc")
        _copy_queries(savepoint, src, dst, scratch, skip=last_commit)
        trial = run.model_copy(update={"checkpoint_root": scratch, "dry_run": True, "dead_letter_topic": None})
        runtime = StreamletRuntime(spark, run.app_id, None, transport_for(trial))
        try:
            ctx = runtime.start_class(cls, trial)
        except Exception as e:  # the new code fails before any batch: not restorable as it is
            result.problems.append(f"the new code did not start: {explain_spark_error(str(e))}")
            return result
        for q in runtime.queries():
            try:
                q.awaitTermination(timeout)
            except Exception:  # the query's failure; q.exception() has it
                pass
            if q.exception() is not None:
                result.problems.append(f"query {q.name!r}: {explain_spark_error(str(q.exception()))}")
            elif q.isActive:
                result.problems.append(f"query {q.name!r}: the dry run did not finish within {timeout:.0f} s")
        started = {q.name.split(".", 1)[1] for q in ctx.queries}
    finally:
        if runtime is not None:
            runtime.stop(timeout=30)
        dst.delete(scratch)
    for q, entry in savepoint["queries"].items():
        if q not in started and entry.get("stateful"):
            result.problems.append(f"query {q!r} holds state in the savepoint, but the new code starts no query "
                                   f"named {q!r} (it starts {', '.join(sorted(started))}): its state would be lost")
        elif q not in started:
            result.notes.append(f"query {q!r} of the savepoint is not started by the new code")
    for q in sorted(started - set(savepoint["queries"])):
        result.notes.append(f"query {q!r} is new: it starts without a checkpoint")
    return result


def restore_savepoint(savepoint: dict[str, Any], run: StreamletRunConfig, *, branch: bool = False,
                      replace: bool = False, spark: "SparkSession | None" = None) -> str | None:
    """Copy the savepoint's query checkpoints into `run.checkpoint_root` (the streamlet must not
    be running). Returns where the replaced checkpoints went, if any.

    `branch`: give each query a new id (its checkpoint's `metadata`), so the copy can run next to
    the original in the same Spark application (Spark stops a query whose id is already running).
    `replace`: move existing checkpoints aside to `<checkpoint_root>.replaced-<savepoint id>`;
    without it, existing checkpoints raise SavepointError.
    """
    src = storage_for(savepoint["path"], spark)
    dst = storage_for(run.checkpoint_root, spark)
    existing = query_folders(dst, run.checkpoint_root)
    moved = None
    if existing and not replace:
        raise SavepointError(f"streamlet {run.streamlet!r} already has checkpoints in {run.checkpoint_root} "
                             f"({', '.join(existing)}): restore into a fresh state folder, or replace them")
    if existing:
        moved = free_name(dst, f"{run.checkpoint_root.rstrip('/')}.replaced-{savepoint['id']}")
        dst.rename(run.checkpoint_root, moved)
    _copy_queries(savepoint, src, dst, run.checkpoint_root,
                  skip=lambda q, f: branch and f in (METADATA, f".{METADATA}.crc"))
    if branch:
        for q in savepoint["queries"]:
            dst.write_text(join(run.checkpoint_root, q, METADATA), json.dumps({"id": str(uuid.uuid4())}) + "\n")
    return moved


def _copy_queries(savepoint: dict[str, Any], src, dst, target_root: str, skip) -> None:
    """Copy each query folder of the savepoint to `<target_root>/<query>`, but the files
    `skip(query, relative path)` names."""
    for q in sorted(savepoint["queries"]):
        folder = join(savepoint["path"], QUERIES, q)
        for f in src.files(folder):
            if not skip(q, f):
                copy_between(src, dst, join(folder, f), join(target_root, q, f))
