"""What one running streamlet needs to know: the runner's single input, in every setting.

The sandbox builds it from the blueprint and the local config; the operator renders it into the
Secret the driver pod reads; the test kit builds it for a temporary folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..kafka_security import KafkaConnection, KafkaSecurity
from ..schema_registry import SchemaRegistry, SchemaRegistryError
from ..settings import BY_FIELD, DELIVERY, MAX_OFFSETS_PER_TRIGGER, ON_FAILURE, PROGRESS_TRACKING, TRIGGER, Setting
from .layout import StateLayout

# The driver's Prometheus endpoint (streamlets.runtime.metrics, served by streamlets.driver): the
# port the driver binds unless $STREAMLETS_METRICS_PORT says otherwise, and what the operator
# declares on the driver pod (a named container port and the prometheus.io annotations).
METRICS_PORT_ENV = "STREAMLETS_METRICS_PORT"
METRICS_PORT = 9464
METRICS_PATH = "/metrics"
METRICS_PORT_NAME = "metrics"


def port_setting(name: str, default: int, env: Mapping[str, str] | None = None) -> int | None:
    """A TCP port from the environment variable `name` (`env`, else os.environ), else `default`;
    None when it is 0 or `off` (nothing served). ValueError naming the variable for anything else."""
    text = (os.environ if env is None else env).get(name, "").strip()
    if not text:
        return default
    if text.lower() == "off" or (text.isdigit() and int(text) == 0):
        return None
    if not text.isdigit() or int(text) > 65535:
        raise ValueError(f"{name}={text!r} is no TCP port (1-65535, 0 or off)")
    return int(text)


def metrics_port(env: Mapping[str, str] | None = None) -> int | None:
    """The driver's metrics port: $STREAMLETS_METRICS_PORT, else METRICS_PORT; None when it is
    0 or `off` (no endpoint). ValueError for anything else that is no TCP port."""
    return port_setting(METRICS_PORT_ENV, METRICS_PORT, env)


def scrape_annotations(port: int = METRICS_PORT) -> dict[str, str]:
    """The pod annotations of Prometheus's conventional kubernetes_sd scrape config."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": METRICS_PATH}


def _setting(setting: Setting) -> Any:
    """The run config's field of a streamlet setting (streamlets.settings): its default and doc."""
    return Field(default=setting.default,
                 description=f"{setting.doc}; config streamlets.<name>.{setting.key} (streamlets.settings)")


class StreamletRunConfig(BaseModel):
    """Run settings of one streamlet instance.

    Paths are local paths or URIs Spark understands. `checkpoint_root` holds one directory per
    query: `<checkpoint_root>/<query>` (Spark's `checkpointLocation`).

    Frozen: a changed run is a copy, `run.model_copy(update={...})` (pydantic's ValidationError
    on assignment).
    """

    model_config = ConfigDict(frozen=True)

    app_id: str
    streamlet: str = Field(description="instance name in the blueprint (DNS label)")
    class_name: str = Field(description="module.Class of the Streamlet subclass")
    topics: dict[str, str] = Field(default_factory=dict, description="port name -> Kafka topic name")
    writer_schemas: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="inlet name -> the producer's Avro schema, where it differs from the inlet's")
    bootstrap_servers: str | None = Field(default=None, description="Kafka bootstrap.servers; None: file transport (test kit)")
    kafka_options: dict[str, str] = Field(default_factory=dict, description="extra kafka.* source/sink options")
    kafka_security: KafkaSecurity = Field(default_factory=KafkaSecurity, description="how every Kafka client "
                                          "connects (streamlets.kafka_security): TLS, SASL; secrets by file or "
                                          "environment variable, never their values")
    schema_registry: SchemaRegistry | None = Field(default=None, description="the schema registry of the ports in "
                                                  "`registry_ports` (streamlets.schema_registry): its URL, where its "
                                                  "secrets are, never their values")
    registry_ports: list[str] = Field(default_factory=list, description="ports whose topics carry the schema "
                                      "registry's wire format (blueprint topic `schema-registry: true`)")
    config_parameters: dict[str, Any] = Field(default_factory=dict, description="raw values by key; defaults fill the rest")
    volume_mounts: dict[str, str] = Field(default_factory=dict, description="mount name -> local folder or path")
    checkpoint_root: str
    dead_letter_topic: str | None = Field(default=None, description="topic for malformed inlet values")
    trigger_interval: str | None = Field(default=None, description="Spark processingTime trigger, e.g. '1 second'; None: as fast as possible")
    trigger: str | None = _setting(TRIGGER)
    available_now: bool = Field(default=False, description="process what is there, then stop (Trigger.AvailableNow)")
    max_offsets_per_trigger: str | None = _setting(MAX_OFFSETS_PER_TRIGGER)
    spark_conf: dict[str, str] = Field(default_factory=dict)
    delivery: str = _setting(DELIVERY)
    progress_tracking: str = _setting(PROGRESS_TRACKING)
    savepoint_root: str | None = Field(default=None, description="where savepoints go (a folder or Hadoop URI); "
                                       "None: `savepoints` next to the application's checkpoint folder")
    state_dump_root: str | None = Field(default=None, description="where dump-state commands write; None: `dumps` "
                                        "next to the application's checkpoint folder")
    restore_from: str | None = Field(default=None, description="a savepoint to start from, once: checked "
                                     "(streamlets.state.restore) and copied over the checkpoints at the next start")
    state_partitions: int | None = Field(default=None, ge=1, description="state partitions of the checkpoints "
                                         "(spark.sql.shuffle.partitions, pinned at a query's first batch): checkpoints "
                                         "with another number are repartitioned before the start (streamlets.state.repartition)")
    reset_state_token: str | None = Field(default=None, description="upgrade mode stateless: when it differs from the "
                                          "one recorded, the checkpoints are moved aside and the streamlet starts fresh")
    savepoint_max_count: int | None = Field(default=None, ge=1, description="savepoints kept per streamlet")
    savepoint_max_age_seconds: int | None = Field(default=None, ge=1, description="older savepoints are disposed "
                                                  "(the newest is always kept)")
    initial_state: dict[str, str] = Field(default_factory=dict, description="query name -> a state export "
                                          "(streamlets.state.export) the query folds in: StreamletContext.initial_state")
    on_failure: str | None = _setting(ON_FAILURE)
    dry_run: bool = Field(default=False, description="check against the checkpoint only: every sink is Spark's noop "
                          "sink, one micro-batch (trigger once), no dead letters (the restore check)")

    @field_validator(*BY_FIELD, mode="before")
    @classmethod
    def _setting_value(cls, value: Any, info: ValidationInfo) -> str | None:
        # streamlets.settings: the value in its normal text; ValueError: pydantic's ValidationError names the field
        return None if value is None else BY_FIELD[str(info.field_name)].normal(value)

    def kafka(self) -> KafkaConnection | None:
        """The Kafka cluster of the run with its security; None with the file transport."""
        if not self.bootstrap_servers:
            return None
        return KafkaConnection(bootstrap_servers=self.bootstrap_servers, security=self.kafka_security)

    def registry(self, port: str) -> SchemaRegistry | None:
        """The schema registry of `port`'s topic, or None when the topic is plain Avro. Raises
        SchemaRegistryError when the port is a registry port but no registry is configured."""
        if port not in self.registry_ports:
            return None
        if self.schema_registry is None:
            raise SchemaRegistryError(f"streamlet {self.streamlet!r}, port {port!r}: its topic carries the schema "
                                      "registry's wire format (schema-registry: true) but no schema registry is "
                                      "configured: set schema-registry.url in the config")
        return self.schema_registry

    def checkpoint_location(self, query: str) -> str:
        """The checkpointLocation of query `query`: `<checkpoint_root>/<query>` (a local path or a Hadoop
        URI)."""
        return f"{self.checkpoint_root.rstrip('/')}/{query}"

    def layout(self) -> StateLayout:
        """The state folder around `checkpoint_root` (`<root>/<app>/<streamlet>`, a checkpoint
        claim's layout: streamlets.runtime.layout), where savepoints and dumps go by default."""
        return StateLayout.of_checkpoint_root(self.checkpoint_root)

    def savepoints(self) -> str:
        """`savepoint_root`, else `savepoints` in the state folder around the checkpoints."""
        return self.savepoint_root or self.layout().savepoints

    def state_dumps(self) -> str:
        """`state_dump_root`, else `dumps` in the state folder around the checkpoints."""
        return self.state_dump_root or self.layout().dumps

    @classmethod
    def read(cls, path: str | Path) -> "StreamletRunConfig":
        """The run config in the JSON file `path` (the driver's run.json). Raises OSError if it cannot be
        read, pydantic's ValidationError if it is not a valid run config."""
        return cls.model_validate_json(Path(path).read_text())
