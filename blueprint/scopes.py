"""The config scopes, in one place: what a dotted settings key (`streamlets.stats.spark.spark.x`)
addresses. Read by the config check (blueprint.configcheck), `blueprint build`
(blueprint.deploy.build), the sandbox's run config (blueprint.sandbox.localconfig) and `kubectl
streamlets configure`; each decides what it accepts, this module only says what a key means.

    streamlets.<name>.config-parameters.<key>      a declared parameter
    streamlets.<name>.volume-mounts.<mount>        a declared mount
    streamlets.<name>.spark.<spark.* key>          Spark settings of that streamlet
    streamlets.<name>.kubernetes.<role>.<key>      pod settings (role driver|executor, or labels|annotations)
    streamlets.<name>.autoscaling.<key>            its autoscaling (streamlets.autoscale: mode and KNOBS)
    streamlets.<name>.<setting>                    a single setting of that streamlet (streamlets.settings:
                                                   on-failure, delivery, trigger, progress-tracking,
                                                   max-offsets-per-trigger)
    runtimes.spark.config.<spark.* key>            every Spark streamlet
    runtimes.spark.kubernetes.<role>.<key>         every Spark streamlet
    topics.<id>.partitions|replication-factor      a topic of the blueprint
    topics.<id>.config.<Kafka topic config>
    kafka.bootstrap-servers
    kafka.security.<key>                           how clients connect (streamlets.kafka_security.CONFIG_KEYS)
    kafka.embedded-broker.security                 the sandbox's own broker: none | sasl-ssl | mtls
    storage.checkpoints | storage.s3a.<key>         the state root on an object store (the sandbox's;
                                                   streamlets.runtime.object_store declares the keys)
    schema-registry.<key>                          the schema registry of `schema-registry: true` topics
                                                   (streamlets.schema_registry.CONFIG_KEYS: url, ca-file...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamlets import autoscale as _autoscale
from streamlets import schema_registry as _schema_registry
from streamlets import settings as _settings
from streamlets.runtime import object_store as _object_store
from streamlets.settings import SETTINGS

STREAMLETS, RUNTIMES, TOPICS, KAFKA = "streamlets", "runtimes", "topics", "kafka"
STORAGE = _object_store.STORAGE
SCHEMA_REGISTRY = _schema_registry.SCOPE  # schema-registry.<key>: streamlets.schema_registry.CONFIG_KEYS
TOP_LEVEL = (STREAMLETS, RUNTIMES, TOPICS, KAFKA, STORAGE, SCHEMA_REGISTRY)
DEPLOY_ONLY_TOP_LEVEL = (RUNTIMES, TOPICS, KAFKA)  # the sandbox reads runtimes.spark.config only
CONFIG_PARAMETERS, VOLUME_MOUNTS, SPARK, KUBERNETES = "config-parameters", "volume-mounts", "spark", "kubernetes"
AUTOSCALING = _autoscale.SECTION  # streamlets.<name>.autoscaling.<key>: streamlets.autoscale (mode and KNOBS)
STREAMLET_SECTIONS = (CONFIG_PARAMETERS, VOLUME_MOUNTS, SPARK, KUBERNETES, AUTOSCALING)
# Single settings of a streamlet, `streamlets.<name>.<setting> = value` (no item): the keys of
# streamlets.settings.SETTINGS (on-failure, delivery, trigger, progress-tracking,
# max-offsets-per-trigger), each declared there.
# The keys the config check acts on itself (at-least-once edges, Real-Time Mode, async progress):
ON_FAILURE, DELIVERY, TRIGGER, PROGRESS_TRACKING = (_settings.ON_FAILURE.key, _settings.DELIVERY.key,
                                                    _settings.TRIGGER.key, _settings.PROGRESS_TRACKING.key)
# setting -> what it accepts (the values of a choice; the text forms of a free-form setting)
STREAMLET_SETTINGS: dict[str, tuple[str, ...]] = {key: s.values for key, s in SETTINGS.items()}
RUNTIME_SECTIONS = ("config", KUBERNETES)  # of runtimes.spark: Spark settings, pod settings
TOPIC_SETTINGS = ("partitions", "replication-factor")  # and config.<key>
POD_ROLES = ("driver", "executor")
POD_KEYS = ("cores", "core-limit", "memory", "memory-overhead")  # and executor.instances
POD_METADATA = ("labels", "annotations")
# kafka.<section>: the cluster's address, how clients connect (kafka.security.<key>: the keys of
# streamlets.kafka_security.CONFIG_KEYS), and the sandbox's embedded broker
# (kafka.embedded-broker.security: one of EMBEDDED_BROKER_SECURITY; blueprint.sandbox.kafka_broker).
BOOTSTRAP_SERVERS, KAFKA_SECURITY, EMBEDDED_BROKER = "bootstrap-servers", "security", "embedded-broker"
EMBEDDED_BROKER_SECURITY = ("none", "sasl-ssl", "mtls")


@dataclass(frozen=True)
class Scope:
    """What a key addresses: `top` (its first part), `owner` (the streamlet name, runtime or
    topic id: the second part), `section` (the third) and `rest` (the parts after it). For
    `kafka.<key>` the owner is None and the section is `<key>`. Missing parts are None / ()."""

    top: str
    owner: str | None
    section: str | None
    rest: tuple[str, ...]

    @property
    def item(self) -> str:
        """The rest as a dotted key: a parameter key, mount name, Spark or Kafka setting."""
        return ".".join(self.rest)

    @property
    def complete(self) -> bool:
        """Whether the key names a setting under a section (`<top>.<owner>.<section>.<item>`)."""
        return self.owner is not None and self.section is not None and bool(self.rest)

    def is_streamlet(self, *sections: str) -> bool:
        """A complete streamlets.<name>.<section>.<item> key, in one of `sections` (any if none)."""
        return self.top == STREAMLETS and self.complete and (not sections or self.section in sections)

    def is_streamlet_setting(self) -> bool:
        """A streamlets.<name>.<setting> key of STREAMLET_SETTINGS (streamlets.settings.SETTINGS)."""
        return self.top == STREAMLETS and self.owner is not None and self.section in STREAMLET_SETTINGS and not self.rest

    def is_runtime(self, section: str) -> bool:
        """A complete runtimes.spark.<section>.<item> key."""
        return self.top == RUNTIMES and self.owner == "spark" and self.section == section and bool(self.rest)

    def pod_setting(self) -> tuple[str, str]:
        """A kubernetes section's (role, key): ("executor", "instances"), ("labels", "team")."""
        return self.rest[0], ".".join(self.rest[1:])


def parse_scope(parts: tuple[str, ...] | list[str]) -> Scope:
    """The Scope of a key split at its dots."""
    parts = tuple(parts)
    top = parts[0] if parts else ""
    if top == KAFKA:
        return Scope(top, None, parts[1] if len(parts) > 1 else None, parts[2:])
    return Scope(top, parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None, parts[3:])


def setting_value(setting: str, value: Any) -> str:
    """The value of `streamlets.<name>.<setting>` (a STREAMLET_SETTINGS key) as run configs and the
    application resource carry it (streamlets.settings.Setting.normal). Raises ValueError saying
    what is accepted."""
    return SETTINGS[setting].normal(value)


def scope_of(key: str) -> Scope:
    """The Scope of a dotted key."""
    return parse_scope(key.split("."))


def spark_text(value: Any) -> str:
    """A Spark setting's value as Spark's text (booleans lower-case: `true`, not `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
