"""A real Kubernetes API server (kube-apiserver + etcd, built by dev/k8s-env) for tests, and a
real one-node cluster (dev/cluster, built by dev/k8s-node-env) for end-to-end tests."""

from .cluster import ClusterError, ClusterUnavailable, KubeCluster, load_cluster_env
from .server import KubeEnvMissing, KubeServer, KubeServerError, load_env

__all__ = ["ClusterError", "ClusterUnavailable", "KubeCluster", "KubeEnvMissing", "KubeServer", "KubeServerError",
           "load_cluster_env", "load_env"]
