"""The operator with an application whose Kafka wants SASL_SSL (SCRAM-SHA-512 over TLS): a real
secured broker (blueprint.sandbox.kafka_broker, security "sasl-ssl"), a real kube-apiserver, the
operator as a subprocess (support.kube_operator.Operator).

spec.kafka.security names the CA and the password as keys of Secrets. Before the Secrets exist the
application waits (TopicsReady False, naming the Secret); once they do, the operator's own admin
client authenticates with them and creates the topics, and each SparkApplication mounts the two
keys as files that the run config names. The password appears nowhere: not in the resource, the
run config Secrets, the SparkApplications, the Events or the operator's log.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from blueprint.sandbox.kafka_broker import KafkaBroker
from streamlets.runtime.runconfig import StreamletRunConfig
from support.kube_operator import Operator, apply, get_app, resource, secrets, spark_apps
from support.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(300)]

STREAMLETS = {"flights", "weather", "enrich", "stats", "files"}


def topics_ready(custom, ns: str) -> dict:
    conditions = {c["type"]: c for c in (get_app(custom, ns).get("status") or {}).get("conditions") or []}
    return conditions.get("TopicsReady") or {}


def test_the_operator_and_the_pods_reach_a_sasl_ssl_kafka_with_the_secrets_of_the_spec(api, cluster, kube_namespace,
                                                                                        built, tmp_path):
    custom, core = api
    ns = kube_namespace
    with KafkaBroker(tmp_path / "kafka", security="sasl-ssl") as broker:
        client = broker.client_security()
        password = Path(client.password_file).read_text().strip()
        body = resource(built, ns)
        body["spec"]["kafka"] = {"bootstrapServers": broker.bootstrap_servers, "security": {
            "protocol": "SASL_SSL", "ca": {"name": "kafka-ca", "key": "ca.crt"}, "saslMechanism": "SCRAM-SHA-512",
            "username": client.username, "password": {"name": "kafka-user", "key": "password"}}}
        op = Operator(cluster, ns, tmp_path / "operator.log").start()
        try:
            apply(custom, body)
            waiting = wait_until(lambda: (c := topics_ready(custom, ns)).get("status") == "False" and c,
                                 timeout=60, what="TopicsReady False while the Secrets are missing", on_timeout=op.tail)
            assert f"Secret {ns}/kafka-" in waiting["message"], waiting
            assert not spark_apps(custom, ns)

            for name, key, value in (("kafka-ca", "ca.crt", Path(client.ca_file).read_text()),
                                     ("kafka-user", "password", password)):
                core.create_namespaced_secret(ns, {"metadata": {"name": name},
                                                   "data": {key: base64.b64encode(value.encode()).decode()}})
            # kopf writes the status after the handler returns, so the SparkApplications (created within
            # it) can exist a moment before TopicsReady turns True: wait for both
            wait_until(lambda: set(spark_apps(custom, ns)) == STREAMLETS and topics_ready(custom, ns).get("status") == "True",
                       timeout=90, what="the SparkApplications and TopicsReady True once the Secrets exist",
                       on_timeout=op.tail)

            # the operator's admin client authenticated: the topics are on the secured broker
            from confluent_kafka.admin import AdminClient

            from streamlets.kafka_logging import client_config
            on_broker = set(AdminClient(client_config({"bootstrap.servers": broker.connection()})).list_topics(timeout=10).topics)
            assert f"{ns}.enriched-flights" in on_broker and "flight-delays.control" in on_broker, on_broker

            # the pods: each key a file, mounted in the driver and the executors, named by the run config
            sa = spark_apps(custom, ns)["enrich"]["spec"]
            volumes = {v["name"]: v for v in sa["volumes"]}
            for pod in ("driver", "executor"):
                mounts = {m["mountPath"]: m for m in sa[pod]["volumeMounts"]}
                for secret, key in (("kafka-ca", "ca.crt"), ("kafka-user", "password")):
                    mount = mounts[f"/etc/streamlets/secrets/{secret}"]
                    assert mount["readOnly"] is True
                    assert volumes[mount["name"]]["secret"] == {"secretName": secret, "items": [{"key": key, "path": key}]}
            run = StreamletRunConfig.model_validate_json(base64.b64decode(secrets(core, ns)["enrich"].data["run.json"]))
            assert run.kafka_security.protocol == "SASL_SSL" and run.kafka_security.username == client.username
            assert (run.kafka_security.ca_file, run.kafka_security.password_file) == (
                "/etc/streamlets/secrets/kafka-ca/ca.crt", "/etc/streamlets/secrets/kafka-user/password")
        finally:
            op.stop()

        # the password nowhere the operator writes or says anything
        events = core.list_namespaced_event(ns).items
        searched = {
            "the resource": json.dumps(get_app(custom, ns)),
            "the SparkApplications": json.dumps(spark_apps(custom, ns)),
            "the run config Secrets": "".join(base64.b64decode(v).decode() for s in secrets(core, ns).values()
                                              for v in s.data.values()),
            "the Events": " ".join(f"{e.reason} {e.message}" for e in events),
            "the operator's log": (tmp_path / "operator.log").read_text(),
        }
        assert any(e.reason == "TopicsCreated" for e in events)
        for where, text in searched.items():
            assert password not in text, where
