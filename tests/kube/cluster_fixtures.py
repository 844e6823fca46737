"""pytest fixtures for the real cluster of dev/cluster.py (``dev/cluster``).

``kube_cluster`` starts the cluster in a temporary directory on first use and takes it down (and
deletes its state but the logs) at the end of the session; a watcher process takes it down too
if the session is killed. The cluster dies with its test session. It skips, saying what is
missing, when this machine cannot run it (not root, dev/k8s-node-env not run, tools missing).

For a quicker edit-run loop, start one with ``dev/cluster up --state-dir DIR`` and run pytest
with ``STREAMLETS_CLUSTER_DIR=DIR``: the fixture uses that cluster (starting it if needed) and
leaves it running.

The number of worker nodes: ``STREAMLETS_CLUSTER_NODES`` (CLUSTER_NODES_ENV; default
DEFAULT_NODES, two: the e2e suite runs on a cluster of several nodes, as a company's is; a shared
cluster: the number it was started with). Tests that need several nodes (test_cluster_nodes.py,
the flight-delays run on S3) skip on a one-node cluster, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
import secrets
import time

import pytest

from dev.cluster import ClusterUnavailable, KubeCluster, check_host, load_cluster_env

CLUSTER_NODES_ENV = "STREAMLETS_CLUSTER_NODES"
DEFAULT_NODES = 2


def cluster_nodes_asked(shared: bool = False) -> int | None:
    """$STREAMLETS_CLUSTER_NODES as a number; when unset, DEFAULT_NODES for a cluster of the
    session's own, None for a shared one (the number it was started with)."""
    value = os.environ.get(CLUSTER_NODES_ENV)
    return int(value) if value else (None if shared else DEFAULT_NODES)


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory, toolchain) -> Iterator[KubeCluster]:
    try:
        env = load_cluster_env()
        check_host(env)
    except ClusterUnavailable as e:
        pytest.skip(f"no Kubernetes cluster: {e}")
    shared = os.environ.get("STREAMLETS_CLUSTER_DIR")
    nodes = cluster_nodes_asked(shared=bool(shared))
    if shared:
        yield KubeCluster(shared, env=env, nodes=nodes).up()
        return
    cluster = KubeCluster(tmp_path_factory.mktemp("cluster"), env=env, nodes=nodes)
    try:
        cluster.up(watch_pid=os.getpid(), watch_purge=True)
    except ClusterUnavailable as e:
        pytest.skip(f"no Kubernetes cluster: {e}")
    try:
        yield cluster
    finally:
        cluster.down(purge=True)


@pytest.fixture
def two_nodes(kube_cluster) -> list:
    """The cluster's nodes (dev.cluster.Node, the first two) when it has two or more; skips
    otherwise, saying how to run with more."""
    if kube_cluster.node_count < 2:
        pytest.skip(f"the cluster has {kube_cluster.node_count} node: run with {CLUSTER_NODES_ENV}=2")
    return kube_cluster.nodes[:2]


@pytest.fixture
def cluster_namespace(kube_cluster) -> Iterator[str]:
    """A fresh namespace in ``kube_cluster`` for one test, deleted afterwards (not waited for)."""
    name = f"t-{secrets.token_hex(4)}"
    kube_cluster.kubectl("create", "namespace", name, check=True)
    deadline = time.monotonic() + 30  # pods are refused until the controller made its "default" SA
    while kube_cluster.kubectl("get", "serviceaccount", "default", f"--namespace={name}").returncode != 0:
        if time.monotonic() > deadline:
            pytest.fail(f"no default service account in namespace {name} after 30s")
        time.sleep(0.2)
    yield name
    kube_cluster.kubectl("delete", "namespace", name, "--wait=false")
