"""flight-delays on the chart's old default storage: one checkpoint claim of the cluster's default
StorageClass (local-path-provisioner), ReadWriteOnce, on a cluster of two nodes. A ReadWriteOnce
volume attaches to one node, so the operator gives every driver and executor of the application a
pod affinity to the application's other pods (render.one_node_affinity): they all run on one node
rather than waiting in ContainerCreating (Multi-Attach) or Pending (volume node affinity) on the
other. Deployed as a user would: `blueprint build --image <app image> --config cluster.conf` and
`kubectl apply`; Kafka is the session's broker on the node's address.

The application is blueprint-registry.yaml: its enriched flights are a schema registry topic, with
Apicurio Registry on the node's address serving HTTPS only and wanting basic auth, its CA and the
password keys of Secrets the deploy config names (`schema-registry.ca-secret`, `password-secret`).

`enrich` (a stream-stream join: its state is the join's buffers) is autoscaled: mode active, one
executor to start, at most three, each executor limited to ENRICH_CPU of a core so that its
capacity is its executors', with intervals of seconds rather than minutes (AUTOSCALING).
bench/bench_autoscale.py runs this module with other values from the environment: the mode
(STREAMLETS_E2E_AUTOSCALING=passive: the same burst with decisions reported only, the drain time
without autoscaling), months fed and drained before the burst (STREAMLETS_E2E_WARM_UP=1), the
burst's months (STREAMLETS_E2E_BURST=2,3,4) and the CPU limit (STREAMLETS_E2E_ENRICH_CPU=100m);
STREAMLETS_E2E_FEED=steady or oscillating feeds those months at a set pace instead (FEED), which
with STREAMLETS_E2E_AUTOSCALING=passive and STREAMLETS_E2E_RECORD records the steady and
oscillating series of tests/unit/test_autoscale.py.

  1. A burst, four months of flights and weather at once, once enrich's autoscaler is past its
     stabilization interval and first window: a driver and an executor per streamlet, every pod
     of the application on one node, each with that affinity; the autoscaler
     adds executors to enrich in place (an Autoscaled Event, its executor pods, no new driver), at
     most three; the results equal the batch computation (flight_delays.reference), so `stats`
     read what `enrich` wrote in the wire format and enrich's join state survived the changes;
     the subject holds enrich's schema, every value of the topic names it, and Confluent's
     AvroDeserializer reads them; the registry password is in no resource, SparkApplication or
     pod spec; the checkpoints and the stats state are on the claim;
  2. the lag drained, enrich goes back to one executor after the scale-down interval (an
     Autoscaled Event, its status), never down while the burst was backlogged; `kubectl
     streamlets status` shows every driver RUNNING with its executors and enrich's autoscaler;
  3. `kubectl streamlets undeploy` leaves no pod.

The state on S3 across nodes, a deleted driver, and the upgrade to version 2 from a savepoint:
test_flight_delays_cluster.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from blueprint.ops.figures import parse_text
from streamlets.schema_registry import header
from support.e2e import APPS, POLL_ERRORS
from support.kafka import read_topic
from support.registry import RegistryServer, serving
from support.flight_delays_cluster import (APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, Deployment,
                                           built_resource)
from support.waiting import wait_until


ENRICHED = f"{APP}.enriched-flights"
# bench/bench_autoscale.py runs this module with other values of these (the environment's)
MODE = os.environ.get("STREAMLETS_E2E_AUTOSCALING", "active")  # passive: the same burst, nothing applied
WARM_UP = tuple(int(m) for m in os.environ.get("STREAMLETS_E2E_WARM_UP", "").split(",") if m)  # fed first, drained
BURST = tuple(int(m) for m in os.environ.get("STREAMLETS_E2E_BURST", "1,2,3,4").split(","))  # then fed at once
ENRICH_CPU = os.environ.get("STREAMLETS_E2E_ENRICH_CPU", "300m")  # each enrich executor's CPU limit
# How the burst's months come: "burst", all at once; "steady", each month's flights as 30 files
# (about a day each) one every 4 s (about 230 flights/s); "oscillating", each month's first 10
# files at once, then the other 20 one every 6 s (a burst of 10 days, then about 155 flights/s)
FEED = os.environ.get("STREAMLETS_E2E_FEED", "burst")
PAUSES = {"steady": [4.0] * 30, "oscillating": [0.0] * 10 + [6.0] * 20}
MAX_EXECUTORS = 3
# enrich's autoscaling (streamlets.<name>.autoscaling.*): Flink's defaults are minutes; a test has seconds.
# enrich reads the burst in one micro-batch of about 40 s at 0.3 of a core, which no window sees
# finish: its running time bounds its rate (streamlets.autoscale), and a catch-up duration of 10 s
# asks for more than one executor once it has run about 10 s (with 2 minutes, one executor rightly
# sufficed and nothing changed)
AUTOSCALING = {"mode": MODE, "max-executors": MAX_EXECUTORS, "stabilization-interval": "30s", "metrics-window": "60s",
               "catch-up-duration": "10s", "restart-time": "10s", "scale-down-interval": "60s",
               "backlog-lag-threshold": "20s", "max-scale-down-factor": 0.9}


class EnrichWatch(threading.Thread):
    """enrich's running executor pods and autoscaler status every few seconds, from the deployment
    on: `seen`, (time, executors, status.streamlets.enrich.autoscaling); and the MetricSamples the
    operator's autoscaler builds from its driver's page (read through the API server's pod proxy):
    `samples`, which STREAMLETS_E2E_RECORD=<file or folder> saves: the recorded series of
    tests/unit/test_autoscale.py (tests/unit/fixtures/autoscale/)."""

    def __init__(self, d: Deployment) -> None:
        super().__init__(daemon=True)
        self.d, self.seen, self.samples, self.stopping = d, [], [], threading.Event()
        self.recording = bool(os.environ.get("STREAMLETS_E2E_RECORD"))

    def run(self) -> None:
        from streamlets.runtime.runconfig import METRICS_PATH, METRICS_PORT
        from streamlets_operator.autoscaling import metric_sample
        while not self.stopping.wait(5 if self.recording else 8):
            try:
                pods = [p for p in self.d.pods("executor") if p["metadata"]["labels"].get("streamlets.io/streamlet")
                        == "enrich" and p["status"].get("phase") == "Running"
                        and not p["metadata"].get("deletionTimestamp")]
                app = json.loads(self.d.kubectl("get", "streamletapplication", APP, "-n", APPS, "-o", "json"))
                auto = ((app.get("status") or {}).get("streamlets") or {}).get("enrich", {}).get("autoscaling") or {}
                self.seen.append((time.monotonic(), len(pods), auto))
                if not self.recording:
                    continue
                driver = self.d.running("driver")["enrich"]["metadata"]["name"]
                page = self.d.kubectl("get", "--raw", f"/api/v1/namespaces/{APPS}/pods/{driver}:{METRICS_PORT}/proxy"
                                      f"{METRICS_PATH}", timeout=20)
                sample = metric_sample(parse_text(page), "enrich", time.time())
                if sample is not None:
                    self.samples.append(dataclasses.asdict(sample))
            except Exception:  # a poll while things start: next time
                continue

    def save(self, events: list[dict]) -> None:
        """The recording (STREAMLETS_E2E_RECORD): the settings, the samples, the autoscaler's Events."""
        where = os.environ.get("STREAMLETS_E2E_RECORD")  # a file, or a folder for e2e-<feed>-<mode>.json
        if where:
            path = Path(where) / f"e2e-{FEED}-{MODE}.json" if Path(where).is_dir() else Path(where)
            fed = "at once" if FEED == "burst" else f"{FEED}: each month's flights as 30 files, pauses {PAUSES[FEED]} s"
            path.write_text(json.dumps({
                "what": f"enrich of flight-delays on the e2e cluster, autoscaling {MODE}, months {BURST} fed {fed}",
                "autoscaling": AUTOSCALING, "executor_cpu": ENRICH_CPU, "samples": self.samples,
                "events": [{"reason": e["reason"], "message": e["message"]} for e in events]}, indent=1) + "\n")


def autoscaler_events(d: Deployment) -> list[dict]:
    """The application's Autoscaled, AutoscaleRecommended and AutoscaleFailed Events, oldest first."""
    events = json.loads(d.kubectl("get", "events", "-n", APPS, "--field-selector",
                                  f"involvedObject.name={APP}", "-o", "json"))["items"]
    return sorted((e for e in events if e.get("reason", "").startswith("Autoscale")),
                  key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


@pytest.fixture(scope="module")
def node_registry(e2e_cluster, tmp_path_factory) -> Iterator[RegistryServer]:
    """Apicurio Registry on the node's address (pods reach it there), HTTPS only, basic auth."""
    with serving(tmp_path_factory.mktemp("registry"), tls=True, username="app", host=e2e_cluster.node_ip) as server:
        yield server


@pytest.fixture(scope="module")
def deployed(e2e_cluster, e2e_images, streamlets_operator, node_kafka, node_registry, tmp_path_factory) -> Deployment:
    tmp = tmp_path_factory.mktemp("flight-delays-claim")
    d = Deployment(e2e_cluster, node_kafka, tmp)
    assert node_registry.ca_file is not None and node_registry.password_file is not None
    for name, key, path in (("registry-ca", "ca.crt", node_registry.ca_file),
                            ("registry-user", "password", node_registry.password_file)):
        d.kubectl("create", "secret", "generic", name, f"--from-file={key}={path}", "-n", APPS)
    conf = tmp / "registry.conf"
    conf.write_text(f'schema-registry {{\n  url = "{node_registry.url}"\n  ca-secret = registry-ca/ca.crt\n'
                    f'  username = {node_registry.username}\n  password-secret = registry-user/password\n}}\n')
    scaling = tmp / "autoscaling.conf"
    scaling.write_text("streamlets.enrich {\n  kubernetes.executor.core-limit = " + ENRICH_CPU + "\n  autoscaling {\n"
                       + "".join(f"    {k} = {json.dumps(v) if isinstance(v, str) else v}\n"
                                 for k, v in AUTOSCALING.items()) + "  }\n}\n")
    resource = built_resource("blueprint-registry.yaml", e2e_images["app"], node_kafka, EXAMPLE / "cluster.conf", conf,
                              scaling)
    (enrich,) = [s for s in resource["spec"]["streamlets"] if s["name"] == "enrich"]
    assert enrich["autoscaling"]["mode"] == MODE and enrich["executor"]["coreLimit"] == ENRICH_CPU, enrich
    assert "storage" not in resource["spec"] or not resource["spec"]["storage"].get("checkpoints"), resource["spec"]
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    d.watch = EnrichWatch(d)
    d.watch.start()
    yield d
    d.watch.stopping.set()
    d.watch.save(autoscaler_events(d))
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)


def test_a_burst_on_one_node_of_the_claim_is_autoscaled_and_equals_the_batch_computation(deployed, e2e_cluster,
                                                                                          node_registry):
    d = deployed
    wait_until(lambda: set(d.running("driver")) == set(STREAMLETS) and set(d.running("executor")) == set(STREAMLETS),
               timeout=START_TIMEOUT, what="a running driver and executor pod per streamlet", interval=5,
               retry_on=POLL_ERRORS, on_timeout=d.report)
    # The claim is ReadWriteOnce, and every pod of the application shares one node through its
    # affinity (on a cluster of two nodes, the scheduler had another node to choose).
    claim = yaml.safe_load(d.kubectl("get", "pvc", f"{APP}-checkpoints", "-n", APPS, "-o", "yaml"))
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"], claim["spec"]
    pods = [p for p in d.pods() if p["status"].get("phase") == "Running"]
    assert len({p["spec"]["nodeName"] for p in pods}) == 1, {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    for p in pods:
        terms = p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms[0]["topologyKey"] == "kubernetes.io/hostname", terms
    for month in WARM_UP:
        d.feed(month)
    if WARM_UP:
        d.wait_results(f"the warm-up, months {WARM_UP}")
    # The burst comes to a streamlet whose autoscaler is evaluating: after a start it decides
    # nothing for a stabilization interval and a full window (Flink's too), which a burst fed at
    # once would otherwise spend most of its drain in (a CI run: no decision)
    wait_until(lambda: d.watch.seen and d.watch.seen[-1][2].get("mode") == MODE
               and d.watch.seen[-1][2].get("evaluatedAt")  # a decision, not "no metrics yet"
               and d.watch.seen[-1][2].get("held") not in ("stabilizing", "collecting"), timeout=300,
               what="enrich's autoscaler past its stabilization interval and first window", interval=5,
               on_timeout=lambda: f"{d.watch.seen[-3:]}")
    enrich_driver = d.running("driver")["enrich"]["metadata"]["uid"]
    started = time.monotonic()
    for month in BURST:
        if FEED == "burst":
            d.feed(month)
        else:
            d.feed_paced(month, PAUSES[FEED])
    d.wait_results(f"a burst of months {BURST}")
    drained = time.monotonic() - started
    events = autoscaler_events(d)
    if MODE == "active" and any(e["reason"] == "Autoscaled" for e in events):
        # the watch samples running executor pods every few seconds: one added late may not be seen yet
        wait_until(lambda: max(n for _, n, _ in d.watch.seen) > 1, timeout=120, interval=5,
                   what="enrich's added executors running", on_timeout=lambda: f"{d.watch.seen[-5:]}")
    peak = max(n for _, n, _ in d.watch.seen)
    print(f"\nautoscaling {MODE}: months {BURST} drained in {drained:.0f} s; enrich's executors at most {peak}; "
          f"events: {[e['message'][:160] for e in events]}")
    figures = {"mode": MODE, "burst": BURST, "warm_up": WARM_UP, "enrich_cpu": ENRICH_CPU,
               "drained_s": round(drained, 1), "peak_executors": peak, "events": [e["message"] for e in events]}
    print(f"BENCH {json.dumps(figures)}")  # bench/bench_autoscale.py reads it
    ups = [e for e in events if e["reason"] == "Autoscaled" and "enrich: 1 -> " in e["message"]]
    if MODE == "active":
        assert ups, (events, d.watch.seen[-5:])
        assert 1 < peak <= MAX_EXECUTORS, d.watch.seen
        # in place: the same driver, no resubmission
        assert d.running("driver")["enrich"]["metadata"]["uid"] == enrich_driver
    else:  # passive: nothing applied; what it recommends (if the burst lasts long enough) is said once
        assert not ups and peak == 1, (events, d.watch.seen[-5:])
        assert all(e["reason"] == "AutoscaleRecommended" and "recommended (passive)" in e["message"]
                   for e in events), events
    _enriched_flights_in_the_wire_format(d, node_registry)
    # Checkpoints on the claim: offsets and commits from the drivers, state from the executors
    # (stats aggregates per window in Spark's state store).
    listing = d.exec("cd /data/flight-delays && find . -maxdepth 3 -type d | sort")
    for name in STREAMLETS:
        assert f"./{name}" in listing, listing
    state = d.exec("find /data/flight-delays/stats -path '*/state/*' -type f | head -5")
    assert state.strip(), "no state store files of the stats streamlet on the claim"


def test_the_executors_come_back_down_after_the_lag_drained(deployed):
    d = deployed
    if MODE == "active":
        wait_until(lambda: d.watch.seen and d.watch.seen[-1][1] == 1
                   and (d.watch.seen[-1][2].get("lastScaled") or "").endswith("-> 1"), timeout=420,
                   what="enrich back to one executor", interval=5, retry_on=POLL_ERRORS,
                   on_timeout=lambda: f"{d.watch.seen[-3:]}\n{autoscaler_events(d)}\n{d.report()}")
        downs = [e for e in autoscaler_events(d) if e["reason"] == "Autoscaled" and e["message"].split(":", 1)[1]
                 .split("executor")[0].strip().endswith("-> 1")]
        assert downs and "scale down" in downs[-1]["message"], autoscaler_events(d)
        # never a down decision while the burst was backlogged: each status the watch saw that asked
        # for fewer executors came with the lag at or below the threshold
        for _, _, auto in d.watch.seen:
            if auto.get("direction") == "down":
                assert not auto.get("backlogged"), auto
    last = {"text": ""}  # the last `kubectl streamlets status` output

    def rows() -> dict[str, list[str]]:
        status = d.plugin("status", APP)
        assert status.returncode == 0, status.stderr
        last["text"] = status.stdout
        return {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:] if line.split()
                and line.split()[0] in STREAMLETS}
    # status.streamlets.<name>.executors follows the Spark Operator's executorState: a removed
    # executor leaves it at its next status update
    def settled() -> dict[str, list[str]] | None:
        found = rows()
        return found if set(found) == set(STREAMLETS) and all(
            row[2] == "RUNNING" and row[3] == "1/1" for row in found.values()) else None

    found = wait_until(settled, timeout=180, what="every streamlet RUNNING with 1/1 executors", interval=10,
                       retry_on=POLL_ERRORS, on_timeout=lambda: last["text"])
    for name, row in found.items():
        assert (row[5] == MODE) if name == "enrich" else row[5] == "off", last["text"]
    assert "autoscaler:\n  enrich: " in last["text"], last["text"]


def _enriched_flights_in_the_wire_format(d: Deployment, registry: RegistryServer) -> None:
    """The subject holds enrich's outlet schema (one version); every value of the topic starts
    with the magic byte and its id, and Confluent's AvroDeserializer reads it; the registry
    password is in no resource the operator or the Spark Operator made."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from flight_delays.enrich import FlightWeatherJoin

    client = registry.client()
    (version,) = client.get_versions(f"{ENRICHED}-value")
    registered = client.get_version(f"{ENRICHED}-value", version)
    schema = FlightWeatherJoin.outlet.schema
    assert [f["name"] for f in json.loads(registered.schema.schema_str)["fields"]] == list(schema.field_names)
    messages = read_topic(d.kafka, ENRICHED)
    assert messages and all(m.value()[:5] == header(registered.schema_id) for m in messages)
    deserialize = AvroDeserializer(client)
    first = deserialize(messages[0].value(), SerializationContext(ENRICHED, MessageField.VALUE))
    assert list(first) == list(schema.field_names), first
    assert registry.password_file is not None
    password = registry.password_file.read_text()
    for kind in ("streamletapplications", "sparkapplications", "pods"):
        assert password not in d.kubectl("get", kind, "-n", APPS, "-o", "yaml"), kind


def test_undeploy_leaves_no_pod(deployed):
    deployed.undeploy()
