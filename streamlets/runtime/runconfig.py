"""What one running streamlet needs to know: the runner's single input, in every setting.

The sandbox builds it from the blueprint and the local config; the operator renders it into the
Secret the driver pod reads; the test kit builds it for a temporary folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class StreamletRunConfig(BaseModel):
    """Run settings of one streamlet instance.

    Paths are local paths or URIs Spark understands. `checkpoint_root` holds one directory per
    query: `<checkpoint_root>/<query>` (Spark's `checkpointLocation`).
    """

    app_id: str
    streamlet: str = Field(description="instance name in the blueprint (DNS label)")
    class_name: str = Field(description="module.Class of the Streamlet subclass")
    topics: dict[str, str] = Field(default_factory=dict, description="port name -> Kafka topic name")
    writer_schemas: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="inlet name -> the producer's Avro schema, where it differs from the inlet's")
    bootstrap_servers: str | None = Field(default=None, description="Kafka bootstrap.servers; None: file transport (test kit)")
    kafka_options: dict[str, str] = Field(default_factory=dict, description="extra kafka.* source/sink options")
    config_parameters: dict[str, Any] = Field(default_factory=dict, description="raw values by key; defaults fill the rest")
    volume_mounts: dict[str, str] = Field(default_factory=dict, description="mount name -> local folder or path")
    checkpoint_root: str
    dead_letter_topic: str | None = Field(default=None, description="topic for malformed inlet values")
    trigger_interval: str | None = Field(default=None, description="Spark processingTime trigger, e.g. '1 second'; None: as fast as possible")
    available_now: bool = Field(default=False, description="process what is there, then stop (Trigger.AvailableNow)")
    max_offsets_per_trigger: int | None = Field(default=None, description="Kafka source maxOffsetsPerTrigger (records per micro-batch)")
    spark_conf: dict[str, str] = Field(default_factory=dict)
    delivery: Literal["exactly-once", "at-least-once"] = Field(
        default="exactly-once", description="Kafka outlets: exactly-once (one Kafka transaction per micro-batch, "
        "streamlets.runtime.exactly_once) or at-least-once (Spark's Kafka sink); config streamlets.<name>.delivery")
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
    on_failure: str | None = Field(default=None, pattern="^(stop|quarantine)$", description="a failed query: 'stop' "
                                   "(the failure stands), 'quarantine' (streamlets.runtime.quarantine: the poison records go to "
                                   "the dead-letter topic and are skipped); None: the class's on_failure, else stop")
    dry_run: bool = Field(default=False, description="check against the checkpoint only: every sink is Spark's noop "
                          "sink, one micro-batch (trigger once), no dead letters (the restore check)")

    def checkpoint_location(self, query: str) -> str:
        return f"{self.checkpoint_root.rstrip('/')}/{query}"

    def _beside_checkpoints(self, name: str) -> str:
        # checkpoint_root is <root>/<app>/<streamlet>; savepoints and dumps go to <root>/<name>
        return f"{self.checkpoint_root.rstrip('/').rsplit('/', 2)[0]}/{name}"

    def savepoints(self) -> str:
        return self.savepoint_root or self._beside_checkpoints("savepoints")

    def state_dumps(self) -> str:
        return self.state_dump_root or self._beside_checkpoints("dumps")

    @classmethod
    def read(cls, path: str | Path) -> "StreamletRunConfig":
        return cls.model_validate_json(Path(path).read_text())
