"""streamlets.runtime.recovery: which failures are Spark 4.1.1's progress-report NPE after a
replayed batch (SPARK-55271), and whether that batch is committed."""

from __future__ import annotations

from streamlets.runtime.recovery import is_replay_metrics_failure, replayed_batch_committed
from streamlets.runtime.storage import storage_for

# The text StreamingQueryException carries (first line) and the frame of spark.log's trace.
SPARK_411 = ('Cannot invoke "scala.collection.IterableOps.map(scala.Function1)" because the return value of '
             '"scala.Option.get()" is null\n=== Streaming Query ===\nIdentifier: enrich.out')
FRAME = ("java.lang.NullPointerException: Cannot invoke \"scala.collection.IterableOps.map(scala.Function1)\" because "
         "the return value of \"scala.Option.get()\" is null\n\tat org.apache.spark.sql.kafka010."
         "KafkaMicroBatchStream$.metrics(KafkaMicroBatchStream.scala:520)")


def test_the_npe_is_recognised_and_other_failures_are_not():
    assert is_replay_metrics_failure(SPARK_411) and is_replay_metrics_failure(FRAME)
    assert not is_replay_metrics_failure("PoisonError: cannot enrich flight 20130101-EV4869-LGA")
    assert not is_replay_metrics_failure('Cannot invoke "String.length()" because "s" is null')


def _log(folder, *ids):
    folder.mkdir(parents=True, exist_ok=True)
    for i in ids:
        (folder / str(i)).write_text("v1\n{}\n")


def test_replayed_batch_committed_only_when_the_last_planned_batch_has_its_commit(tmp_path):
    storage = storage_for(str(tmp_path))
    assert replayed_batch_committed(storage, str(tmp_path)) is None  # nothing planned
    _log(tmp_path / "offsets", 0, 1)
    _log(tmp_path / "commits", 0)
    assert replayed_batch_committed(storage, str(tmp_path)) is None  # batch 1 planned, not committed
    _log(tmp_path / "commits", 1)
    assert replayed_batch_committed(storage, str(tmp_path)) == 1
