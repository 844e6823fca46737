"""The operator's Helm chart: `helm lint --strict`, and what `helm template` renders for the
default values, namespaced mode and two replicas: security settings, probes, kopf's command
line, and least-privilege RBAC.

Needs a helm binary: ~/.cache/streamlets/helm/<version>/helm (dev/k8s-env installs it) or helm
on PATH; skipped otherwise.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamlets-operator"
RELEASE, NAMESPACE = "sops", "streamlets-system"
FULLNAME = f"{RELEASE}-streamlets-operator"
APP_RESOURCES = {"streamletapplications", "streamletapplications/status", "sparkapplications",
                 "persistentvolumeclaims", "secrets"}


def find_helm() -> str | None:
    """The newest helm under the streamlets cache, else helm on PATH."""
    cache = Path(os.environ.get("STREAMLETS_CACHE") or Path.home() / ".cache" / "streamlets")
    found = [p for p in (cache / "helm").glob("*/helm") if p.is_file() and os.access(p, os.X_OK)]
    if found:
        def version(p: Path) -> tuple:
            return tuple(int(x) if x.isdigit() else 0 for x in p.parent.name.lstrip("v").split("."))
        return str(max(found, key=version))
    return shutil.which("helm")


@pytest.fixture(autouse=True, scope="module")
def helm_binary(toolchain) -> str:
    """The helm binary, once dev/test's background toolchain build (dev/k8s-env builds helm) ended."""
    found = find_helm()
    if found is None:
        pytest.skip("no helm binary: run dev/k8s-env (installs it under ~/.cache/streamlets/helm/<version>/helm) "
                    "or put helm on PATH")
    return found


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm-config",
           "HELM_DATA_HOME": "/tmp/helm-data"}
    binary = find_helm()
    assert binary is not None, "no helm binary"
    result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def render(*sets: str, crds: bool = False) -> list[dict]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += [a for s in sets for a in ("--set", s)]
    if crds:
        args.append("--include-crds")
    return [d for d in yaml.safe_load_all(helm(*args).stdout) if d]


def of_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def deployment(docs: list[dict]) -> dict:
    (d,) = of_kind(docs, "Deployment")
    return d


def container(docs: list[dict]) -> dict:
    (c,) = deployment(docs)["spec"]["template"]["spec"]["containers"]
    return c


def grants(role: dict, resource: str) -> set[str]:
    return {v for rule in role["rules"] if resource in rule.get("resources", []) for v in rule["verbs"]}


@pytest.fixture(scope="module")
def default() -> list[dict]:
    return render()


@pytest.fixture(scope="module")
def namespaced() -> list[dict]:
    return render("watchNamespaces={a,b}")


@pytest.fixture(scope="module")
def two_replicas() -> list[dict]:
    return render("replicas=2")


# --- lint ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sets", [[], ["watchNamespaces={a,b}"], ["replicas=2"],
                                  ["leaderElection.enabled=false"],
                                  ["grafana.dashboard.enabled=true", "prometheus.rules.enabled=true"]])
def test_lint_strict(sets):
    result = helm("lint", "--strict", str(CHART), *[a for s in sets for a in ("--set", s)])
    assert "0 chart(s) failed" in result.stdout


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "streamlets-operator"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["replicas"] == 1 and values["watchNamespaces"] == []
    assert values["leaderElection"]["enabled"] is True
    assert values["grafana"]["dashboard"]["enabled"] is False and values["prometheus"]["rules"]["enabled"] is False


# --- the Deployment ------------------------------------------------------------------------

def test_security_settings(default):
    pod = deployment(default)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = container(default)
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "add" not in c["securityContext"]["capabilities"]
    # With a read-only root, /tmp is the one writable place.
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert pod["serviceAccountName"] == FULLNAME


def test_resources_and_liveness_probe(default):
    c = container(default)
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert set(c["resources"]["limits"]) == {"cpu", "memory"}
    probe = c["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    (port,) = [p for p in c["ports"] if p["name"] == probe["port"]]
    assert f"--liveness=http://0.0.0.0:{port['containerPort']}/healthz" in c["command"]


def test_cluster_wide_command(default):
    command = container(default)["command"]
    assert command[:2] == ["kopf", "run"]
    assert "--module=streamlets_operator" in command
    assert "--all-namespaces" in command
    assert not any(a.startswith("--namespace") for a in command)
    assert f"--peering={FULLNAME}" in command  # leader election is on by default
    assert deployment(default)["spec"]["replicas"] == 1


def test_operator_environment(default):
    env = {e["name"]: e for e in container(default)["env"]}
    assert env["STREAMLETS_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["STREAMLETS_STORAGE_SIZE"]["value"] == "10Gi"
    assert env["STREAMLETS_STORAGE_ACCESS_MODE"]["value"] == "ReadWriteOnce"
    docs = render("kafka.bootstrapServers=kafka:9092", "storage.size=50Gi")
    env = {e["name"]: e.get("value") for e in container(docs)["env"]}
    assert (env["STREAMLETS_KAFKA_BOOTSTRAP_SERVERS"], env["STREAMLETS_STORAGE_SIZE"]) == ("kafka:9092", "50Gi")


def test_the_charts_object_store_reaches_the_operators_render():
    """The chart's storage.checkpoints, s3a.* and secretName become the operator's environment,
    which its render reads (streamlets_operator.render.storage): an application without
    spec.storage gets its state on S3, no claim, and the Secret by secretKeyRef."""
    import copy

    from typer.testing import CliRunner

    from blueprint.cli import app as blueprint_cli
    from streamlets_operator import render as operator_render

    docs = render("storage.checkpoints=s3a://state/prod", "storage.s3a.endpoint=http://minio:9000",
                  "storage.s3a.pathStyleAccess=true", "storage.secretName=s3-credentials")
    env = {e["name"]: e.get("value") or "" for e in container(docs)["env"] if "value" in e}
    built = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                               "--image", "fd:1", "--kafka", "kafka:9092"])
    assert built.exit_code == 0, built.output
    body = yaml.safe_load(built.stdout)
    body["metadata"].update(namespace="apps", uid="1")
    for name, mount in (("flights", "source"), ("weather", "source"), ("files", "output")):
        next(x for x in body["spec"]["streamlets"] if x["name"] == name)["volumeMounts"] = {mount: f"{name}-files"}
    out = operator_render.render_all(copy.deepcopy(body), env=env)
    assert out["claim"] is None
    conf = out["streamlets"]["stats"][1]["spec"]["sparkConf"]
    assert (conf["spark.hadoop.fs.s3a.endpoint"], conf["spark.hadoop.fs.s3a.path.style.access"]) == ("http://minio:9000", "true")
    assert out["streamlets"]["stats"][1]["spec"]["executor"]["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "s3-credentials"
    # the chart's defaults (no object store) keep the claim
    plain = {e["name"]: e.get("value") or "" for e in container(render())["env"] if "value" in e}
    assert operator_render.render_all(copy.deepcopy(body), env=plain)["claim"] is not None


def test_the_charts_schema_registry_reaches_the_operators_render():
    """The chart's schemaRegistry becomes $STREAMLETS_SCHEMA_REGISTRY, which the operator's render
    reads: an application with registry topics and no spec.schemaRegistry gets the chart's
    registry in its run configs, its password Secret mounted; without it, it is refused; a spec's
    own registry wins."""
    import base64
    import copy

    from typer.testing import CliRunner

    from blueprint.cli import app as blueprint_cli
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets_operator import render as operator_render

    docs = render("schemaRegistry.url=https://registry.internal:8081", "schemaRegistry.username=streamlets",
                  "schemaRegistry.password.name=registry-user", "schemaRegistry.password.key=password")
    env = {e["name"]: e.get("value") or "" for e in container(docs)["env"] if "value" in e}
    built = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "tests" / "integration" / "apps" / "registry" / "blueprint.yaml"),
                                               "--image", "r:1", "--kafka", "kafka:9092"])
    assert built.exit_code == 0, built.output
    body = yaml.safe_load(built.stdout)
    body["metadata"].update(namespace="apps", uid="1")
    secret, sapp = operator_render.render_all(copy.deepcopy(body), env=env)["streamlets"]["scale"]
    registry = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"])).schema_registry
    assert registry is not None and (registry.url, registry.username, registry.password_file) == (
        "https://registry.internal:8081", "streamlets", "/etc/streamlets/secrets/registry-user/password")
    assert "/etc/streamlets/secrets/registry-user" in [m["mountPath"] for m in sapp["spec"]["executor"]["volumeMounts"]]
    plain = {e["name"]: e.get("value") or "" for e in container(render())["env"] if "value" in e}
    with pytest.raises(operator_render.SpecError, match="spec.schemaRegistry is not set"):
        operator_render.render_all(copy.deepcopy(body), env=plain)
    own = copy.deepcopy(body)  # a spec's own registry wins over the chart's
    own["spec"]["schemaRegistry"] = {"url": "http://team-registry:8081"}
    secret, _ = operator_render.render_all(own, env=env)["streamlets"]["scale"]
    registry = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"])).schema_registry
    assert registry is not None and (registry.url, registry.username) == ("http://team-registry:8081", None)


def test_two_replicas_use_peering(two_replicas):
    assert deployment(two_replicas)["spec"]["replicas"] == 2
    assert f"--peering={FULLNAME}" in container(two_replicas)["command"]
    (peering,) = of_kind(two_replicas, "ClusterKopfPeering")
    assert peering["apiVersion"] == "kopf.dev/v1" and peering["metadata"]["name"] == FULLNAME


def test_two_replicas_without_peering_are_refused():
    result = helm("template", RELEASE, str(CHART), "--set", "replicas=2", "--set", "leaderElection.enabled=false",
                  check=False)
    assert result.returncode != 0
    assert "leaderElection" in result.stderr


def test_standalone_without_leader_election():
    docs = render("leaderElection.enabled=false")
    command = container(docs)["command"]
    assert "--standalone" in command and not any(a.startswith("--peering") for a in command)
    assert not of_kind(docs, "ClusterKopfPeering") and not of_kind(docs, "KopfPeering")


# --- RBAC ----------------------------------------------------------------------------------

def test_cluster_wide_rbac(default):
    (app_role,) = [r for r in of_kind(default, "ClusterRole") if grants(r, "streamletapplications")]
    assert grants(app_role, "streamletapplications") == {"get", "list", "watch", "patch", "update"}
    assert grants(app_role, "streamletapplications/status") >= {"patch", "update"}
    assert grants(app_role, "sparkapplications") == {"create", "get", "list", "watch", "patch", "update", "delete"}
    assert grants(app_role, "persistentvolumeclaims") >= {"create", "delete"}
    assert grants(app_role, "secrets") >= {"create", "delete"}
    assert grants(app_role, "events") == {"create", "patch"}
    assert grants(app_role, "clusterkopfpeerings") == {"get", "list", "watch", "patch"}
    binding = [b for b in of_kind(default, "ClusterRoleBinding") if b["roleRef"]["name"] == app_role["metadata"]["name"]]
    assert binding and binding[0]["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    assert not of_kind(default, "Role")


SPARK_SA = f"{FULLNAME}-spark"


def test_namespaced_mode(namespaced):
    roles = [r for r in of_kind(namespaced, "Role") if r["metadata"]["name"] == FULLNAME]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["a", "b"]
    for role in roles:
        assert grants(role, "streamletapplications") == {"get", "list", "watch", "patch", "update"}
        assert grants(role, "kopfpeerings") == {"get", "list", "watch", "patch"}
    bindings = [b for b in of_kind(namespaced, "RoleBinding") if b["metadata"]["name"] == FULLNAME]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["a", "b"]
    assert all(b["subjects"][0]["namespace"] == NAMESPACE for b in bindings)
    # No ClusterRole reaches the applications or their children.
    for role in of_kind(namespaced, "ClusterRole"):
        assert not APP_RESOURCES & {r for rule in role["rules"] for r in rule["resources"]}, role["metadata"]["name"]
    command = container(namespaced)["command"]
    assert "--namespace=a" in command and "--namespace=b" in command and "--all-namespaces" not in command
    assert sorted(p["metadata"]["namespace"] for p in of_kind(namespaced, "KopfPeering")) == ["a", "b"]
    assert not of_kind(namespaced, "ClusterKopfPeering")


@pytest.mark.parametrize("sets", [[], ["watchNamespaces={a,b}"], ["replicas=2"]])
def test_no_wildcards_and_no_admin_bindings(sets):
    docs = render(*sets)
    roles = of_kind(docs, "Role") + of_kind(docs, "ClusterRole")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for key in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: {key} has *"
            assert not any("*" in r for r in rule.get("resources", []))
            assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"] and "impersonate" not in rule["verbs"]
            assert "nonResourceURLs" not in rule
    for binding in of_kind(docs, "RoleBinding") + of_kind(docs, "ClusterRoleBinding"):
        assert binding["roleRef"]["name"] not in ("cluster-admin", "admin", "edit")
        assert binding["roleRef"]["name"].startswith(FULLNAME)


def test_crds_are_in_the_chart():
    docs = render(crds=True)
    names = {d["metadata"]["name"] for d in of_kind(docs, "CustomResourceDefinition")}
    assert names == {"streamletapplications.streamlets.io", "kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"}


# --- monitoring ----------------------------------------------------------------------------

def test_no_dashboard_and_no_rules_by_default(default):
    assert not of_kind(default, "ConfigMap") and not of_kind(default, "PrometheusRule")


def test_grafana_dashboard_configmap():
    """The dashboard file in a ConfigMap with the Grafana sidecar's label."""
    docs = render("grafana.dashboard.enabled=true", "grafana.dashboard.namespace=monitoring",
                  "grafana.dashboard.annotations.grafana_folder=Streamlets")
    (cm,) = of_kind(docs, "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Streamlets"}
    (name,) = cm["data"]
    assert name.endswith(".json")
    assert json.loads(cm["data"][name]) == json.loads((CHART / "dashboards" / "streamlets.json").read_text())
    docs = render("grafana.dashboard.enabled=true", "grafana.dashboard.labels.grafana_dashboard=streamlets")
    (cm,) = of_kind(docs, "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "streamlets" and cm["metadata"]["namespace"] == NAMESPACE


def test_prometheus_rule():
    """The PrometheusRule carries the rules file's groups unchanged (its alert templates are not
    Helm's), with the labels a Prometheus's ruleSelector matches."""
    (rule,) = of_kind(render("prometheus.rules.enabled=true", "prometheus.rules.labels.release=kps"), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kps" and rule["metadata"]["namespace"] == NAMESPACE
    shipped = yaml.safe_load((CHART / "alerts" / "streamlets-rules.yaml").read_text())
    assert rule["spec"] == {"groups": shipped["groups"]}
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts == {"StreamletLagGrowing", "StreamletFailing", "DeadLettersAppearing"}
    assert "{{ $labels.streamlet }}" in rule["spec"]["groups"][0]["rules"][0]["annotations"]["summary"]


def test_spark_driver_service_account(namespaced, default):
    """Drivers run as the chart's Spark ServiceAccount, which may manage executors in its own
    namespace only; the operator renders it into every SparkApplication."""
    accounts = [a for a in of_kind(namespaced, "ServiceAccount") if a["metadata"]["name"] == SPARK_SA]
    assert sorted(a["metadata"]["namespace"] for a in accounts) == ["a", "b"]
    for ns in ("a", "b"):
        role = next(r for r in of_kind(namespaced, "Role") if r["metadata"] == {**r["metadata"], "name": SPARK_SA, "namespace": ns})
        assert grants(role, "pods") >= {"create", "get", "list", "watch", "delete"}
        assert grants(role, "services") >= {"create", "delete"} and grants(role, "configmaps") >= {"create", "delete"}
        binding = next(b for b in of_kind(namespaced, "RoleBinding") if b["metadata"]["name"] == SPARK_SA and b["metadata"]["namespace"] == ns)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SPARK_SA, "namespace": ns}]
    env = {e["name"]: e.get("value") for e in container(namespaced)["env"]}
    assert env["STREAMLETS_SPARK_SERVICE_ACCOUNT"] == SPARK_SA
    # cluster-wide with no namespaces listed: no account is made (sparkServiceAccount.namespaces names them)
    assert not [a for a in of_kind(default, "ServiceAccount") if a["metadata"]["name"] == SPARK_SA]
