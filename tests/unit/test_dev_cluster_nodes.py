"""The layout of dev/cluster's worker nodes (dev/cluster.py, Node): nothing two nodes share that
must be theirs alone (containerd, kubelet ports, cgroups, bridge, pod range), and the first node
laid out as the one node of a one-node cluster always was. Nothing is started here."""

from __future__ import annotations

import ipaddress
import json

import pytest

from dev.cluster import (BRIDGE, CLUSTER_CIDR, CNI_NETWORK, MAX_NODES, POD_CIDR, PORTS, ClusterError, KubeCluster,
                         Node)

ENV = {"images": {"pause": "localhost/streamlets/pause:3.10"}}


def test_the_first_node_keeps_the_one_node_layout(tmp_path):
    cluster = KubeCluster(tmp_path, env=ENV)
    assert cluster.node_count == 1
    (node,) = cluster.nodes
    assert node.dir == tmp_path
    assert node.containerd_socket == tmp_path / "containerd" / "containerd.sock" == cluster.containerd_socket
    assert (node.pod_cidr, node.bridge, node.cni_network) == (POD_CIDR, BRIDGE, CNI_NETWORK)
    assert (node.kubelet_port, node.healthz_port) == (PORTS["kubelet"], PORTS["kubelet_healthz"])
    assert node.cgroup_root == "/" and node.kubepods == "kubepods"
    assert cluster.components == ("etcd", "kube-apiserver", "containerd", "kube-controller-manager",
                                  "kube-scheduler", "kubelet", "kube-proxy")


def test_no_two_nodes_share_what_must_be_their_own(tmp_path):
    cluster = KubeCluster(tmp_path, env=ENV, nodes=MAX_NODES)
    nodes = cluster.nodes
    assert len(nodes) == MAX_NODES
    for attr in ("name", "dir", "containerd_socket", "kubelet_dir", "cni_dir", "images_record", "pod_cidr",
                 "bridge", "cni_network", "kubelet_port", "healthz_port", "cgroup_root", "kubepods"):
        values = [getattr(n, attr) for n in nodes]
        assert len(set(values)) == len(values), f"{attr} shared: {values}"
    ports = {p for n in nodes for p in (n.kubelet_port, n.healthz_port)}
    assert len(ports) == 2 * len(nodes)
    assert not ports & (set(PORTS.values()) - {PORTS["kubelet"], PORTS["kubelet_healthz"]})
    cluster_net = ipaddress.ip_network(CLUSTER_CIDR)
    ranges = [ipaddress.ip_network(n.pod_cidr) for n in nodes]
    assert all(r.subnet_of(cluster_net) for r in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1:])
    assert all(ipaddress.ip_address(n.gateway) in r for n, r in zip(nodes, ranges, strict=True))
    # no node's pods inside another's kubepods: kubelets remove pod cgroups they do not know of
    assert not any(a.kubepods.startswith(b.kubepods) for a in nodes for b in nodes if a is not b)
    assert len(set(cluster.components)) == len(cluster.components) == 5 + 2 * MAX_NODES


def test_each_node_has_its_own_containerd_and_cni_config(tmp_path):
    cluster = KubeCluster(tmp_path, env=ENV, nodes=2)
    first, second = cluster.nodes
    assert second.name == f"{first.name}-2" and second.proc("kubelet") == "kubelet-2"
    for node in (first, second):
        config = cluster._containerd_config(node)
        assert f'address = "{node.containerd_socket}"' in config
        assert f'root = "{node.containerd_dir / "root"}"' in config
        assert f'conf_dir = "{node.cni_dir / "net.d"}"' in config
        cni = json.loads(cluster._cni_config(node))
        plugin = cni["plugins"][0]
        assert cni["name"] == node.cni_network
        assert plugin["bridge"] == node.bridge
        assert plugin["ipam"]["ranges"] == [[{"subnet": node.pod_cidr, "gateway": node.gateway}]]
        assert plugin["ipam"]["dataDir"] == str(node.cni_dir / "ipam")
    other = cluster._containerd_config(second)
    assert str(first.containerd_socket) not in other and f'"{first.containerd_dir}/' not in other


def test_the_number_of_nodes_is_recorded_and_bounded(tmp_path):
    (tmp_path / "nodes.json").write_text(json.dumps({"nodes": 3}))
    assert KubeCluster(tmp_path, env=ENV).node_count == 3  # down and status find every node
    assert KubeCluster(tmp_path, env=ENV, nodes=2).node_count == 2
    for wrong in (0, MAX_NODES + 1):
        with pytest.raises(ClusterError, match="nodes must be"):
            KubeCluster(tmp_path, env=ENV, nodes=wrong)


def test_node_of_names_the_extra_nodes_after_the_host(tmp_path):
    assert Node.of(tmp_path, 0, "box").name == "box"
    node = Node.of(tmp_path, 2, "box")
    assert (node.name, node.dir, node.cgroup_root, node.kubepods) == (
        "box-3", tmp_path / "nodes" / "box-3", "/streamlets-node-3", "streamlets-node-3/kubepods")
