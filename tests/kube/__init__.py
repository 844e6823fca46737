"""A real Kubernetes API server (kube-apiserver + etcd, built by dev/k8s-env) for tests."""

from .server import KubeEnvMissing, KubeServer, KubeServerError, load_env

__all__ = ["KubeEnvMissing", "KubeServer", "KubeServerError", "load_env"]
