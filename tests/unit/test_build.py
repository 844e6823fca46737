"""`blueprint build`: the StreamletApplication of the flight-delays example, checked against the
CRD's schema; config layering; refusal of unsound blueprints and configs; and that the CRD
really rejects bad resources."""

import copy
import json
import os
import sys
import textwrap
from pathlib import Path

import jsonschema
import pyspark
import pytest
import yaml
from typer.testing import CliRunner

from blueprint.deploy import crd
from blueprint.deploy.build import BuildError, build_resource
from blueprint.cli import app
from blueprint.configcheck import parse_overrides
from blueprint.loader import load_blueprint
from blueprint.verify import resolve
from support.crd_schema import to_json_schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flight-delays"
BLUEPRINT = EXAMPLE / "blueprint.yaml"
FIXTURES = Path(__file__).parent / "fixtures" / "verify_app"
IMAGE = "registry.example/flight-delays:1.0"
STREAMLETS = ["flights", "weather", "enrich", "stats", "files"]
runner = CliRunner()


# --- the CRD's schema as JSON Schema -------------------------------------------------------

SCHEMA = to_json_schema(crd.openapi_schema())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def schema_errors(resource) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(resource)]


# --- helpers -------------------------------------------------------------------------------

def build(*args, conf=(), kafka="kafka.example:9092"):
    """Run `blueprint build` on the example; (exit code, stdout, stderr)."""
    argv = ["build", str(BLUEPRINT), "--image", IMAGE]
    for c in conf:
        argv += ["--conf", str(c)]
    if kafka:
        argv += ["--kafka", kafka]
    result = runner.invoke(app, argv + list(args))
    return result.exit_code, result.stdout, result.stderr


def built(*args, conf=(), kafka="kafka.example:9092") -> dict:
    code, out, err = build(*args, conf=conf, kafka=kafka)
    assert code == 0, err
    return yaml.safe_load(out)


def streamlet(resource: dict, name: str) -> dict:
    (entry,) = [s for s in resource["spec"]["streamlets"] if s["name"] == name]
    return entry


def topic(resource: dict, topic_id: str) -> dict:
    (entry,) = [t for t in resource["spec"]["topics"] if t["id"] == topic_id]
    return entry


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture(scope="module")
def example() -> dict:
    return built()


# --- the CRD file --------------------------------------------------------------------------

def test_crd_names_scope_and_version():
    doc = crd.load_crd()
    spec = doc["spec"]
    assert doc["kind"] == "CustomResourceDefinition"
    assert doc["metadata"]["name"] == "streamletapplications.streamlets.io"
    assert (spec["group"], spec["scope"]) == ("streamlets.io", "Namespaced")
    assert spec["names"]["kind"] == "StreamletApplication"
    assert spec["names"]["plural"] == "streamletapplications"
    assert spec["names"]["shortNames"] == ["sapp"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {"Streamlets": ".status.streamletCount", "Phase": ".status.phase",
                       "Ready": ".status.ready", "Age": ".metadata.creationTimestamp"}


def test_crd_schema_is_structural():
    """Every node has a type, except free-form ones (preserve-unknown); free-form only where meant."""
    free_form = []

    def walk(node, path):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            free_form.append(path)
        else:
            assert "type" in node, f"{path} has no type"
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(crd.openapi_schema(), "")
    assert free_form == [".spec.streamlets[].descriptor.config_parameters[].default"]


def test_package_copy_of_the_crd_is_the_chart_file():
    packaged = ROOT / "blueprint" / "crds" / crd.CRD_PATH.name
    chart = ROOT / "charts" / "streamlets-operator" / "crds" / "streamlets.io_streamletapplications.yaml"
    assert crd.CRD_PATH == chart
    assert packaged.read_bytes() == chart.read_bytes()


def test_status_phase_enum():
    status = crd.openapi_schema()["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == ["Pending", "Deploying", "Running", "Degraded", "Failed", "Deleting"]
    condition = status["conditions"]["items"]
    assert set(condition["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}


# --- the example ---------------------------------------------------------------------------

def test_example_builds_and_matches_the_crd(example):
    assert example["apiVersion"] == "streamlets.io/v1alpha1"
    assert example["kind"] == "StreamletApplication"
    assert example["metadata"]["name"] == "flight-delays"
    spec = example["spec"]
    assert (spec["appId"], spec["image"]) == ("flight-delays", IMAGE)
    assert spec["kafka"] == {"bootstrapServers": "kafka.example:9092"}
    assert [s["name"] for s in spec["streamlets"]] == STREAMLETS
    assert schema_errors(example) == []


def test_descriptors_and_class_names(example):
    r = resolve(load_blueprint(BLUEPRINT))
    for name in STREAMLETS:
        entry = streamlet(example, name)
        assert entry["className"] == r.descriptors[name].class_name
        ports = entry["descriptor"]["inlets"] + entry["descriptor"]["outlets"]
        expected = r.descriptors[name].inlets + r.descriptors[name].outlets
        assert [p["name"] for p in ports] == [p.name for p in expected]
        for port, declared in zip(ports, expected):
            assert isinstance(port["schema"], str)  # JSON text: see test_avro_null_defaults_survive
            assert json.loads(port["schema"]) == declared.schema_
            assert port["fingerprint"] == declared.fingerprint


def test_avro_null_defaults_survive(example):
    """The API server drops nulls from objects; as JSON text the schema keeps `"default": null`
    (an optional field) and its field order."""
    outlet = streamlet(example, "flights")["descriptor"]["outlets"][0]
    fields = json.loads(outlet["schema"])["fields"]
    assert {"default": None, "name": "tailnum", "type": ["null", "string"]} in fields
    assert '"default":null' in outlet["schema"]


def test_defaults_fill_config_parameters_as_text(example):
    assert streamlet(example, "enrich")["configParameters"] == {"watermark-delay": "21600000ms"}
    assert streamlet(example, "stats")["configParameters"] == {"watermark-delay": "21600000ms"}
    assert "configParameters" not in streamlet(example, "flights")  # declares none


def test_topics_have_kafka_names_partitions_and_config(example):
    topics = example["spec"]["topics"]
    assert [t["name"] for t in topics] == ["flight-delays.flight-events", "flight-delays.weather-observations",
                                           "flight-delays.enriched-flights", "flight-delays.delay-stats"]
    assert all(t["partitions"] == 3 and t["managed"] is True for t in topics)
    assert topic(example, "delay-stats")["config"] == {"cleanup.policy": "compact"}
    assert topic(example, "flight-events")["producers"] == ["flights.out"]
    assert topic(example, "flight-events")["consumers"] == ["enrich.flights"]
    assert example["spec"]["deadLetterTopic"] == "flight-delays.dead-letters"


def test_port_topics(example):
    assert streamlet(example, "enrich")["portTopics"] == {
        "flights": "flight-delays.flight-events", "weather": "flight-delays.weather-observations",
        "out": "flight-delays.enriched-flights"}
    assert streamlet(example, "flights")["portTopics"] == {"out": "flight-delays.flight-events"}
    assert streamlet(example, "files")["portTopics"] == {"in": "flight-delays.delay-stats"}


def test_default_scale_is_one_executor(example):
    assert [streamlet(example, n)["scale"] for n in STREAMLETS] == [{"executors": 1}] * 5


# --- layering ------------------------------------------------------------------------------

def test_override_beats_later_file_beats_earlier_file_beats_default(tmp_path):
    first = write(tmp_path, "first.conf", """
        streamlets.stats.config-parameters.watermark-delay = "1h"
        streamlets.enrich.config-parameters.watermark-delay = "1h"
        kafka.bootstrap-servers = "first:9092"
        """)
    second = write(tmp_path, "second.yaml", """
        streamlets:
          stats:
            config-parameters:
              watermark-delay: 2h
        """)
    resource = built("streamlets.stats.config-parameters.watermark-delay=3h", conf=[first, second], kafka=None)
    assert streamlet(resource, "stats")["configParameters"] == {"watermark-delay": "3h"}   # command line
    assert streamlet(resource, "enrich")["configParameters"] == {"watermark-delay": "1h"}  # file over default
    assert resource["spec"]["kafka"]["bootstrapServers"] == "first:9092"
    resource = built(conf=[first, second], kafka=None)
    assert streamlet(resource, "stats")["configParameters"] == {"watermark-delay": "2h"}   # later file
    assert schema_errors(resource) == []


def test_kafka_option_wins_over_the_config(tmp_path):
    conf = write(tmp_path, "deploy.conf", 'kafka.bootstrap-servers = ["a:9092", "b:9092"]\n')
    assert built(conf=[conf], kafka=None)["spec"]["kafka"]["bootstrapServers"] == "a:9092,b:9092"
    assert built(conf=[conf], kafka="c:9093")["spec"]["kafka"]["bootstrapServers"] == "c:9093"
    code, out, err = build(conf=[conf], kafka="no port")
    assert code == 1 and out == ""
    assert "--kafka" in err and "is not a list of host:port" in err


def test_scale_and_pod_resources_from_kubernetes_settings(tmp_path):
    conf = write(tmp_path, "deploy.yaml", """
        runtimes:
          spark:
            kubernetes:
              executor: {instances: 2}
              driver: {memory: 1g}
        streamlets:
          stats:
            kubernetes:
              executor: {instances: 4, cores: 2, memory: 4g, memory-overhead: 512m}
              driver: {core-limit: 1200m}
              labels: {team: delays}
          files:
            kubernetes: {executor: {instances: 0}}
        """)
    resource = built(conf=[conf])
    stats = streamlet(resource, "stats")
    assert stats["scale"] == {"executors": 4}
    assert stats["executor"] == {"cores": "2", "memory": "4g", "memoryOverhead": "512m"}
    assert stats["driver"] == {"coreLimit": "1200m", "memory": "1g"}
    assert stats["labels"] == {"team": "delays"}
    assert streamlet(resource, "enrich")["scale"] == {"executors": 2}  # the runtime's setting
    assert streamlet(resource, "files")["scale"] == {"executors": 0}
    assert "labels" not in streamlet(resource, "enrich")
    assert schema_errors(resource) == []


def test_spark_conf_runtime_then_streamlet(tmp_path):
    conf = write(tmp_path, "deploy.conf", """
        runtimes.spark.config { spark.sql.shuffle.partitions = 8, spark.ui.enabled = false }
        streamlets.stats.spark { spark.sql.shuffle.partitions = 4 }
        """)
    resource = built(conf=[conf])
    assert streamlet(resource, "stats")["sparkConf"] == {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
    assert streamlet(resource, "enrich")["sparkConf"] == {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}


def test_topic_settings_from_config(tmp_path):
    conf = write(tmp_path, "deploy.yaml", """
        topics:
          flight-events:
            partitions: 6
            replication-factor: 3
            config:
              retention.ms: 86400000
        """)
    resource = built("topics.delay-stats.config.min.insync.replicas=2", conf=[conf])
    events = topic(resource, "flight-events")
    assert (events["partitions"], events["replicationFactor"]) == (6, 3)
    assert events["config"] == {"retention.ms": "86400000"}
    assert topic(resource, "delay-stats")["config"] == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    assert "replicationFactor" not in topic(resource, "weather-observations")
    assert schema_errors(resource) == []


def test_volume_mounts_name_claims(tmp_path):
    resource = built("streamlets.flights.volume-mounts.source=flights-data",
                     "streamlets.files.volume-mounts.output=delay-stats.out")
    assert streamlet(resource, "flights")["volumeMounts"] == {"source": "flights-data"}
    assert streamlet(resource, "files")["volumeMounts"] == {"output": "delay-stats.out"}
    assert "volumeMounts" not in streamlet(resource, "weather")
    assert schema_errors(resource) == []


def test_kafka_security_names_secret_keys_that_the_operator_mounts(tmp_path):
    """A deploy config's kafka.security (Strimzi-shaped: SCRAM over TLS, the cluster CA's Secret,
    the KafkaUser's Secret) becomes spec.kafka.security with SecretKeyRefs, no secret value; the
    operator reads it as files where it mounts those keys."""
    from streamlets_operator import render

    from blueprint.deploy.spec import ApplicationSpec

    conf = write(tmp_path, "deploy.conf", """
        kafka.security {
          protocol = SASL_SSL
          sasl-mechanism = SCRAM-SHA-512
          username = flight-delays
          password-secret = flight-delays-user/password
          ca-secret = "my-cluster-cluster-ca-cert/ca.crt"
          verify-hostname = false
        }
    """)
    resource = built(conf=[conf])
    assert resource["spec"]["kafka"]["security"] == {
        "protocol": "SASL_SSL", "saslMechanism": "SCRAM-SHA-512", "username": "flight-delays",
        "password": {"name": "flight-delays-user", "key": "password"},
        "ca": {"name": "my-cluster-cluster-ca-cert", "key": "ca.crt"}, "verifyHostname": False}
    assert schema_errors(resource) == []
    security = render.kafka_security(ApplicationSpec.model_validate(resource["spec"]), env={})
    assert security.password_file == f"{render.SECRETS_DIR}/flight-delays-user/password"
    assert security.ca_file == f"{render.SECRETS_DIR}/my-cluster-cluster-ca-cert/ca.crt"
    assert (security.sasl_mechanism, security.username, security.verify_hostname) == \
        ("SCRAM-SHA-512", "flight-delays", False)
    # mutual TLS, and no kafka.security at all: the operator's default then
    mtls = built("kafka.security.protocol=SSL", "kafka.security.cert-secret=app-user/user.crt",
                 "kafka.security.key-secret=app-user/user.key")
    assert mtls["spec"]["kafka"]["security"] == {"protocol": "SSL", "certificate": {"name": "app-user", "key": "user.crt"},
                                                 "key": {"name": "app-user", "key": "user.key"}}
    assert "security" not in built()["spec"]["kafka"]


@pytest.mark.parametrize("overrides, message", [
    (["kafka.security.protocol=SASL_SSL", "kafka.security.sasl-mechanism=PLAIN", "kafka.security.username=u",
      "kafka.security.password-file=/run/secrets/pw"],
     "kafka.security.password-file is a file of this machine, which the pods do not have: in a deploy config name "
     "a key of a Secret, password-secret = SECRET/KEY"),
    (["kafka.security.protocol=SSL", "kafka.security.ca-secret=Not_A_Secret/ca.crt"],
     "kafka.security.ca-secret: 'Not_A_Secret/ca.crt' is not SECRET/KEY"),
    (["kafka.security.protocol=SASL_SSL", "kafka.security.sasl-mechanism=PLAIN", "kafka.security.username=u"],
     "needs sasl-mechanism, username and password"),
    (["kafka.security.protocol=PLAINTEXT", "kafka.security.cert-secret=u/user.crt"],
     "cert-file and key-file go together"),
])
def test_kafka_security_of_this_machine_or_inconsistent_is_refused(overrides, message):
    code, out, err = build(*overrides)
    assert code == 1 and out == "", err
    assert " ".join(err.split()).count(message) == 1, err  # once, at its key
    assert "nothing was built" in err


def test_the_sandbox_refuses_a_secret_key_naming_the_file_to_give():
    from blueprint.configcheck import kafka_security

    entries, problems = parse_overrides(["kafka.security.protocol=SASL_SSL", "kafka.security.sasl-mechanism=PLAIN",
                                         "kafka.security.username=u", "kafka.security.password-secret=user/password"])
    assert problems == []
    with pytest.raises(ValueError, match=r"kafka.security.password-secret names a key of a Kubernetes Secret.*"
                                         r"password-file, or an environment variable, password-env"):
        kafka_security(entries)


# --- refusals ------------------------------------------------------------------------------

def test_unknown_config_key_is_refused():
    code, out, err = build("streamlets.stats.config-parameters.window-size=1h")
    assert code == 1
    assert out == ""  # nothing rendered
    assert "streamlets.stats.config-parameters.window-size" in err
    assert "declares no config parameter 'window-size'" in err
    assert "nothing was built" in err


def test_invalid_config_value_is_refused():
    code, out, err = build("streamlets.stats.kubernetes.executor.instances=-1")
    assert code == 1 and out == ""
    assert "streamlets.stats.kubernetes.executor.instances" in err


def test_missing_kafka_is_refused():
    code, out, err = build(kafka=None)
    assert code == 1 and out == ""
    assert "kafka.bootstrap-servers is not set" in err


def test_local_folders_as_volume_mounts_are_refused():
    """The sandbox config names folders; a deploy needs claim names."""
    code, out, err = build(conf=[EXAMPLE / "local.conf"])
    assert code == 1 and out == ""
    assert "'data/flights' is not a PersistentVolumeClaim name" in err
    assert "local.conf:5:" in err


def test_unsound_blueprint_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(FIXTURES), *sys.path])
    path = write(tmp_path, "blueprint.yaml", """
        app-id: broken
        streamlets:
          ingress: verify_fixture_streamlets.Ingress
          stats: verify_fixture_streamlets.Stats
        topics:
          t: {producers: [ingress.out], consumers: [stats.nope]}
        """)
    blueprint = load_blueprint(path)
    with pytest.raises(BuildError) as raised:
        build_resource(blueprint, resolve(blueprint), IMAGE, [], kafka="k:9092")
    codes = {p.code for p in raised.value.errors}
    assert "unknown-port" in codes
    assert "unknown-port" in str(raised.value)
    result = runner.invoke(app, ["build", str(path), "--image", IMAGE, "--kafka", "k:9092"])
    assert result.exit_code == 1 and result.stdout == ""
    assert "has no inlet 'nope'" in result.stderr


def test_writer_schemas_where_the_producer_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(FIXTURES), *sys.path])
    from verify_fixture_streamlets import FLIGHT

    path = write(tmp_path, "blueprint.yaml", """
        app-id: evolved
        streamlets:
          ingress: verify_fixture_streamlets.Ingress
          reader: verify_fixture_streamlets.EvolvedReader
        topics:
          flights: {producers: [ingress.out], consumers: [reader.in], name: shared.flights}
        """)
    blueprint = load_blueprint(path)
    entries, problems = parse_overrides(["kafka.bootstrap-servers=k:9092"])
    assert problems == []
    resource = build_resource(blueprint, resolve(blueprint), IMAGE, entries, namespace="streams")
    assert resource["metadata"]["namespace"] == "streams"
    reader = streamlet(resource, "reader")
    assert reader["portTopics"] == {"in": "shared.flights"}
    assert json.loads(reader["writerSchemas"]["in"])["fields"] == FLIGHT["fields"]
    assert "writerSchemas" not in streamlet(resource, "ingress")
    assert schema_errors(resource) == []


def test_empty_image_is_an_error():
    blueprint = load_blueprint(BLUEPRINT)
    with pytest.raises(ValueError, match="image"):
        build_resource(blueprint, resolve(blueprint), " ", [])


# --- usage and I/O -------------------------------------------------------------------------

def test_output_file(tmp_path):
    target = tmp_path / "app.yaml"
    code, out, err = build("--output", str(target), "--namespace", "flights")
    assert code == 0, err
    assert out == ""
    resource = yaml.safe_load(target.read_text())
    assert resource["metadata"]["namespace"] == "flights"
    assert schema_errors(resource) == []


@pytest.mark.parametrize("args, message", [
    (["--conf", "no-such.conf"], "cannot read config"),
    (["--namespace", "Not_A_Namespace"], "is not a namespace name"),
    (["--output", "/no/such/folder/app.yaml"], "cannot write"),
])
def test_usage_and_io_errors_exit_2(args, message):
    code, out, err = build(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err + out


def test_missing_image_is_a_usage_error():
    result = runner.invoke(app, ["build", str(BLUEPRINT), "--kafka", "k:9092"])
    assert result.exit_code == 2
    assert "--image" in result.stderr


def test_missing_blueprint_exits_2(tmp_path):
    result = runner.invoke(app, ["build", str(tmp_path / "nope.yaml"), "--image", IMAGE])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


# --- the CRD constrains --------------------------------------------------------------------

def _mutated(resource: dict, change) -> dict:
    copy_ = copy.deepcopy(resource)
    change(copy_)
    return copy_


def _drop_image(r):
    del r["spec"]["image"]


@pytest.mark.parametrize("change, where", [
    (lambda r: streamlet(r, "stats")["scale"].update(executors=-1), "executors"),
    (lambda r: streamlet(r, "stats").update(name="Stats"), "name"),
    (_drop_image, "image"),
    (lambda r: r["spec"].update(image=""), "image"),
    (lambda r: r["spec"].update(appId="Flight_Delays"), "appId"),
    (lambda r: r["spec"].update(streamlets=[]), "streamlets"),
    (lambda r: topic(r, "flight-events").update(name="flight events!"), "name"),
    (lambda r: topic(r, "flight-events").update(partitions=0), "partitions"),
    (lambda r: r["spec"]["kafka"].update(bootstrapServers="kafka"), "bootstrapServers"),
    (lambda r: r["spec"].update(upgradeMode="sometimes"), "upgradeMode"),
    (lambda r: r["spec"].update(storage={"accessMode": "ReadWriteSometimes"}), "accessMode"),
    (lambda r: r["spec"].update(storage={"size": "ten gigs"}), "size"),
    (lambda r: streamlet(r, "stats").update(configParameters={"watermark-delay": 3}), "watermark-delay"),
    (lambda r: streamlet(r, "stats").update(portTopics={"in": "a/b"}), "in"),
    (lambda r: streamlet(r, "stats").update(executor={"memory": "lots"}), "memory"),
    (lambda r: r.update(status={"phase": "Sleeping"}), "phase"),
])
def test_crd_rejects_invalid_variants(example, change, where):
    assert schema_errors(example) == []
    errors = schema_errors(_mutated(example, change))
    assert errors, f"the CRD accepts a resource with a bad {where}"
    assert any(where in e for e in errors), errors


def test_crd_accepts_a_full_status(example):
    status = {
        "phase": "Running", "observedGeneration": 2, "streamletCount": 5, "ready": "5/5", "message": "",
        "conditions": [{"type": "Ready", "status": "True", "reason": "AllRunning", "message": "5/5 running",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}],
        "streamlets": {"stats": {"sparkApplication": "flight-delays-stats", "specHash": "abc", "state": "RUNNING",
                                 "executors": 1, "restarts": 0, "lastDeployed": "2026-01-01T00:00:00Z"}},
        "topics": [{"id": "delay-stats", "name": "flight-delays.delay-stats", "partitions": 3, "state": "Created"}],
    }
    assert schema_errors(_mutated(example, lambda r: r.update(status=status))) == []
    bad = copy.deepcopy(status)
    bad["conditions"][0]["status"] = "Maybe"
    assert schema_errors(_mutated(example, lambda r: r.update(status=bad)))


def test_renderer_fields_are_all_declared(example):
    """The closed-object conversion catches a field the CRD does not declare (it would be pruned)."""
    errors = schema_errors(_mutated(example, lambda r: streamlet(r, "stats").update(replicas=2)))
    assert any("replicas" in e for e in errors)


def test_cli_is_in_the_help():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "build" in result.stdout
    assert os.path.exists(crd.CRD_PATH)


def test_delivery_reaches_the_run_config(tmp_path):
    """streamlets.<name>.delivery goes into the resource (checked by the CRD) and the run config
    the operator renders; absent, the streamlet is exactly-once; a bad value is one problem."""
    from streamlets_operator.render import run_config

    conf = write(tmp_path, "deploy.conf", "streamlets.stats.delivery = at-least-once\n")
    resource = built(conf=[conf])
    assert schema_errors(resource) == []
    assert streamlet(resource, "stats")["delivery"] == "at-least-once"
    assert run_config(resource["spec"], streamlet(resource, "stats"))["delivery"] == "at-least-once"
    assert run_config(resource["spec"], streamlet(resource, "enrich"))["delivery"] == "exactly-once"
    from streamlets_operator.topics import desired_topics

    ledger = [t for t in desired_topics(resource["spec"]) if t.id == "outlet-batches"]
    assert [(t.name, t.partitions) for t in ledger] == [("flight-delays.outlet-batches", 1)]
    code, _, err = build(conf=[write(tmp_path, "bad.conf", "streamlets.stats.delivery = sometimes\n")])
    assert code != 0 and "'sometimes' is not a delivery mode" in err, err
def test_progress_tracking_reaches_the_run_config(tmp_path):
    """streamlets.<name>.progress-tracking goes into the resource (checked by the CRD) and the run
    config; absent, sync; async on an exactly-once streamlet is refused, one line naming it."""
    from streamlets_operator.render import run_config

    conf = write(tmp_path, "deploy.conf", "streamlets.enrich.delivery = at-least-once\n"
                                          "streamlets.enrich.progress-tracking = async\n")
    resource = built(conf=[conf])
    assert schema_errors(resource) == []
    assert streamlet(resource, "enrich")["progressTracking"] == "async"
    assert "progressTracking" not in streamlet(resource, "stats")
    assert run_config(resource["spec"], streamlet(resource, "enrich"))["progress_tracking"] == "async"
    assert run_config(resource["spec"], streamlet(resource, "stats"))["progress_tracking"] == "sync"
    bad = copy.deepcopy(resource)
    for wrong in ("eventually", "async 5 seconds", "async 0 milliseconds"):  # the resource carries milliseconds
        streamlet(bad, "enrich")["progressTracking"] = wrong
        assert any("progressTracking" in e for e in schema_errors(bad)), wrong
    conf = write(tmp_path, "interval.conf", "streamlets.enrich.delivery = at-least-once\n"
                                            "streamlets.enrich.progress-tracking = async 5 seconds\n")
    resource = built(conf=[conf])
    assert schema_errors(resource) == []
    assert streamlet(resource, "enrich")["progressTracking"] == "async 5000 milliseconds"
    assert run_config(resource["spec"], streamlet(resource, "enrich"))["progress_tracking"] == "async 5000 milliseconds"
    code, out, err = build(conf=[write(tmp_path, "eo.conf", "streamlets.enrich.progress-tracking = async\n")])
    assert code == 1 and out == ""
    assert "error: streamlet 'enrich' cannot use asynchronous progress tracking: its Kafka outlets are " \
        "exactly-once" in err, err



def test_max_offsets_per_trigger_reaches_the_run_config(tmp_path):
    """streamlets.<name>.max-offsets-per-trigger: a whole number of records in the resource (checked
    by the CRD's pattern) and the run config; a bad value is one line naming it."""
    from streamlets_operator.render import run_config

    resource = built(conf=[write(tmp_path, "deploy.conf", "streamlets.enrich.max-offsets-per-trigger = 20000\n")])
    assert schema_errors(resource) == []
    assert streamlet(resource, "enrich")["maxOffsetsPerTrigger"] == "20000"
    assert run_config(resource["spec"], streamlet(resource, "enrich"))["max_offsets_per_trigger"] == "20000"
    assert run_config(resource["spec"], streamlet(resource, "stats"))["max_offsets_per_trigger"] is None
    bad = copy.deepcopy(resource)
    streamlet(bad, "enrich")["maxOffsetsPerTrigger"] = "0"
    assert any("maxOffsetsPerTrigger" in e for e in schema_errors(bad))
    code, _, err = build(conf=[write(tmp_path, "bad.conf", "streamlets.enrich.max-offsets-per-trigger = many\n")])
    assert code != 0 and "'many' is not a number of records" in err, err

# --- Real-Time Mode: the flight-alerts example (examples/flight-delays/realtime.yaml) ----------

REALTIME = BLUEPRINT.parent / "realtime.yaml"


def build_realtime(*overrides):
    result = runner.invoke(app, ["build", str(REALTIME), "--image", IMAGE, "--kafka", "kafka.example:9092",
                                 *overrides])
    return result.exit_code, result.stdout, result.stderr


def test_real_time_streamlet_renders_with_its_trigger_and_enough_cores():
    code, out, err = build_realtime("streamlets.alerts.kubernetes.executor.cores=2")
    assert code == 0, err
    resource = yaml.safe_load(out)
    assert schema_errors(resource) == []
    alerts = next(s for s in resource["spec"]["streamlets"] if s["name"] == "alerts")
    assert alerts["descriptor"]["trigger"] == "real-time 5 seconds"  # declared by the class
    assert "trigger" not in alerts  # no override
    from streamlets_operator import render

    body = {**resource, "metadata": {**resource["metadata"], "namespace": "apps", "uid": "u", "generation": 1}}
    secret, app_ = render.render_all(body, env={})["streamlets"]["alerts"]
    assert app_["spec"]["sparkVersion"] == pyspark.__version__  # the image's Spark is the project's PySpark
    code, out, err = build_realtime("streamlets.alerts.kubernetes.executor.cores=2", "streamlets.alerts.trigger=real-time 2s")
    alerts = next(s for s in yaml.safe_load(out)["spec"]["streamlets"] if s["name"] == "alerts")
    assert alerts["trigger"] == "real-time 2s"
    assert render.run_config(yaml.safe_load(out)["spec"], alerts)["trigger"] == "real-time 2s"


def test_real_time_with_fewer_cores_than_partitions_is_refused():
    code, out, err = build_realtime()
    assert code == 1 and out == ""
    assert "streamlet 'alerts' cannot run in real-time mode: its inlets' topics have 2 partitions but its executors " \
           "1 core(s)" in err
    assert build_realtime("streamlets.alerts.trigger=micro-batch")[0] == 0  # the config overrides the class
    code, out, err = build_realtime("streamlets.alerts.trigger=sometimes")
    assert code == 1 and "is not a trigger" in err


def test_real_time_streamlet_with_consumers_gets_an_at_least_once_edge_warning(tmp_path):
    """Real-Time Mode's outlets use Spark's Kafka sink (no foreachBatch, no transaction): verify
    names each edge from a real-time streamlet as at-least-once; micro-batch streamlets get none."""
    conf = write(tmp_path, "rt.conf", "streamlets.enrich.trigger = real-time\n"
                                      "streamlets.enrich.kubernetes.executor.cores = 8\n")
    result = runner.invoke(app, ["verify", str(BLUEPRINT), "--config", str(conf), "--format", "json"])
    problems = [(p["code"], p["severity"], p["message"]) for p in json.loads(result.stdout)["problems"]]
    assert [code for code, _, _ in problems] == ["at-least-once-edge"], problems
    [(_, severity, message)] = problems
    assert severity == "warning" and "enrich.out -> enriched-flights -> stats.in" in message
    assert "Real-Time Mode's Kafka sink" in message
    plain = runner.invoke(app, ["verify", str(BLUEPRINT), "--format", "json"])
    assert json.loads(plain.stdout)["problems"] == []
