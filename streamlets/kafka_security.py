"""Kafka connection security, in one place: how every Kafka client of the project (Spark's Kafka
source and sink, the exactly-once producer and its ledger reader, admin clients, dead letters,
the control stream, the operations server, `blueprint topic tail`) reaches a broker that wants
TLS, mutual TLS or SASL.

`KafkaSecurity` is the typed model; it holds **no secret**, only where each secret is: a file
(`*_file`: the whole file, one trailing newline dropped) or an environment variable (`*_env`).
Secrets are read when a client is configured, so the model can be written to disk (the run
config, `sandbox.json`) and logged. A Kubernetes Secret mounted as files fits the `*_file`
fields; one exposed through `env.valueFrom.secretKeyRef` fits the `*_env` fields.

It is rendered in the dialect of each client (the table is also in README, "Connecting to a
secured Kafka"):

    setting (run config kafka.security.*)  librdkafka (confluent-kafka)         Java client (Spark, `kafka.` prefix)
    protocol                               security.protocol                    security.protocol
    ca-file                                ssl.ca.location                      ssl.truststore.type=PEM, ssl.truststore.location
    verify-hostname (default true)         ssl.endpoint.identification          ssl.endpoint.identification.algorithm
                                           .algorithm = https | none            = https | "" (empty)
    cert-file + key-file (mutual TLS)      ssl.certificate.location,            ssl.keystore.type=PEM,
                                           ssl.key.location                     ssl.keystore.certificate.chain, ssl.keystore.key
                                                                                (the files' PEM text)
    key-password-file | key-password-env   ssl.key.password                     ssl.key.password
    sasl-mechanism                         sasl.mechanism                       sasl.mechanism
    username, password-file | password-env sasl.username, sasl.password         sasl.jaas.config (PlainLoginModule or
                                                                                ScramLoginModule, username and password)

The Java client reads PEM files since Kafka 2.7 (KIP-651). OAUTHBEARER is not offered: both
clients support OIDC client credentials, but no test broker here has a token endpoint.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

# The run config's keys under kafka.security (kebab case), by field: one list for the config
# check, the sandbox and the docs.
CONFIG_KEYS = {"protocol": "protocol", "ca-file": "ca_file", "verify-hostname": "verify_hostname",
               "cert-file": "cert_file", "key-file": "key_file", "key-password-file": "key_password_file",
               "key-password-env": "key_password_env", "sasl-mechanism": "sasl_mechanism", "username": "username",
               "password-file": "password_file", "password-env": "password_env"}
PATH_KEYS = ("ca-file", "cert-file", "key-file", "key-password-file", "password-file")  # relative to the config file
# A deploy config's keys (`blueprint build`, spec.kafka.security): each secret a key of a Kubernetes
# Secret, written SECRET/KEY, in place of a file or an environment variable of this machine, which
# pods do not have; by the KafkaSecurity field it becomes in a pod (the key mounted as a file).
SECRET_KEYS = {key.replace("-file", "-secret"): CONFIG_KEYS[key] for key in PATH_KEYS}
LOCAL_KEYS = tuple(key for key in CONFIG_KEYS if key.endswith(("-file", "-env")))  # a run config's only
_SECRET_REF = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([-._a-zA-Z0-9]+)$")


def secret_ref(text: str) -> tuple[str, str]:
    """(Secret name, key) of a deploy config's `SECRET/KEY` (a DNS subdomain, then a key of the
    Secret's data). ValueError saying the form otherwise."""
    match = _SECRET_REF.match(str(text))
    if not match or len(match.group(1)) > 253 or len(match.group(5)) > 253:
        raise ValueError(f"{text!r} is not SECRET/KEY (a Secret's name, a slash, a key of its data)")
    return match.group(1), match.group(5)

_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


class KafkaSecurityError(ValueError):
    """A secret or certificate the settings name cannot be read (the message names the setting and
    the file or variable, never a secret's value)."""


def _secret(file: str | None, env: str | None, what: str) -> str | None:
    """The secret in `file` (one trailing newline dropped) or environment variable `env`; None when
    neither is set. KafkaSecurityError naming `what` and the file or variable otherwise."""
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as e:
            raise KafkaSecurityError(f"kafka.security.{what}-file: cannot read {file}: {e.strerror or e}") from None
        text = text[:-1] if text.endswith("\n") else text
        text = text[:-1] if text.endswith("\r") else text
        if not text:
            raise KafkaSecurityError(f"kafka.security.{what}-file: {file} is empty")
        return text
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise KafkaSecurityError(f"kafka.security.{what}-env: the environment variable {env} is not set")
        return value
    return None


def _pem(file: str, what: str) -> str:
    try:
        return Path(file).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise KafkaSecurityError(f"kafka.security.{what}: cannot read {file}: "
                                 f"{getattr(e, 'strerror', None) or e}") from None


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class KafkaSecurity(BaseModel):
    """How a Kafka client authenticates and encrypts: Kafka's `security.protocol` and what it needs.

    - `protocol`: PLAINTEXT (default: nothing below applies), SSL (TLS; mutual TLS with
      `cert_file` and `key_file`), SASL_SSL (SASL over TLS), SASL_PLAINTEXT.
    - `ca_file`: PEM file of the CA(s) that signed the brokers' certificates; None: the system's
      (librdkafka) or the JVM's (Java) trusted CAs.
    - `verify_hostname`: check that the broker's certificate names the host dialled (default true).
    - `cert_file`, `key_file`: the client's certificate (PEM, chain allowed) and its PKCS#8 private
      key (PEM), for mutual TLS; `key_password_file` / `key_password_env` if the key is encrypted.
    - `sasl_mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; `username`; the password from
      `password_file` or `password_env`.

    Paths are local paths of the process that connects (a driver pod: where the Secret is
    mounted). Frozen; pydantic's ValidationError names the field for an inconsistent combination
    (SASL settings without a SASL protocol, a certificate without its key, two sources for one
    secret).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: Protocol = Field(default="PLAINTEXT", description="Kafka security.protocol")
    ca_file: str | None = Field(default=None, description="PEM file of the trusted CA(s); None: the system's")
    verify_hostname: bool = Field(default=True, description="the broker certificate must name the host dialled")
    cert_file: str | None = Field(default=None, description="client certificate (PEM), mutual TLS")
    key_file: str | None = Field(default=None, description="client private key (PKCS#8 PEM), mutual TLS")
    key_password_file: str | None = Field(default=None, description="file holding the private key's password")
    key_password_env: str | None = Field(default=None, description="environment variable holding the key's password")
    sasl_mechanism: Mechanism | None = Field(default=None, description="SASL mechanism (SASL_* protocols)")
    username: str | None = Field(default=None, description="SASL user name")
    password_file: str | None = Field(default=None, description="file holding the SASL password")
    password_env: str | None = Field(default=None, description="environment variable holding the SASL password")

    @model_validator(mode="after")
    def _consistent(self) -> "KafkaSecurity":
        sasl = self.protocol.startswith("SASL_")
        tls = self.protocol.endswith("SSL")
        if self.password_file is not None and self.password_env is not None:
            raise ValueError("give password-file or password-env, not both")
        if self.key_password_file is not None and self.key_password_env is not None:
            raise ValueError("give key-password-file or key-password-env, not both")
        if sasl and (self.sasl_mechanism is None or self.username is None
                     or (self.password_file is None and self.password_env is None)):
            raise ValueError(f"protocol {self.protocol} needs sasl-mechanism, username and password-file or password-env")
        if not sasl and (self.sasl_mechanism or self.username or self.password_file or self.password_env):
            raise ValueError(f"sasl-mechanism, username and password-* need protocol SASL_SSL or SASL_PLAINTEXT "
                             f"(not {self.protocol})")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert-file and key-file go together (mutual TLS)")
        tls_only = [k for k, v in (("ca-file", self.ca_file), ("cert-file", self.cert_file),
                                   ("key-password-*", self.key_password_file or self.key_password_env)) if v]
        if tls_only and not tls:
            raise ValueError(f"{', '.join(tls_only)} need protocol SSL or SASL_SSL (not {self.protocol})")
        if (self.key_password_file or self.key_password_env) and self.key_file is None:
            raise ValueError("key-password-* needs key-file")
        return self

    @classmethod
    def from_config(cls, values: dict[str, Any]) -> "KafkaSecurity":
        """From the run config's `kafka.security.<key>` values by kebab-case key (CONFIG_KEYS).
        KeyError for an unknown key; pydantic's ValidationError for bad values."""
        return cls.model_validate({CONFIG_KEYS[k]: v for k, v in values.items()})

    @property
    def tls(self) -> bool:
        """The connection is encrypted (SSL or SASL_SSL)."""
        return self.protocol.endswith("SSL")

    def describe(self) -> str:
        """A short description for messages, no secret: `SASL_SSL, SCRAM-SHA-512 as user app`."""
        parts: list[str] = [self.protocol]
        if self.sasl_mechanism:
            parts.append(f"{self.sasl_mechanism} as user {self.username}")
        if self.cert_file:
            parts.append(f"client certificate {self.cert_file}")
        return ", ".join(parts)

    def librdkafka(self) -> dict[str, str]:
        """librdkafka's settings (confluent-kafka's config names), secrets read now; empty for
        PLAINTEXT. KafkaSecurityError if a file or variable named cannot be read."""
        return self._render(java=False)

    def java(self, prefix: str = "") -> dict[str, str]:
        """The Java client's settings, each name after `prefix` (`kafka.` for Spark's Kafka source
        and sink options), secrets and the client key read now; empty for PLAINTEXT.
        KafkaSecurityError if a file or variable named cannot be read."""
        return {prefix + k: v for k, v in self._render(java=True).items()}

    def _render(self, java: bool) -> dict[str, str]:
        """The settings in the Java client's names (`java`) or librdkafka's (the module's table)."""
        if self.protocol == "PLAINTEXT":
            return {}
        conf: dict[str, str] = {"security.protocol": self.protocol}
        if self.tls:
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else ("" if java else "none")
            if self.ca_file:
                conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file} if java
                            else {"ssl.ca.location": self.ca_file})
            if self.cert_file and self.key_file:
                conf.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": _pem(self.cert_file, "cert-file"),
                             "ssl.keystore.key": _pem(self.key_file, "key-file")} if java
                            else {"ssl.certificate.location": self.cert_file, "ssl.key.location": self.key_file})
                key_password = _secret(self.key_password_file, self.key_password_env, "key-password")
                if key_password is not None:
                    conf["ssl.key.password"] = key_password
        if self.sasl_mechanism and self.username:
            password = _secret(self.password_file, self.password_env, "password") or ""
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf.update({"sasl.jaas.config": f"{_LOGIN_MODULES[self.sasl_mechanism]} required "
                                             f"username={_jaas_quoted(self.username)} password={_jaas_quoted(password)};"}
                        if java else {"sasl.username": self.username, "sasl.password": password})
        return conf


class KafkaConnection(BaseModel):
    """A Kafka cluster and how to reach it: `bootstrap_servers` (`host:port[,host:port...]`) and
    `security`. `str()` is the bootstrap servers (for messages). Frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)

    def __str__(self) -> str:
        return self.bootstrap_servers

    @classmethod
    def of(cls, kafka: "str | KafkaConnection") -> "KafkaConnection":
        """`kafka` itself, or a PLAINTEXT connection to the bootstrap servers `kafka`."""
        return kafka if isinstance(kafka, KafkaConnection) else cls(bootstrap_servers=kafka)

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka's `bootstrap.servers` and security settings (KafkaSecurity.librdkafka)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security.librdkafka()}

    def check(self, timeout: float = 15.0) -> None:
        """Connect with an admin client and list the topics, before anything else starts. Raises
        ConnectionCheckError, one line naming the broker, the security and the cause (refused,
        authentication failed, certificate not trusted...), or KafkaSecurityError."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient

        from .kafka_logging import client_config

        errors: list[KafkaError] = []
        try:
            admin = AdminClient(client_config({"bootstrap.servers": self, "error_cb": errors.append}))
        except KafkaException as e:  # a CA, certificate or key file librdkafka cannot load
            raise ConnectionCheckError(f"cannot connect to Kafka at {self.bootstrap_servers} "
                                       f"({self.security.describe()}): {_cause(e.args[0] if e.args else e)}") from None
        fatal = {KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED,
                 KafkaError.UNSUPPORTED_SASL_MECHANISM, KafkaError.ILLEGAL_SASL_STATE}
        deadline = _now() + timeout
        while True:
            try:
                admin.list_topics(timeout=1)
                return
            except KafkaException as e:
                last: Any = e.args[0] if e.args else e
            admin.poll(0)
            # a TLS alert from the broker (a client certificate it does not trust) ends it too
            cause = next((err for err in errors if err.code() in fatal
                          or (err.code() == KafkaError._TRANSPORT and "SSL alert" in err.str())), None)
            if cause is None and _now() > deadline:
                cause = errors[-1] if errors else last
            if cause is not None:
                raise ConnectionCheckError(f"cannot connect to Kafka at {self.bootstrap_servers} "
                                           f"({self.security.describe()}): {_cause(cause)}")


class ConnectionCheckError(RuntimeError):
    """KafkaConnection.check: the broker cannot be reached, or refuses the client."""


def _now() -> float:
    import time

    return time.monotonic()


def _cause(err: Any) -> str:
    """librdkafka's error text without its `sasl_ssl://host:port/bootstrap: ` prefix and
    `(after N ms in state X)` suffix."""
    import re

    text = err.str() if hasattr(err, "str") else str(err)
    text = re.sub(r"^([a-z_]+://)?\S+/(bootstrap|\d+): ", "", text)
    text = re.sub(r"\s*\(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\)$", "", text)
    return text
