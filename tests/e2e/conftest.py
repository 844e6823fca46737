"""The end-to-end suite: a real Kubernetes cluster of two nodes (dev/cluster; STREAMLETS_CLUSTER_NODES,
tests/kube/cluster_fixtures.py) running the images made
here (dev/images), the kubeflow Spark Operator installed with its own Helm chart, our operator
installed with ours, a Kafka broker pods reach, and an application deployed as a user would.

Session fixtures, built once and shared by every e2e test:
  e2e_images           dev/images: the application, operator and Spark Operator images
  e2e_cluster          kube_cluster (tests/kube/cluster_fixtures.py, dev/cluster.py) with those images loaded
  node_kafka           a Kafka broker listening on the node's address (pods and this process reach it)
  spark_operator       the Spark Operator's controller and webhook, from its own chart
  streamlets_operator  our chart: the operator pod, its RBAC, the Spark drivers' ServiceAccount

Run alone with `pytest -m e2e` (or `pytest tests/e2e`).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from support.e2e import (APPS, OPERATOR_NS, REPO, SPARK_OPERATOR_NS, helm, images, node_kafka_broker,
                         spark_operator_chart, values_args)


@pytest.fixture(scope="session")
def e2e_images(toolchain) -> dict[str, str]:
    """dev/images (cached: seconds when nothing changed), then the references of the images."""
    proc = subprocess.run([str(REPO / "dev" / "images")], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"dev/images failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return images()


@pytest.fixture(scope="session")
def e2e_cluster(kube_cluster, e2e_images):
    """The cluster with the images in its containerd (no registry: `dev/cluster load`)."""
    kube_cluster.load(*e2e_images.values())
    kube_cluster.kubectl("create", "namespace", APPS)
    return kube_cluster


@pytest.fixture(scope="session")
def node_kafka(e2e_cluster, tmp_path_factory):
    """A Kafka broker on the node's address: pods reach it through the node IP, as they would an
    external Kafka cluster; the tests reach it too."""
    with node_kafka_broker(e2e_cluster, tmp_path_factory.mktemp("kafka")) as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def spark_operator(e2e_cluster, e2e_images):
    """The kubeflow Spark Operator, controller and webhook (the webhook adds our volumes, env and
    ports to driver and executor pods), installed with its own chart, watching APPS. Its image:
    its binary on our streamlet image (docker/spark-operator.Dockerfile)."""
    registry, _, rest = e2e_images["spark-operator"].partition("/")
    repository, _, tag = rest.rpartition(":")
    values = {
        "image": {"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "Never"},
        "controller": {"leaderElection": {"enable": False}, "workers": 4, "uiService": {"enable": False},
                       "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}}},
        "webhook": {"enable": True, "leaderElection": {"enable": False},
                    "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}}},
        "spark": {"jobNamespaces": [APPS], "serviceAccount": {"create": False}, "rbac": {"create": False}},
        "prometheus": {"metrics": {"enable": False}, "podMonitor": {"create": False}},
    }
    helm(e2e_cluster, "upgrade", "--install", "spark-operator", spark_operator_chart(e2e_cluster),
         "-n", SPARK_OPERATOR_NS, "--create-namespace", "--wait", "--timeout", "5m",
         "--set", "fullnameOverride=spark-operator", *values_args(values))
    return SPARK_OPERATOR_NS


@pytest.fixture(scope="session")
def streamlets_operator(e2e_cluster, e2e_images, node_kafka, spark_operator):
    """Our chart, as a user installs it: the operator from its image, watching APPS, Kafka on the
    node, checkpoint claims from the cluster's default StorageClass."""
    repository, _, tag = e2e_images["operator"].rpartition(":")
    helm(e2e_cluster, "upgrade", "--install", "streamlets", str(REPO / "charts" / "streamlets-operator"),
         "-n", OPERATOR_NS, "--create-namespace", "--wait", "--timeout", "5m",
         "--set", f"image.repository={repository}", "--set", f"image.tag={tag}", "--set", "image.pullPolicy=Never",
         "--set-json", f"watchNamespaces={json.dumps([APPS])}", "--set", f"kafka.bootstrapServers={node_kafka}",
         "--set", "storage.size=2Gi", "--set", "leaderElection.enabled=false",
         "--set", "resources.requests.cpu=50m")
    return OPERATOR_NS
