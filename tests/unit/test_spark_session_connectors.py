"""Where a session's Kafka and Avro connectors come from: among Spark's own jars in the streamlet
image ($SPARK_HOME/jars, docker/connectors.py), else resolved by Spark into the cache."""

from streamlets.runtime.jars import connector_packages, connectors_in_spark_home


def test_connectors_in_spark_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    jars = tmp_path / "jars"
    jars.mkdir()
    assert not connectors_in_spark_home("4.1.1")
    (jars / "spark-sql-kafka-0-10_2.13-4.1.1.jar").write_bytes(b"")
    assert not connectors_in_spark_home("4.1.1")  # both, or the packages are resolved
    (jars / "spark-avro_2.13-4.1.1.jar").write_bytes(b"")
    assert connectors_in_spark_home("4.1.1")
    assert not connectors_in_spark_home("4.1.2")  # the versions of this Spark
    assert [c.split(":")[1] for c in connector_packages("4.1.1")] == ["spark-sql-kafka-0-10_2.13", "spark-avro_2.13"]

