"""The blueprint as data: streamlet instances, topics and the port paths that connect them.

Every entry remembers where it was written (1-based line and column, None when the source has
no positions) so that the loader and the verifier can point at it. Port paths are kept as the
text the user wrote: a malformed one is a verify problem, not a load error.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from streamlets.names import DNS_LABEL_MAX

# Kafka's rule for topic names (kafka.common.internals.Topic).
KAFKA_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
KAFKA_TOPIC_NAME_MAX = 249


def is_kafka_topic_name(name: str) -> bool:
    """True if Kafka accepts `name` as a topic name: [a-zA-Z0-9._-], 1 to 249 characters, not . or .."""
    return (isinstance(name, str) and len(name) <= KAFKA_TOPIC_NAME_MAX
            and bool(KAFKA_TOPIC_NAME.match(name)) and name not in (".", ".."))


def dns_label_from(text: str, fallback: str = "app") -> str:
    """`text` made a DNS label: lowercased, other characters as '-', trimmed to 63 characters."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower())[:DNS_LABEL_MAX].strip("-")
    return label or fallback


class Located(BaseModel):
    """Where an entry starts in the blueprint file (1-based), when known."""

    line: int | None = None
    column: int | None = None


class LoadProblem(Located):
    """A structural problem the loader found and skipped (the verifier reports it as an error)."""

    code: str
    message: str


class PortPath(BaseModel):
    """`streamlet.port`: one port of one streamlet instance."""

    streamlet: str
    port: str

    @classmethod
    def parse(cls, text: str) -> "PortPath":
        """Split `streamlet.port`. Raises ValueError if `text` is not exactly two non-empty parts."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise ValueError(f"{text!r} is not a port path of the form streamlet.port")
        return cls(streamlet=parts[0].strip(), port=parts[1].strip())

    def __str__(self) -> str:
        return f"{self.streamlet}.{self.port}"


class PortRef(Located):
    """One item of a topic's producers or consumers, as written."""

    text: str

    @property
    def path(self) -> PortPath | None:
        """The parsed port path, or None if the text is malformed."""
        try:
            return PortPath.parse(self.text)
        except ValueError:
            return None


class StreamletRef(Located):
    """A streamlet instance: its name in the blueprint and the class path `module.Class`."""

    name: str
    class_name: str


class Topic(Located):
    """A topic: the outlets writing to it and the inlets reading from it, plus Kafka settings."""

    id: str
    producers: list[PortRef] = []
    consumers: list[PortRef] = []
    name: str | None = None
    partitions: int = Field(default=1, ge=1)
    replication_factor: int | None = Field(default=None, ge=1)
    config: dict[str, str] = {}
    managed: bool = True  # created (never deleted) by the sandbox and the operator; False: must exist
    # values in the schema registry's wire format, schemas under `<Kafka topic>-value`
    # (streamlets.schema_registry); False: plain Avro binary, the blueprint's schemas only
    schema_registry: bool = False

    def kafka_name(self, app_id: str) -> str:
        """The Kafka topic name: `name` if given, else `<app id>.<topic id>`."""
        return self.name or f"{app_id}.{self.id}"


class Blueprint(BaseModel):
    """A parsed blueprint file. `path` is the file it was read from (positions refer to it)."""

    app_id: str
    streamlets: dict[str, StreamletRef]
    topics: dict[str, Topic] = {}
    path: Path
    app_id_position: Located = Located()
    load_problems: list[LoadProblem] = []

    @property
    def folder(self) -> Path:
        """The blueprint's folder: streamlet class paths resolve against it."""
        return self.path.resolve().parent
