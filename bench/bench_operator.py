"""Benchmark: time from applying StreamletApplications to all their children created, by the operator.

    python bench/bench_operator.py [--streamlets 20] [--apps 50] [--rounds 3]

Runs on a real kube-apiserver and etcd (the test binaries, `dev/k8s-env`), the Spark Operator's
real SparkApplication CRD and a real Kafka broker, all started by the benchmark. Two scenarios:

- one application of `--streamlets` streamlets (a generated chain, one topic between neighbours);
- `--apps` applications at once (the flight-delays example, 5 streamlets and 4 topics each).

Operator: `kopf run --standalone -m streamlets_operator --namespace NS` (as in its Deployment,
8 workers), started before the clock; timed is creating the StreamletApplications until every
child exists (per streamlet a SparkApplication and a Secret, per application a claim), which
includes creating the topics on the broker.

Baseline, in the same run: the same work with no operator, done straight and in sequence by one
client: create each StreamletApplication, create its topics through Kafka's admin API, then
create its pre-rendered children (rendered before the clock starts). Printed per round and as
medians: seconds of each and the ratio operator/baseline. Results: bench/results/operator.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator"), str(ROOT / "tests")]

GROUP, VERSION, PLURAL = "streamlets.io", "v1alpha1", "streamletapplications"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")


# --- applications -------------------------------------------------------------------------------

def chain_application(n: int, kafka: str, folder: Path) -> dict:
    """A StreamletApplication of `n` streamlets in a chain (s-0 -> s-1 -> ...), built from a
    blueprint with `blueprint.deploy.build` (classes generated here, so nothing is imported)."""
    from blueprint.deploy.build import build_resource
    from blueprint.loader import load_blueprint
    from blueprint.verify import resolve
    from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet

    schema = {"type": "record", "name": "Event", "namespace": "bench",
              "fields": [{"name": "id", "type": "string"}, {"name": "value", "type": "long"}]}
    classes = {}
    for i in range(n):
        attrs = {"limit": IntegerParameter("limit", default=10), "create_logic": lambda self, ctx: None,
                 "__module__": "generated"}
        if i > 0:
            attrs["inlet"] = AvroInlet("in", schema)
        if i < n - 1:
            attrs["outlet"] = AvroOutlet("out", schema, key="id")
        classes[f"s-{i}"] = type(f"S{i}", (Streamlet,), attrs)
    lines = ["app-id: chain", "streamlets:", *(f"  s-{i}: generated.S{i}" for i in range(n)), "topics:"]
    lines += [f"  t-{i}: {{producers: [s-{i}.out], consumers: [s-{i + 1}.in], partitions: 1}}" for i in range(n - 1)]
    path = folder / "blueprint.yaml"
    path.write_text("\n".join(lines) + "\n")
    bp = load_blueprint(path)
    return build_resource(bp, resolve(bp, classes), "registry.example/chain:1", [], kafka=kafka)


def flight_delays_application(kafka: str) -> dict:
    from typer.testing import CliRunner

    import yaml
    from blueprint.cli import app as blueprint_cli

    result = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                                "--image", "registry.example/fd:1", "--kafka", kafka])
    if result.exit_code != 0:
        raise SystemExit(f"blueprint build failed:\n{result.output}")
    return yaml.safe_load(result.stdout)


def named(resource: dict, name: str, ns: str) -> dict:
    """A copy of `resource` as application `name` in namespace `ns`, with topics of its own."""
    app_id = resource["spec"]["appId"]
    r = json.loads(json.dumps(resource).replace(f'"{app_id}.', f'"{ns}-{name}.'))
    r["metadata"].update(name=name, namespace=ns)
    r["spec"]["appId"] = name
    return r


def expected_children(resources: list[dict]) -> int:
    return sum(2 * len(r["spec"]["streamlets"]) + 1 for r in resources)


# --- measuring ----------------------------------------------------------------------------------

class Cluster:
    def __init__(self, kube, bootstrap: str):
        from kubernetes import client

        self.kube, self.bootstrap = kube, bootstrap
        api = kube.api_client()
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def namespace(self) -> str:
        ns = f"b-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": ns}})
        return ns

    def children(self, ns: str) -> int:
        sel = "app.kubernetes.io/managed-by=streamlets-operator"
        return (len(self.custom.list_namespaced_custom_object(*SPARK[:2], ns, SPARK[2], label_selector=sel)["items"])
                + len(self.core.list_namespaced_secret(ns, label_selector=sel).items)
                + len(self.core.list_namespaced_persistent_volume_claim(ns, label_selector=sel).items))


def start_operator(kube, ns: str, log: Path) -> subprocess.Popen:
    env = {**kube.subprocess_env(), "STREAMLETS_STATUS_INTERVAL": "30",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", "--standalone", "-m", "streamlets_operator",
                                 "--namespace", ns], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while "Initial authentication has finished" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the operator did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    time.sleep(2)  # its watch stream opens right after authentication
    return proc


def with_operator(cluster: Cluster, resources: list[dict], log: Path, timeout: float = 900) -> float:
    ns = resources[0]["metadata"]["namespace"]
    proc = start_operator(cluster.kube, ns, log)
    try:
        want = expected_children(resources)
        t0 = time.perf_counter()
        for r in resources:
            cluster.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, r)
        while cluster.children(ns) < want:
            if time.perf_counter() - t0 > timeout or proc.poll() is not None:
                raise SystemExit(f"children not created after {time.perf_counter() - t0:.0f} s:\n{log.read_text()[-2000:]}")
            time.sleep(0.05)
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def baseline(cluster: Cluster, resources: list[dict]) -> float:
    """The same objects and topics, created in sequence by one client with no operator."""
    from streamlets_operator import render, topics

    ns = resources[0]["metadata"]["namespace"]
    rendered = []
    for r in resources:  # before the clock: the rendering; the uid is filled in once created
        body = {**r, "metadata": {**r["metadata"], "uid": "00000000-0000-0000-0000-000000000000"}}
        children = render.render_all(body, env={})
        objs = [children["claim"], *(o for pair in children["streamlets"].values() for o in pair)]
        rendered.append((r, [o for o in objs if o], topics.desired_topics(r["spec"])))
    t0 = time.perf_counter()
    for r, objs, wanted in rendered:
        uid = cluster.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, r)["metadata"]["uid"]
        topics.ensure_topics(cluster.bootstrap, wanted, timeout=30)
        for o in objs:
            o["metadata"]["ownerReferences"][0]["uid"] = uid
            kind = o["kind"]
            if kind == "SparkApplication":
                cluster.custom.create_namespaced_custom_object(*SPARK[:2], ns, SPARK[2], o)
            elif kind == "Secret":
                cluster.core.create_namespaced_secret(ns, o)
            else:
                cluster.core.create_namespaced_persistent_volume_claim(ns, o)
    elapsed = time.perf_counter() - t0
    if cluster.children(ns) != expected_children(resources):
        raise SystemExit("the baseline did not create every child")
    return elapsed


def scenario(cluster: Cluster, label: str, make, rounds: int, logs: Path) -> dict:
    op_s, base_s = [], []
    for rnd in range(rounds):
        # the baseline and the operator each in a fresh namespace, with topics of their own
        b = baseline(cluster, make(cluster.namespace()))
        o = with_operator(cluster, make(cluster.namespace()), logs / f"operator-{label}-{rnd}.log")
        base_s.append(b)
        op_s.append(o)
        print(f"  {label} round {rnd + 1}: operator {o:7.2f} s   baseline {b:7.2f} s   ratio {o / b:5.2f}", flush=True)
    o, b = statistics.median(op_s), statistics.median(base_s)
    print(f"{label}: median operator {o:.2f} s, baseline {b:.2f} s, ratio operator/baseline {o / b:.2f}", flush=True)
    return {"operator_seconds": op_s, "baseline_seconds": base_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streamlets", type=int, default=20)
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from blueprint.sandbox.kafka_broker import KafkaBroker
    from kube.server import KubeServer

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        broker = KafkaBroker(tmp / "kafka").start()
        kube = KubeServer(tmp / "kube").start()
        try:
            kube.apply_file(ROOT / "charts" / "streamlets-operator" / "crds" / "streamlets.io_streamletapplications.yaml",
                            server_side=True)
            kube.wait_crd_established(f"{PLURAL}.{GROUP}")
            kube.install_spark_operator_crd()
            cluster = Cluster(kube, broker.bootstrap_servers)
            chain = chain_application(args.streamlets, broker.bootstrap_servers, tmp)
            fd = flight_delays_application(broker.bootstrap_servers)
            print(f"one application of {args.streamlets} streamlets ({expected_children([chain])} children, "
                  f"{args.streamlets} topics with the dead-letter topic); {args.apps} applications of 5 streamlets "
                  f"({args.apps * expected_children([fd])} children, {args.apps * 5} topics)", flush=True)
            results = {
                "one_app": scenario(cluster, f"1 app x {args.streamlets} streamlets",
                                    lambda ns: [named(chain, "chain", ns)], args.rounds, tmp),
                "many_apps": scenario(cluster, f"{args.apps} apps x 5 streamlets",
                                      lambda ns: [named(fd, f"fd-{i:02d}", ns) for i in range(args.apps)], args.rounds, tmp),
            }
        finally:
            kube.stop()
            broker.stop()
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "operator.json").write_text(json.dumps({"streamlets": args.streamlets, "apps": args.apps, **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
