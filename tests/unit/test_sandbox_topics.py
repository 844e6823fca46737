"""The sandbox's topic watcher once its broker is gone for good (issue 26): the final tables come
from the last counts at once, not after a 10 s client timeout per topic."""

import time

from blueprint.sandbox.topics import TopicWatcher


def test_an_offline_watcher_answers_with_its_last_counts_at_once():
    watcher = TopicWatcher("127.0.0.1:9")  # nothing listens there
    try:
        watcher._cache["app.counted"] = (time.time() - 60, 42)  # counted a minute ago, before the broker died
        watcher.offline()
        t0 = time.monotonic()
        assert watcher.records("app.counted") == 42 and watcher.records("app.never-counted") == 0
        assert watcher.records("app.counted", fresh=True) == 42
        assert time.monotonic() - t0 < 1
    finally:
        watcher.close()
