"""flight-delays on a cluster of two nodes with its state on S3 (STREAMLETS_CLUSTER_NODES=2;
skipped on one node): MinIO on the node IP holds every streamlet's checkpoints
(spec.storage.checkpoints s3a://..., spec.storage.s3a, the credentials in a Secret the test
makes, spec.storage.secretRef), and each streamlet's executor runs on another node than its
driver.

What forces the nodes is this test's deploy config, not a product default: the nodes are
labelled, and Spark's own settings `spark.kubernetes.driver.node.selector.<label>` and
`spark.kubernetes.executor.node.selector.<label>` go in through
`streamlets.<s>.spark."spark.kubernetes...."` (every driver on the first node, every executor on
the second). The volume mounts (the ingresses' sources, the egress's output) have claims of their
own (`streamlets.<s>.volume-mounts.<mount>`), which the data pod mounts too: shared hostPath
claims (KubeCluster.shared_claim, ReadWriteMany), honest here because the nodes share this
machine's file system; a local-path claim (ReadWriteOnce) would pin its users to one node. Kafka
is a broker of this module's own on the node IP, so topics of another deployment of the example
in the session are not read again.

  1. January: a driver and an executor per streamlet, on different nodes; the results equal the
     batch computation; every streamlet's checkpoints (and the stats state) are objects in MinIO;
  2. a deleted driver pod is started again and resumes from its checkpoints on S3: January and
     February equal the batch computation;
  3. `kubectl streamlets undeploy` leaves no pod.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
import yaml

from support.e2e import APPS, POLL_ERRORS, node_kafka_broker
from support.flight_delays_cluster import APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, VOLUMES, Deployment
from support.minio import run_minio
from support.waiting import wait_until

NODE_LABEL = "streamlets-e2e-spark-role"  # drivers on the first node, executors on the second
SECRET = "s3-credentials"
PREFIX = f"e2e-{secrets.token_hex(3)}"
# (streamlet, mount) -> the claim of its own
MOUNT_CLAIMS = {("flights", "source"): "flights-source", ("weather", "source"): "weather-source",
                ("files", "output"): "files-output"}


def deploy_config() -> str:
    """The example's cluster.conf, then this test's settings (HOCON)."""
    lines = [(EXAMPLE / "cluster.conf").read_text(), "streamlets {"]
    for (streamlet, mount), claim in MOUNT_CLAIMS.items():
        lines.append(f"  {streamlet}.volume-mounts.{mount} = {claim}")
    for streamlet in STREAMLETS:
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
    with node_kafka_broker(e2e_cluster, tmp_path_factory.mktemp("kafka-nodes")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def deployed(nodes, e2e_cluster, e2e_images, streamlets_operator, node_minio, module_kafka,
             tmp_path_factory) -> Deployment:
    cluster = e2e_cluster
    tmp = tmp_path_factory.mktemp("flight-delays-s3")
    if cluster.kubectl("get", "streamletapplication", APP, "-n", APPS).returncode == 0:  # an earlier module's
        cluster.kubectl("delete", "streamletapplication", APP, "-n", APPS, "--wait=true", "--timeout=300s")
        cluster.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=true", "--timeout=120s")
    # The credentials: into the Secret through kubectl's stdin (never on a command line)
    cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": APPS},
                   "type": "Opaque", "stringData": {"AWS_ACCESS_KEY_ID": node_minio.access_key,
                                                    "AWS_SECRET_ACCESS_KEY": node_minio.secret_key}})
    claims = {}
    for (streamlet, mount), claim in MOUNT_CLAIMS.items():
        cluster.shared_claim(APPS, claim, "1Gi")
        claims[f"{VOLUMES}/{streamlet}/{mount}"] = claim
    config = tmp / "deploy.conf"
    config.write_text(deploy_config())
    built = subprocess.run([sys.executable, "-m", "blueprint.cli", "build", str(EXAMPLE / "blueprint.yaml"),
                            "--image", e2e_images["app"], "--config", str(config),
                            "--kafka", module_kafka, "-n", APPS],
                           capture_output=True, text=True, timeout=300, cwd=EXAMPLE)
    assert built.returncode == 0, built.stderr
    resource = yaml.safe_load(built.stdout)
    resource["spec"]["imagePullPolicy"] = "Never"  # no registry: the images are in containerd
    resource["spec"]["storage"] = {
        "checkpoints": f"s3a://{node_minio.bucket}/{PREFIX}",
        "s3a": {"endpoint": node_minio.endpoint, "pathStyleAccess": True, "region": "us-east-1"},
        "secretRef": {"name": SECRET}}
    d = Deployment(cluster, module_kafka, tmp, claims=claims, staging=None)
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    yield d
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)
    d.kubectl("delete", "secret", SECRET, "-n", APPS, "--wait=false", check=False)


def _nodes_of(d: Deployment) -> dict[str, tuple[str, str]]:
    """streamlet -> (its running driver's node, its running executor's node)."""
    drivers, executors = d.running("driver"), d.running("executor")
    return {s: (drivers[s]["spec"]["nodeName"], executors[s]["spec"]["nodeName"])
            for s in STREAMLETS if s in drivers and s in executors}


def test_january_with_executors_on_the_other_node_and_checkpoints_on_s3(deployed, nodes, node_minio):
    d = deployed
    wait_until(lambda: set(d.running("driver")) == set(STREAMLETS) and set(d.running("executor")) == set(STREAMLETS),
               timeout=START_TIMEOUT, what="a running driver and executor pod per streamlet", interval=5,
               retry_on=POLL_ERRORS, on_timeout=d.report)
    placed = _nodes_of(d)
    assert placed == {s: (nodes[0].name, nodes[1].name) for s in STREAMLETS}, placed
    # no checkpoint claim: the state is on S3
    assert d.kubectl("get", "pvc", f"{APP}-checkpoints", "-n", APPS, check=False).strip() == ""
    d.feed(1)
    d.wait_results("January")
    keys = node_minio.keys(f"{PREFIX}/")
    for name in STREAMLETS:
        assert any(k.startswith(f"{PREFIX}/checkpoints/{APP}/{name}/") for k in keys), (name, keys[:50])
    assert any(k.startswith(f"{PREFIX}/checkpoints/{APP}/stats/") and "/state/" in k for k in keys), keys[:50]
    # the credentials reach the pods by secretKeyRef only
    spec = json.loads(d.kubectl("get", "pod", d.running("driver")["stats"]["metadata"]["name"], "-n", APPS,
                                "-o", "json"))["spec"]
    env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == SECRET
    assert node_minio.secret_key not in json.dumps(spec)


def test_a_deleted_driver_resumes_from_its_checkpoints_on_s3(deployed, nodes):
    d = deployed
    d.delete_driver_then_feed("stats", 2)  # February arrives while the stats driver is gone
    placed = _nodes_of(d)
    assert placed.get("stats") == (nodes[0].name, nodes[1].name), placed


def test_undeploy_leaves_no_pod(deployed):
    deployed.undeploy()
