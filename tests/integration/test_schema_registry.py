"""Schema registry topics (issue 29) against a real registry (Apicurio Registry over HTTPS with
basic auth, Confluent's REST API: tests/support/registry.py) and the session's Kafka broker.

Another team's producer (confluent-kafka's AvroSerializer) writes readings with two schema
versions; the registry application (tests/integration/apps/registry) reads both, resolved to its
inlet's schema, through `blueprint run`; another team's consumer (confluent-kafka's
AvroDeserializer) reads what its outlet wrote. Then `blueprint verify --schema-registry` judges
schema changes against the subjects as the registry would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support.kafka import produce, read_topic
from support.sandbox import run_blueprint

from blueprint.sandbox.kafka_broker import create_topics
from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.schema import decode

APP = Path(__file__).resolve().parent / "apps" / "registry"
sys.path.insert(0, str(APP))
from registry_app import READING  # noqa: E402  (the inlet's schema)
READINGS, SCALED, DEAD = "registry.readings", "registry.scaled", "registry.dead-letters"
# The producing team's versions: v2 adds `unit` (with a default: BACKWARD compatible) and `note`.
V1 = {"type": "record", "name": "Reading", "namespace": "test.registry", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "double"}]}
V2 = {"type": "record", "name": "Reading", "namespace": "test.registry", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "double"},
    {"name": "unit", "type": "string", "default": "m"}, {"name": "note", "type": "string", "default": ""}]}
N = 1_000  # records per version


@pytest.fixture(scope="module")
def registry_run(tmp_path_factory, kafka_broker, secured_schema_registry):
    """The readings written in two versions plus two malformed values, then one `blueprint run
    --exit-when-done` of the application with the registry's URL and CA from its config."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    tmp = tmp_path_factory.mktemp("registry-app")
    client = secured_schema_registry.client()
    client.set_compatibility(f"{READINGS}-value", "BACKWARD")
    bootstrap = kafka_broker.bootstrap_servers
    create_topics(bootstrap, [(READINGS, 2, {})])
    ctx = SerializationContext(READINGS, MessageField.VALUE)
    first, second = AvroSerializer(client, json.dumps(V1)), AvroSerializer(client, json.dumps(V2))
    sent = [{"id": i, "value": i / 4} for i in range(N)]
    sent2 = [{"id": N + i, "value": -i / 8, "unit": ("ft", "m")[i % 2], "note": f"n{i}"} for i in range(N)]
    values = [(i % 2, first(r, ctx)) for i, r in enumerate(sent)] + [(i % 2, second(r, ctx)) for i, r in enumerate(sent2)]
    values += [(0, b'{"id": 1, "value": 2.0}'), (1, b"\x00\x00\x0f\x42\x3f" + values[0][1][5:])]  # JSON; id 999999
    produce(bootstrap, READINGS, values)
    conf = tmp / "run.conf"
    registry = secured_schema_registry
    conf.write_text(f'schema-registry {{\n  url = "{registry.url}"\n  ca-file = "{registry.ca_file}"\n'
                    f'  username = {registry.username}\n  password-file = "{registry.password_file}"\n}}\n')
    run = run_blueprint("run", str(APP / "blueprint.yaml"), "--config", str(conf), "--state-dir", str(tmp / "state"),
                        "--kafka", bootstrap, "--exit-when-done", "--idle-seconds", "1", cwd=tmp, pythonpath=APP)
    expected = [{"id": r["id"], "value": r["value"] * 2, "unit": "m"} for r in sent] + \
        [{"id": r["id"], "value": r["value"] * 2, "unit": r["unit"]} for r in sent2]
    return run, conf, expected


def test_a_streamlet_reads_both_versions_and_another_team_reads_its_outlet(registry_run, kafka_broker, secured_schema_registry):
    """Both versions resolved to the inlet's schema (v1's missing unit from the inlet's default,
    v2's note dropped), exact; the outlet's schema registered under `registry.scaled-value` and its
    values read by confluent-kafka's AvroDeserializer; the JSON value and the unknown schema id
    are dead letters with their reasons, nothing else is."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    run, _, expected = registry_run
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "Traceback" not in out
    client = secured_schema_registry.client()
    deserialize = AvroDeserializer(client)
    ctx = SerializationContext(SCALED, MessageField.VALUE)
    got = [deserialize(m.value(), ctx) for m in read_topic(kafka_broker.bootstrap_servers, SCALED)]
    assert sorted(got, key=lambda r: r["id"]) == expected
    versions = client.get_versions(f"{SCALED}-value")
    assert len(versions) == 1
    registered = json.loads(client.get_version(f"{SCALED}-value", versions[0]).schema.schema_str)
    assert [f["name"] for f in registered["fields"]] == ["id", "value", "unit"]

    letters = [decode(DEAD_LETTER_SCHEMA, m.value()) for m in read_topic(kafka_broker.bootstrap_servers, DEAD)]
    reasons = sorted(letter["error"] for letter in letters)
    assert len(reasons) == 2, reasons
    assert "first byte is 0x7b, not the magic byte 0x00" in reasons[0], reasons
    assert reasons[1].startswith("schema id 999999 is unknown to the schema registry https://127.0.0.1:"), reasons
    assert {(letter["streamlet"], letter["inlet"], letter["topic"]) for letter in letters} == {("scale", "in", READINGS)}


def _verify(*args: str):
    return run_blueprint("verify", *args, "--format", "json", cwd=APP)


def test_verify_judges_schema_changes_against_the_registry(registry_run, kafka_broker, secured_schema_registry):
    """With the subjects' BACKWARD level: the application as it runs is sound; an outlet adding a
    field without a default is refused with the field named (registry-incompatible), an inlet that
    cannot read the producer's first version too (registry-unreadable-version); the registry's
    certificate untrusted is one registry-unavailable error naming the registry. `blueprint run` of
    the changed outlet stops before anything is written: one error line with the registry's words
    (the field), nothing registered; with a wrong password, one line naming the registry and its
    401 before anything starts, and no password in the output."""
    run, conf, _ = registry_run
    assert run.returncode == 0
    secured_schema_registry.client().set_compatibility(f"{SCALED}-value", "BACKWARD")
    url = secured_schema_registry.url

    sound = _verify(str(APP / "blueprint.yaml"), "--config", str(conf), "--schema-registry", url)
    assert sound.returncode == 0, sound.stdout + sound.stderr
    assert not [p for p in json.loads(sound.stdout)["problems"] if p["code"].startswith("registry-")]

    changed = _verify(str(APP / "blueprint-v2.yaml"), "--config", str(conf))  # the config's url
    assert changed.returncode == 1, changed.stdout + changed.stderr
    (problem,) = [p for p in json.loads(changed.stdout)["problems"] if p["code"].startswith("registry-")]
    assert problem["code"] == "registry-incompatible"
    assert "subject registry.scaled-value" in problem["message"] and "BACKWARD" in problem["message"]
    assert "quality" in problem["message"], problem["message"]

    strict = _verify(str(APP / "blueprint-strict.yaml"), "--config", str(conf))
    assert strict.returncode == 1, strict.stdout + strict.stderr
    (problem,) = [p for p in json.loads(strict.stdout)["problems"] if p["code"].startswith("registry-")]
    assert problem["code"] == "registry-unreadable-version"
    assert "version 1" in problem["message"] and "'unit'" in problem["message"], problem["message"]

    refused = run_blueprint("run", str(APP / "blueprint-v2.yaml"), "--config", str(conf), "--state-dir",
                            str(conf.parent / "state-v2"), "--kafka", kafka_broker.bootstrap_servers, "--exit-when-done",
                            "--idle-seconds", "1", cwd=conf.parent, pythonpath=APP)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Traceback" not in out, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and f"subject {SCALED}-value" in errors[0] and "quality" in errors[0], out[-4000:]
    assert len(secured_schema_registry.client().get_versions(f"{SCALED}-value")) == 1  # nothing registered

    wrong = conf.parent / "wrong-password"
    wrong.write_text("not-the-password\n")
    refused = run_blueprint("run", str(APP / "blueprint.yaml"), "--config", str(conf), f"schema-registry.password-file={wrong}",
                            "--state-dir", str(conf.parent / "state-wrong"), "--kafka", kafka_broker.bootstrap_servers,
                            cwd=conf.parent, pythonpath=APP)
    out = refused.stdout + refused.stderr
    errors = [line for line in out.splitlines() if line.startswith("error")]
    assert refused.returncode == 1 and len(errors) == 1, out[-4000:]
    assert url in errors[0] and "401" in errors[0] and "starting Spark" not in out, out[-4000:]
    assert "not-the-password" not in out and secured_schema_registry.password_file.read_text() not in out

    untrusted = _verify(str(APP / "blueprint.yaml"), "--schema-registry", url)  # no ca-file
    assert untrusted.returncode == 1
    (problem,) = [p for p in json.loads(untrusted.stdout)["problems"] if p["code"].startswith("registry-")]
    assert problem["code"] == "registry-unavailable" and url in problem["message"], problem
    assert "CERTIFICATE_VERIFY_FAILED" in problem["message"] or "certificate" in problem["message"], problem


def test_error_handling_fail_stops_on_a_value_without_a_reading(spark, secured_schema_registry):
    """An inlet with error handling "fail" decodes registry values like any (both versions,
    resolved) and stops on the first value with no reading, naming the inlet, as from_avro's
    FAILFAST does for plain topics."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamlets.runtime.codec import RECORD, decode_value
    from streamlets.schema import AvroSchema
    from streamlets.schema_registry import SchemaRegistry

    server = secured_schema_registry
    topic = "registry.fail-fast"
    ctx = SerializationContext(topic, MessageField.VALUE)
    client = server.client()
    good = [AvroSerializer(client, json.dumps(V1))({"id": 1, "value": 0.5}, ctx),
            AvroSerializer(client, json.dumps(V2))({"id": 2, "value": 1.5, "unit": "ft", "note": ""}, ctx)]
    registry = SchemaRegistry(url=server.url, ca_file=str(server.ca_file), username=server.username,
                              password_file=str(server.password_file))
    reader = AvroSchema.load(READING)
    rows = decode_value(spark.createDataFrame([(v,) for v in good], "value binary"), reader, permissive=False,
                        registry=registry, where="inlet in").select(RECORD).collect()
    assert [r[RECORD].asDict() for r in rows] == [{"id": 1, "value": 0.5, "unit": "m"},
                                                   {"id": 2, "value": 1.5, "unit": "ft"}]
    bad = spark.createDataFrame([(v,) for v in [*good, b'{"id": 3}']], "value binary")
    with pytest.raises(Exception, match="inlet in: a value is not in the schema registry's wire format"):
        decode_value(bad, reader, permissive=False, registry=registry, where="inlet in").collect()
