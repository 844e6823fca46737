"""`kubectl streamlets`: the plugin run by the real kubectl (plugin discovery on PATH) against the
real API server with the StreamletApplication CRD. No operator runs here: these tests check what
the plugin writes to the resource; what the operator makes of it is tested with the operator."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flight-delays" / "blueprint.yaml"
CRDS = ROOT / "charts" / "streamlets-operator" / "crds"


@pytest.fixture(scope="module")
def plugin_env(kube, tmp_path_factory):
    """Environment for kubectl with `kubectl-streamlets` of this checkout first on PATH."""
    kube.kubectl("apply", "-f", str(CRDS), check=True)
    kube.wait_crd_established("streamletapplications.streamlets.io")
    bin_dir = tmp_path_factory.mktemp("plugin-bin")
    script = bin_dir / "kubectl-streamlets"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m blueprint.cli.kubectl \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = kube.subprocess_env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def kubectl(env, *args: str) -> subprocess.CompletedProcess:
    # kubectl finds plugins only when the plugin name comes first: the kubeconfig is in $KUBECONFIG.
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)


def spec_of(env, namespace: str, name: str = "flight-delays") -> dict:
    got = kubectl(env, "get", "sapp", name, "-n", namespace, "-o", "yaml")
    assert got.returncode == 0, got.stderr
    return yaml.safe_load(got.stdout)


def streamlet(resource: dict, name: str) -> dict:
    return next(s for s in resource["spec"]["streamlets"] if s["name"] == name)


def deploy(env, namespace: str, *extra: str) -> subprocess.CompletedProcess:
    return kubectl(env, "streamlets", "deploy", str(EXAMPLE), "--image", "registry.example/fd:1",
                   "--kafka", "kafka:9092", "-n", namespace, *extra)


def test_deploy_list_status_undeploy(plugin_env, kube_namespace):
    env, ns = plugin_env, kube_namespace
    first = deploy(env, ns)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"streamletapplication.streamlets.io/flight-delays created in {ns}"
    resource = spec_of(env, ns)
    assert [s["name"] for s in resource["spec"]["streamlets"]] == ["flights", "weather", "enrich", "stats", "files"]

    again = deploy(env, ns, "streamlets.stats.kubernetes.executor.instances=3")
    assert again.returncode == 0 and "configured" in again.stdout
    resource = spec_of(env, ns)
    assert streamlet(resource, "stats")["scale"]["executors"] == 3
    assert resource["metadata"]["generation"] == 2

    listed = kubectl(env, "streamlets", "list", "-n", ns)
    assert listed.returncode == 0, listed.stderr
    [header, row] = listed.stdout.strip().splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "STREAMLETS", "PHASE", "READY", "IMAGE"]
    assert row.split() == [ns, "flight-delays", "5", "-", "-", "registry.example/fd:1"]

    shown = kubectl(env, "streamlets", "status", "flight-delays", "-n", ns)
    assert shown.returncode == 0, shown.stderr
    names = {"flights", "weather", "enrich", "stats", "files"}
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines() if line.split()
            and line.split()[0] in names}  # (a narrow terminal wraps the header)
    assert set(rows) == names, shown.stdout
    assert rows["stats"][1:6] == ["-", "PENDING", "0/3", "0", "off"]  # nothing deployed yet: no operator here

    gone = kubectl(env, "streamlets", "undeploy", "flight-delays", "-n", ns)
    assert gone.returncode == 0 and "deleted" in gone.stdout
    assert kubectl(env, "get", "sapp", "flight-delays", "-n", ns).returncode != 0
    unknown = kubectl(env, "streamlets", "undeploy", "flight-delays", "-n", ns)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == f"error: no application 'flight-delays' in namespace '{ns}'"


def test_scale_and_configure_change_only_what_they_name(plugin_env, kube_namespace):
    env, ns = plugin_env, kube_namespace
    assert deploy(env, ns).returncode == 0
    before = spec_of(env, ns)

    scaled = kubectl(env, "streamlets", "scale", "flight-delays", "stats", "4", "-n", ns)
    assert scaled.returncode == 0, scaled.stderr
    after = spec_of(env, ns)
    assert streamlet(after, "stats")["scale"]["executors"] == 4
    for name in ("flights", "weather", "enrich", "files"):
        assert streamlet(after, name) == streamlet(before, name)

    configured = kubectl(env, "streamlets", "configure", "flight-delays", "-n", ns,
                         "streamlets.stats.config-parameters.watermark-delay=2 hours",
                         "streamlets.enrich.spark.spark.sql.shuffle.partitions=8",
                         "streamlets.enrich.autoscaling.mode=passive", "streamlets.enrich.autoscaling.max-executors=3",
                         "streamlets.enrich.autoscaling.stabilization-interval=2 minutes")
    assert configured.returncode == 0, configured.stderr
    assert configured.stdout.strip() == "flight-delays: configured enrich, stats"
    now = spec_of(env, ns)
    assert streamlet(now, "stats")["configParameters"]["watermark-delay"] == "2 hours"
    assert streamlet(now, "enrich")["sparkConf"]["spark.sql.shuffle.partitions"] == "8"
    assert streamlet(now, "enrich")["autoscaling"] == {"mode": "passive", "maxExecutors": 3,
                                                       "stabilizationIntervalSeconds": 120.0}
    assert streamlet(now, "files") == streamlet(before, "files")


@pytest.mark.parametrize("args, words", [
    (["configure", "flight-delays", "streamlets.stats.config-parameters.watermark-delay=forever"],
     "'forever' is not a duration"),
    (["configure", "flight-delays", "streamlets.stats.config-parameters.nope=1"],
     "streamlet 'stats' declares no config parameter 'nope'"),
    (["configure", "flight-delays", "streamlets.ghost.spark.spark.x=1"], "has no streamlet 'ghost'"),
    (["configure", "flight-delays", "streamlets.enrich.autoscaling.max-executors=0"],
     "streamlets.enrich.autoscaling.max-executors = 0: must be at least min-executors (1)"),
    (["scale", "flight-delays", "ghost", "2"], "has no streamlet 'ghost'"),
    (["status", "no-such-app"], "no application 'no-such-app'"),
])
def test_refusals_change_nothing(plugin_env, kube_namespace, args, words):
    env, ns = plugin_env, kube_namespace
    assert deploy(env, ns).returncode == 0
    before = spec_of(env, ns)
    refused = kubectl(env, "streamlets", *args, "-n", ns)
    assert refused.returncode == 1, refused.stdout
    assert words in refused.stderr and "Traceback" not in refused.stderr
    assert spec_of(env, ns)["metadata"]["generation"] == before["metadata"]["generation"]


def test_deploy_refuses_an_unsound_configuration(plugin_env, kube_namespace):
    refused = deploy(plugin_env, kube_namespace, "streamlets.stats.config-parameters.watermark-delay=forever")
    assert refused.returncode == 1
    assert "'forever' is not a duration" in refused.stderr and "nothing was built" in refused.stderr
    assert kubectl(plugin_env, "get", "sapp", "-n", kube_namespace, "-o", "name").stdout.strip() == ""
