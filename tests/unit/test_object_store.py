"""Checkpoints on an object store: the run config's `storage` section (streamlets.runtime.object_store),
read by the sandbox (blueprint.sandbox.localconfig) and checked by the config check; the Spark
settings it gives carry no credential; the S3A connector's packages match Spark's Hadoop."""

import textwrap
from pathlib import Path

import pytest

from blueprint.configcheck import _check_entry, config_entries
from blueprint.sandbox.localconfig import LocalConfigError, load_settings, load_storage
from streamlets.runtime.object_store import (ENVIRONMENT_PROVIDER, PROFILE_PROVIDER, ObjectStore, StorageConfigError,
                                             object_store)
from streamlets.runtime.jars import S3A_EXCLUDES, connectors_in_spark_home, hadoop_version, s3a_packages

SECRET = "wJalrXUtnFEMI-not-a-real-key"


def write(tmp_path: Path, text: str, name: str = "run.conf") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_storage_section_in_hocon(tmp_path):
    path = write(tmp_path, """
        streamlets.stats.spark.spark.sql.shuffle.partitions = 2
        storage {
          checkpoints = "s3a://bucket/flight-delays/"
          s3a { endpoint = "http://127.0.0.1:9000", path-style-access = true }
        }
    """)
    store = load_storage(path, [])
    assert store == ObjectStore("s3a://bucket/flight-delays/", endpoint="http://127.0.0.1:9000", path_style_access=True)
    assert store.layout().checkpoints("app", "stats") == "s3a://bucket/flight-delays/checkpoints/app/stats"
    assert store.layout().savepoints == "s3a://bucket/flight-delays/savepoints"
    assert store.layout().dumps == "s3a://bucket/flight-delays/dumps"
    conf = store.spark_conf()
    assert conf == {"spark.hadoop.fs.s3a.aws.credentials.provider": ENVIRONMENT_PROVIDER,
                    "spark.hadoop.fs.s3a.input.stream.type": "classic",  # sees overwrites (INPUT_STREAM)
                    "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
                    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                    "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                    "spark.hadoop.fs.s3a.path.style.access": "true"}
    assert load_settings(path, [], ["stats"])["stats"].spark == {"spark.sql.shuffle.partitions": "2"}  # storage is no streamlet's


def test_no_storage_section_keeps_everything_in_the_state_folder(tmp_path):
    assert load_storage(write(tmp_path, 'streamlets.stats.config-parameters.x = 1\n'), []) is None
    assert load_storage(None, []) is None


def test_credentials_file_and_relative_paths(tmp_path, monkeypatch):
    path = write(tmp_path, """
        storage.checkpoints = state-root
        storage.s3a.credentials-file = secrets/aws
        storage.s3a.profile = minio
    """, "conf/run.conf")
    store = load_storage(path, [])
    assert store.checkpoints == str((tmp_path / "conf" / "state-root").resolve())  # a folder: against the file's
    assert not store.is_s3a and store.spark_conf() == {}
    assert store.environment() == {"AWS_SHARED_CREDENTIALS_FILE": str((tmp_path / "conf" / "secrets" / "aws").resolve()),
                                   "AWS_PROFILE": "minio"}
    s3 = ObjectStore("s3a://b/p", credentials_file=str(tmp_path / "creds"))
    assert s3.spark_conf()["spark.hadoop.fs.s3a.aws.credentials.provider"] == PROFILE_PROVIDER
    assert "does not exist" in s3.missing_credentials()
    (tmp_path / "creds").write_text(f"[default]\naws_access_key_id = a\naws_secret_access_key = {SECRET}\n")
    assert s3.missing_credentials() is None
    assert SECRET not in repr(s3.spark_conf()) + repr(s3.environment())


def test_environment_credentials(monkeypatch):
    store = ObjectStore("s3a://b/p")
    assert store.missing_credentials({}) == ("the checkpoint root s3a://b/p needs S3 credentials: set AWS_ACCESS_KEY_ID "
                                             "and AWS_SECRET_ACCESS_KEY (or storage.s3a.credentials-file)")
    assert store.missing_credentials({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": SECRET}) is None
    assert ObjectStore("/tmp/x").missing_credentials({}) is None  # a local root needs none
    assert "endpoint" not in " ".join(store.spark_conf())  # AWS's own endpoint and region chain


@pytest.mark.parametrize("values, words", [
    ({"checkpoints": "s3a://b", "s3a.secret-key": "x"}, "storage.s3a.secret-key: unknown setting"),
    ({"s3a.endpoint": "http://h:1"}, "storage.checkpoints is missing"),
    ({"checkpoints": "gs://b/p"}, "is neither s3a://bucket/prefix nor a folder"),
    ({"checkpoints": "s3a://"}, "names no bucket"),
    ({"checkpoints": "s3a://b", "s3a.path-style-access": "sometimes"}, "is not true or false"),
    ({"checkpoints": "s3a://b", "s3a.endpoint": "127.0.0.1:9000"}, "is no http:// or https:// URL"),
])
def test_bad_settings_name_the_key(values, words):
    with pytest.raises(StorageConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        object_store(values)


def test_bad_setting_names_the_file(tmp_path):
    path = write(tmp_path, 'storage { checkpoints = "s3a://b/p", s3a.access-key = AKIA }\n')
    with pytest.raises(LocalConfigError) as e:
        load_storage(path, [])
    assert str(e.value).startswith(f"{path}: storage.s3a.access-key: unknown setting"), str(e.value)
    assert "storage.s3a.credentials-file" in str(e.value)  # the settings there are, listed


def test_config_check_knows_the_storage_section(tmp_path):
    path = write(tmp_path, 'storage { checkpoints = "s3a://b/p", s3a.endpoint = "http://h:9000", s3a.region = x }\n'
                           'storage.s3a.secret-key = nope\nstorage.s3a.path-style-access = maybe\n')
    entries, problems = config_entries([path], [])
    assert problems == []
    found = [p for e in entries for p in _check_entry(None, e)]  # type: ignore[arg-type]  (storage needs no blueprint)
    assert [(p.code, p.message.split(":")[0]) for p in found] == [
        ("unknown-config-key", "storage.s3a.secret-key"), ("invalid-config-value", "storage.s3a.path-style-access")]


def test_s3a_packages_match_sparks_hadoop_without_the_sdk_bundle(tmp_path, monkeypatch):
    hadoop = hadoop_version()
    packages = s3a_packages()
    assert packages[0] == f"org.apache.hadoop:hadoop-aws:{hadoop}"
    assert all(not p.startswith("software.amazon.awssdk:bundle") for p in packages)
    assert "software.amazon.awssdk:bundle" in S3A_EXCLUDES
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("spark-sql-kafka-0-10_2.13-4.1.1.jar", "spark-avro_2.13-4.1.1.jar", "hadoop-client-runtime-3.5.0.jar"):
        (jars / name).write_bytes(b"")
    assert connectors_in_spark_home("4.1.1") and not connectors_in_spark_home("4.1.1", s3a=True)
    (jars / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    assert connectors_in_spark_home("4.1.1", s3a=True)  # the image carries it: nothing resolved
