"""Asynchronous progress tracking: micro-batch queries that write their offset and commit logs in
the background (`streamlets.<name>.progress-tracking = async`, or `async <checkpoint interval>`:
`async 5 seconds`).

A micro-batch query writes `offsets/N` before batch N runs and `commits/N` after it, each a file
on the checkpoint's storage, and runs nothing while it writes: two file writes (with their
renames) per batch sit on every record's path from Kafka to Kafka. Spark's asynchronous progress
tracking (the `asyncProgressTrackingEnabled` writeStream option) writes them on a background
thread, and only every `asyncProgressTrackingCheckpointIntervalMs` (1 second by default; the
duration after `async` sets it): the next batch starts as soon as the last one's data is written.

What Spark runs it with, and so what `blueprint verify --config` and the runner refuse, one line
naming the streamlet and the reason:

- Spark's Kafka sink only (Spark 4.1 also takes foreach, memory, console and noop sinks, none of
  which a streamlet's outlet is): an exactly-once outlet writes through its own sink (Kafka
  transactions the driver commits with each micro-batch, streamlets.runtime.exactly_once), which it
  refuses. So the
  streamlet's delivery must be at-least-once, and queries started with `start_query` must write
  to Kafka.
- Kafka sources, stateless queries (aggregations, deduplication, stream-stream joins keep state,
  which Spark refuses at the first batch), micro-batch or processing-time triggers: not Real-Time
  Mode (its progress is tracked per checkpoint interval already), not AvailableNow or Once.
- Not with `on-failure = quarantine`: quarantine reads a failed batch's offset range from the
  offset log, which now holds a batch only once per checkpoint interval.

What it changes: a restart replays from the last batch written to the log, up to a checkpoint
interval of batches instead of one (at-least-once: consumers may see those records again). A
longer interval writes the logs less often and replays more after a restart.
Switching back to `sync` is safe here: before a synchronous query starts on a checkpoint the
asynchronous one left with gaps in `offsets/`, `bridge_offset_gap` writes the missing entry Spark
needs (a copy of the last entry before the gap: the batch is replayed from there, as the
asynchronous query itself would have), which Spark otherwise refuses with "batch N doesn't exist".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import StreamletError
from ..settings import (ASYNC, AT_LEAST_ONCE, EXACTLY_ONCE, PROGRESS_TRACKING_FORMS, QUARANTINE,  # noqa: F401
                        SYNC, parse_progress_tracking, progress_tracking_text)

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

log = logging.getLogger(__name__)

# The setting's modes (SYNC, ASYNC), its text forms and how its text is read: streamlets.settings.
# Spark's default asyncProgressTrackingCheckpointIntervalMs: the offset and commit logs get an entry
# at most this often; a restart replays at most about this much.
CHECKPOINT_INTERVAL_MS = 1000
ENABLED_OPTION = "asyncProgressTrackingEnabled"
INTERVAL_OPTION = "asyncProgressTrackingCheckpointIntervalMs"


class ProgressTrackingError(StreamletError):
    """Asynchronous progress tracking asked for where Spark cannot run it: one line naming the
    streamlet and the reasons."""


parse = parse_progress_tracking  # (mode, checkpoint interval in ms or None): streamlets.settings
normal_text = progress_tracking_text  # `sync`, `async` or `async <N> milliseconds`: streamlets.settings


def streamlet_refusals(*, kafka: bool, delivery: str, real_time: bool, available_now: bool, on_failure: str) -> list[str]:
    """Why a streamlet cannot run with asynchronous progress tracking, from its settings alone
    (empty: it can, as far as they tell). `delivery` is what its outlets get (exactly_once.delivery_for)."""
    reasons = []
    if not kafka:
        reasons.append("it does not run on Kafka (the test kit's folder transport); asynchronous progress tracking "
                       "needs Kafka sources and Spark's Kafka sink")
    elif delivery == EXACTLY_ONCE:
        reasons.append("its Kafka outlets are exactly-once (Kafka transactions the driver commits with each micro-batch, "
                       "a sink asynchronous progress tracking cannot run); set delivery = " + AT_LEAST_ONCE)
    if real_time:
        reasons.append("it runs in real-time mode, whose progress is tracked per checkpoint interval already")
    if available_now:
        reasons.append("it runs with Trigger.AvailableNow, which asynchronous progress tracking cannot run")
    if on_failure == QUARANTINE:
        reasons.append("on-failure = quarantine reads each failed batch's offsets from the offset log, which "
                       "asynchronous progress tracking writes once per checkpoint interval")
    return reasons


def query_refusals(df: Any, sink: str | None) -> list[str]:
    """Why Spark cannot run the streaming DataFrame `df`, written to `sink` (a DataStreamWriter's
    format: streamlets.trigger.writer_sink), with asynchronous progress tracking: a sink other than
    Kafka, a source other than Kafka, a stateful operator."""
    from ..trigger import KEEPS_STATE, optimized_nodes, source_refusal, stateful_refusal

    reasons = []
    if sink is not None and sink != "kafka":
        what = "through foreachBatch" if sink == "foreachBatch" else f"to a {sink} sink"
        reasons.append(f"the query writes {what}; asynchronous progress tracking writes to Spark's Kafka sink only")
    for node in optimized_nodes(df):
        reason = stateful_refusal(node, "asynchronous progress tracking runs stateless queries", KEEPS_STATE) or \
            source_refusal(node, "asynchronous progress tracking")
        if reason:
            reasons.append(reason)
    return list(dict.fromkeys(reasons))


def apply(writer: "DataStreamWriter", interval_ms: int | None = None) -> "DataStreamWriter":
    """`writer` with asynchronous progress tracking on (writeStream option
    asyncProgressTrackingEnabled), its logs written every `interval_ms` milliseconds (option
    asyncProgressTrackingCheckpointIntervalMs; default CHECKPOINT_INTERVAL_MS)."""
    return writer.option(ENABLED_OPTION, "true").option(INTERVAL_OPTION, str(interval_ms or CHECKPOINT_INTERVAL_MS))


def bridge_offset_gap(storage: Any, checkpoint: str) -> int | None:
    """Before a synchronous start: when the checkpoint's last planned batch N has no `offsets/N-1`
    (an asynchronous query wrote its offset log with gaps), write `offsets/N-1` as a copy of the
    last entry before N, so that Spark replays batch N from there (what the asynchronous query would
    replay) instead of failing. Returns N-1 when it wrote the entry, else None."""
    from .checkpoint import offsets_file, planned_batches

    planned = planned_batches(storage, checkpoint)
    if len(planned) < 2 or planned[-2] == planned[-1] - 1:
        return None
    last, before = planned[-1], planned[-2]
    storage.copy_file(offsets_file(checkpoint, before), offsets_file(checkpoint, last - 1))
    log.info("%s: offsets/%d copied to offsets/%d (an asynchronous query's offset log had a gap); batch %d "
             "is replayed from batch %d's end", checkpoint, before, last - 1, last, before)
    return last - 1
