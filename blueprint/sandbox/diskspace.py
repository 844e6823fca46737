"""A full disk under the sandbox's state folder, named as such with the folder.

When the disk fills, Kafka's broker takes its log folder offline and stops, Spark's checkpoint
writes fail and the clients retry for a minute before a generic KafkaException; only broker.log
says "No space left on device". The sandbox checks the state folder's file system before it
starts and every second while it runs (os.statvfs, no I/O), and reads the broker log's new
lines: either sign stops the run with one line naming the folder, the space left and where the
broker said so.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

MIN_FREE_BYTES = 1 << 20  # below this the state folder's disk counts as full (Kafka appends, checkpoints)
NO_SPACE = "No space left on device"


def free_bytes(folder: Path) -> tuple[int, int]:
    """(bytes free for an unprivileged writer, total bytes) of the file system holding `folder`
    (its nearest existing parent if it does not exist yet)."""
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def full_disk_message(folder: Path, said_by: Path | None = None) -> str:
    """One line for a full disk: the state folder, its free and total space, the file that said so (`said_by`)
    and what to do."""
    free, total = free_bytes(folder)
    where = f"; {said_by} says {NO_SPACE!r}" if said_by is not None else ""
    return (f"the disk of the state folder {folder} is full ({_size(free)} free of {_size(total)}){where}: "
            "free some space, or give --state-dir a folder on another disk")


class DiskWatch:
    """Full-disk checks of a state folder, and of the broker's log (only lines new since the last look)."""

    def __init__(self, state_dir: Path, broker_log: Path | None = None, min_free: int = MIN_FREE_BYTES) -> None:
        self.state_dir = Path(state_dir)
        self.broker_log = Path(broker_log) if broker_log is not None else None
        self.min_free = min_free
        self._offset = self._log_size()

    def follow(self, broker_log: Path) -> None:
        """Watch the broker's log too, from its current end."""
        self.broker_log = Path(broker_log)
        self._offset = self._log_size()

    def _log_size(self) -> int:
        try:
            return self.broker_log.stat().st_size if self.broker_log is not None else 0
        except OSError:
            return 0

    def check(self) -> str | None:
        """The full-disk line if the disk is full or the broker said so since the last check, else None."""
        if self._broker_says_full():
            return full_disk_message(self.state_dir, self.broker_log)
        free, _ = free_bytes(self.state_dir)
        return full_disk_message(self.state_dir) if free < self.min_free else None

    def _broker_says_full(self) -> bool:
        size = self._log_size()
        if self.broker_log is None or size <= self._offset:
            self._offset = min(self._offset, size)
            return False
        try:
            with open(self.broker_log, "rb") as f:
                f.seek(self._offset)
                new = f.read(size - self._offset)
        except OSError:
            return False
        self._offset = size
        return NO_SPACE.encode() in new


def is_full_disk_error(error: BaseException | str) -> bool:
    """An OSError with ENOSPC (or EDQUOT), or an error text saying "No space left on device"."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return NO_SPACE in str(error)
