"""The dead-letter ledger moves at every batch with malformed values, and otherwise at most every
LEDGER_INTERVAL_SECONDS; a drain or a stop writes what is pending (streamlets.runtime.deadletter)."""

from __future__ import annotations

import os

from streamlets.runtime.deadletter import DeadLetterWriter, InletRead, ScanRequest, _ledger_path, read_ledger
from streamlets.schema import AvroSchema

SCHEMA = AvroSchema.load({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
READ = InletRead("s", "in", "topic", SCHEMA)


def request(checkpoint: str, end: dict[str, int], malformed: int = 0) -> ScanRequest:
    return ScanRequest(READ, checkpoint, None, end, malformed)


def test_batches_without_dead_letters_move_the_ledger_once_per_interval(tmp_path):
    checkpoint = str(tmp_path / "cp")
    writer = DeadLetterWriter(None, None, None, "app", ledger_interval=3600)  # type: ignore[arg-type]
    try:
        writer.submit(request(checkpoint, {"0": 10, "1": 4}))
        writer.submit(request(checkpoint, {"0": 20, "1": 9}))
        writer.submit(request(checkpoint, {"0": 30, "1": 9}))
        writer.drain(30)
        # the first batch's ledger is written at once, the next two wait for the interval; the drain writes them
        assert read_ledger(checkpoint, "in") == {"0": 30, "1": 9}
        path = _ledger_path(checkpoint, "in")
        os.utime(path, (0, 0))
        writer.submit(request(checkpoint, {"0": 40, "1": 12}))
        writer.submit(request(checkpoint, {"0": 50, "1": 12}))
        writer._queue.join()  # both handled, no drain: the interval has not passed
        assert os.stat(path).st_mtime == 0
        assert read_ledger(checkpoint, "in") == {"0": 30, "1": 9}
    finally:
        writer.close()
    assert read_ledger(checkpoint, "in") == {"0": 50, "1": 12}  # written at the stop
    assert writer.errors == []


def test_a_batch_with_dead_letters_moves_the_ledger_at_once(tmp_path):
    checkpoint = str(tmp_path / "cp")
    writer = DeadLetterWriter(None, None, None, "app", ledger_interval=3600)  # type: ignore[arg-type]
    try:
        writer.submit(request(checkpoint, {"0": 10}))
        writer.submit(request(checkpoint, {"0": 20}))
        # no dead-letter topic: the scan writes nothing, but its range is recorded without waiting
        writer.submit(request(checkpoint, {"0": 30}, malformed=2))
        writer._queue.join()
        assert read_ledger(checkpoint, "in") == {"0": 30}
        writer.submit(request(checkpoint, {"0": 40}))
        writer._queue.join()
        assert read_ledger(checkpoint, "in") == {"0": 30}
    finally:
        writer.close()
    assert read_ledger(checkpoint, "in") == {"0": 40}


def test_ledgers_of_two_queries_are_kept_apart(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    writer = DeadLetterWriter(None, None, None, "app", ledger_interval=0)  # type: ignore[arg-type]
    try:
        writer.submit(request(a, {"0": 5}))
        writer.submit(request(b, {"0": 7}))
        writer.submit(request(a, {"0": 6}))
        writer._queue.join()
        assert (read_ledger(a, "in"), read_ledger(b, "in")) == ({"0": 6}, {"0": 7})  # interval 0: every batch
    finally:
        writer.close()
