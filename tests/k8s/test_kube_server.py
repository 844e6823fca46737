"""The Kubernetes test environment is real: a kube-apiserver backed by etcd that validates custom
resources against the Spark Operator's actual CRD, enforces RBAC, and is driven by real kubectl
and helm binaries (all built by dev/k8s-env)."""

from __future__ import annotations

import copy
import json
import pathlib
import subprocess
import sys
import time

import pytest

from support.waiting import wait_until

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"


def spark_application(name: str, **spec) -> dict:
    """A minimal valid SparkApplication (a PySpark job); ``spec`` entries override."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "pythonVersion": "3",
            "sparkVersion": "4.2.0",
            "image": "spark:4.2.0-python3",
            "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
            "driver": {"cores": 1, "memory": "512m", "serviceAccount": "spark"},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            **spec,
        },
    }


def test_server_is_ready_and_versions_match(kube):
    status, body = kube.get("/readyz?verbose")
    assert status == 200, body
    assert b"[+]etcd ok" in body
    version = json.loads(kube.kubectl("version", "-o", "json", check=True).stdout)
    assert version["serverVersion"]["gitVersion"] == kube.env["kubernetes_version"]
    assert version["clientVersion"]["gitVersion"] == kube.env["kubernetes_version"]


def test_spark_application_crd_validates(kube, kube_namespace, tmp_path):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    kube.install_spark_operator_crd()
    api = kube.api_client()
    custom = client.CustomObjectsApi(api)

    created = custom.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL,
                                                     spark_application("pi"))
    assert created["metadata"]["uid"] and created["spec"]["type"] == "Python"

    invalid = spark_application("cobol", type="Cobol")
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, invalid)
    assert rejected.value.status == 422
    status = json.loads(rejected.value.body)
    assert status["reason"] == "Invalid"
    assert any(c["field"] == "spec.type" and "Cobol" in c["message"] for c in status["details"]["causes"]), status

    missing = spark_application("no-driver")
    del missing["spec"]["driver"]
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, missing)
    assert rejected.value.status == 422 and "spec.driver" in rejected.value.body

    # real kubectl apply (client-side) of a manifest file, then a listing across namespaces
    manifest = tmp_path / "pi-2.json"
    manifest.write_text(json.dumps({**spark_application("pi-2"),
                                    "metadata": {"name": "pi-2", "namespace": kube_namespace}}))
    assert "created" in kube.apply_file(manifest)
    bad = copy.deepcopy(json.loads(manifest.read_text()))
    bad["spec"]["executor"]["instances"] = "many"
    manifest.write_text(json.dumps(bad))
    res = kube.kubectl("apply", "-f", str(manifest))
    assert res.returncode != 0 and "spec.executor.instances" in res.stderr, res.stderr

    listed = kube.kubectl("get", "sparkapplications", "-A", "-o", "json", check=True)
    names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in json.loads(listed.stdout)["items"]}
    assert {(kube_namespace, "pi"), (kube_namespace, "pi-2")} <= names
    table = kube.kubectl("get", "sparkapplications", "-A", check=True).stdout
    assert "pi-2" in table


def test_rbac_is_enforced(kube, kube_namespace):
    """Admin (system:masters) may do anything; a service account with no bindings may not."""
    sa = f"system:serviceaccount:{kube_namespace}:operator"
    assert kube.kubectl("auth", "can-i", "create", "pods", "-n", kube_namespace).stdout.strip() == "yes"
    assert kube.kubectl("auth", "can-i", "list", "pods", "-n", kube_namespace, f"--as={sa}").stdout.strip() == "no"
    denied = kube.kubectl("get", "pods", "-n", kube_namespace, f"--as={sa}")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

    kube.kubectl("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", kube_namespace,
                 check=True)
    kube.kubectl("create", "rolebinding", "operator-reads-pods", "--role=pod-reader",
                 f"--serviceaccount={kube_namespace}:operator", "-n", kube_namespace, check=True)
    # the authorizer sees a new binding through its informer's cache, a moment after the create
    wait_until(lambda: kube.kubectl("auth", "can-i", "list", "pods", "-n", kube_namespace, f"--as={sa}").stdout.strip()
               == "yes", timeout=30, what="the rolebinding in force")
    assert kube.kubectl("auth", "can-i", "delete", "pods", "-n", kube_namespace, f"--as={sa}").stdout.strip() == "no"


def test_helm_runs(kube):
    res = kube.helm("version", "--short", check=True)
    assert res.stdout.startswith(kube.env["helm_version"]), res.stdout
    # helm talks to the server too (lists releases through the API; none installed)
    assert kube.helm("list", "-A", check=True).returncode == 0


def test_processes_die_with_the_test_process(kube_env, tmp_path):
    """etcd and kube-apiserver are SIGKILLed by the kernel when the process that started them dies,
    even by SIGKILL (no leftovers holding ports after a crashed or killed test run)."""
    script = (
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(pathlib.Path(__file__).parents[1])!r})\n"
        "from kube import KubeServer\n"
        f"server = KubeServer({str(tmp_path)!r}).start()\n"
        "print(server._etcd.pid, server._apiserver.pid, flush=True)\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2, f"the child did not start the server; see {tmp_path}"
        assert all(_alive(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie (not yet reaped by init) is dead
    except FileNotFoundError:
        return False
