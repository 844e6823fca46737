"""Waiting for a condition in a test: one helper, one argument order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout: float, what: str, interval: float = 0.5,
               on_timeout: Callable[[], str] | None = None,
               retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """Call `predicate()` every `interval` seconds until it returns a truthy value, which is
    returned. After `timeout` seconds: AssertionError "timed out after <timeout> s waiting for
    <what>" with the last value, the last exception `predicate` raised (only those of `retry_on`
    count as "not yet"; any other propagates at once) and `on_timeout()`'s text (logs, states)."""
    deadline = time.monotonic() + timeout
    last: object = None
    last_error: BaseException | None = None
    while True:
        try:
            last = predicate()
            if last:
                return last  # type: ignore[return-value]
        except retry_on as e:  # a poll may fail while things start
            last_error = e
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    detail = f" (last: {last!r})" if last_error is None else f" (last error: {last_error!r})"
    report = f"\n{on_timeout()}" if on_timeout is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}{report}")
