"""Small pods and a host server for the tests of dev/cluster's cluster itself (tests/e2e
test_cluster_smoke.py, test_cluster_nodes.py).

Everything runs in ``localhost/streamlets/busybox:1`` (made by dev/k8s-node-env, loaded by up).
Its wget (Debian's busybox-static 1.35) segfaults with -T, so timeouts come from `timeout`."""

from __future__ import annotations

import contextlib
import http.server
import socketserver
import threading
from collections.abc import Iterator

HOST_REPLY = "hello-from-host"


def busybox_pod(name: str, script: str, *, image: str, volumes=(), mounts=(), restart: str = "Never",
                node: str | None = None, **spec) -> dict:
    """A pod running ``sh -c script`` (label app=<name>); ``node``: pinned to that node through
    the scheduler (nodeSelector kubernetes.io/hostname)."""
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", script], "volumeMounts": list(mounts),
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
            "volumes": list(volumes), **spec,
        },
    }


def run_pod(cluster, ns: str, name: str, script: str, **kw) -> str:
    """Run ``script`` in a busybox pod to completion; its logs (fails with them unless Succeeded)."""
    cluster.apply(busybox_pod(name, script, image=cluster.env["images"]["busybox"], **kw), namespace=ns)
    phase, logs = cluster.wait_pod_done(ns, name)
    assert phase == "Succeeded", f"pod {name} {phase}:\n{logs}"
    return logs


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"{HOST_REPLY}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def host_server() -> Iterator[int]:
    """An HTTP server on the host listening on 0.0.0.0 (as a Kafka broker or MinIO would),
    answering HOST_REPLY; yields its port."""
    with socketserver.ThreadingTCPServer(("0.0.0.0", 0), _Hello) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
