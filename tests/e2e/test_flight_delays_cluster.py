"""flight-delays on a real cluster of two nodes with its state on S3, deployed as a user would:
`helm install` of our chart (and the Spark Operator's), `blueprint build --image <app image>` and
`kubectl apply`. Each streamlet's driver and executor are pods the Spark Operator started, on
different nodes; MinIO on the node IP holds every streamlet's checkpoints and savepoints
(spec.storage.checkpoints s3a://..., spec.storage.s3a, the credentials in a Secret the test makes,
spec.storage.secretRef), and no checkpoint claim exists. Kafka is a company's: a broker of this
module's own on the node IP whose only listener pods reach is SASL_SSL (SCRAM-SHA-512 over TLS,
its certificate signed by a CA of its own); the deploy config names the CA and the password as
keys of Secrets the test makes (`kafka.security.ca-secret`, `password-secret`), `blueprint build`
writes them into spec.kafka.security, and the operator mounts them into every driver and executor
and reads them for its own clients (topics, the savepoint commands). Skipped on a one-node
cluster (STREAMLETS_CLUSTER_NODES=1).

What forces the nodes is this test's deploy config, not a product default: the nodes are
labelled, and Spark's own settings `spark.kubernetes.driver.node.selector.<label>` and
`spark.kubernetes.executor.node.selector.<label>` go in through
`streamlets.<s>.spark."spark.kubernetes...."` (every driver on the first node, every executor on
the second; enrich's executors get no selector). The volume mounts (the ingresses' sources, the egress's output) have claims of their
own (`streamlets.<s>.volume-mounts.<mount>`), which the data pod mounts too: shared hostPath
claims (KubeCluster.shared_claim, ReadWriteMany), honest here because the nodes share this
machine's file system; a local-path claim (ReadWriteOnce) would pin its users to one node. The
broker being this module's own, topics of another deployment of the example in the session are not
read again.

The tests run in order on one deployment, a month of data each, and each compares the egress
output with the batch computation (flight_delays.reference) for the months fed so far:
  1. January: a driver and an executor per streamlet, on different nodes, and two executors of
     enrich, one on each node (the operator spreads a streamlet's executors), both writing its
     exactly-once outlet (records per executor from the batch ledger's commit messages); the
     results equal the batch computation; every streamlet's checkpoints (and the stats state) are
     objects in MinIO;
  2. a deleted driver pod is started again by the Spark Operator and resumes from its checkpoints
     on S3: January and February equal the batch computation;
  3. `kubectl streamlets savepoint`, then an upgrade to version 2 (blueprint-v2.yaml: `enrich`
     gains a second flights inlet, fed by a new ingress `more-flights`; the image already holds
     both versions' code) with upgradeMode savepoint: only what changed is replaced, as in
     Cloudflow: enrich stops with a savepoint on S3 before its new pods start, which continue
     from it, more-flights starts, and the other streamlets keep their drivers; March's flights
     arrive on the new inlet only, and every window of the three months equals the batch
     computation (none lost or doubled);
  4. neither the S3 secret key nor the Kafka password is in any of: the application resource,
     the SparkApplications, the Secrets the operator wrote, the Events, any pod's spec, any pod's
     log (the application's, the operator's, the Spark Operator's);
  5. `kubectl streamlets undeploy` leaves no pod.

The old default, one ReadWriteOnce checkpoint claim: test_flight_delays_claim.py.
"""

from __future__ import annotations

import base64
import json
import secrets
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from support.e2e import APPS, OPERATOR_NS, POLL_ERRORS, SPARK_OPERATOR_NS, node_kafka_broker
from support.flight_delays_cluster import (APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, VOLUMES, Deployment,
                                           built_resource)
from support.ledger import LedgerFollower
from support.minio import run_minio
from support.waiting import wait_until

STREAMLETS_V2 = (*STREAMLETS, "more-flights")  # blueprint-v2.yaml
NODE_LABEL = "streamlets-e2e-spark-role"  # drivers on the first node, executors on the second
SPREAD = "enrich"  # but this streamlet's: two executors, one on each node, both writing its exactly-once outlet
SECRET = "s3-credentials"
KAFKA_CA, KAFKA_USER = "kafka-ca", "kafka-user"  # the Secrets of the broker's CA and the SCRAM password
PREFIX = f"e2e-{secrets.token_hex(3)}"
# (streamlet, mount) -> the claim of its own (more-flights: version 2's new ingress)
MOUNT_CLAIMS = {("flights", "source"): "flights-source", ("weather", "source"): "weather-source",
                ("files", "output"): "files-output", ("more-flights", "source"): "more-flights-source"}


def deploy_config(streamlets: tuple[str, ...], username: str) -> str:
    """This test's settings for `streamlets` (HOCON), layered over the example's cluster.conf:
    Kafka's security with the secrets as keys of Secrets, claims of their own for the volume
    mounts, the node selectors."""
    lines = ["kafka.security {", "  protocol = SASL_SSL", "  sasl-mechanism = SCRAM-SHA-512",
             f"  username = {username}", f'  password-secret = "{KAFKA_USER}/password"',
             f'  ca-secret = "{KAFKA_CA}/ca.crt"', "}", "streamlets {"]
    for (streamlet, mount), claim in MOUNT_CLAIMS.items():
        if streamlet in streamlets:
            lines.append(f"  {streamlet}.volume-mounts.{mount} = {claim}")
    for streamlet in streamlets:
        if streamlet == SPREAD:  # its executors on both nodes: the operator spreads them (render.spread_affinity)
            lines.append(f"  {streamlet}.kubernetes.executor.instances = 2")
            lines.append(f'  {streamlet}.spark {{ "spark.kubernetes.driver.node.selector.{NODE_LABEL}" = drivers }}')
            continue
        lines.append(f'  {streamlet}.spark {{ "spark.kubernetes.driver.node.selector.{NODE_LABEL}" = drivers, '
                     f'"spark.kubernetes.executor.node.selector.{NODE_LABEL}" = executors }}')
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def nodes(e2e_cluster) -> list:
    if e2e_cluster.node_count < 2:
        pytest.skip(f"the cluster has {e2e_cluster.node_count} node: run with STREAMLETS_CLUSTER_NODES=2")
    chosen = e2e_cluster.nodes[:2]
    for node, role in zip(chosen, ("drivers", "executors"), strict=True):
        e2e_cluster.kubectl("label", "node", node.name, f"{NODE_LABEL}={role}", "--overwrite", check=True)
    yield chosen
    for node in chosen:
        e2e_cluster.kubectl("label", "node", node.name, f"{NODE_LABEL}-")


@pytest.fixture(scope="module")
def node_minio(nodes, e2e_cluster, tmp_path_factory):
    """MinIO on the node IP: pods reach it there, as they would an object store of the network."""
    with run_minio(tmp_path_factory.mktemp("minio-nodes"), host=e2e_cluster.node_ip) as server:
        yield server


@pytest.fixture(scope="module")
def module_kafka(nodes, e2e_cluster, tmp_path_factory):
    """A SASL_SSL broker on the node IP (SCRAM user `sandbox`, its password made at start)."""
    with node_kafka_broker(e2e_cluster, tmp_path_factory.mktemp("kafka-nodes"), security="sasl-ssl") as broker:
        yield broker


def kafka_password(broker) -> str:
    return Path(broker.client_security().password_file).read_text().strip()


def s3_resource(node_minio, blueprint: str, image: str, kafka: str, config: Path, *configs: str) -> dict:
    """The example built with `configs` (the example's) and this test's `config` over them, its
    state on MinIO."""
    resource = built_resource(blueprint, image, kafka, *(EXAMPLE / c for c in configs), config)
    resource["spec"]["storage"] = {
        "checkpoints": f"s3a://{node_minio.bucket}/{PREFIX}",
        "s3a": {"endpoint": node_minio.endpoint, "pathStyleAccess": True, "region": "us-east-1"},
        "secretRef": {"name": SECRET}}
    return resource


@pytest.fixture(scope="module")
def ledger(module_kafka) -> LedgerFollower:
    """The application's batch ledger, followed from before the deployment."""
    follower = LedgerFollower(module_kafka.connection(), APP)
    yield follower
    follower.close()


@pytest.fixture(scope="module")
def deployed(nodes, e2e_cluster, e2e_images, streamlets_operator, node_minio, module_kafka, ledger,
             tmp_path_factory) -> Deployment:
    cluster = e2e_cluster
    tmp = tmp_path_factory.mktemp("flight-delays-s3")
    if cluster.kubectl("get", "streamletapplication", APP, "-n", APPS).returncode == 0:  # an earlier module's
        cluster.kubectl("delete", "streamletapplication", APP, "-n", APPS, "--wait=true", "--timeout=300s")
        cluster.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=true", "--timeout=120s")
    # The credentials: into Secrets through kubectl's stdin (never on a command line)
    client = module_kafka.client_security()
    for name, data in ((SECRET, {"AWS_ACCESS_KEY_ID": node_minio.access_key,
                                 "AWS_SECRET_ACCESS_KEY": node_minio.secret_key}),
                       (KAFKA_CA, {"ca.crt": Path(client.ca_file).read_text()}),
                       (KAFKA_USER, {"password": kafka_password(module_kafka)})):
        cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": APPS},
                       "type": "Opaque", "stringData": data})
    claims = {}
    for (streamlet, mount), claim in MOUNT_CLAIMS.items():
        cluster.shared_claim(APPS, claim, "1Gi")
        claims[f"{VOLUMES}/{streamlet}/{mount}"] = claim
    config = tmp / "deploy.conf"
    config.write_text(deploy_config(STREAMLETS, client.username))
    bootstrap = module_kafka.bootstrap_servers
    resource = s3_resource(node_minio, "blueprint.yaml", e2e_images["app"], bootstrap, config, "cluster.conf")
    assert resource["spec"]["kafka"]["security"]["password"] == {"name": KAFKA_USER, "key": "password"}
    d = Deployment(cluster, bootstrap, tmp, claims=claims, staging=None)
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    yield d
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)
    for name in (SECRET, KAFKA_CA, KAFKA_USER):
        d.kubectl("delete", "secret", name, "-n", APPS, "--wait=false", check=False)


def _executors(d: Deployment, streamlet: str) -> list[dict]:
    """The streamlet's Running executor pods."""
    return [p for p in d.pods("executor") if p["metadata"]["labels"].get("streamlets.io/streamlet") == streamlet
            and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def _nodes_of(d: Deployment, streamlets: tuple[str, ...] = STREAMLETS) -> dict[str, tuple[str, set[str]]]:
    """streamlet -> (its running driver's node, its running executors' nodes)."""
    drivers = d.running("driver")
    placed = {s: (drivers[s]["spec"]["nodeName"], {p["spec"]["nodeName"] for p in _executors(d, s)})
              for s in streamlets if s in drivers}
    return {s: nodes for s, nodes in placed.items() if nodes[1]}


def _expected(nodes, streamlets: tuple[str, ...] = STREAMLETS) -> dict[str, tuple[str, set[str]]]:
    """Every driver on the first node, every executor on the second, SPREAD's on both."""
    return {s: (nodes[0].name, {n.name for n in nodes} if s == SPREAD else {nodes[1].name}) for s in streamlets}


def test_january_with_executors_on_the_other_node_and_checkpoints_on_s3(deployed, nodes, node_minio, ledger):
    d = deployed
    wait_until(lambda: set(d.running("driver")) == set(STREAMLETS) and set(d.running("executor")) == set(STREAMLETS)
               and len(_executors(d, SPREAD)) == 2,
               timeout=START_TIMEOUT, what=f"a running driver and executor pod per streamlet, two of {SPREAD}",
               interval=5, retry_on=POLL_ERRORS, on_timeout=d.report)
    placed = _nodes_of(d)
    assert placed == _expected(nodes), placed
    spread = {p["metadata"]["labels"]["spark-exec-id"]: p["spec"]["nodeName"] for p in _executors(d, SPREAD)}
    # no checkpoint claim: the state is on S3
    assert d.kubectl("get", "pvc", f"{APP}-checkpoints", "-n", APPS, check=False).strip() == ""
    d.feed(1)
    d.wait_results("January")
    # both of SPREAD's executors wrote its exactly-once outlet: the records each one's tasks
    # produced, from the commit messages the driver recorded in the batch ledger
    written = ledger.records_per_executor(f"{APP}.{SPREAD}.")
    print(f"\n{SPREAD}: records written per executor (id: node): "
          + ", ".join(f"{e} ({spread.get(e, '?')}): {n}" for e, n in sorted(written.items())))
    assert {spread.get(e) for e, n in written.items() if n > 0} == {n.name for n in nodes}, (written, spread)
    keys = node_minio.keys(f"{PREFIX}/")
    for name in STREAMLETS:
        assert any(k.startswith(f"{PREFIX}/checkpoints/{APP}/{name}/") for k in keys), (name, keys[:50])
    assert any(k.startswith(f"{PREFIX}/checkpoints/{APP}/stats/") and "/state/" in k for k in keys), keys[:50]
    # the credentials reach the pods by secretKeyRef only
    spec = json.loads(d.kubectl("get", "pod", d.running("driver")["stats"]["metadata"]["name"], "-n", APPS,
                                "-o", "json"))["spec"]
    env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == SECRET


def test_a_deleted_driver_resumes_from_its_checkpoints_on_s3(deployed, nodes):
    d = deployed
    d.delete_driver_then_feed("stats", 2)  # February arrives while the stats driver is gone
    placed = _nodes_of(d)
    assert placed.get("stats") == _expected(nodes)["stats"], placed


def test_savepoint_and_an_upgrade_to_version_2_from_savepoints_on_s3(deployed, nodes, node_minio, module_kafka,
                                                                      e2e_images):
    d = deployed
    taken = d.plugin("savepoint", APP)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert "ok" in taken.stdout, taken.stdout
    # Version 2 (the image holds its code too), built from blueprint-v2.yaml with cluster-v2.conf
    # over cluster.conf (and this test's settings over both), applied over version 1 with
    # upgradeMode savepoint, as a user would. Only enrich's SparkApplication changes (its inlets),
    # and more-flights is new: the others keep their drivers (their spec hashes are equal).
    before = {n: p["metadata"]["uid"] for n, p in d.running("driver").items()}
    config = d.tmp / "deploy-v2.conf"
    config.write_text(deploy_config(STREAMLETS_V2, module_kafka.client_security().username))
    resource = s3_resource(node_minio, "blueprint-v2.yaml", e2e_images["app"], d.kafka, config, "cluster.conf",
                           "cluster-v2.conf")
    resource["spec"]["upgradeMode"] = "savepoint"
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    changed = {"enrich", "more-flights"}

    def upgraded() -> bool:
        drivers = d.running("driver")
        return set(drivers) == set(STREAMLETS_V2) and set(d.running("executor")) == set(STREAMLETS_V2) \
            and len(_executors(d, SPREAD)) == 2 and all(
            (p["metadata"]["uid"] != before.get(n)) == (n in changed) for n, p in drivers.items())
    wait_until(upgraded, timeout=START_TIMEOUT, what="version 2's drivers running: enrich's new, more-flights', the "
               "others' unchanged", interval=5, retry_on=POLL_ERRORS, on_timeout=d.report)
    assert _nodes_of(d, STREAMLETS_V2) == _expected(nodes, STREAMLETS_V2)
    status = json.loads(d.kubectl("get", "streamletapplication", APP, "-n", APPS, "-o", "json"))["status"]
    upgrade_savepoints = [s for s in status.get("savepoints", []) if s.get("reason") == "upgrade"]
    assert {s["streamlet"] for s in upgrade_savepoints} == {"enrich"}, status.get("savepoints")
    # every upgrade savepoint is on S3, its objects in MinIO
    savepoints = f"s3a://{node_minio.bucket}/{PREFIX}/savepoints/"
    for sp in upgrade_savepoints:
        assert sp["location"].startswith(savepoints), sp
        assert node_minio.keys(sp["location"].removeprefix(f"s3a://{node_minio.bucket}/").rstrip("/") + "/"), sp
    drivers = d.running("driver")
    d.feed(3, flights="more-flights")  # March's flights reach enrich through its new inlet only
    d.wait_results("after the upgrade to version 2")
    s3 = node_minio.client()

    def offsets(streamlet: str, query: str) -> str:
        return f"{PREFIX}/checkpoints/{APP}/{streamlet}/{query}/offsets"
    # enrich's checkpoint keys its sources by name, the new inlet's among them
    (enrich,) = [sp for sp in upgrade_savepoints if sp["streamlet"] == "enrich"]
    for query in enrich["batchIds"]:
        logged = [k for k in node_minio.keys(offsets("enrich", query) + "/") if k.rsplit("/", 1)[1].isdigit()]
        newest = max(logged, key=lambda k: int(k.rsplit("/", 1)[1]))
        text = s3.get_object(Bucket=node_minio.bucket, Key=newest)["Body"].read().decode()
        for source in ("inlet_flights", "inlet_more_flights", "inlet_weather"):
            assert f"{source}:" in text, text
    # Stop-with-savepoint: enrich's queries stopped before its savepoint, so no batch ran in the old
    # pods after it: the batch after the savepoint's was planned (offsets/<n+1> written) by the new
    # driver, after it started. The new pods continued from the savepoint.
    for sp in upgrade_savepoints:
        started = datetime.fromisoformat(drivers[sp["streamlet"]]["status"]["startTime"].replace("Z", "+00:00"))
        assert sp["batchIds"], sp
        for query, batch in sp["batchIds"].items():
            key = f"{offsets(sp['streamlet'], query)}/{batch + 1}"
            found = node_minio.keys(key)
            assert key in found, (sp, query, found)
            planned = s3.head_object(Bucket=node_minio.bucket, Key=key)["LastModified"]
            assert planned.timestamp() >= started.timestamp() - 1, (sp, query, planned, started)


def _secret_values(d: Deployment) -> list[str]:
    """The decoded values of every Secret of the application's namespace but the test's own."""
    items = json.loads(d.kubectl("get", "secrets", "-n", APPS, "-o", "json"))["items"]
    return [base64.b64decode(v).decode(errors="replace") for s in items
            if s["metadata"]["name"] not in (SECRET, KAFKA_CA, KAFKA_USER) for v in (s.get("data") or {}).values()]


def test_no_secret_is_in_a_resource_pod_spec_or_log(deployed, node_minio, module_kafka):
    d = deployed
    secret_values = {"the S3 secret key": node_minio.secret_key, "the Kafka password": kafka_password(module_kafka)}
    places = {
        "the application (kubectl get sapp -o yaml)": d.kubectl("get", "sapp", APP, "-n", APPS, "-o", "yaml"),
        "the SparkApplications": d.kubectl("get", "sparkapplications", "-n", APPS, "-o", "yaml"),
        "the Secrets the operator wrote": "\n".join(_secret_values(d)),
        "the Events": d.kubectl("get", "events", "-n", APPS, "-o", "yaml"),
    }
    for ns in (APPS, OPERATOR_NS, SPARK_OPERATOR_NS):
        pods = json.loads(d.kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]
        places[f"the pod specs of {ns}"] = json.dumps(pods)
        for pod in pods:
            name = pod["metadata"]["name"]
            places[f"the log of {ns}/{name}"] = d.kubectl("logs", "-n", ns, name, "--all-containers", "--tail=-1",
                                                          check=False, timeout=120)
    assert len([p for p in places if p.startswith(f"the log of {APPS}/")]) >= 2 * len(STREAMLETS_V2)
    assert places["the Secrets the operator wrote"].strip(), "no Secret of the operator's found"
    assert [(what, place) for what, value in secret_values.items() for place, text in places.items()
            if value in text] == []
    # the searched texts do name the Secrets, so the search looked where the credentials are referenced
    for name in (SECRET, KAFKA_USER, KAFKA_CA):
        assert name in places["the SparkApplications"], name
    # the pods read the Kafka secrets as files the run config names (the operator's mount)
    assert "/etc/streamlets/secrets/kafka-user/password" in places["the Secrets the operator wrote"]


def test_undeploy_leaves_no_pod(deployed):
    deployed.undeploy()
