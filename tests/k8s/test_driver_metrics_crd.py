"""The rendered SparkApplications' metrics settings on a real kube-apiserver with the Spark
Operator's CRD: accepted, and stored unchanged (driver ports, prometheus.io annotations and the
PrometheusServlet sparkConf are declared fields, nothing pruned).

Needs dev/k8s-env (kube-apiserver, etcd, the Spark Operator CRD); skipped without it.
"""

from pathlib import Path

import yaml
from typer.testing import CliRunner

from blueprint.cli import app
from streamlets_operator import render

ROOT = Path(__file__).resolve().parents[2]


def test_rendered_spark_applications_are_stored_unchanged(kube, kube_namespace):
    from kubernetes import client

    result = CliRunner().invoke(app, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                      "--image", "registry.example/fd:1", "--kafka", "kafka:9092"])
    assert result.exit_code == 0, result.stderr
    body = yaml.safe_load(result.stdout)
    body["metadata"].update(namespace=kube_namespace, uid="0000-1111")
    next(s for s in body["spec"]["streamlets"] if s["name"] == "stats")["annotations"] = {"team": "flights"}
    kube.install_spark_operator_crd()
    custom = client.CustomObjectsApi(kube.api_client())
    for name, (_, sa) in render.render_all(body, env={})["streamlets"].items():
        created = custom.create_namespaced_custom_object(render.SPARK_GROUP, render.SPARK_VERSION, kube_namespace,
                                                         render.SPARK_PLURAL, sa)
        assert created["spec"] == sa["spec"], name
        driver = created["spec"]["driver"]
        assert driver["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
        assert driver["annotations"]["prometheus.io/port"] == "9464"
        assert created["spec"]["sparkConf"]["spark.ui.prometheus.enabled"] == "true"
