"""Shared fixtures: one SparkSession and one Kafka broker per test session (both started lazily)."""

import pytest

# The real Kubernetes API server fixtures (kube_env, kube, kube_namespace): tests/kube/fixtures.py.
pytest_plugins = ["kube.fixtures"]


@pytest.fixture(scope="session")
def spark():
    """The test kit's local SparkSession (local[2]), shared by every test that asks for it."""
    from streamlets.testkit import spark_session

    session = spark_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real single-node Kafka broker (KRaft) for the whole session; topics are per test."""
    from blueprint.sandbox.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    yield broker
    broker.stop()


def pytest_collection_modifyitems(session, config, items):
    """Three phases, the order kept within each: the tests that need no cluster toolchain; then
    those that do (the `toolchain` fixture, directly or through kube_env, kube_cluster, ...: they
    wait for dev/test's background build, which the first phase leaves time for); then the
    end-to-end tests (marker e2e), so their cluster (kube_cluster, session-scoped) lives only
    while they run, not beside the rest of the suite."""

    def phase(item) -> int:
        if item.get_closest_marker("e2e") is not None:
            return 2
        return 1 if "toolchain" in getattr(item, "fixturenames", ()) else 0

    items.sort(key=phase)  # stable
