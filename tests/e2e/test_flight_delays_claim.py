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

  1. January: a driver and an executor per streamlet, every pod of the application on one node,
     each with that affinity; the results equal the batch computation (flight_delays.reference),
     so `stats` read what `enrich` wrote in the wire format; the subject holds enrich's schema,
     every value of the topic names it, and Confluent's AvroDeserializer reads them; the registry
     password is in no resource, SparkApplication or pod spec; the checkpoints and the stats
     state are on the claim; `kubectl streamlets status` shows every driver RUNNING with its
     executor;
  2. `kubectl streamlets undeploy` leaves no pod.

The state on S3 across nodes, a deleted driver, and the upgrade to version 2 from a savepoint:
test_flight_delays_cluster.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from streamlets.schema_registry import header
from support.e2e import APPS, POLL_ERRORS
from support.kafka import read_topic
from support.registry import RegistryServer, serving
from support.flight_delays_cluster import (APP, DATA_POD, EXAMPLE, START_TIMEOUT, STREAMLETS, Deployment,
                                           built_resource)
from support.waiting import wait_until


ENRICHED = f"{APP}.enriched-flights"


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
    resource = built_resource("blueprint-registry.yaml", e2e_images["app"], node_kafka, EXAMPLE / "cluster.conf", conf)
    assert "storage" not in resource["spec"] or not resource["spec"]["storage"].get("checkpoints"), resource["spec"]
    d.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource))
    d.start_data_pod(e2e_images["app"])
    yield d
    d.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=false", check=False)


def test_january_on_one_node_of_the_claim_equals_the_batch_computation(deployed, e2e_cluster, node_registry):
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
    _enriched_flights_in_the_wire_format(d, node_registry)
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
