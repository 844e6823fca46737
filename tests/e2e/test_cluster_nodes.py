"""A cluster of several worker nodes (dev/cluster up --nodes 2; STREAMLETS_CLUSTER_NODES=2 for
the ``kube_cluster`` fixture; skipped on one node): every node Ready with its own pod range and
kubelet, pods pinned to each node reach the other's pods by address and through a Service (names
from CoreDNS, which runs on one of them), both reach the host at the node IP, and a shared claim
(KubeCluster.shared_claim) is written on one node and read on the other. The pods:
support.cluster_pods (busybox)."""

from __future__ import annotations

import ipaddress
import json
import secrets

import pytest

from support.cluster_pods import HOST_REPLY, busybox_pod, host_server, run_pod


def _pod(cluster, ns: str, name: str) -> dict:
    return json.loads(cluster.kubectl("get", "pod", name, f"--namespace={ns}", "-o", "json", check=True).stdout)


def test_every_node_is_ready_with_its_own_pod_range_and_kubelet(kube_cluster, two_nodes):
    items = {n["metadata"]["name"]: n
             for n in json.loads(kube_cluster.kubectl("get", "nodes", "-o", "json", check=True).stdout)["items"]}
    assert set(items) == {n.name for n in kube_cluster.nodes}
    for node in kube_cluster.nodes:
        item = items[node.name]
        ready = next(c for c in item["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", (node.name, ready)
        assert item["spec"]["podCIDR"] == node.pod_cidr
        assert item["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == node.kubelet_port
        assert item["metadata"]["labels"]["kubernetes.io/hostname"] == node.name
        # dev/cluster status shows each node, with its own containerd and kubelet running
        details = kube_cluster.status()["node_details"][node.name]
        assert details["ready"] == "True" and details["kubelet"].startswith("running")
        assert details["containerd"].startswith("running"), details


@pytest.fixture
def servers(kube_cluster, cluster_namespace, two_nodes) -> dict[str, dict]:
    """An httpd pod pinned to each node (answering web-on-<its node>) behind a Service
    web-<i>: node name -> {ip, service}."""
    busybox = kube_cluster.env["images"]["busybox"]
    manifests = []
    for i, node in enumerate(two_nodes):
        pod = busybox_pod(f"web-{i}", 'mkdir -p /www && echo "web-on-$NODE" > /www/index.html && '
                                      'exec httpd -f -v -p 8080 -h /www', image=busybox, restart="Always",
                          node=node.name)
        container = pod["spec"]["containers"][0]
        container["env"] = [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
        container["readinessProbe"] = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
        manifests += [pod, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"web-{i}"},
                            "spec": {"selector": {"app": f"web-{i}"}, "ports": [{"port": 80, "targetPort": 8080}]}}]
    kube_cluster.apply(manifests, namespace=cluster_namespace)
    out = {}
    for i, node in enumerate(two_nodes):
        kube_cluster.kubectl("wait", "--for=condition=Ready", f"pod/web-{i}", f"--namespace={cluster_namespace}",
                             "--timeout=120s", check=True)
        pod = _pod(kube_cluster, cluster_namespace, f"web-{i}")
        assert pod["spec"]["nodeName"] == node.name
        out[node.name] = {"ip": pod["status"]["podIP"], "service": f"web-{i}"}
    return out


def test_pods_reach_pods_and_services_on_the_other_node(kube_cluster, cluster_namespace, two_nodes, servers):
    coredns = json.loads(kube_cluster.kubectl("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns",
                                              "-o", "json", check=True).stdout)["items"]
    dns_nodes = {p["spec"]["nodeName"] for p in coredns}
    clients = []
    for i, (client, server) in enumerate(((two_nodes[0], two_nodes[1]), (two_nodes[1], two_nodes[0]))):
        target = servers[server.name]
        assert ipaddress.ip_address(target["ip"]) in ipaddress.ip_network(server.pod_cidr)
        name = f"client-{i}"
        logs = run_pod(kube_cluster, cluster_namespace, name,
                       f"timeout 10 wget -q -O- http://{target['ip']}:8080/ && "
                       f"timeout 10 wget -q -O- http://{target['service']}/ && "
                       f"timeout 10 wget -q -O- http://{target['service']}.{cluster_namespace}.svc.cluster.local/",
                       node=client.name)
        assert logs.split() == [f"web-on-{server.name}"] * 3, logs
        pod = _pod(kube_cluster, cluster_namespace, name)
        assert pod["spec"]["nodeName"] == client.name
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(client.pod_cidr)
        clients.append(client.name)
    # one client ran on a node without CoreDNS: its names came from the other node
    assert set(clients) - dns_nodes, (clients, dns_nodes)


def test_pods_on_every_node_reach_the_host(kube_cluster, cluster_namespace, two_nodes):
    """A server on the host (as Kafka or MinIO) at the node IP, and by each node's name."""
    info = kube_cluster.info()
    with host_server() as port:
        for i, node in enumerate(two_nodes):
            logs = run_pod(kube_cluster, cluster_namespace, f"to-host-{i}",
                           f"timeout 10 wget -q -O- http://{info['node_ip']}:{port}/ && "
                           f"timeout 10 wget -q -O- http://{two_nodes[1 - i].name}:{port}/", node=node.name)
            assert logs.split() == [HOST_REPLY] * 2, logs


def test_a_shared_claim_is_written_on_one_node_and_read_on_the_other(kube_cluster, cluster_namespace, two_nodes):
    path = kube_cluster.shared_claim(cluster_namespace, "shared", "16Mi")
    volume = {"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}
    mount = {"name": "shared", "mountPath": "/shared"}
    token = f"written-on-{two_nodes[0].name}-{secrets.token_hex(4)}"
    run_pod(kube_cluster, cluster_namespace, "writer", f"echo {token} > /shared/file",
            volumes=[volume], mounts=[mount], node=two_nodes[0].name)
    logs = run_pod(kube_cluster, cluster_namespace, "reader", "cat /shared/file",
                   volumes=[volume], mounts=[mount], node=two_nodes[1].name)
    assert logs.strip() == token
    assert (path / "file").read_text() == f"{token}\n"
    for name, node in (("writer", two_nodes[0]), ("reader", two_nodes[1])):
        assert _pod(kube_cluster, cluster_namespace, name)["spec"]["nodeName"] == node.name
