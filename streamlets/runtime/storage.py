"""Files of checkpoints and savepoints, on the local disk or on any Hadoop file system.

A plain path or a `file:` URI is handled in Python. Any other scheme (s3a://, abfss://, hdfs://,
gs://) goes through Hadoop's FileSystem API in the JVM of a SparkSession, so it takes the same
settings as Spark's checkpoints (`spark.hadoop.fs.s3a.*`, `spark.hadoop.fs.azure.*`, ...).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Storage(Protocol):
    """Paths are '/'-separated strings relative to nothing: what the caller passes in."""

    def exists(self, path: str) -> bool:
        """True if a file or folder is at `path`."""

    def files(self, root: str) -> Iterator[str]:
        """The '/'-separated paths, relative to `root`, of every file under it (recursively)."""

    def children(self, path: str) -> list[str]:
        """The names of the entries directly in folder `path`, sorted; [] if it does not exist."""

    def read_text(self, path: str) -> str:
        """The UTF-8 text of the file at `path`; raises the file system's error (FileNotFoundError, or the
        JVM's) if it is missing."""

    def write_text(self, path: str, text: str) -> None:
        """Write `text` (UTF-8) to `path`, replacing it, creating missing parent folders."""

    def copy_file(self, src: str, dst: str) -> None:
        """Copy the file `src` to `dst` (replaced if present), creating missing parent folders."""

    def rename(self, src: str, dst: str) -> None:
        """Move `src` to `dst`, creating missing parent folders; raises OSError if the move fails."""

    def delete(self, path: str) -> None:
        """Delete the file or folder (recursively) at `path`; a missing path is fine."""


def is_local(path: str) -> bool:
    """True for a plain path or a `file:` URI; False for another scheme (`hdfs://`, `s3a://`, ...)."""
    return "://" not in str(path) or str(path).startswith("file:")


def local_path(path: str) -> Path:
    """The local Path of a plain path or a `file:` / `file://` URI."""
    text = str(path)
    return Path(text[len("file://"):] if text.startswith("file://") else text[len("file:"):] if text.startswith("file:") else text)


class LocalStorage:
    def exists(self, path: str) -> bool:
        """Storage.exists on the local file system."""
        return local_path(path).exists()

    def files(self, root: str) -> Iterator[str]:
        """Storage.files, by os.walk."""
        base = local_path(root)
        for folder, _, names in os.walk(base):
            for name in names:
                yield (Path(folder) / name).relative_to(base).as_posix()

    def children(self, path: str) -> list[str]:
        """Storage.children on the local file system."""
        p = local_path(path)
        return sorted(c.name for c in p.iterdir()) if p.is_dir() else []

    def read_text(self, path: str) -> str:
        """Storage.read_text on the local file system."""
        return local_path(path).read_text()

    def write_text(self, path: str, text: str) -> None:
        """Storage.write_text, atomically: written to `.<name>.tmp` beside it, then renamed over it (a crash
        leaves the old or the new file, never half)."""
        p = local_path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, p)

    def copy_file(self, src: str, dst: str) -> None:
        """Storage.copy_file by shutil.copy2 (times and mode kept)."""
        d = local_path(dst)
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(local_path(src), d)

    def rename(self, src: str, dst: str) -> None:
        """Storage.rename by os.replace (atomic on one file system; replaces a file at `dst`)."""
        local_path(dst).parent.mkdir(parents=True, exist_ok=True)
        os.replace(local_path(src), local_path(dst))

    def delete(self, path: str) -> None:
        """Storage.delete: shutil.rmtree for a folder, unlink for a file."""
        p = local_path(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


class HadoopStorage:
    """Hadoop's FileSystem through py4j (the session's Hadoop configuration)."""

    def __init__(self, spark: "SparkSession") -> None:
        self.jvm = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str):
        p = self.jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self.conf), p

    def exists(self, path: str) -> bool:
        """Storage.exists through Hadoop's FileSystem for the path's scheme."""
        fs, p = self._fs(path)
        return fs.exists(p)

    def files(self, root: str) -> Iterator[str]:
        """Storage.files through FileSystem.listFiles (recursive)."""
        fs, base = self._fs(root)
        prefix = fs.makeQualified(base).toString().rstrip("/") + "/"
        it = fs.listFiles(base, True)
        while it.hasNext():
            yield it.next().getPath().toString()[len(prefix):]

    def children(self, path: str) -> list[str]:
        """Storage.children through FileSystem.listStatus."""
        fs, p = self._fs(path)
        if not fs.exists(p):
            return []
        return sorted(s.getPath().getName() for s in fs.listStatus(p))

    def read_text(self, path: str) -> str:
        """Storage.read_text through FileSystem.open."""
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Storage.write_text through FileSystem.create (overwriting; on object stores the write is whole or
        nothing)."""
        fs, p = self._fs(path)
        out = fs.create(p, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def copy_file(self, src: str, dst: str) -> None:
        """Storage.copy_file through Hadoop's FileUtil.copy (overwriting), across file systems too."""
        sfs, s = self._fs(src)
        dfs, d = self._fs(dst)
        self.jvm.org.apache.hadoop.fs.FileUtil.copy(sfs, s, dfs, d, False, True, self.conf)

    def rename(self, src: str, dst: str) -> None:
        """Storage.rename through FileSystem.rename; OSError if the file system refuses it."""
        fs, s = self._fs(src)
        _, d = self._fs(dst)
        fs.mkdirs(d.getParent())
        if not fs.rename(s, d):
            raise OSError(f"cannot rename {src} to {dst}")

    def delete(self, path: str) -> None:
        """Storage.delete through FileSystem.delete (recursive)."""
        fs, p = self._fs(path)
        fs.delete(p, True)


def storage_for(path: str, spark: "SparkSession | None" = None) -> Storage:
    """LocalStorage for local paths; HadoopStorage for any other scheme, through `spark`'s Hadoop
    settings (without one, a local session's: for an s3a:// path with the S3A connector and AWS's
    defaults, streamlets.runtime.object_store)."""
    if is_local(path):
        return LocalStorage()
    if spark is None:
        from .object_store import ObjectStore
        from .spark_session import build_spark_session

        spark = build_spark_session("streamlets-storage", master="local[1]", store=ObjectStore(path))
    return HadoopStorage(spark)


def join(base: str, *parts: str) -> str:
    """`base` and `parts` joined with single '/' (empty parts skipped), for paths and URIs alike."""
    return "/".join([str(base).rstrip("/"), *(p.strip("/") for p in parts if p)])


def copy_between(src: Storage, dst: Storage, src_path: str, dst_path: str) -> None:
    """Copy one file from `src` to `dst` storage: in Python when both are local, else through
    Hadoop (local paths as file: URIs), so that a local checkpoint can go to s3a:// and back."""
    if isinstance(src, LocalStorage) and isinstance(dst, LocalStorage):
        src.copy_file(src_path, dst_path)
        return
    hadoop = src if isinstance(src, HadoopStorage) else dst

    def uri(path: str) -> str:
        return local_path(path).resolve().as_uri() if is_local(path) else path
    hadoop.copy_file(uri(src_path), uri(dst_path))


def free_name(storage: Storage, base: str) -> str:
    """`base`, or `base-2`, `base-3`... whichever does not exist yet."""
    name, n = base, 1
    while storage.exists(name):
        n += 1
        name = f"{base}-{n}"
    return name
