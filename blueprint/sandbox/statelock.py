"""One owner per state folder: an exclusive lock on `<state folder>/sandbox.lock`.

`blueprint run` takes it before it reads, creates or deletes anything in the folder (`--fresh`
included) and holds it until it ends; `blueprint state repartition` and `blueprint savepoint
take` (when no sandbox runs) hold it while they write. The lock is the kernel's (fcntl.flock on
an open file), so it ends with its process however that ends: a killed sandbox leaves no stale
lock. The file records the owner's pid, start time and command, for the message of whoever is
refused; it is never deleted (deleting a lock file lets two processes lock two files).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path

from streamlets.runtime.layout import LOCK_FILE  # the file's name (the state folder's layout)


class StateFolderBusy(Exception):
    """The state folder's lock is held by another process; the message names it (pid, start time)."""


class StateLock:
    """The lock of one state folder. `acquire()` raises StateFolderBusy if another process holds it."""

    def __init__(self, state_dir: Path, command: str | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LOCK_FILE
        self.command = command or "blueprint " + " ".join(sys.argv[1:2])
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock (acquire() succeeded and release() has not run)."""
        return self._fd is not None

    def acquire(self) -> "StateLock":
        """Take the state folder's lock (an exclusive flock on its lock file, created with the folder if
        missing) and write this process's pid, start time and command into it; returns self. Raises
        StateFolderBusy, naming the owner, if another process holds it; does nothing if this object holds
        it already."""
        if self._fd is not None:
            return self
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateFolderBusy(f"state folder {self.state_dir} is in use by {describe_owner(self.path)}; "
                                  "nothing was changed: stop it first, or give another --state-dir") from None
        except BaseException:
            os.close(fd)
            raise
        owner = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "command": self.command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the lock file and release the lock (the file stays); does nothing if the lock is not held."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # no owner any more; the file stays (see the module's doc)
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> "StateLock":
        return self.acquire()

    def __exit__(self, *_) -> None:
        self.release()


def describe_owner(lock_file: Path) -> str:
    """`blueprint run (pid 123, started 2026-11-23 20:30:01 UTC)` from a lock file's record."""
    try:
        owner = json.loads(Path(lock_file).read_text() or "{}")
    except (OSError, ValueError):
        owner = {}
    if not isinstance(owner, dict) or "pid" not in owner:
        return "another process (it has not recorded itself yet)"
    return f"{owner.get('command') or 'a sandbox'} (pid {owner['pid']}, started {owner.get('started', '?')})"


def is_busy(state_dir: Path) -> str | None:
    """Who holds the folder's lock (describe_owner's text), or None if no process does."""
    path = Path(state_dir) / LOCK_FILE
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return describe_owner(path)
    finally:
        os.close(fd)  # closing drops a shared lock we got
    return None


def state_folder_of(path: Path) -> Path | None:
    """The state folder `path` lies in: the nearest folder (itself or a parent) with a lock file."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if (folder / LOCK_FILE).is_file():
            return folder
    return None


def clear_state_folder(state_dir: Path) -> None:
    """Delete everything in the state folder but its lock file (`blueprint run --fresh`; the
    caller holds the lock)."""
    for child in Path(state_dir).iterdir():
        if child.name == LOCK_FILE:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
