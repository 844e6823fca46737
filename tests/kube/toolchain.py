"""The cluster toolchain's background build that dev/test starts, and waiting for it.

dev/test runs dev/toolchain (dev/k8s-env; as root also dev/k8s-node-env and dev/images: some 35
minutes of Go and image builds on a fresh machine beside the tests, seconds when cached) while the
lint and the tests that need none of it run. It sets ``STREAMLETS_TOOLCHAIN_DIR`` to a folder where
the build writes ``log`` and, when it ends, ``rc`` (its exit status), and starts the pytest of the
tests that need the toolchain (the cluster lane) once ``rc`` exists. Those tests use the
``toolchain`` fixture (tests/kube/fixtures.py), which calls :func:`wait_for_toolchain`: there it
returns at once, or fails them with the log's tail when the build failed; tests/conftest.py orders
them after the others. Without the variable (pytest run directly) nothing waits: the toolchain is
whatever the cache holds. Stdlib only.
"""

from __future__ import annotations

import os
import pathlib
import time

ENV = "STREAMLETS_TOOLCHAIN_DIR"
TIMEOUT = 3 * 3600.0  # seconds: longer than any cold build on 2 cores; a hung build fails the tests waiting


class ToolchainFailed(RuntimeError):
    """The background toolchain build exited non-zero, or did not end within the timeout."""


def _tail(path: pathlib.Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for_toolchain(timeout: float = TIMEOUT, poll: float = 2.0) -> float:
    """Block until dev/test's background toolchain build has ended; returns the seconds waited
    (0 when there is no such build: ``STREAMLETS_TOOLCHAIN_DIR`` unset). Raises ToolchainFailed,
    with the tail of its log, when it exited non-zero or is still running after `timeout` seconds."""
    folder = os.environ.get(ENV)
    if not folder:
        return 0.0
    rc_file, log = pathlib.Path(folder) / "rc", pathlib.Path(folder) / "log"
    start = time.monotonic()
    while not rc_file.exists():
        if time.monotonic() - start > timeout:
            raise ToolchainFailed(f"the toolchain build (dev/toolchain, log {log}) still runs after {timeout:.0f} s:\n"
                                  f"{_tail(log)}")
        time.sleep(poll)
    rc = rc_file.read_text().strip()
    if rc != "0":
        raise ToolchainFailed(f"the toolchain build (dev/toolchain) failed with exit status {rc}; its log, {log}, ends:\n"
                              f"{_tail(log)}")
    return time.monotonic() - start
