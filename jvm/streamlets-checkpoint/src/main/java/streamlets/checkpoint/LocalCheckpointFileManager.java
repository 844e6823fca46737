package streamlets.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager (spark.sql.streaming.checkpointFileManagerClass) for checkpoints on
 * the local file system, which writes a file without starting a process.
 *
 * <p>Spark's default for {@code file:} paths (FileContextBasedCheckpointFileManager) writes each file
 * (an offsets or commit log entry, every micro-batch; a state store's files) through Hadoop's local
 * file system, which sets the new file's and its checksum file's permissions by starting
 * {@code chmod} when Hadoop's native library is not loaded (PySpark ships none): about 30 ms per file
 * on 2 cores, 20 of them CPU in those processes (bench/bench_checkpoint_writes.py). Here a file is
 * written with java.nio and moved into place: with {@code overwriteIfPossible} by an atomic rename,
 * otherwise by a hard link, which fails atomically when the file exists (Hadoop's
 * FileAlreadyExistsException, as Spark's metadata logs expect of a concurrent writer). No checksum
 * file is written; a stale one of the name (from Spark's default manager) is removed, so Hadoop's
 * local file system reads the new file unchecked. Files are not forced to disk, as with Spark's
 * default. Reading and listing go through Hadoop's local file system (no process either).
 *
 * <p>Any other file system (s3a, hdfs) gets Spark's own choice: FileContextBasedCheckpointFileManager,
 * or FileSystemBasedCheckpointFileManager where Hadoop has no FileContext for it.
 */
public final class LocalCheckpointFileManager implements CheckpointFileManager {
    private final FileSystem fs;
    private final CheckpointFileManager other;
    private final Path path;

    public LocalCheckpointFileManager(Path path, Configuration conf) throws IOException {
        FileSystem fileSystem = path.getFileSystem(conf);
        if (fileSystem instanceof LocalFileSystem || fileSystem instanceof RawLocalFileSystem) {
            this.fs = fileSystem;
            this.other = null;
        } else {
            this.fs = null;
            CheckpointFileManager spark;
            try {
                spark = new FileContextBasedCheckpointFileManager(path, conf);
            } catch (Exception e) { // FileContext.getFileContext's, undeclared by the Scala constructor
                if (!(e instanceof UnsupportedFileSystemException)) {
                    throw e;
                }
                spark = new FileSystemBasedCheckpointFileManager(path, conf);
            }
            this.other = spark;
        }
        this.path = path;
    }

    private static java.nio.file.Path local(Path p) {
        return java.nio.file.Paths.get(p.toUri().getScheme() == null ? new java.io.File(p.toUri().getPath()).toURI()
                : p.toUri());
    }

    /** Hadoop's checksum file of `file`: .<name>.crc in its folder. */
    private static java.nio.file.Path checksumOf(java.nio.file.Path file) {
        return file.resolveSibling("." + file.getFileName() + ".crc");
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (other != null) {
            return other.createAtomic(path, overwriteIfPossible);
        }
        java.nio.file.Path target = local(path);
        java.nio.file.Path temp = target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            Files.createDirectories(target.getParent());
            return new AtomicFile(Files.newOutputStream(temp), temp, target, overwriteIfPossible);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("creating " + temp, e);
        }
    }

    /** The temporary file's stream: close() moves it into place, cancel() deletes it. */
    private static final class AtomicFile extends CancellableFSDataOutputStream {
        private final OutputStream out;
        private final java.nio.file.Path temp;
        private final java.nio.file.Path target;
        private final boolean overwrite;
        private boolean done;

        AtomicFile(OutputStream out, java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) {
            super(out);
            this.out = out;
            this.temp = temp;
            this.target = target;
            this.overwrite = overwrite;
        }

        @Override
        public synchronized void close() throws IOException {
            if (done) {
                return;
            }
            done = true;
            try {
                super.close();
                if (overwrite) {
                    Files.deleteIfExists(checksumOf(target));
                    try {
                        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
                    } catch (AtomicMoveNotSupportedException e) {
                        Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING);
                    }
                } else {
                    try {
                        try {
                            Files.createLink(target, temp);
                        } catch (UnsupportedOperationException | java.nio.file.FileSystemException e) {
                            if (e instanceof java.nio.file.FileAlreadyExistsException) {
                                throw e;
                            }
                            // no hard links on this file system: a rename that checks first, as
                            // Spark's FileSystemBasedCheckpointFileManager does
                            Files.move(temp, target);
                        }
                    } catch (java.nio.file.FileAlreadyExistsException e) {
                        throw new FileAlreadyExistsException(target + " exists");
                    }
                    Files.deleteIfExists(checksumOf(target));
                }
            } finally {
                Files.deleteIfExists(temp);
            }
        }

        @Override
        public synchronized void cancel() {
            if (done) {
                return;
            }
            done = true;
            try {
                out.close();
            } catch (IOException ignored) { // the file is deleted anyway
            }
            try {
                Files.deleteIfExists(temp);
            } catch (IOException ignored) { // a leftover .tmp file: Spark's logs and stores ignore it
            }
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        if (other != null) {
            return other.open(path);
        }
        try {
            return fs.open(path);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        if (other != null) {
            return other.list(path, filter);
        }
        try {
            return fs.listStatus(path, filter);
        } catch (FileNotFoundException e) {
            return new FileStatus[0];
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public void mkdirs(Path path) {
        if (other != null) {
            other.mkdirs(path);
            return;
        }
        try {
            Files.createDirectories(local(path));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public boolean exists(Path path) {
        return other != null ? other.exists(path) : Files.exists(local(path));
    }

    @Override
    public void delete(Path path) {
        if (other != null) {
            other.delete(path);
            return;
        }
        try {
            fs.delete(path, true); // its checksum file too
        } catch (FileNotFoundException e) {
            // gone already: what was asked
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public boolean isLocal() {
        return other != null ? other.isLocal() : true;
    }

    @Override
    public Path createCheckpointDirectory() {
        if (other != null) {
            return other.createCheckpointDirectory();
        }
        Path qualified = fs.makeQualified(path);
        mkdirs(qualified);
        return qualified;
    }
}
