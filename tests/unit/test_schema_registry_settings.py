"""Schema registry topics' settings, without a registry: the blueprint's `schema-registry` topic
key, the config's `schema-registry.*` scope, the wire format's header, and `blueprint run` and
`verify` refusing what cannot work before anything starts. The registry itself:
tests/integration/test_schema_registry.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from blueprint.configcheck import Entry, schema_registry
from blueprint.loader import load_blueprint
from blueprint.topics import registry_ports, topic_bindings
from streamlets.schema_registry import SchemaRegistry, SchemaRegistryError, header, subject

APP = Path(__file__).resolve().parents[1] / "integration" / "apps" / "registry"


def test_the_topic_key_opts_in_per_topic():
    bp = load_blueprint(APP / "blueprint.yaml")
    assert bp.topics["readings"].schema_registry and bp.topics["scaled"].schema_registry
    assert registry_ports(bp, "scale") == ["in", "out"]
    assert registry_ports(bp, "nosuch") == []


def test_a_registry_topic_carries_no_writer_schema_from_the_blueprint(tmp_path):
    # On a plain topic the inlet gets its producer's schema from the blueprint; on a registry
    # topic each value names its own.
    text = ("app-id: a\nstreamlets:\n  p: m.P\n  c: m.C\ntopics:\n"
            "  t:\n    producers: [p.out]\n    consumers: [c.in]\n    schema-registry: {flag}\n")
    (tmp_path / "m.py").write_text(
        "from streamlets import *\n"
        "W = {'type': 'record', 'name': 'R', 'fields': [{'name': 'a', 'type': 'int'}, {'name': 'b', 'type': 'int'}]}\n"
        "R = {'type': 'record', 'name': 'R', 'fields': [{'name': 'a', 'type': 'int'}]}\n"
        "class P(Streamlet):\n    out = AvroOutlet('out', W)\n    def create_logic(self, ctx): pass\n"
        "class C(Streamlet):\n    inlet = AvroInlet('in', R)\n    def create_logic(self, ctx): pass\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import m  # noqa: F401
        for flag, writers in (("false", {"in"}), ("true", set())):
            (tmp_path / "bp.yaml").write_text(text.format(flag=flag))
            bp = load_blueprint(tmp_path / "bp.yaml")
            classes = {"p": sys.modules["m"].P, "c": sys.modules["m"].C}
            assert set(topic_bindings(bp, "c", classes)[1]) == writers
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("m", None)


def test_the_topic_key_is_a_boolean(tmp_path):
    bp = tmp_path / "bp.yaml"
    bp.write_text((APP / "blueprint.yaml").read_text().replace("schema-registry: true", "schema-registry: confluent", 1))
    assert [p.message for p in load_blueprint(bp).load_problems] == [
        "schema-registry of topic 'readings' must be true or false, not 'confluent'"]


def test_config_entries_make_the_registry_with_files_relative_to_the_config(tmp_path):
    source = str(tmp_path / "run.conf")
    entries = [Entry(("schema-registry", "url"), "https://registry:8081", source),
               Entry(("schema-registry", "ca-file"), "certs/ca.pem", source),
               Entry(("schema-registry", "username"), "key", source),
               Entry(("schema-registry", "password-env"), "REGISTRY_SECRET", source)]
    registry = schema_registry(entries)
    assert registry == SchemaRegistry(url="https://registry:8081", ca_file=str(tmp_path / "certs" / "ca.pem"),
                                      username="key", password_env="REGISTRY_SECRET")
    assert schema_registry([]) is None
    with pytest.raises(ValueError, match=r"schema-registry: the settings name no url"):
        schema_registry(entries[1:])
    with pytest.raises(ValueError, match=r"schema-registry.url: .*not an http:// or https:// URL"):
        schema_registry([Entry(("schema-registry", "url"), "registry:8081", source)])


def test_the_password_is_read_when_a_client_is_made_and_named_when_missing(tmp_path, monkeypatch):
    registry = SchemaRegistry(url="http://r", username="key", password_env="REGISTRY_SECRET")
    monkeypatch.delenv("REGISTRY_SECRET", raising=False)
    with pytest.raises(SchemaRegistryError, match="environment variable REGISTRY_SECRET is not set"):
        registry.client_config()
    monkeypatch.setenv("REGISTRY_SECRET", "s3cret")
    assert registry.client_config()["basic.auth.user.info"] == "key:s3cret"
    assert "s3cret" not in registry.model_dump_json()  # the model names where the secret is, never its value
    (tmp_path / "pw").write_text("from-file\n")
    assert SchemaRegistry(url="http://r", username="k", password_file=str(tmp_path / "pw")).password() == "from-file"
    with pytest.raises(SchemaRegistryError, match=r"schema-registry.ca-file: cannot read /nope/ca.pem: No such file"):
        SchemaRegistry(url="https://r", ca_file="/nope/ca.pem").client_config()
    with pytest.raises(ValueError, match="a password without a username"):
        SchemaRegistry(url="http://r", password_env="X")


def test_the_wire_format_header_and_the_subject():
    assert header(1) == b"\x00\x00\x00\x00\x01"
    assert header(999_999) == b"\x00\x00\x0f\x42\x3f"
    assert subject("registry.scaled") == "registry.scaled-value"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blueprint.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_run_refuses_a_registry_topic_without_a_registry_before_anything_starts(tmp_path):
    result = _cli("run", str(APP / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"), cwd=APP)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "readings, scaled" in errors[0] and "schema-registry.url" in errors[0], result.stderr
    assert "Traceback" not in result.stderr and "starting Spark" not in result.stdout + result.stderr


def test_run_names_an_unreachable_registry_before_anything_starts(tmp_path):
    from support.ports import free_port

    url = f"http://127.0.0.1:{free_port()}"
    result = _cli("run", str(APP / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"),
                  f"schema-registry.url={url}", cwd=APP)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and url in errors[0], result.stderr
    assert "starting Spark" not in result.stdout + result.stderr


def test_verify_reports_an_unknown_registry_setting_at_its_key(tmp_path):
    result = _cli("verify", str(APP / "blueprint.yaml"), "schema-registry.token=abc", "--format", "json", cwd=APP)
    assert result.returncode == 1
    assert '"unknown-config-key"' in result.stdout and "no schema registry setting 'token'" in result.stdout


# --- the cluster: blueprint build's spec.schemaRegistry, the operator's run configs and mounts ----

def _build(*overrides: str):
    import yaml
    from typer.testing import CliRunner

    from blueprint.cli import app

    result = CliRunner().invoke(app, ["build", str(APP / "blueprint.yaml"), "--image", "registry.example/r:1",
                                      "--kafka", "kafka:9092", *overrides])
    return result.exit_code, (yaml.safe_load(result.stdout) if result.exit_code == 0 else None), result.stderr


DEPLOY = ("schema-registry.url=https://registry.internal:8081", "schema-registry.ca-secret=registry-ca/ca.crt",
          "schema-registry.username=app", "schema-registry.password-secret=shared/registry-password",
          "kafka.security.protocol=SASL_SSL", "kafka.security.sasl-mechanism=SCRAM-SHA-512",
          "kafka.security.username=app", "kafka.security.password-secret=shared/kafka-password")


def test_build_names_the_registrys_secret_keys_and_the_operator_mounts_them_once():
    """spec.schemaRegistry holds the URL and SecretKeyRefs, no value; the topics say
    schemaRegistry; each streamlet's run config names the mounted files and its registry ports;
    a Secret that Kafka and the registry share is one volume with both keys, in driver and
    executor."""
    import base64

    from streamlets_operator import render

    from streamlets.runtime.runconfig import StreamletRunConfig

    code, resource, err = _build(*DEPLOY)
    assert code == 0, err
    spec = resource["spec"]
    assert spec["schemaRegistry"] == {"url": "https://registry.internal:8081", "username": "app",
                                      "ca": {"name": "registry-ca", "key": "ca.crt"},
                                      "password": {"name": "shared", "key": "registry-password"}}
    assert {t["id"]: t.get("schemaRegistry") for t in spec["topics"]} == {"readings": True, "scaled": True}
    resource["metadata"].update(namespace="apps", uid="0000-1111", generation=1)
    secret, sapp = render.render_all(resource, env={})["streamlets"]["scale"]
    cfg = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))
    assert cfg.registry_ports == ["in", "out"]
    assert cfg.schema_registry == SchemaRegistry(url="https://registry.internal:8081", username="app",
                                                 ca_file="/etc/streamlets/secrets/registry-ca/ca.crt",
                                                 password_file="/etc/streamlets/secrets/shared/registry-password")
    volumes = {v["secret"]["secretName"]: v for v in sapp["spec"]["volumes"] if "secret" in v}
    assert volumes["shared"]["secret"]["items"] == [{"key": "kafka-password", "path": "kafka-password"},
                                                    {"key": "registry-password", "path": "registry-password"}]
    for pod in ("driver", "executor"):
        mounts = [m["mountPath"] for m in sapp["spec"][pod]["volumeMounts"]]
        assert mounts.count("/etc/streamlets/secrets/shared") == 1 and "/etc/streamlets/secrets/registry-ca" in mounts


@pytest.mark.parametrize("overrides, message", [
    (["schema-registry.url=https://r", "schema-registry.ca-file=ca.pem"],
     "schema-registry.ca-file is a file of this machine, which the pods do not have: in a deploy config name a key "
     "of a Secret, ca-secret = SECRET/KEY"),
    (["schema-registry.url=https://r", "schema-registry.password-secret=pw/password"],
     "a password without a username"),
    (["schema-registry.ca-secret=ca/ca.crt"], "the settings name no url"),
])
def test_build_refuses_what_pods_cannot_use(overrides, message):
    code, _, err = _build(*overrides)
    assert code == 1 and " ".join(err.split()).count(message) == 1, err


def test_the_operator_refuses_registry_topics_without_a_registry():
    from streamlets_operator import render

    code, resource, err = _build()
    assert code == 0, err
    resource["metadata"].update(namespace="apps", uid="0000-1111", generation=1)
    with pytest.raises(render.SpecError, match="topic 'readings' has schemaRegistry true but spec.schemaRegistry is not set"):
        render.render_all(resource, env={})
