"""The test suite's shared setup: fixtures (the session's SparkSession and Kafka broker, the real
Kubernetes API server and cluster) come from plugin modules, markers from folders, the Hypothesis
profile from $HYPOTHESIS_PROFILE, and the order of the tests from what they need.

What the tests share lives in tests/support (a package; pytest puts this folder on sys.path): test
modules import from it and never from one another."""

from pathlib import Path

import pytest

from support import profiles

# spark: support/spark.py; kafka_broker: support/kafka.py; the real Kubernetes API server
# (toolchain, kube_env, kube, kube_namespace): tests/kube/fixtures.py; the one-node cluster
# (kube_cluster, cluster_namespace): tests/kube/cluster_fixtures.py; the operator's (cluster, built,
# api): support/kube_operator.py; MinIO, an S3 server (minio): support/minio.py.
pytest_plugins = ["support.spark", "support.kafka", "kube.fixtures", "kube.cluster_fixtures", "support.kube_operator",
                  "support.minio", "support.registry"]

profiles.load()

TESTS = Path(__file__).parent
# What a test's folder says it needs: the markers every test in it gets (pytest -m selects on
# them), and no other of these (a module marking itself otherwise is refused).
FOLDER_MARKERS = {
    "unit": (),
    "integration": ("integration",),   # a real Kafka broker and/or Spark
    "k8s": ("integration", "k8s"),     # also a real Kubernetes API server (dev/k8s-env)
    "e2e": ("e2e",),                   # a real one-node cluster (dev/cluster; root)
}
TIER_MARKERS = {"integration", "k8s", "e2e"}


# The two lanes dev/test runs side by side (pytest --lane): "local", the unit tier and the tests that
# need no cluster toolchain (phases 0 and 1 below); "cluster", those that do (phases 2 and 3).
LANES = {"local": (0, 1), "cluster": (2, 3)}


def pytest_addoption(parser):
    parser.addoption("--lane", choices=sorted(LANES), default=None,
                     help="run only this lane's tests: " + "; ".join(f"{k}: phases {v}" for k, v in LANES.items())
                     + " (tests/conftest.py); default: every test")


def folder_markers(item) -> tuple[str, ...]:
    """The markers of `item`'s folder under tests/ (FOLDER_MARKERS; none outside those folders)."""
    try:
        folder = Path(item.path).relative_to(TESTS).parts[0]
    except ValueError:
        return ()
    return FOLDER_MARKERS.get(folder, ())


def pytest_collection_modifyitems(session, config, items):
    """Markers from folders: each test gets its folder's markers (FOLDER_MARKERS); a module that
    marks itself with a tier marker its folder does not give is a usage error naming it.

    Then four phases, the order kept within each: the unit tier (no marker: pure Python, in a
    process that has run nothing yet; after the integration tier, whose Spark session, clients and
    objects this process keeps, the verifier's property test took 254 s instead of 51); the other
    tests that need no cluster toolchain; then those that do (the `toolchain` fixture, directly or
    through kube_env, kube_cluster, ...: they wait for dev/test's background build, which the first
    phases leave time for); then the end-to-end tests (marker e2e), so their cluster
    (kube_cluster, session-scoped) lives only while they run, not beside the API server's tests.
    With --lane, only that lane's phases run (LANES: dev/test runs both lanes side by side)."""
    wrong = set()
    for item in items:
        wanted = folder_markers(item)
        own = {m.name for m in item.iter_markers() if m.name in TIER_MARKERS}
        if own - set(wanted):
            wrong.add(f"{item.path}: marked {', '.join(sorted(own - set(wanted)))}, but its folder gives "
                      f"{', '.join(wanted) or 'no tier marker'} (move it, or drop the marker)")
        for name in wanted:
            if name not in own:
                item.add_marker(name)
    if wrong:
        raise pytest.UsageError("markers disagree with folders (tests/conftest.py FOLDER_MARKERS):\n"
                                + "\n".join(sorted(wrong)))

    def phase(item) -> int:
        if item.get_closest_marker("e2e") is not None:
            return 3
        if "toolchain" in getattr(item, "fixturenames", ()):
            return 2
        return 1 if any(item.get_closest_marker(m) for m in TIER_MARKERS) else 0

    items.sort(key=phase)  # stable
    lane = config.getoption("--lane")
    if lane is not None:
        kept, left = [], []
        for item in items:
            (kept if phase(item) in LANES[lane] else left).append(item)
        config.hook.pytest_deselected(items=left)
        items[:] = kept
