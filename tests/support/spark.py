"""The session's SparkSession (fixture ``spark``; a pytest plugin of tests/conftest.py)."""

import pytest


@pytest.fixture(scope="session")
def spark():
    """The test kit's local SparkSession (local[2]), shared by every test that asks for it."""
    from streamlets.testkit import spark_session

    session = spark_session()
    yield session
    session.stop()
