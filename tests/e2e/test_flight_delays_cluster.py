"""flight-delays on a real cluster, deployed as a user would: `helm install` of our chart (and the
Spark Operator's), `blueprint build --image <app image>` and `kubectl apply`. Each streamlet's
driver and executor are pods the Spark Operator started; checkpoints live on the application's
claim (local-path-provisioner); Kafka is a broker on the node's address.

The tests run in order on one deployment, a month of data each, and each compares the egress
output with the batch computation (flight_delays.reference) for the months fed so far:
  1. January: the drivers and executors run as pods, the results equal the batch computation,
     `kubectl streamlets status` shows every driver RUNNING with its executor;
  2. a driver pod deleted mid-run: the Spark Operator starts it again, it resumes from its
     checkpoints, and January and February equal the batch computation;
  3. `kubectl streamlets savepoint`, then an upgrade to version 2 (blueprint-v2.yaml: `enrich`
     gains a second flights inlet, fed by a new ingress `more-flights`) on a new image tag with
     upgradeMode savepoint: each changed streamlet stops with a savepoint before its new pods
     start, which continue from it; March's flights arrive on the new inlet only, and every
     window of the three months equals the batch computation (none lost or doubled);
  4. `kubectl streamlets undeploy` leaves no pod.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import pytest
import yaml

from support.e2e import APPS, POLL_ERRORS
from support.flight_delays_cluster import APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, Deployment
from support.waiting import wait_until

STREAMLETS_V2 = (*STREAMLETS, "more-flights")  # blueprint-v2.yaml


def built_resource(blueprint: str, image: str, kafka: str, *configs: str) -> dict:
    """`blueprint build <blueprint> --image <image> --config <each config> --kafka ...` of the
    example, as the StreamletApplication to apply (images pulled never: no registry here)."""
    args = [a for c in configs for a in ("--config", str(EXAMPLE / c))]
    built = subprocess.run([sys.executable, "-m", "blueprint.cli", "build", str(EXAMPLE / blueprint), "--image", image,
                            *args, "--kafka", kafka, "-n", APPS], capture_output=True, text=True, timeout=300,
                           cwd=EXAMPLE)
    assert built.returncode == 0, built.stderr
    resource = yaml.safe_load(built.stdout)
    resource["spec"]["imagePullPolicy"] = "Never"  # no registry: the images are in containerd
    return resource


@pytest.fixture(scope="module")
def deployed(e2e_cluster, e2e_images, streamlets_operator, node_kafka, tmp_path_factory) -> Deployment:
    d = Deployment(e2e_cluster, node_kafka, tmp_path_factory.mktemp("flight-delays"))
    resource = built_resource("blueprint.yaml", e2e_images["app"], node_kafka, "cluster.conf")
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    yield d
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)


def test_january_in_pods_equals_the_batch_computation(deployed):
    d = deployed
    wait_until(lambda: set(d.running("driver")) == set(STREAMLETS) and set(d.running("executor")) == set(STREAMLETS),
               timeout=START_TIMEOUT, what="a running driver and executor pod per streamlet", interval=5,
               retry_on=POLL_ERRORS, on_timeout=d.report)
    d.feed(1)
    d.wait_results("January")
    # Checkpoints on the claim: offsets and commits from the drivers, state from the executors
    # (stats aggregates per window in Spark's state store).
    listing = d.exec("cd /data/flight-delays && find . -maxdepth 3 -type d | sort")
    for name in STREAMLETS:
        assert f"./{name}" in listing, listing
    state = d.exec("find /data/flight-delays/stats -path '*/state/*' -type f | head -5")
    assert state.strip(), "no state store files of the stats streamlet on the claim"

    status = d.plugin("status", APP)
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:] if line.split()
            and line.split()[0] in STREAMLETS}
    assert set(rows) == set(STREAMLETS), status.stdout
    for row in rows.values():
        assert row[2] == "RUNNING" and row[3] == "1/1", status.stdout


def test_a_deleted_driver_pod_resumes_from_its_checkpoints(deployed):
    d = deployed
    d.delete_driver_then_feed("stats", 2)  # February arrives while the stats driver is gone


def test_savepoint_and_an_upgrade_to_version_2_with_upgrade_mode_savepoint(deployed, e2e_images):
    d = deployed
    taken = d.plugin("savepoint", APP)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert "ok" in taken.stdout, taken.stdout
    # Version 2 on a new image tag (the same content: no registry to push to, containerd gets it as
    # `load` does), built from blueprint-v2.yaml with cluster-v2.conf over cluster.conf and applied
    # over version 1 with upgradeMode savepoint, as a user would.
    repository, _, tag = e2e_images["app"].rpartition(":")
    new_image = f"{repository}:{tag}-upgrade"
    subprocess.run(["podman", "tag", e2e_images["app"], new_image], check=True, capture_output=True)
    d.cluster.load(new_image)
    before = {n: p["metadata"]["uid"] for n, p in d.running("driver").items()}
    resource = built_resource("blueprint-v2.yaml", new_image, d.kafka, "cluster.conf", "cluster-v2.conf")
    resource["spec"]["upgradeMode"] = "savepoint"
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))

    def upgraded() -> bool:
        drivers = d.running("driver")
        return set(drivers) == set(STREAMLETS_V2) and all(
            p["metadata"]["uid"] != before.get(n) and p["spec"]["containers"][0]["image"] == new_image
            for n, p in drivers.items())
    wait_until(upgraded, timeout=START_TIMEOUT, what="every driver of version 2 running on the new image", interval=5,
               retry_on=POLL_ERRORS, on_timeout=d.report)
    status = json.loads(d.kubectl("get", "streamletapplication", APP, "-n", APPS, "-o", "json"))["status"]
    upgrade_savepoints = [s for s in status.get("savepoints", []) if s.get("reason") == "upgrade"]
    assert "enrich" in {s["streamlet"] for s in upgrade_savepoints}, status.get("savepoints")
    drivers = d.running("driver")
    d.feed(3, flights="more-flights")  # March's flights reach enrich through its new inlet only
    d.wait_results("after the upgrade to version 2")
    # enrich's checkpoint keys its sources by name, the new inlet's among them
    (enrich,) = [sp for sp in upgrade_savepoints if sp["streamlet"] == "enrich"]
    for query in enrich["batchIds"]:
        folder = f"/data/{APP}/enrich/{query}/offsets"
        newest = d.exec(f"cat {folder}/$(ls {folder} | grep -E '^[0-9]+$' | sort -n | tail -1)")
        for source in ("inlet_flights", "inlet_more_flights", "inlet_weather"):
            assert f"{source}:" in newest, newest
    # Stop-with-savepoint: each streamlet's queries stopped before its savepoint, so no batch ran in
    # the old pods after it: the batch after the savepoint's was planned (offsets/<n+1> written) by
    # the new driver, after it started. The new pods continued from the savepoint. `flights` gets no
    # input after the upgrade (March's flights go to `more-flights`), so it plans no batch at all.
    for sp in upgrade_savepoints:
        started = datetime.fromisoformat(drivers[sp["streamlet"]]["status"]["startTime"].replace("Z", "+00:00"))
        assert sp["batchIds"], sp
        for query, batch in sp["batchIds"].items():
            path = f"/data/{APP}/{sp['streamlet']}/{query}/offsets/{batch + 1}"
            planned = d.exec(f"if [ -e {path} ]; then stat -c %Y {path}; else echo none; fi").strip()
            if sp["streamlet"] == "flights":
                assert planned == "none", (sp, query, planned)
                continue
            assert int(planned) >= int(started.timestamp()), (sp, query, planned, started)


def test_undeploy_leaves_no_pod(deployed):
    deployed.undeploy()
