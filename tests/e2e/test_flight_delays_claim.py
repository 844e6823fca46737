"""flight-delays on the chart's old default storage: one checkpoint claim of the cluster's default
StorageClass (local-path-provisioner), ReadWriteOnce, on a cluster of two nodes. A ReadWriteOnce
volume attaches to one node, so the operator gives every driver and executor of the application a
pod affinity to the application's other pods (render.one_node_affinity): they all run on one node
rather than waiting in ContainerCreating (Multi-Attach) or Pending (volume node affinity) on the
other. Deployed as a user would: `blueprint build --image <app image> --config cluster.conf` and
`kubectl apply`; Kafka is the session's broker on the node's address.

  1. January: a driver and an executor per streamlet, every pod of the application on one node,
     each with that affinity; the results equal the batch computation (flight_delays.reference);
     the checkpoints and the stats state are on the claim; `kubectl streamlets status` shows every
     driver RUNNING with its executor;
  2. `kubectl streamlets undeploy` leaves no pod.

The state on S3 across nodes, a deleted driver, and the upgrade to version 2 from a savepoint:
test_flight_delays_cluster.py.
"""

from __future__ import annotations

import pytest
import yaml

from support.e2e import APPS, POLL_ERRORS
from support.flight_delays_cluster import (APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, Deployment,
                                           built_resource)
from support.waiting import wait_until


@pytest.fixture(scope="module")
def deployed(e2e_cluster, e2e_images, streamlets_operator, node_kafka, tmp_path_factory) -> Deployment:
    d = Deployment(e2e_cluster, node_kafka, tmp_path_factory.mktemp("flight-delays-claim"))
    resource = built_resource("blueprint.yaml", e2e_images["app"], node_kafka, EXAMPLE / "cluster.conf")
    assert "storage" not in resource["spec"] or not resource["spec"]["storage"].get("checkpoints"), resource["spec"]
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    yield d
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)


def test_january_on_one_node_of_the_claim_equals_the_batch_computation(deployed, e2e_cluster):
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


def test_undeploy_leaves_no_pod(deployed):
    deployed.undeploy()
