"""The StreamletApplication's spec, typed: what `blueprint build` writes, `kubectl streamlets
configure|scale|restore` patch and the operator reads (operator/streamlets_operator).

Fields are snake_case in Python and camelCase in the resource (pydantic aliases: `app_id` is
`appId`); `model_validate` reads either, `to_resource()` / `dump()` write camelCase and leave out
what is unset. Defaults are the CRD's (`upgradeMode` last-state, `imagePullPolicy` IfNotPresent,
`scale.executors` 1, a topic's `managed` true). A streamlet's single settings (`onFailure`,
`delivery`, `trigger`, `progressTracking`) are fields made from streamlets.settings, one per row.

The CRD's schema (blueprint/crds/streamlets.io_streamletapplications.yaml) is checked against
these models by tests/unit/test_spec.py: the same fields, types, enums, patterns, bounds and
defaults (the descriptor's schema is the SDK's, streamlets.descriptor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model
from pydantic.alias_generators import to_camel

from streamlets.autoscale import KNOBS, Autoscaling, Knob
from streamlets.autoscale import Mode as AutoscaleMode
from streamlets.settings import SETTINGS, Setting

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
TOPIC_NAME = r"^[a-zA-Z0-9._-]{1,249}$"
CPU = r"^[0-9]+(\.[0-9]+)?m?$"
MEMORY = r"^[0-9]+[kmgtpKMGTP]?[bB]?$"
PORT_REF = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
BOOTSTRAP_SERVERS = r"^[A-Za-z0-9.\-\[\]:]+:[0-9]+(,[A-Za-z0-9.\-\[\]:]+:[0-9]+)*$"
UpgradeMode = Literal["stateless", "last-state", "savepoint"]
TopicName = Annotated[str, StringConstraints(pattern=TOPIC_NAME)]
ClaimName = Annotated[str, StringConstraints(max_length=253, pattern=DNS_SUBDOMAIN)]
SchemaText = Annotated[str, StringConstraints(min_length=2)]  # an Avro schema as JSON text
PortRef = Annotated[str, StringConstraints(pattern=PORT_REF)]  # streamlet.port


class SpecModel(BaseModel):
    """camelCase in the resource, snake_case here; unknown fields are ignored (the API server
    prunes them anyway)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        """As the resource carries it: camelCase, without unset fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class PodResources(SpecModel):
    """A driver's or executor's resources (Spark's pod settings)."""

    cores: str | None = Field(default=None, description="CPU, e.g. 1, 0.5 or 500m", pattern=CPU)
    core_limit: str | None = Field(default=None, pattern=CPU)
    memory: str | None = Field(default=None, description="Spark memory string, e.g. 512m or 2g", pattern=MEMORY)
    memory_overhead: str | None = Field(default=None, pattern=MEMORY)


class Scale(SpecModel):
    executors: int = Field(default=1, ge=0, description="Spark executor instances")


def _knob_field(knob: Knob) -> tuple[Any, Any]:
    """A field of spec.streamlets[].autoscaling from its setting (streamlets.autoscale.KNOBS)."""
    unit = " (seconds)" if knob.seconds else ""
    default = "" if knob.default is None else f"; default {knob.default:g}"
    doc = f"{knob.doc}{unit}{default} (streamlets.<name>.autoscaling.{knob.key}; Flink job.autoscaler.{knob.flink})"
    return (int if knob.kind is int else float) | None, Field(default=None, ge=1 if knob.kind is int else 0,
                                                               description=doc)


if TYPE_CHECKING:
    class AutoscalingSpec(SpecModel):
        mode: AutoscaleMode
else:  # a field per setting (streamlets.autoscale.KNOBS)
    AutoscalingSpec = create_model(
        "AutoscalingSpec", __base__=SpecModel, __module__=__name__,
        mode=(AutoscaleMode, Field(default="off", description="off; passive: decisions reported, not applied; active")),
        **{k.resource: _knob_field(k) for k in KNOBS.values()})
    AutoscalingSpec.__doc__ = ("A streamlet's autoscaling (streamlets.autoscale): executors follow its lag and rates "
                               "(the README's Autoscaling).")


class _StreamletFields(SpecModel):
    name: str = Field(description="instance name in the blueprint (DNS label)", min_length=1, max_length=63,
                      pattern=DNS_LABEL)
    class_name: str = Field(description="module.Class of the Streamlet subclass in the image",
                            pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
    descriptor: dict[str, Any] = Field(description="the class's StreamletDescriptor (ports with Avro schemas, "
                                       "parameters, mounts)")
    restore_from: str | None = Field(default=None, min_length=1, description="a savepoint (its folder) to start from; "
                                     "checked against the code, restored once")
    state_partitions: int | None = Field(default=None, ge=1, description="state partitions (spark.sql.shuffle.partitions, "
                                         "pinned in the checkpoints at the first batch); when the checkpoints have "
                                         "another number, the driver repartitions them before it starts (after a "
                                         "restoreFrom), so that state follows a change of scale")
    scale: Scale = Field(default_factory=lambda: Scale())
    autoscaling: AutoscalingSpec | None = Field(default=None, description="executors that follow the load "
                                                "(streamlets.<name>.autoscaling); scale.executors is the start count")
    driver: PodResources | None = None
    executor: PodResources | None = None
    spark_conf: dict[str, str] | None = Field(default=None, description="spark.* settings (runtimes.spark.config, then "
                                              "streamlets.<name>.spark)")
    config_parameters: dict[str, str] | None = Field(default=None, description="config parameter key -> value as text "
                                                     "(defaults filled in)")
    volume_mounts: dict[str, ClaimName] | None = Field(default=None, description="volume mount name -> PersistentVolumeClaim name; "
                                                 "unlisted mounts get a claim from the operator")
    port_topics: dict[str, TopicName] | None = Field(default=None, description="port name -> Kafka topic name")
    writer_schemas: dict[str, SchemaText] | None = Field(default=None, description="inlet name -> the producer's Avro schema (JSON "
                                                  "text), where it differs from the inlet's")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    def autoscaling_settings(self) -> Autoscaling:
        """Its autoscaling (mode off when unset). Raises AutoscaleSettingsError for settings out of range."""
        return Autoscaling.from_resource(self.autoscaling.model_dump() if self.autoscaling else {})

    def settings(self) -> dict[str, Any]:
        """The single settings that are set (streamlets.settings), by run config field
        (`progress_tracking`): unset ones take the run config's defaults."""
        values = {s.field: getattr(self, s.field, None) for s in SETTINGS.values()}
        return {k: v for k, v in values.items() if v is not None}

    def with_settings(self, **values: str) -> "StreamletSpec":
        """A copy with single settings set (by run config field)."""
        return self.model_copy(update=values)


def _setting_field(setting: Setting) -> tuple[Any, Any]:
    """A streamlet's field of one setting: a choice is an enum, a free form its pattern; unset by default."""
    doc = f"streamlets.<name>.{setting.key}: {setting.doc}"
    if setting.choices is not None:
        return Literal[setting.choices] | None, Field(default=None, description=doc)
    return str | None, Field(default=None, description=doc, pattern=setting.pattern)


if TYPE_CHECKING:
    StreamletSpec = _StreamletFields
else:  # a field per streamlet setting (streamlets.settings), after the others
    StreamletSpec = create_model("StreamletSpec", __base__=_StreamletFields, __module__=__name__,
                                 **{s.field: _setting_field(s) for s in SETTINGS.values()})
    StreamletSpec.__doc__ = "One streamlet of the application: spec.streamlets[]."


class TopicDefaults(SpecModel):
    partitions: int | None = Field(default=None, ge=1)
    replication_factor: int | None = Field(default=None, ge=1)


class SecretKeyRef(SpecModel):
    """A key of a Secret in the application's namespace (Kubernetes' SecretKeySelector)."""

    name: str = Field(description="the Secret's name", max_length=253, pattern=DNS_SUBDOMAIN)
    key: str = Field(description="the key in its data", max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")


class KafkaSecuritySpec(SpecModel):
    """How every client reaches the Kafka cluster (streamlets.kafka_security.KafkaSecurity, whose
    rules it follows): each secret is a key of a Secret, which the operator mounts as a file in the
    drivers and executors and reads for its own clients; no secret value is in the resource."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="Kafka security.protocol")
    verify_hostname: bool | None = Field(default=None, description="the broker certificate must name the host dialled "
                                         "(ssl.endpoint.identification.algorithm https; default true)")
    ca: SecretKeyRef | None = Field(default=None, description="PEM of the CA(s) that signed the brokers' certificates "
                                    "(e.g. Strimzi's <cluster>-cluster-ca-cert, key ca.crt); unset: the JVM's and the "
                                    "system's trusted CAs")
    certificate: SecretKeyRef | None = Field(default=None, description="the client certificate (PEM), mutual TLS "
                                             "(e.g. Strimzi's KafkaUser Secret, key user.crt)")
    key: SecretKeyRef | None = Field(default=None, description="the client's PKCS#8 private key (PEM), mutual TLS "
                                     "(key user.key)")
    key_password: SecretKeyRef | None = Field(default=None, description="the private key's password, if encrypted")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, description="SASL mechanism (SASL_* protocols)")
    username: str | None = Field(default=None, description="SASL user name", min_length=1, max_length=253)
    password: SecretKeyRef | None = Field(default=None, description="the SASL password (e.g. Strimzi's KafkaUser "
                                          "Secret, key password)")


# KafkaSecuritySpec's secret fields -> the KafkaSecurity (streamlets.kafka_security) file fields they
# become in a pod, where the operator mounts each Secret key as a file
KAFKA_SECRET_FILES = {"ca": "ca_file", "certificate": "cert_file", "key": "key_file",
                      "key_password": "key_password_file", "password": "password_file"}


class KafkaSpec(SpecModel):
    bootstrap_servers: str = Field(description="Kafka bootstrap.servers, host:port[,host:port...]",
                                   pattern=BOOTSTRAP_SERVERS)
    topic_defaults: TopicDefaults | None = Field(default=None, description="for topics that set no partitions or "
                                                 "replication factor")
    security: KafkaSecuritySpec | None = Field(default=None, description="TLS, mutual TLS or SASL, secrets from "
                                               "Secrets; unset: the operator's default (the chart's kafka.security), "
                                               "else PLAINTEXT")


class SchemaRegistrySpec(SpecModel):
    """The schema registry of the `schemaRegistry: true` topics (streamlets.schema_registry.SchemaRegistry,
    whose rules it follows): each secret is a key of a Secret, which the operator mounts as a file in
    the drivers and executors; no secret value is in the resource."""

    url: str = Field(description="the registry's REST base URL (Confluent's http://host:8081; Apicurio's "
                     "http://host:8080/apis/ccompat/v7)", pattern=r"^https?://[^\s/]+(/.*)?$")
    ca: SecretKeyRef | None = Field(default=None, description="PEM of the CA that signed an https registry's "
                                    "certificate; unset: the JVM's and the system's trusted CAs")
    username: str | None = Field(default=None, description="HTTP basic auth user (e.g. a Confluent Cloud API key)",
                                 min_length=1, max_length=253)
    password: SecretKeyRef | None = Field(default=None, description="the basic auth password (the API secret)")


# SchemaRegistrySpec's secret fields -> the SchemaRegistry (streamlets.schema_registry) file fields
REGISTRY_SECRET_FILES = {"ca": "ca_file", "password": "password_file"}


S3A_URI = r"^s3a://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$"
ENDPOINT = r"^https?://[^\s/]+(/.*)?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"  # a key of a Secret's data


class S3ASpec(SpecModel):
    """How to reach the object store of spec.storage.checkpoints (Hadoop's S3A connector)."""

    endpoint: str | None = Field(default=None, description="the S3 API's URL (fs.s3a.endpoint), http:// or https://; "
                                 "unset: AWS's for the region", pattern=ENDPOINT)
    path_style_access: bool | None = Field(default=None, description="the bucket in the path, not the host name "
                                           "(fs.s3a.path.style.access; MinIO and most S3-compatible stores)")
    region: str | None = Field(default=None, description="the signing region (fs.s3a.endpoint.region)", min_length=1,
                               max_length=64)


class StorageSecretRef(SpecModel):
    """The Secret (in the application's namespace) with the object store's credentials; they reach
    the drivers and executors as $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (secretKeyRef), never
    through the resource or the run config."""

    name: str = Field(description="the Secret's name", max_length=253, pattern=DNS_SUBDOMAIN)
    access_key_id_key: str = Field(default="AWS_ACCESS_KEY_ID", description="its key holding the access key id",
                                   max_length=253, pattern=SECRET_KEY)
    secret_access_key_key: str = Field(default="AWS_SECRET_ACCESS_KEY", description="its key holding the secret "
                                       "access key", max_length=253, pattern=SECRET_KEY)


class StorageSpec(SpecModel):
    size: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|[kmu]|[eE][0-9]+)?$")
    storage_class_name: str | None = Field(default=None, max_length=253)
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"] | None = None
    existing_claim: str | None = Field(default=None, description="use this claim instead of creating one", max_length=253,
                                       pattern=DNS_SUBDOMAIN)
    checkpoints: str | None = Field(default=None, description="the state root on an object store, s3a://bucket/prefix: "
                                    "checkpoints, savepoints and state dumps go there and no claim is made (the claim "
                                    "fields above are then refused)", pattern=S3A_URI)
    s3a: S3ASpec | None = Field(default=None, alias="s3a", description="how to reach the object store of "
                                "spec.storage.checkpoints (Hadoop's S3A connector)")
    secret_ref: StorageSecretRef | None = Field(default=None, description="the Secret with the object store's "
                                                "credentials (required with checkpoints)")


class SavepointsSpec(SpecModel):
    directory: str | None = Field(default=None, min_length=1, description="where drivers write savepoints (a path on the "
                                  "checkpoint claim or a Hadoop URI); default /checkpoints/savepoints")
    periodic_seconds: int | None = Field(default=None, ge=0, description="take a savepoint of every streamlet this often "
                                         "(0 or unset means never)")
    max_count: int | None = Field(default=None, ge=1, description="savepoints kept per streamlet (older ones are disposed)")
    max_age_seconds: int | None = Field(default=None, ge=1, description="savepoints older than this are disposed (the newest "
                                        "is always kept)")


class TopicSpec(SpecModel):
    id: str = Field(description="topic id in the blueprint", pattern=TOPIC_NAME)
    name: str = Field(description="Kafka topic name", pattern=TOPIC_NAME)
    partitions: int | None = Field(default=None, ge=1)
    replication_factor: int | None = Field(default=None, ge=1)
    config: dict[str, str] | None = Field(default=None, description="Kafka topic configs, e.g. cleanup.policy")
    managed: bool = Field(default=True, description="created by the operator; false means it must exist")
    schema_registry: bool = Field(default=False, description="values in the schema registry's wire format, schemas "
                                  "under the subject <name>-value (spec.schemaRegistry)")
    producers: list[PortRef] = Field(default_factory=list)
    consumers: list[PortRef] = Field(default_factory=list)


class ApplicationSpec(SpecModel):
    """spec of a StreamletApplication: the application as rendered by `blueprint build`."""

    app_id: str = Field(description="the blueprint's app-id (a DNS label); prefixes topic names and child resources",
                        min_length=1, max_length=63, pattern=DNS_LABEL)
    image: str = Field(min_length=1, description="the image with the application's streamlets (built on "
                       "docker/streamlet.Dockerfile)")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    service_account_name: str | None = Field(default=None, description="service account of the Spark driver pods",
                                             max_length=253, pattern=DNS_SUBDOMAIN)
    kafka: KafkaSpec
    storage: StorageSpec | None = Field(default=None, description="where the state lives: the checkpoint volume (one claim "
                                        "per application) or an object store (checkpoints); unset fields take the "
                                        "operator's defaults")
    upgrade_mode: UpgradeMode = Field(default="last-state", description="what happens to a streamlet's state when its spec "
                                      "changes")
    delete_topics_on_delete: bool = Field(default=False, description="delete the managed topics with the application (never "
                                          "by default)")
    savepoints: SavepointsSpec | None = Field(default=None, description="savepoints taken through the control stream "
                                              "(kubectl streamlets savepoint)")
    dead_letter_topic: str | None = Field(default=None, description="Kafka topic for malformed inlet values (created by the "
                                          "operator)", pattern=TOPIC_NAME)
    schema_registry: SchemaRegistrySpec | None = Field(default=None, description="the schema registry of the "
                                                       "topics with schemaRegistry true")
    streamlets: list[StreamletSpec] = Field(min_length=1)
    topics: list[TopicSpec] | None = None

    def streamlet(self, name: str) -> StreamletSpec | None:
        """The streamlet called `name`, or None."""
        return next((s for s in self.streamlets if s.name == name), None)
