"""The Streamlet base class: declared ports, parameters and mounts, checked at class definition."""

from __future__ import annotations

import inspect
import re
from typing import Any, ClassVar, Iterable

from .descriptor import (
    InletDescriptor,
    OutletDescriptor,
    ParameterDescriptor,
    StreamletDescriptor,
    VolumeMountDescriptor,
)
from .errors import ConfigError, DefinitionProblem, StreamletDefinitionError
from .logic import LogicContext
from .names import is_config_key, is_dns_label
from .params import ConfigParameter
from .ports import ERROR_HANDLING, AvroInlet, AvroOutlet, Port
from .schema import SchemaError
from .settings import ON_FAILURE, STOP
from .trigger import Trigger, TriggerError
from .volumes import ACCESS_MODES, VolumeMount

class StreamletShape:
    """The inlets and outlets of a streamlet, in declaration order."""

    def __init__(self, inlets: Iterable[AvroInlet], outlets: Iterable[AvroOutlet]) -> None:
        self.inlets = tuple(inlets)
        self.outlets = tuple(outlets)

    def inlet(self, name: str) -> AvroInlet | None:
        """The inlet named `name`, or None."""
        return next((p for p in self.inlets if p.name == name), None)

    def outlet(self, name: str) -> AvroOutlet | None:
        """The outlet named `name`, or None."""
        return next((p for p in self.outlets if p.name == name), None)

    def __repr__(self) -> str:
        return f"StreamletShape(inlets={[p.name for p in self.inlets]}, outlets={[p.name for p in self.outlets]})"


def _declared(cls: type, kind: type) -> list[Any]:
    """Class attributes of `kind`, base classes first, in declaration order; overrides win."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            if isinstance(value, kind):
                found[attr] = value
    return list(found.values())


class Streamlet:
    """Base class of Spark streamlets.

    Declare ports, parameters and mounts as class attributes and build the streaming queries in
    `create_logic`::

        class Doubler(Streamlet):
            "Doubles every value."
            inlet = AvroInlet("in", "value.avsc")
            outlet = AvroOutlet("out", "value.avsc", key="id")
            factor = IntegerParameter("factor", "multiplier", default=2)

            def create_logic(self, ctx):
                df = ctx.read_stream(self.inlet)
                ctx.write_stream(df.withColumn("v", df.v * ctx.config[self.factor]), self.outlet)

    The class is checked when it is defined (StreamletDefinitionError names the streamlet and the
    part at fault). Streamlets hold no state of their own: the runtime may instantiate a class
    only to read its metadata.
    """

    runtime: ClassVar[str] = "spark"
    # What a failed query does: "stop" (the failure stands) or "quarantine" (streamlets.runtime.quarantine:
    # records that make the logic fail go to the dead-letter topic and are skipped). The deploy
    # config's streamlets.<name>.on-failure wins.
    on_failure: ClassVar[str] = STOP
    # How the streamlet's queries are triggered (streamlets.trigger.Trigger); the deploy config's
    # streamlets.<name>.trigger overrides it. Trigger.real_time("5 seconds") asks for Real-Time Mode.
    trigger: ClassVar["Trigger | None"] = None
    __shape__: ClassVar[StreamletShape]
    __parameters__: ClassVar[tuple[ConfigParameter, ...]]
    __volume_mounts__: ClassVar[tuple[VolumeMount, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        problems = _check_class(cls)
        if problems:
            raise StreamletDefinitionError(f"{cls.__module__}.{cls.__qualname__}", problems)

    # --- metadata, available without Spark ------------------------------------------------

    @classmethod
    def class_name(cls) -> str:
        """`module.QualifiedName`: what a blueprint names the class by."""
        return f"{cls.__module__}.{cls.__qualname__}"

    @classmethod
    def shape(cls) -> StreamletShape:
        """The declared inlets and outlets (StreamletShape), in declaration order, base classes first."""
        return cls.__shape__

    @classmethod
    def config_parameters(cls) -> tuple[ConfigParameter, ...]:
        """The declared config parameters, in declaration order, base classes first (defaults already parsed)."""
        return cls.__parameters__

    @classmethod
    def volume_mounts(cls) -> tuple[VolumeMount, ...]:
        """The declared volume mounts, in declaration order, base classes first."""
        return cls.__volume_mounts__

    @classmethod
    def is_abstract(cls) -> bool:
        """True if the class does not implement create_logic (a base for other streamlets)."""
        return cls.create_logic is Streamlet.create_logic

    @classmethod
    def descriptor(cls) -> StreamletDescriptor:
        """The streamlet's metadata: shape with schemas, config parameters and volume mounts."""
        shape = cls.shape()
        return StreamletDescriptor(
            class_name=cls.class_name(),
            runtime=cls.runtime,
            description=inspect.cleandoc(cls.__doc__ or ""),
            inlets=[
                InletDescriptor(name=p.name, schema=p.schema.schema, schema_name=p.schema.name,
                                fingerprint=p.schema.fingerprint, error_handling=p.error_handling,
                                description=p.description)
                for p in shape.inlets
            ],
            outlets=[
                OutletDescriptor(name=p.name, schema=p.schema.schema, schema_name=p.schema.name,
                                 fingerprint=p.schema.fingerprint, key=list(p.key), description=p.description)
                for p in shape.outlets
            ],
            config_parameters=[
                ParameterDescriptor(key=p.key, type=p.type_name, description=p.description,
                                    default=_plain(p.default), pattern=p.pattern)
                for p in cls.config_parameters()
            ],
            volume_mounts=[
                VolumeMountDescriptor(name=m.name, path=m.path, access_mode=m.access_mode)
                for m in cls.volume_mounts()
            ],
            trigger=cls.trigger.text() if isinstance(cls.trigger, Trigger) else None,
        )

    # --- logic ----------------------------------------------------------------------------

    def create_logic(self, ctx: LogicContext) -> None:
        """Build and start the streamlet's streaming queries with `ctx.read_stream`,
        `ctx.write_stream` and `ctx.start_query`. Called once per run, on the Spark driver, with
        the runtime's StreamletContext (streamlets.runtime.context), which satisfies the SDK
        protocol LogicContext (streamlets.logic). NotImplementedError here: an abstract base."""
        raise NotImplementedError(f"{self.class_name()} does not implement create_logic(ctx)")


def _plain(value: Any) -> Any:
    """Defaults as JSON-friendly values (durations as text) for descriptors."""
    from datetime import timedelta

    if isinstance(value, timedelta):
        micros = value // timedelta(microseconds=1)  # exact: no float on the way
        return f"{micros // 1000}ms" if micros % 1000 == 0 else f"{micros}us"
    return value


def _check_class(cls: type[Streamlet]) -> list[DefinitionProblem]:
    """Every problem of the class's declarations; also resolves and caches the port schemas.

    The codes are the verifier's problem codes (see blueprint.verify).
    """
    problems: list[DefinitionProblem] = []
    add = lambda code, message: problems.append(DefinitionProblem(code, message))  # noqa: E731
    ports: list[Port] = _declared(cls, Port)
    inlets = [p for p in ports if isinstance(p, AvroInlet)]
    outlets = [p for p in ports if isinstance(p, AvroOutlet)]
    seen: set[str] = set()
    if getattr(cls, "on_failure", STOP) not in ON_FAILURE.values:
        add("invalid-on-failure", f"on_failure must be {' or '.join(map(repr, ON_FAILURE.values))}, not {cls.on_failure!r}")
    for port in ports:
        label = f"{port.role} {port.name!r}"
        if not is_dns_label(port.name):
            add("invalid-port-name", f"{label}: port names must be DNS labels (lowercase letters, digits, '-'; at most 63)")
        if port.name in seen:
            add("duplicate-port-name", f"{label}: another port has the same name")
        seen.add(port.name)
        if isinstance(port, AvroInlet) and port.error_handling not in ERROR_HANDLING:
            add("invalid-error-handling",
                f"{label}: error_handling must be one of {', '.join(ERROR_HANDLING)}, not {port.error_handling!r}")
        try:
            schema = port.resolve(cls)
        except SchemaError as e:
            add("invalid-schema", f"{label}: {e}")
            continue
        if isinstance(port, AvroOutlet):
            for k in port.key:
                if schema.field(k) is None:
                    add("invalid-partition-key", f"{label}: partition key field {k!r} is not a field of {schema.name} "
                                                 f"(fields: {', '.join(schema.field_names)})")
    cls.__shape__ = StreamletShape(inlets, outlets)

    params: list[ConfigParameter] = _declared(cls, ConfigParameter)
    keys: set[str] = set()
    for p in params:
        if not is_config_key(p.key):
            add("invalid-config-key", f"config parameter {p.key!r}: keys are letters, digits, '-', '_' and '.'")
        if p.key in keys:
            add("duplicate-config-key", f"config parameter {p.key!r}: declared twice")
        keys.add(p.key)
        pattern_error = getattr(p, "pattern_error", None)
        if pattern_error:
            add("invalid-validation-pattern", f"config parameter {p.key!r}: {pattern_error}")
        elif p.default is not None:
            try:
                p.default = p.parse(p.default)
            except ConfigError as e:
                add("invalid-default", f"default of {e}")
    cls.__parameters__ = tuple(params)

    mounts: list[VolumeMount] = _declared(cls, VolumeMount)
    names: set[str] = set()
    paths: set[str] = set()
    for m in mounts:
        label = f"volume mount {m.name!r}"
        if not is_dns_label(m.name):
            add("invalid-volume-name", f"{label}: names must be DNS labels (lowercase letters, digits, '-')")
        if m.name in names:
            add("duplicate-volume-name", f"{label}: declared twice")
        path_error = _volume_path_error(m.path)
        if path_error:
            add("invalid-volume-path", f"{label}: {path_error}")
        elif m.path in paths:
            add("duplicate-volume-path", f"{label}: path {m.path!r} is used by another mount")
        if m.access_mode not in ACCESS_MODES:
            add("invalid-access-mode", f"{label}: access mode must be one of {', '.join(ACCESS_MODES)}")
        names.add(m.name)
        paths.add(m.path)
    cls.__volume_mounts__ = tuple(mounts)
    declared = vars(cls).get("trigger")
    if declared is not None and not isinstance(declared, Trigger):
        try:
            cls.trigger = Trigger.parse(declared)
        except TriggerError as e:
            add("invalid-trigger", f"trigger: {e}")
    return problems


def _volume_path_error(path: object) -> str | None:
    """Why `path` cannot be a container mount path, or None (Kubernetes wants absolute paths)."""
    if not isinstance(path, str) or not path.strip():
        return "the path is empty"
    if not path.startswith("/"):
        return f"path {path!r} is relative; mount paths must be absolute"
    if ".." in re.split(r"/+", path):
        return f"path {path!r} contains '..'"
    return None


Streamlet.__shape__ = StreamletShape((), ())
Streamlet.__parameters__ = ()
Streamlet.__volume_mounts__ = ()
