"""The StreamletApplication CRD and the operator's chart on a real kube-apiserver: the built
example is stored unchanged (nothing pruned), bad resources are rejected by the server itself,
the printer columns show the status, and `helm install` of the chart is accepted.

Needs dev/k8s-env (kube-apiserver, etcd, kubectl, helm); skipped without it.
"""

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprint.cli import app

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamlets-operator"
NAMESPACE = "apps"


@pytest.fixture(scope="module")
def server(kube):
    """The session's real API server (tests/kube) with the chart's CRDs and the apps namespace."""
    kube.kubectl("apply", "-f", str(CHART / "crds"), check=True)
    kube.wait_crd_established("streamletapplications.streamlets.io")
    kube.kubectl("create", "namespace", NAMESPACE)  # may exist from an earlier module of the session
    yield kube


@pytest.fixture(scope="module")
def example() -> dict:
    result = CliRunner().invoke(app, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                      "--image", "registry.example/fd:1", "--kafka", "kafka:9092",
                                      "--namespace", NAMESPACE, "streamlets.stats.kubernetes.executor.instances=2"])
    assert result.exit_code == 0, result.stderr
    return yaml.safe_load(result.stdout)


def apply(server, resource: dict):
    return server.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))


def test_the_built_example_is_stored_unchanged(server, example):
    result = apply(server, example)
    assert result.returncode == 0, result.stderr
    stored = yaml.safe_load(server.kubectl("get", "sapp", "flight-delays", "-n", NAMESPACE, "-o", "yaml",
                                           check=True).stdout)
    defaults = {"imagePullPolicy": "IfNotPresent", "deleteTopicsOnDelete": False,
                "topics": [{"schemaRegistry": False, **t} for t in example["spec"]["topics"]]}
    assert stored["spec"] == {**example["spec"], **defaults}  # nothing pruned (Avro schemas intact)


@pytest.mark.parametrize("change, message", [
    (lambda s: s["streamlets"][0]["scale"].update(executors=-1), "greater than or equal to 0"),
    (lambda s: s["streamlets"][0].update(name="Flights"), "spec.streamlets[0].name"),
    (lambda s: s.pop("image"), "spec.image: Required value"),
    (lambda s: s["topics"][0].update(name="flight events"), "spec.topics[0].name"),
    (lambda s: s["streamlets"].append(copy.deepcopy(s["streamlets"][0])), "Duplicate value"),
    (lambda s: s.update(upgradeMode="sometimes"), "spec.upgradeMode"),
])
def test_the_server_rejects_bad_resources(server, example, change, message):
    bad = copy.deepcopy(example)
    bad["metadata"]["name"] = "bad"
    change(bad["spec"])
    result = apply(server, bad)
    assert result.returncode != 0
    assert message in result.stderr


def test_printer_columns_show_the_status(server, example):
    assert apply(server, example).returncode == 0
    server.kubectl("patch", "sapp", "flight-delays", "-n", NAMESPACE, "--subresource=status", "--type=merge",
                   "-p", '{"status": {"phase": "Running", "streamletCount": 5, "ready": "4/5"}}', check=True)
    header, row = server.kubectl("get", "sapp", "-n", NAMESPACE, check=True).stdout.splitlines()
    assert header.split() == ["NAME", "STREAMLETS", "PHASE", "READY", "AGE"]
    assert row.split()[:4] == ["flight-delays", "5", "Running", "4/5"]


@pytest.mark.parametrize("release, sets", [("cluster-wide", ["replicas=2"]),
                                           ("namespaced", [f"watchNamespaces={{{NAMESPACE}}}"])])
def test_helm_install_is_accepted(server, release, sets):
    namespace = f"op-{release}"
    args = ["install", release, str(CHART), "--namespace", namespace, "--create-namespace", "--skip-crds",
            "--wait=false", "--timeout=60s"]
    for s in sets:
        args += ["--set", s]
    result = server.helm(*args)
    assert result.returncode == 0, result.stderr
    deployments = server.kubectl("get", "deployments", "-n", namespace, "-o", "name", check=True).stdout.split()
    assert deployments == [f"deployment.apps/{release}-streamlets-operator"]
