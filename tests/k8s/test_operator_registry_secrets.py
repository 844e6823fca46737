"""spec.schemaRegistry's Secrets on a real kube-apiserver: the operator holds a deployment whose
registry Secret or key is missing (the pods would wait on the mount), naming it, and lets it go
once it exists (streamlets_operator.kafka.check_registry_secrets, through kube.get_secret)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprint.cli import app

pytestmark = [pytest.mark.k8s, pytest.mark.integration]

APP = Path(__file__).resolve().parents[1] / "integration" / "apps" / "registry"


@pytest.fixture
def operator_client(kube, monkeypatch):
    """The operator's Kubernetes client (streamlets_operator.kube) on the test's API server."""
    from streamlets_operator import kube as operator_kube

    client = kube.api_client()
    monkeypatch.setattr(operator_kube, "_client", client)  # what api_client() makes from a kubeconfig
    yield operator_kube
    client.close()


def test_a_missing_registry_secret_or_key_is_named_until_it_exists(api, kube_namespace, operator_client):
    from streamlets_operator import kafka

    _, core = api
    ns = kube_namespace
    result = CliRunner().invoke(app, ["build", str(APP / "blueprint.yaml"), "--image", "r:1", "--kafka", "kafka:9092",
                                      "schema-registry.url=https://registry:8081", "schema-registry.username=app",
                                      "schema-registry.ca-secret=registry-ca/ca.crt",
                                      "schema-registry.password-secret=registry-user/password"])
    assert result.exit_code == 0, result.stderr
    spec = yaml.safe_load(result.stdout)["spec"]
    with pytest.raises(kafka.KafkaSecretError, match=rf"spec.schemaRegistry: Secret {ns}/registry-ca does not exist"):
        kafka.check_registry_secrets(spec, ns)

    def secret(name: str, **data: str) -> None:
        core.create_namespaced_secret(ns, {"metadata": {"name": name},
                                           "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})

    secret("registry-ca", **{"ca.crt": "-----BEGIN CERTIFICATE-----"})
    secret("registry-user", user="app")
    with pytest.raises(kafka.KafkaSecretError, match=rf"Secret {ns}/registry-user has no key 'password'"):
        kafka.check_registry_secrets(spec, ns)
    core.patch_namespaced_secret("registry-user", ns, {"data": {"password": base64.b64encode(b"pw").decode()}})
    kafka.check_registry_secrets(spec, ns)  # all there: nothing raised
