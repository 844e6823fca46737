"""The session's SparkSession (fixture ``spark``; a pytest plugin of tests/conftest.py), and the
JVM options of every Spark driver the tests start.

The tests' drivers (this session's, the sandboxes' and the CLIs' child processes) compile with
HotSpot's C1 only (`-XX:TieredStopAtLevel=1`, through Spark's launcher variable
SPARK_SUBMIT_OPTS, which its child processes inherit): a test's micro-batches are small, and C2's
compiler threads spent a third of the suite's CPU on code that ran a few times (the flight-delays
savepoint test: 130 CPU seconds with C2, 82 without, on this 2-core machine). The Kafka broker
does the same (blueprint.sandbox.kafka_broker). Users' runs and bench/ keep the JVM's defaults
(bench/bench_autoscale.py, which runs an e2e module, sets STREAMLETS_TEST_JAVA_OPTIONS to ""). A
SPARK_SUBMIT_OPTS already in the environment is kept.
"""

import os

import pytest

TEST_JAVA_OPTIONS = os.environ.get("STREAMLETS_TEST_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
if TEST_JAVA_OPTIONS:
    os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JAVA_OPTIONS)


@pytest.fixture(scope="session")
def spark():
    """The test kit's local SparkSession (local[2]), shared by every test that asks for it."""
    from streamlets.testkit import spark_session

    session = spark_session()
    yield session
    session.stop()
