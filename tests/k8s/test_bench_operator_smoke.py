"""Smoke test of bench/bench_operator.py, small: both ways of creating an application's children
(the operator, and the baseline's straight API calls) end with the same children and topics on
the real API server and broker. The full sizes run by hand (bench/README.md)."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_operator.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_operator", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def crds(kube):
    root = BENCH.parents[1]
    kube.kubectl("apply", "-f", str(root / "charts" / "streamlets-operator" / "crds"), check=True)
    kube.wait_crd_established("streamletapplications.streamlets.io")
    kube.install_spark_operator_crd()
    return kube


def children(cluster, ns: str) -> dict[str, set[str]]:
    sel = "app.kubernetes.io/managed-by=streamlets-operator"
    return {"sparkapplications": {i["metadata"]["name"] for i in cluster.custom.list_namespaced_custom_object(
                "sparkoperator.k8s.io", "v1beta2", ns, "sparkapplications", label_selector=sel)["items"]},
            "secrets": {s.metadata.name for s in cluster.core.list_namespaced_secret(ns, label_selector=sel).items},
            "claims": {c.metadata.name for c in cluster.core.list_namespaced_persistent_volume_claim(
                ns, label_selector=sel).items}}


def test_operator_and_baseline_create_the_same_children(crds, kafka_broker, tmp_path, capsys):
    from confluent_kafka.admin import AdminClient

    bench = load_bench()
    cluster = bench.Cluster(crds, kafka_broker.bootstrap_servers)
    chain = bench.chain_application(4, kafka_broker.bootstrap_servers, tmp_path)
    assert [s["name"] for s in chain["spec"]["streamlets"]] == ["s-0", "s-1", "s-2", "s-3"]
    made = {}
    for way in ("baseline", "operator"):
        ns = cluster.namespace()
        apps = [bench.named(chain, f"chain-{i}", ns) for i in range(2)]
        seconds = (bench.baseline(cluster, apps) if way == "baseline"
                   else bench.with_operator(cluster, apps, tmp_path / "operator.log"))
        assert seconds > 0
        made[way] = children(cluster, ns)
        topics = set(AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers}).list_topics(timeout=10).topics)
        assert {f"{ns}-chain-{i}.t-{k}" for i in range(2) for k in range(3)} <= topics
    assert made["baseline"] == made["operator"]
    assert made["operator"]["claims"] == {"chain-0-checkpoints", "chain-1-checkpoints"}
    assert len(made["operator"]["sparkapplications"]) == len(made["operator"]["secrets"]) == 8
