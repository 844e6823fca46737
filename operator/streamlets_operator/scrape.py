"""Each streamlet driver's Prometheus page (streamlets.runtime.metrics), read by the operator: for
the operations API's live figures (api.py) and for the autoscaler (autoscaling.py).

A streamlet's driver is the newest pod, not being deleted, with the Spark Operator's labels
`spark-role=driver` and `sparkoperator.k8s.io/app-name=<its SparkApplication>`; its page is
http://<pod IP>:<the container port named `metrics`>/metrics (streamlets.runtime.runconfig).
"""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from blueprint.ops.figures import Sample, parse_text
from streamlets.runtime.runconfig import METRICS_PATH, METRICS_PORT, METRICS_PORT_NAME

from . import kube, render

TIMEOUT = 2.0  # seconds per driver


def api_message(e: Exception) -> str:
    """The Kubernetes API's message of an ApiException (its reason when the body is not JSON)."""
    try:
        return json.loads(e.body).get("message") or str(e.reason)  # type: ignore[attr-defined]
    except Exception:
        return str(getattr(e, "reason", e))


def driver_samples(app: dict[str, Any], streamlets: list[str], timeout: float = TIMEOUT
                   ) -> dict[str, list[Sample] | str]:
    """Per streamlet of the application (`app`: the resource, status included), its driver's samples,
    or the text of why there are none (no driver pod, no IP, unreachable, not Prometheus' format).
    Drivers are read in parallel, `timeout` seconds each."""
    from kubernetes.client.exceptions import ApiException

    meta, st = app["metadata"], app.get("status") or {}
    names = {s: ((st.get("streamlets") or {}).get(s) or {}).get("sparkApplication")
             or render.spark_app_name(meta["name"], s) for s in streamlets}
    if not names:
        return {}
    selector = f"{render.SPARK_ROLE}=driver,{render.SPARK_APP_NAME} in ({','.join(sorted(set(names.values())))})"
    try:
        pods = kube.core().list_namespaced_pod(meta["namespace"], label_selector=selector).items
    except ApiException as e:
        return {s: f"cannot list the driver pods: {e.status} {api_message(e)}" for s in streamlets}
    drivers: dict[str, Any] = {}
    for pod in sorted(pods, key=lambda p: p.metadata.creation_timestamp or 0):
        if pod.metadata.deletion_timestamp is None:
            drivers[(pod.metadata.labels or {}).get(render.SPARK_APP_NAME, "")] = pod  # the newest wins

    def scrape(streamlet: str) -> list[Sample] | str:
        pod = drivers.get(names[streamlet])
        if pod is None:
            return f"no driver pod of SparkApplication {names[streamlet]}"
        ip = pod.status.pod_ip if pod.status is not None else None
        if not ip:
            return f"driver pod {pod.metadata.name} has no IP (phase {pod.status.phase if pod.status else '?'})"
        port = next((p.container_port for c in pod.spec.containers or [] for p in c.ports or []
                     if p.name == METRICS_PORT_NAME), METRICS_PORT)
        host = f"[{ip}]" if ":" in ip else ip
        url = f"http://{host}:{port}{METRICS_PATH}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (an http URL we built)
                return parse_text(resp.read().decode("utf-8", errors="replace"))
        except Exception as e:  # unreachable, slow or not Prometheus' format: no figures
            return f"{url}: {type(e).__name__}: {e}"

    with ThreadPoolExecutor(max_workers=min(8, len(streamlets))) as pool:
        return dict(zip(streamlets, pool.map(scrape, streamlets), strict=True))
