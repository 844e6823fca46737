"""The cluster of dev/cluster works as a real one: pods run, DNS, Services, the API from a pod
with its ServiceAccount, volumes from the default StorageClass, the host from pods. (Several
nodes: test_cluster_nodes.py.) The pods: support.cluster_pods (busybox)."""

from __future__ import annotations

import json
import os
import re

import pytest

from support.cluster_pods import HOST_REPLY, busybox_pod, host_server, run_pod


def test_pod_runs_to_completion(kube_cluster, cluster_namespace):
    logs = run_pod(kube_cluster, cluster_namespace, "hello", "echo hello from $(hostname); cat /etc/resolv.conf")
    assert "hello from hello" in logs
    assert f"nameserver {kube_cluster.info()['dns_ip']}" in logs  # ClusterFirst: CoreDNS only
    assert f"search {cluster_namespace}.svc.cluster.local svc.cluster.local cluster.local" in logs


@pytest.fixture
def web(kube_cluster, cluster_namespace) -> str:
    """busybox httpd behind a Service ``web`` (port 80 -> 8080); its ClusterIP."""
    busybox = kube_cluster.env["images"]["busybox"]
    server = busybox_pod("web", "mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -v -p 8080 -h /www",
                         image=busybox, restart="Always")
    server["spec"]["containers"][0]["readinessProbe"] = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    kube_cluster.apply([server, service], namespace=cluster_namespace)
    kube_cluster.kubectl("wait", "--for=condition=Ready", "pod/web", f"--namespace={cluster_namespace}",
                         "--timeout=120s", check=True)
    return kube_cluster.kubectl("get", "service", "web", f"--namespace={cluster_namespace}",
                                "-o", "jsonpath={.spec.clusterIP}", check=True).stdout.strip()


def test_dns_resolves_cluster_names(kube_cluster, cluster_namespace, web):
    info = kube_cluster.info()
    logs = run_pod(kube_cluster, cluster_namespace, "dns", f"""
        nslookup kubernetes.default.svc.cluster.local
        nslookup web.{cluster_namespace}.svc.cluster.local
        nslookup {info['node_name']}.
    """)
    answers = re.findall(r"Address: (\S+)", logs)
    assert info["api_service_ip"] in answers, logs
    assert web in answers, logs
    assert info["node_ip"] in answers, logs  # the node's name (CoreDNS hosts plugin)


def test_pod_reaches_a_service(kube_cluster, cluster_namespace, web):
    logs = run_pod(kube_cluster, cluster_namespace, "client",
                   f"timeout 10 wget -q -O- http://{web}/ && timeout 10 wget -q -O- http://web/ && "
                   f"timeout 10 wget -q -O- http://web.{cluster_namespace}.svc.cluster.local/")
    assert logs.split() == ["web-ok"] * 3


def test_pod_reaches_the_api_with_its_service_account(kube_cluster, cluster_namespace):
    """kubectl (the cluster's static binary, mounted from the host) in a pod: in-cluster config
    (KUBERNETES_SERVICE_HOST = the `kubernetes` Service's IP), then by DNS name; TLS verified
    against the mounted CA, authenticated by the mounted ServiceAccount token."""
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    logs = run_pod(kube_cluster, cluster_namespace, "api", f"""
        export HOME=/tmp
        echo "in-cluster $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
        /kubectl auth whoami -o jsonpath='{{.status.userInfo.username}}{{"\\n"}}'
        /kubectl --server=https://kubernetes.default.svc --certificate-authority={sa}/ca.crt \\
                 --token="$(cat {sa}/token)" get --raw /version
    """, volumes=[{"name": "kubectl", "hostPath": {"path": kube_cluster.env["kubectl"], "type": "File"}}],
        mounts=[{"name": "kubectl", "mountPath": "/kubectl", "readOnly": True}])
    info = kube_cluster.info()
    assert f"in-cluster {info['api_service_ip']}:443" in logs
    assert f"system:serviceaccount:{cluster_namespace}:default" in logs
    version = json.loads(logs[logs.index("{"):])
    assert version["gitVersion"] == kube_cluster.env["kubernetes_version"]


def test_pvc_of_the_default_storage_class(kube_cluster, cluster_namespace):
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}
    kube_cluster.apply(pvc, namespace=cluster_namespace)
    logs = run_pod(kube_cluster, cluster_namespace, "writer", "echo persisted > /data/file && cat /data/file",
                   volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                   mounts=[{"name": "data", "mountPath": "/data"}])
    assert logs.strip() == "persisted"
    claim = json.loads(kube_cluster.kubectl("get", "pvc", "data", f"--namespace={cluster_namespace}",
                                            "-o", "json", check=True).stdout)
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == kube_cluster.info()["storage_class"]
    pv = json.loads(kube_cluster.kubectl("get", "pv", claim["spec"]["volumeName"], "-o", "json", check=True).stdout)
    path = pv["spec"]["hostPath"]["path"]
    assert path.startswith(kube_cluster.info()["local_path_dir"])
    with open(os.path.join(path, "file")) as f:
        assert f.read() == "persisted\n"


def test_pod_reaches_the_host(kube_cluster, cluster_namespace):
    """A server on the host listening on 0.0.0.0 (as a Kafka broker would) is reachable from
    pods at the node IP of cluster.json, and by the node's name."""
    info = kube_cluster.info()
    with host_server() as port:
        logs = run_pod(kube_cluster, cluster_namespace, "to-host",
                       f"timeout 10 wget -q -O- http://{info['node_ip']}:{port}/ && "
                       f"timeout 10 wget -q -O- http://{info['node_name']}:{port}/")
    assert logs.split() == [HOST_REPLY] * 2
