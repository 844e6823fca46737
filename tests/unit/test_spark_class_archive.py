"""The driver JVM's class archive (AppCDS): where it lives, and when a session maps it."""

from streamlets.runtime.spark_session import CLASS_ARCHIVE_OFF, class_archive, class_archive_option, spark_version


def test_the_archive_is_mapped_once_written_and_not_when_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMLETS_CACHE", str(tmp_path))
    monkeypatch.delenv(CLASS_ARCHIVE_OFF, raising=False)
    archive = class_archive()
    assert archive.parent == tmp_path / "cds" and archive.name.startswith(f"spark-{spark_version()}-")
    assert class_archive_option() is None  # not written yet: JVMs start as before
    archive.parent.mkdir()
    archive.write_bytes(b"x")
    option = class_archive_option()
    assert option is not None and f"-XX:SharedArchiveFile={archive}" in option.split()
    assert "-Xshare:auto" in option.split()  # one that does not fit is skipped, never fatal
    monkeypatch.setenv(CLASS_ARCHIVE_OFF, "0")
    assert class_archive_option() is None


def test_another_java_runtime_gets_another_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMLETS_CACHE", str(tmp_path))
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"one build")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    first = class_archive()
    (java_home / "bin" / "java").write_bytes(b"another build")
    assert class_archive() != first
