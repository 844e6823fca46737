"""The run config file of the sandbox: per-streamlet config-parameter values, volume-mount
folders and Spark settings, in HOCON (Cloudflow's format), YAML or JSON.

    streamlets {
      stats.config-parameters.watermark-delay = "2 hours"
      flights.volume-mounts.source = "data/flights"     # relative to this file's folder
      stats.spark { spark.sql.shuffle.partitions = 2 }
    }

Command-line `key=value` pairs (`streamlets.stats.config-parameters.watermark-delay=1h`) come
on top. Values are checked against the streamlets' declarations before anything starts.
"""

from __future__ import annotations


from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import BlueprintError
from ..scopes import (CONFIG_PARAMETERS, DEPLOY_ONLY_TOP_LEVEL, KUBERNETES, STREAMLETS, VOLUME_MOUNTS, parse_scope, setting_value,
                      spark_text)
from ..scopes import STREAMLET_SECTIONS as SECTIONS

# Deploy-time scopes a shared config file may carry (DEPLOY_ONLY_TOP_LEVEL); the sandbox applies
# runtimes.spark.config to every streamlet and leaves the rest (pods, topic sizes, the Kafka
# cluster) to the operator.


class LocalConfigError(BlueprintError, ValueError):
    """The run config file or a key=value override is malformed or names something unknown."""


@dataclass
class StreamletSettings:
    config_parameters: dict[str, Any] = field(default_factory=dict)
    volume_mounts: dict[str, str] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    on_failure: str | None = None  # streamlets.<name>.on-failure: stop | quarantine (streamlets.runtime.quarantine)
    delivery: str | None = None  # streamlets.<name>.delivery: exactly-once (default) or at-least-once
    trigger: str | None = None  # streamlets.<name>.trigger (streamlets.trigger text form)
    progress_tracking: str | None = None  # streamlets.<name>.progress-tracking: sync (default) or async [<interval>]


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise LocalConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            from pyhocon import HOCONConverter
            import json

            from .. import hocon

            # Through JSON so that the result is plain dicts (pyhocon's ConfigTree keeps dotted keys apart).
            data = json.loads(HOCONConverter.to_json(hocon.parse(text)))
    except Exception as e:  # parser errors carry line numbers in their text
        raise LocalConfigError(f"{path}: not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'HOCON'}: {e}") from None
    if not isinstance(data, dict):
        raise LocalConfigError(f"{path}: the top level must be a map with a 'streamlets' section")
    return data


def _flatten(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix, value


def parse_override(text: str) -> tuple[str, str]:
    """`streamlets.<name>.<section>.<key>=value` from the command line."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise LocalConfigError(f"{text!r}: overrides are key=value, e.g. streamlets.stats.config-parameters.window=1h")
    return key.strip(), value.strip()


def load_settings(
    config_file: Path | None,
    overrides: Iterable[str],
    streamlets: Iterable[str],
) -> dict[str, StreamletSettings]:
    """Settings per streamlet instance from the file and the overrides (overrides win).

    Relative volume-mount folders resolve against the config file's folder (the current folder
    for overrides). Raises LocalConfigError naming the file and key for unknown streamlets,
    unknown sections and malformed text.
    """
    names = set(streamlets)
    settings = {n: StreamletSettings() for n in names}
    sources: list[tuple[str, Path, list[tuple[str, Any]]]] = []
    if config_file is not None:
        data = _read(config_file)
        unknown_top = sorted(set(data) - {STREAMLETS, *DEPLOY_ONLY_TOP_LEVEL})
        if unknown_top:
            raise LocalConfigError(f"{config_file}: unknown top-level key(s) {', '.join(unknown_top)}; expected "
                                   f"'streamlets' (or {', '.join(DEPLOY_ONLY_TOP_LEVEL)})")
        runtime_spark = (((data.get("runtimes") or {}).get("spark") or {}).get("config") or {})
        pairs = [(f"streamlets.{n}.spark.{k}", v) for n in sorted(names) for k, v in _flatten("", runtime_spark)]
        sources.append((str(config_file), config_file.parent,
                        pairs + list(_flatten("streamlets", data.get("streamlets") or {}))))
    sources.append(("command line", Path.cwd(), [parse_override(o) for o in overrides]))
    for where, base, pairs in sources:
        for key, value in pairs:
            scope = parse_scope(key.split("."))
            if scope.is_streamlet_setting() and scope.owner in names:
                setting = str(scope.section)
                try:
                    text = setting_value(setting, value)
                except ValueError as e:
                    raise LocalConfigError(f"{where}: {key!r}: {e}") from None
                setattr(settings[str(scope.owner)], setting.replace("-", "_"), text)
                continue
            if not scope.is_streamlet():
                raise LocalConfigError(f"{where}: {key!r} is not of the form streamlets.<name>.<section>.<key>")
            name, section, item = scope.owner, scope.section, scope.item
            if name not in names:
                raise LocalConfigError(f"{where}: {key!r}: the blueprint has no streamlet {name!r} (it has {', '.join(sorted(names))})")
            if section not in SECTIONS:
                raise LocalConfigError(f"{where}: {key!r}: unknown section {section!r}; use one of {', '.join(SECTIONS)}")
            target = settings[name]
            if section == CONFIG_PARAMETERS:
                target.config_parameters[item] = value
            elif section == KUBERNETES:
                continue  # pod resources: the operator's, not the sandbox's
            elif section == VOLUME_MOUNTS:
                target.volume_mounts[item] = str((base / str(value)).resolve())
            else:
                target.spark[item] = spark_text(value)
    return settings
