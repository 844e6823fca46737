"""streamlets.runtime.storage.HadoopStorage (Hadoop's FileSystem through the JVM, what s3a:// and abfss://
savepoints use) on the one Hadoop file system available here, file://, against LocalStorage."""

from streamlets.state.savepoint import keep_in_savepoint
from streamlets.runtime.storage import HadoopStorage, LocalStorage, join


def test_hadoop_storage_does_what_local_storage_does(spark, tmp_path):
    hadoop = HadoopStorage(spark)
    for storage, root in ((LocalStorage(), str(tmp_path / "local")), (hadoop, f"file://{tmp_path}/hadoop")):
        storage.write_text(join(root, "a", "metadata"), '{"id": "q"}')
        storage.write_text(join(root, "a", "offsets", "0"), "v1")
        storage.copy_file(join(root, "a", "offsets", "0"), join(root, "b", "offsets", "0"))
        assert storage.exists(join(root, "a", "metadata")) and not storage.exists(join(root, "nope"))
        assert sorted(storage.files(root)) == ["a/metadata", "a/offsets/0", "b/offsets/0"]
        assert storage.children(root) == ["a", "b"] and storage.children(join(root, "nope")) == []
        assert storage.read_text(join(root, "b", "offsets", "0")) == "v1"
        storage.rename(join(root, "b"), join(root, "c", "b"))
        assert storage.children(root) == ["a", "c"] and storage.read_text(join(root, "c", "b", "offsets", "0")) == "v1"
        storage.delete(join(root, "c"))
        storage.delete(join(root, "never-there"))
        assert storage.children(root) == ["a"]
    assert (tmp_path / "hadoop" / "a" / "metadata").read_text() == '{"id": "q"}'
    assert keep_in_savepoint("a/metadata", 0)
