"""The run config of the sandbox: per-streamlet config-parameter values, volume-mount folders,
Spark settings and the single settings of streamlets.settings, from a config file in HOCON
(Cloudflow's format), YAML or JSON and command-line `key=value` pairs on top.

    streamlets {
      stats.config-parameters.watermark-delay = "2 hours"
      flights.volume-mounts.source = "data/flights"     # relative to this file's folder
      stats.spark { spark.sql.shuffle.partitions = 2 }
      stats.delivery = at-least-once
    }
    storage.checkpoints = "s3a://bucket/prefix"    # the state root on S3 (streamlets.runtime.object_store)

The file and the pairs are read by blueprint.configcheck (config_entries) and checked there
against the streamlets' declarations (check_config) before anything starts; `settings_from_entries`
sorts the checked entries per streamlet. `load_settings` reads and sorts for callers without a
resolved blueprint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from streamlets.runtime.object_store import PATH_KEYS, ObjectStore, StorageConfigError, object_store
from streamlets.settings import BY_FIELD, SETTINGS

from ..configcheck import COMMAND_LINE, ConfigReadError, Entry, config_entries
from ..errors import BlueprintError
from ..loader import HOCON_SUFFIXES
from ..scopes import (AUTOSCALING, CONFIG_PARAMETERS, DEPLOY_ONLY_TOP_LEVEL, KUBERNETES, RUNTIMES, SCHEMA_REGISTRY, STORAGE, STREAMLETS,
                      VOLUME_MOUNTS, parse_scope, setting_value, spark_text)
from ..scopes import STREAMLET_SECTIONS as SECTIONS

# Deploy-time scopes a shared config file may carry (DEPLOY_ONLY_TOP_LEVEL); the sandbox applies
# runtimes.spark.config to every streamlet and leaves the rest (pods, topic sizes, the Kafka
# cluster) to the operator.


class LocalConfigError(BlueprintError, ValueError):
    """The run config file or a key=value override is malformed or names something unknown."""


@dataclass(init=False)
class StreamletSettings:
    """One streamlet's run settings. `settings`: its single settings (streamlets.settings) that
    are set, by run config field (`progress_tracking`), in their normal text; each is also an
    attribute (`.delivery`), None when unset (the run config's default applies)."""

    config_parameters: dict[str, Any] = field(default_factory=dict)
    volume_mounts: dict[str, str] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)

    def __init__(self, config_parameters: dict[str, Any] | None = None, volume_mounts: dict[str, str] | None = None,
                 spark: dict[str, str] | None = None, **settings: str | None) -> None:
        unknown = sorted(set(settings) - set(BY_FIELD))
        if unknown:
            raise TypeError(f"no streamlet setting {', '.join(unknown)} (streamlets.settings: {', '.join(BY_FIELD)})")
        self.config_parameters = dict(config_parameters or {})
        self.volume_mounts = dict(volume_mounts or {})
        self.spark = dict(spark or {})
        self.settings = {k: BY_FIELD[k].normal(v) for k, v in settings.items() if v is not None}

    def __getattr__(self, name: str) -> str | None:
        if name in BY_FIELD:
            return self.__dict__.get("settings", {}).get(name)
        raise AttributeError(name)


def settings_from_entries(entries: Iterable[Entry], streamlets: Iterable[str]) -> dict[str, StreamletSettings]:
    """Settings per streamlet instance from config entries in the order given (a later entry for
    a key wins), as blueprint.configcheck read and checked them: keys the sandbox does not act on
    (pods, topics, Kafka) are left out. Relative volume-mount folders resolve against the folder
    of the entry's config file (the current folder for command-line entries)."""
    settings = {n: StreamletSettings() for n in streamlets}
    runtime_spark: dict[str, str] = {}
    for e in entries:
        scope = parse_scope(e.parts)
        if scope.top == RUNTIMES and scope.is_runtime("config"):
            runtime_spark[scope.item] = spark_text(e.value)
            continue
        if scope.top != STREAMLETS or scope.owner not in settings:
            continue
        target = settings[str(scope.owner)]
        if scope.is_streamlet_setting():
            setting = SETTINGS[str(scope.section)]
            target.settings[setting.field] = setting.normal(e.value)
        elif scope.section == CONFIG_PARAMETERS:
            target.config_parameters[scope.item] = e.value
        elif scope.section == VOLUME_MOUNTS:
            base = Path.cwd() if e.source == COMMAND_LINE else Path(e.source).parent
            target.volume_mounts[scope.item] = str((base / str(e.value)).resolve())
        elif scope.section not in (KUBERNETES, AUTOSCALING):  # pods and their count: the operator's, not the sandbox's
            target.spark[scope.item] = spark_text(e.value)
    for s in settings.values():  # a streamlet's own Spark settings win over runtimes.spark.config
        s.spark = {**runtime_spark, **s.spark}
    return settings


def storage_from_entries(entries: Iterable[Entry]) -> ObjectStore | None:
    """The state root's object store from the `storage.*` entries (a later entry for a key wins),
    None when there are none (the state folder holds everything). A relative local root or
    credentials file resolves against its entry's config file's folder (the current folder for the
    command line). Raises LocalConfigError naming the file and key for a bad setting
    (streamlets.runtime.object_store)."""
    values: dict[str, Any] = {}
    where = COMMAND_LINE
    for e in entries:
        if e.parts[0] != STORAGE or e.source == COMMAND_LINE and len(e.parts) < 2:
            continue
        key = ".".join(e.parts[1:])
        value = e.value
        if key in PATH_KEYS and "://" not in str(value):
            base = Path.cwd() if e.source == COMMAND_LINE else Path(e.source).parent
            value = str((base / Path(str(value)).expanduser()).resolve())
        values[key], where = value, e.source
    try:
        return object_store(values)
    except StorageConfigError as err:
        raise LocalConfigError(f"{where}: {err}") from None


def load_settings(config_file: Path | None, overrides: Iterable[str], streamlets: Iterable[str]) -> dict[str, StreamletSettings]:
    """Settings per streamlet instance from the file and the overrides (overrides win), read by
    blueprint.configcheck.config_entries, for callers without a resolved blueprint to check them
    against (blueprint.configcheck.check_config does that fully).

    Raises LocalConfigError naming the file (or the command line) and key for an unreadable or
    malformed file, malformed overrides, unknown top-level keys and streamlets, unknown sections
    and bad setting values.
    """
    names = sorted(set(streamlets))
    try:
        entries, problems = config_entries([config_file] if config_file is not None else [], overrides)
    except ConfigReadError as err:
        raise LocalConfigError(str(err).replace(": cannot read config:", ": cannot read:")) from None
    for p in problems:
        if p.file == COMMAND_LINE:
            raise LocalConfigError(f"{p.message}: overrides are key=value, e.g. streamlets.stats.config-parameters.window=1h")
        kind = "HOCON" if Path(p.file).suffix in HOCON_SUFFIXES else "YAML"
        what = "the top level must be a map with a 'streamlets' section" if "must be a mapping" in p.message \
            else f"not valid {kind}: {p.message}" + (f" (line {p.line})" if p.line else "")
        raise LocalConfigError(f"{p.file}: {what}")
    unknown_top = sorted({e.parts[0] for e in entries
                          if e.source != COMMAND_LINE and e.parts[0] not in (STREAMLETS, STORAGE, SCHEMA_REGISTRY, *DEPLOY_ONLY_TOP_LEVEL)})
    if unknown_top:
        raise LocalConfigError(f"{config_file}: unknown top-level key(s) {', '.join(unknown_top)}; expected "
                               f"'streamlets' (or {', '.join((STORAGE, SCHEMA_REGISTRY, *DEPLOY_ONLY_TOP_LEVEL))})")
    for e in entries:
        scope = parse_scope(e.parts)
        if scope.top != STREAMLETS and e.source != COMMAND_LINE or scope.top in (STORAGE, SCHEMA_REGISTRY):
            continue  # storage: storage_from_entries; schema-registry: configcheck.schema_registry
        where = f"{e.source}: {e.key!r}"
        if scope.owner is not None and scope.owner not in names and (scope.is_streamlet() or scope.is_streamlet_setting()):
            raise LocalConfigError(f"{where}: the blueprint has no streamlet {scope.owner!r} (it has {', '.join(names)})")
        if scope.is_streamlet_setting():
            try:
                setting_value(str(scope.section), e.value)
            except ValueError as err:
                raise LocalConfigError(f"{where}: {err}") from None
        elif not scope.is_streamlet():
            raise LocalConfigError(f"{where} is not of the form streamlets.<name>.<section>.<key>")
        elif scope.section not in SECTIONS:
            raise LocalConfigError(f"{where}: unknown section {scope.section!r}; use one of {', '.join(SECTIONS)}")
    return settings_from_entries(entries, names)


def load_storage(config_file: Path | None, overrides: Iterable[str]) -> ObjectStore | None:
    """The state root's object store of the file and the overrides (storage_from_entries), for
    callers without checked entries; LocalConfigError as load_settings."""
    try:
        entries, _ = config_entries([config_file] if config_file is not None else [], overrides)
    except ConfigReadError as err:
        raise LocalConfigError(str(err).replace(": cannot read config:", ": cannot read:")) from None
    return storage_from_entries(entries)
