"""What the e2e tests share: names, helm, and what a failure shows (tests/e2e). Their polls
(support.waiting.wait_until) retry on POLL_ERRORS: a poll may fail while things start."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blueprint.sandbox.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[2]
APPS = "apps"  # the namespace of the applications
OPERATOR_NS = "streamlets-system"
SPARK_OPERATOR_NS = "spark-operator"
POLL_INTERVAL = 3.0  # seconds between polls of the cluster, unless a wait says otherwise
POLL_ERRORS = (Exception,)  # what a poll of the cluster may raise while things start: "not yet"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def images() -> dict[str, str]:
    """The references dev/images and dev/k8s-node-env give the images the e2e runs."""
    env = json.loads((Path(os.environ.get("STREAMLETS_CACHE", Path.home() / ".cache" / "streamlets"))
                      / "k8s" / "env.json").read_text())
    return {"app": f"localhost/streamlets/flight-delays:{VERSION}",
            "operator": f"localhost/streamlets/operator:{VERSION}",
            "spark-operator": f"localhost/streamlets/spark-operator:{env['spark_operator_version']}"}


def helm(cluster, *args: str, timeout: float = 600) -> str:
    proc = subprocess.run([cluster.env["helm"], f"--kubeconfig={cluster.kubeconfig}", *args], capture_output=True,
                          text=True, timeout=timeout, env=cluster.subprocess_env())
    assert proc.returncode == 0, f"helm {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def pods_report(cluster, namespace: str) -> str:
    """Pods, recent events and the tails of failing pods' logs: what a timeout message shows."""
    out = [cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout,
           cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp").stdout[-4000:]]
    return "\n".join(out)


def spark_operator_chart(cluster) -> str:
    chart = cluster.env.get("spark_operator_chart")
    assert chart and Path(chart).is_dir(), "no Spark Operator chart: run dev/k8s-node-env"
    return chart


def values_args(values: dict) -> list[str]:
    """--set-json for each top-level value (helm merges them over the chart's values)."""
    return [arg for key, value in values.items() for arg in ("--set-json", f"{key}={json.dumps(value)}")]

# podman (dev/images' storage) on this kind of machine: see dev/containers.conf
os.environ.setdefault("CONTAINERS_CONF", str(REPO / "dev" / "containers.conf"))


@contextmanager
def node_kafka_broker(cluster, folder: Path, security: str = "none") -> Iterator[KafkaBroker]:
    """A Kafka broker on the node's address, its data in `folder`, started; pods reach it through
    the node IP, as they would an external Kafka cluster, and the tests too. `security`: the
    client listener's (KafkaBroker's SECURITY_MODES: "sasl-ssl" is SCRAM over TLS, its certificate
    naming the node IP)."""
    from blueprint.sandbox.kafka_broker import KafkaBroker

    broker = KafkaBroker(folder, host=cluster.node_ip, security=security).start()
    try:
        yield broker
    finally:
        broker.stop()
