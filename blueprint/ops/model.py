"""What the operations API returns and takes: pydantic models, the one home of its JSON shapes
(the OpenAPI document's schemas are generated from them, blueprint.ops.openapi)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ApplicationSummary(BaseModel):
    """One application, as listed."""

    namespace: str = Field(description="Kubernetes namespace; `local` in the sandbox")
    name: str = Field(description="the StreamletApplication's name (the sandbox: the app id)")
    app_id: str
    phase: str = Field(description="Pending, Deploying, Running, Degraded, Failed (the operator's status.phase); "
                       "the sandbox: Running")
    ready: str = Field(description='streamlets running of all, e.g. "4/5"')


class AutoscalingView(BaseModel):
    """A streamlet's autoscaler (the operator's status.streamlets.<name>.autoscaling)."""

    mode: str = Field(description="passive (decisions reported) or active (applied)")
    target_executors: int | None = Field(default=None, description="executors the last decision asks for")
    direction: str | None = Field(default=None, description="up, down or none")
    held: str | None = Field(default=None, description="why a change the load asks for is not made (stabilizing, "
                             "collecting, backlog, scale-down-delay, at-max, at-min, partition-cap, alignment)")
    reason: str | None = Field(default=None, description="the decision with its figures, or why there is none")
    last_scaled: str | None = Field(default=None, description="the last change applied, e.g. 1 -> 3")
    last_scaled_at: str | None = None


class StreamletView(BaseModel):
    """A streamlet of a running application with its live figures (None: not known yet, e.g. no
    micro-batch or no metrics endpoint reached)."""

    name: str
    class_name: str
    status: str = Field(description="running, starting, restarting (failed, a restart is due), stopped, failed, "
                        "unknown (metrics unreachable)")
    inlets: dict[str, str] = Field(default_factory=dict, description="inlet name -> Kafka topic")
    outlets: dict[str, str] = Field(default_factory=dict, description="outlet name -> Kafka topic")
    queries: int = 0
    records_in: int | None = Field(default=None, description="records read since the streamlet's process started")
    records_out: int | None = Field(default=None, description="records written since the streamlet's process started")
    input_rate: float | None = Field(default=None, description="records per second arriving (Spark's inputRowsPerSecond)")
    processed_rate: float | None = Field(
        default=None, description="records per second processed by its last micro-batch that read records "
                                  "(processedRowsPerSecond)")
    batch_duration_seconds: float | None = Field(default=None, description="the last micro-batch's duration, longest query")
    watermark: float | None = Field(default=None, description="event-time watermark, Unix seconds (the earliest query's)")
    state_rows: int | None = None
    state_memory_bytes: int | None = None
    malformed: int | None = Field(default=None, description="values sent to the dead-letter topic")
    restarts: int | None = None
    quarantined: int | None = None
    lag: int | None = Field(default=None, description="records of its inlets' topics not yet processed")
    executors: int | None = Field(default=None, description="executors its driver runs (streamlets_executors)")
    autoscaling: AutoscalingView | None = Field(default=None, description="its autoscaler, when on")
    metrics_error: str | None = Field(default=None, description="why live figures are missing")


class TopicView(BaseModel):
    """A topic of the application: an edge of the graph, with its rate and each consumer's lag."""

    id: str = Field(description="the topic id in the blueprint")
    name: str = Field(description="the Kafka topic name")
    producers: list[str] = Field(default_factory=list, description="streamlet.outlet")
    consumers: list[str] = Field(default_factory=list, description="streamlet.inlet")
    end_offset: int | None = Field(default=None, description="records written (sum of partitions' last stable offsets)")
    rate: float | None = Field(default=None, description="records per second written, between the last two looks")
    lag: dict[str, int] = Field(default_factory=dict, description="consumer (streamlet.inlet) -> records not yet processed")


class ApplicationView(ApplicationSummary):
    """An application: its graph (streamlets and topics) with live figures."""

    streamlets: list[StreamletView] = Field(default_factory=list)
    topics: list[TopicView] = Field(default_factory=list)
    dead_letter_topic: str | None = None
    dead_letters: int | None = Field(default=None, description="records on the dead-letter topic")


class DeadLetterView(BaseModel):
    """A dead letter's metadata (never its payload): where the value came from and why it failed."""

    streamlet: str
    inlet: str
    topic: str
    partition: int
    offset: int
    timestamp: float | None = Field(default=None, description="the value's Kafka timestamp, Unix seconds")
    error: str
    value_bytes: int = Field(description="size of the raw value, bytes")


class SavepointView(BaseModel):
    streamlet: str
    name: str
    location: str
    batch_ids: dict[str, int | None] = Field(default_factory=dict, description="query -> last committed batch id "
                                             "(null: the query had committed none when the savepoint was taken)")
    time: str = Field(description="ISO 8601, UTC")
    reason: str | None = None


class CommandRequest(BaseModel):
    """A control command (streamlets.runtime.control): ping, savepoint, dump-state, reload-config, stop."""

    command: str
    target: str | None = Field(default=None, description="a streamlet; None: every streamlet")
    args: dict[str, str] = Field(default_factory=dict)


class SavepointRequest(BaseModel):
    streamlet: str | None = Field(default=None, description="a streamlet; None: every streamlet")
    reason: str = "api"


class CommandResultView(BaseModel):
    id: str
    command: str
    streamlet: str
    status: str = Field(description="ok, error, no-answer")
    message: str = ""
    location: str = Field(default="", description="a savepoint's or dump's location")


class ErrorBody(BaseModel):
    error: str
    status: int


Verb = Literal["list", "get", "patch"]


def batch_ids_text(ids: dict[str, int | None]) -> str:
    """`out=12, other=none`: a savepoint's batch ids (SavepointView.batch_ids) as the web view, the
    sandbox and the CLI show them; none: the query had committed no batch."""
    return ", ".join(f"{q}={'none' if b is None else b}" for q, b in sorted(ids.items()))
