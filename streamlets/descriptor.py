"""A streamlet's metadata as data: what verify, the sandbox and the operator read from a class.

Built without starting Spark (see Streamlet.descriptor()); serialisable as JSON for the
application resource.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class InletDescriptor(BaseModel):
    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    schema_name: str
    fingerprint: str
    error_handling: str = "dead-letter"
    description: str = ""

    model_config = {"populate_by_name": True}


class OutletDescriptor(BaseModel):
    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    schema_name: str
    fingerprint: str
    key: list[str] = []
    description: str = ""

    model_config = {"populate_by_name": True}


class ParameterDescriptor(BaseModel):
    key: str
    type: str
    description: str = ""
    default: Any = None
    pattern: str | None = None


class VolumeMountDescriptor(BaseModel):
    name: str
    path: str
    access_mode: str


class StreamletDescriptor(BaseModel):
    """Shape (inlets, outlets), config parameters and volume mounts of a streamlet class."""

    class_name: str
    runtime: str = "spark"
    description: str = ""
    inlets: list[InletDescriptor] = []
    outlets: list[OutletDescriptor] = []
    config_parameters: list[ParameterDescriptor] = []
    volume_mounts: list[VolumeMountDescriptor] = []
    trigger: str | None = None  # text form of streamlets.trigger.Trigger; None: micro-batch

    def inlet(self, name: str) -> InletDescriptor | None:
        """The inlet named `name`, or None."""
        return next((p for p in self.inlets if p.name == name), None)

    def outlet(self, name: str) -> OutletDescriptor | None:
        """The outlet named `name`, or None."""
        return next((p for p in self.outlets if p.name == name), None)
