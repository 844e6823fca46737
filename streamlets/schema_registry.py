"""Confluent Schema Registry topics, in one place: where the registry is, how a topic's subject is
named, and the wire format's header.

A blueprint topic with `schema-registry: true` carries the registry's wire format: each value is a
zero magic byte, the writer schema's id (4 bytes, big-endian), then the Avro binary encoding with
that schema. Its schemas live under the subject `<Kafka topic>-value` (Confluent's
TopicNameStrategy; keys are strings here, so no key subject). Outlets register their schema there
when a query starts and write the header with the id the registry gives; inlets read every value
with the writer schema its id names, resolved to the inlet's (runtime.schema_registry, in the
JVM); `blueprint verify --schema-registry` checks schemas against the subject
(blueprint.registry_check).

`SchemaRegistry` is the typed setting; like streamlets.kafka_security it holds no secret, only
where the basic-auth password is (a file or an environment variable).

    setting (run config schema-registry.*)   confluent-kafka (Python)      executors (Java, runtime.schema_registry)
    url                                      url                           the REST base URL
    ca-file                                  ssl.ca.location               an SSLContext trusting that CA only
    username, password-file | password-env   basic.auth.user.info          Authorization: Basic
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .errors import StreamletError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from .schema import AvroSchema

MAGIC = 0
HEADER_BYTES = 5
SUBJECT_SUFFIX = "-value"
# The run config's keys under schema-registry (kebab case), by field: one list for the config
# check, the sandbox, `blueprint verify` and the docs.
CONFIG_KEYS = {"url": "url", "ca-file": "ca_file", "username": "username", "password-file": "password_file",
               "password-env": "password_env"}
PATH_KEYS = ("ca-file", "password-file")  # relative to the config file
# A deploy config's keys (`blueprint build`, spec.schemaRegistry): each secret a key of a Kubernetes
# Secret, SECRET/KEY (streamlets.kafka_security.secret_ref), in place of a file or variable of this
# machine; by the SchemaRegistry field it becomes in a pod (the key mounted as a file).
SECRET_KEYS = {"ca-secret": "ca_file", "password-secret": "password_file"}
LOCAL_KEYS = ("ca-file", "password-file", "password-env")  # a run config's only
SCOPE = "schema-registry"


class SchemaRegistryError(StreamletError):
    """The registry refused or could not answer (the message names the registry, the subject and
    the cause, never a secret)."""


def subject(topic: str) -> str:
    """The subject of a topic's values: `<topic>-value` (TopicNameStrategy)."""
    return topic + SUBJECT_SUFFIX


def header(schema_id: int) -> bytes:
    """The wire format's 5-byte header of values written with `schema_id`."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big")


class SchemaRegistry(BaseModel):
    """Where the schema registry is and how to reach it.

    - `url`: the base URL of Confluent's REST API (Confluent's `http://host:8081`; Apicurio's
      `http://host:8080/apis/ccompat/v7`).
    - `ca_file`: PEM file of the CA that signed an https registry's certificate; None: the
      system's (Python) or the JVM's (executors) trusted CAs.
    - `username` and `password_file` | `password_env`: HTTP basic auth (Confluent Cloud's API key
      and secret).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="the registry's REST base URL")
    ca_file: str | None = Field(default=None, description="PEM file of the trusted CA(s) (https)")
    username: str | None = Field(default=None, description="basic auth user (an API key)")
    password_file: str | None = Field(default=None, description="file holding the basic auth password")
    password_env: str | None = Field(default=None, description="environment variable holding the basic auth password")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return url

    @model_validator(mode="after")
    def _consistent(self) -> "SchemaRegistry":
        if self.password_file and self.password_env:
            raise ValueError("give the password by password_file or password_env, not both")
        if (self.password_file or self.password_env) and not self.username:
            raise ValueError("a password without a username: set username too")
        return self

    def password(self) -> str | None:
        """The basic auth password, read now; SchemaRegistryError naming the file or variable."""
        if self.password_file:
            try:
                text = Path(self.password_file).read_text(encoding="utf-8")
            except OSError as e:
                raise SchemaRegistryError(f"{SCOPE}.password-file: cannot read {self.password_file}: "
                                          f"{e.strerror or e}") from None
            return text[:-1] if text.endswith("\n") else text
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise SchemaRegistryError(f"{SCOPE}.password-env: the environment variable {self.password_env} is not set")
            return value
        return None

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient configuration (the password read now).
        SchemaRegistryError naming the key and the file when the CA or the password cannot be read."""
        conf: dict[str, Any] = {"url": self.url}
        if self.ca_file:
            try:
                Path(self.ca_file).read_bytes()
            except OSError as e:
                raise SchemaRegistryError(f"{SCOPE}.ca-file: cannot read {self.ca_file}: {e.strerror or e}") from None
            conf["ssl.ca.location"] = self.ca_file
        if self.username:
            conf["basic.auth.user.info"] = f"{self.username}:{self.password() or ''}"
        return conf

    def client(self) -> "SchemaRegistryClient":
        """A confluent-kafka SchemaRegistryClient of the registry."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient(self.client_config())


def _failure(registry: SchemaRegistry, what: str, e: Exception) -> SchemaRegistryError:
    from confluent_kafka.schema_registry.error import SchemaRegistryError as _Refused

    if isinstance(e, _Refused) and e.http_status_code in (401, 403):
        return SchemaRegistryError(f"schema registry {registry.url}: {what}: HTTP {e.http_status_code}, the credentials "
                                   f"are refused: check {SCOPE}.username and its password "
                                   f"({'user ' + repr(registry.username) if registry.username else 'none given'})")
    if isinstance(e, _Refused):
        return SchemaRegistryError(f"schema registry {registry.url}: {what}: {e.error_message} "
                                   f"(HTTP {e.http_status_code}, error code {e.error_code})")
    return SchemaRegistryError(f"schema registry {registry.url}: {what}: {type(e).__name__}: {e}")


def check(registry: SchemaRegistry) -> None:
    """The registry answers with these credentials (`GET /subjects`); SchemaRegistryError naming
    the registry and the cause (unreachable, its certificate untrusted, 401...) otherwise."""
    try:
        registry.client().get_subjects()
    except SchemaRegistryError:
        raise
    except Exception as e:
        raise _failure(registry, "listing its subjects", e) from None


def register(registry: SchemaRegistry, topic: str, schema: "AvroSchema") -> int:
    """Register `schema` under the topic's subject (a no-op returning the same id when it is
    registered already) and return its id. SchemaRegistryError when the registry refuses it (the
    subject's compatibility level forbids it: its words, which name the field) or is unreachable."""
    from confluent_kafka.schema_registry import Schema

    try:
        return int(registry.client().register_schema(subject(topic), Schema(schema.json, "AVRO")))
    except Exception as e:
        raise _failure(registry, f"registering {schema.name} under subject {subject(topic)}", e) from None


def registered(registry: SchemaRegistry, topic: str) -> list[tuple[int, int, dict[str, Any]]]:
    """(version, schema id, schema) of every version under the topic's subject, oldest first; []
    when the subject does not exist. SchemaRegistryError when the registry cannot answer."""
    import json

    from confluent_kafka.schema_registry.error import SchemaRegistryError as _Refused

    client = registry.client()
    name = subject(topic)
    try:
        versions = client.get_versions(name)
    except _Refused as e:
        if e.http_status_code == 404:
            return []
        raise _failure(registry, f"listing the versions of subject {name}", e) from None
    except Exception as e:
        raise _failure(registry, f"listing the versions of subject {name}", e) from None
    found = []
    for version in sorted(versions):
        try:
            got = client.get_version(name, version)
        except Exception as e:
            raise _failure(registry, f"reading version {version} of subject {name}", e) from None
        found.append((int(got.version or version), int(got.schema_id or 0), json.loads(got.schema.schema_str or "{}")))
    return found


def compatibility(registry: SchemaRegistry, topic: str) -> str:
    """The compatibility level that governs the topic's subject: its own, else the registry's
    global one (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL,
    FULL_TRANSITIVE or NONE)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError as _Refused

    client = registry.client()
    try:
        return str(client.get_compatibility(subject(topic)))
    except _Refused as e:
        if e.http_status_code != 404:
            raise _failure(registry, f"reading the compatibility of subject {subject(topic)}", e) from None
    except Exception as e:
        raise _failure(registry, f"reading the compatibility of subject {subject(topic)}", e) from None
    try:
        return str(client.get_compatibility())
    except Exception as e:
        raise _failure(registry, "reading the global compatibility level", e) from None
