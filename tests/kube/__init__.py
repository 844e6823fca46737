"""A real Kubernetes API server (kube-apiserver + etcd, built by dev/k8s-env) for tests (server.py,
fixtures.py), and the fixtures of the real one-node cluster for end-to-end tests
(cluster_fixtures.py; the cluster itself, dev/cluster, is implemented in dev/cluster.py)."""

from .server import KubeEnvMissing, KubeServer, KubeServerError, load_env

__all__ = ["KubeEnvMissing", "KubeServer", "KubeServerError", "load_env"]
