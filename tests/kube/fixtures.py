"""pytest fixtures for a real Kubernetes API server (see server.py). A plugin module rather than a
conftest so that tests anywhere (tests/integration, tests/k8s) can use it; tests/conftest.py
registers it in ``pytest_plugins`` (with kube.cluster_fixtures, the one-node cluster's)."""

from __future__ import annotations

import secrets

import pytest

from .server import KubeEnvMissing, KubeServer, load_env
from .toolchain import ToolchainFailed, wait_for_toolchain


@pytest.fixture(scope="session")
def toolchain(request) -> None:
    """Waits for dev/test's background build of the cluster toolchain (tests/kube/toolchain.py).
    Tests that use it, directly or through another fixture, run after the others (tests/conftest.py)."""
    failed = None
    try:
        waited = wait_for_toolchain()
    except ToolchainFailed as e:
        failed = str(e)
    if failed is not None:
        pytest.fail(failed, pytrace=False)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if waited >= 1 and reporter is not None:
        reporter.write_line(f"(waited {waited:.0f} s for the toolchain build, dev/toolchain)")


@pytest.fixture(scope="session")
def kube_env(toolchain) -> dict:
    """What dev/k8s-env built (paths of kube-apiserver, etcd, kubectl, helm, the CRD; versions)."""
    try:
        return load_env()
    except KubeEnvMissing as e:
        missing = str(e)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def kube(tmp_path_factory, kube_env) -> KubeServer:
    """One etcd + kube-apiserver for the whole session (started on first use, stopped at the end).
    Tests share it: give each its own namespace (``kube_namespace``) or unique names."""
    server = KubeServer(tmp_path_factory.mktemp("kube"), env=kube_env).start()
    yield server
    server.stop()


@pytest.fixture
def kube_namespace(kube) -> str:
    """A fresh namespace for one test. Deleting it only marks it Terminating (no namespace
    controller runs), so names are never reused."""
    name = f"t-{secrets.token_hex(4)}"
    kube.kubectl("create", "namespace", name, check=True)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false")
