"""A query failure that is Spark's, not the streamlet's: restarted once, transparently.

Spark 4.1.1's Kafka source throws a NullPointerException while reporting progress for the first
batch a restarted query runs when that batch was planned before the restart (offsets/N written,
commits/N not): `KafkaMicroBatchStream.metrics` wraps its latest partition offsets, still unset
because `latestOffset` was not called for a replayed batch, in `Some(null)` (SPARK-55271; the fix,
`Option(...)`, is not in a release whose connectors Maven Central serves). This is exactly the
recovery path: every restart after a crash mid-batch. Progress is reported after the batch's
commit-log entry is written, so the batch itself is done; started again, the query plans its next
batch with `latestOffset` and runs. The runtime (StreamletRuntime.unhandled_failures) restarts
such a query's streamlet once per replayed batch and logs why, so neither the sandbox's
supervisor nor a driver pod's restart policy sees a failure.
"""

from __future__ import annotations

from typing import Any

# The exception's text and the frame that raises it (spark-sql-kafka-0-10 4.1.1).
_NPE = 'because the return value of "scala.Option.get()" is null'
_FRAME = "KafkaMicroBatchStream"


def is_replay_metrics_failure(error: str) -> bool:
    """Whether a query's exception text is SPARK-55271's NullPointerException (see the module doc)."""
    return _NPE in error and (_FRAME in error or "IterableOps.map" in error)


def replayed_batch_committed(storage: Any, checkpoint: str) -> int | None:
    """The id of the query's last planned batch when the commit log has it too (the replayed batch
    finished before its progress report failed), else None."""
    from .checkpoint import committed_batches, planned_batches

    planned, committed = planned_batches(storage, checkpoint), committed_batches(storage, checkpoint)
    if planned and committed and planned[-1] == committed[-1]:
        return planned[-1]
    return None
