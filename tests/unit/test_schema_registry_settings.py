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
