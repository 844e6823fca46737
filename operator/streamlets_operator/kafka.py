"""How the operator's own Kafka clients (topic management, the control stream's commands, the
operations API's dead letters) reach an application's Kafka cluster: spec.kafka's bootstrap
servers and security (render.kafka_security), each secret read from its Secret through the
Kubernetes API and written to a file only this process can read, the way the pods get them as
mounted files. No secret value is logged, put in a status, an Event or a message: errors name the
Secret and the key.
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from blueprint.deploy.spec import ApplicationSpec, SecretKeyRef
from streamlets.errors import StreamletError
from streamlets.kafka_security import KafkaConnection

from . import kube, render

_DIR: Path | None = None
_LOCK = threading.Lock()


class KafkaSecretError(StreamletError, RuntimeError):
    """A Secret or key spec.kafka.security (or spec.schemaRegistry) names cannot be read (transient as far as the operator
    knows: the Secret may be created after the application). The message names the Secret and the
    key, never a value."""


def _secrets_dir() -> Path:
    """A folder of this process, mode 0700, for the secrets its clients read (removed with the pod)."""
    global _DIR
    with _LOCK:
        if _DIR is None:
            _DIR = Path(tempfile.mkdtemp(prefix="streamlets-kafka-"))
            _DIR.chmod(0o700)
        return _DIR


def _write_secret(namespace: str, ref: SecretKeyRef, reader: Any) -> str:
    """The file holding the Secret's key (written now, mode 0600, replaced whole)."""
    secret = reader(namespace, ref.name)
    if secret is None:
        raise KafkaSecretError(f"spec.kafka.security: Secret {namespace}/{ref.name} does not exist")
    data = (secret.get("data") or {}).get(ref.key)
    if data is None:
        raise KafkaSecretError(f"spec.kafka.security: Secret {namespace}/{ref.name} has no key {ref.key!r}")
    path = _secrets_dir() / namespace / ref.name / ref.key
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(data))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(path)


def connection(spec: dict[str, Any] | ApplicationSpec, namespace: str, reader: Any = None) -> KafkaConnection:
    """The application's Kafka cluster as the operator's clients reach it: a KafkaConnection (pass
    it where a bootstrap server string goes: streamlets.kafka_logging.client_config expands it).
    `reader(namespace, name)` reads a Secret as a dict (kube.get_secret). Raises KafkaSecretError
    for a Secret or key that is missing."""
    app = render.typed(spec)
    security = render.kafka_security(app, path=lambda ref: _write_secret(namespace, ref, reader or kube.get_secret))
    return KafkaConnection(bootstrap_servers=app.kafka.bootstrap_servers, security=security)


def check_registry_secrets(spec: dict[str, Any] | ApplicationSpec, namespace: str, reader: Any = None) -> None:
    """Each Secret key the application's schema registry names (spec.schemaRegistry, else the
    chart's) exists: the pods mount them, and a missing one would leave them waiting to start.
    Raises KafkaSecretError naming the Secret and the key."""
    for ref in render.registry_secret_refs(render.typed(spec)).values():
        secret = (reader or kube.get_secret)(namespace, ref.name)
        if secret is None:
            raise KafkaSecretError(f"spec.schemaRegistry: Secret {namespace}/{ref.name} does not exist")
        if ref.key not in (secret.get("data") or {}):
            raise KafkaSecretError(f"spec.schemaRegistry: Secret {namespace}/{ref.name} has no key {ref.key!r}")
