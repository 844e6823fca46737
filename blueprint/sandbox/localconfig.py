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

SECTIONS = ("config-parameters", "volume-mounts", "spark", "kubernetes")
# Deploy-time scopes a shared config file may carry; the sandbox applies runtimes.spark.config to
# every streamlet and leaves the rest (pods, topic sizes, the Kafka cluster) to the operator.
DEPLOY_ONLY_TOP_LEVEL = ("runtimes", "topics", "kafka")


class LocalConfigError(ValueError):
    """The run config file or a key=value override is malformed or names something unknown."""


@dataclass
class StreamletSettings:
    config_parameters: dict[str, Any] = field(default_factory=dict)
    volume_mounts: dict[str, str] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    trigger: str | None = None  # streamlets.<name>.trigger (streamlets.trigger text form)


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
            from pyhocon import ConfigFactory, HOCONConverter
            import json

            # Through JSON so that the result is plain dicts (pyhocon's ConfigTree keeps dotted keys apart).
            data = json.loads(HOCONConverter.to_json(ConfigFactory.parse_string(text)))
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
        unknown_top = sorted(set(data) - {"streamlets", *DEPLOY_ONLY_TOP_LEVEL})
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
            parts = key.split(".", 3)
            if len(parts) == 3 and parts[0] == "streamlets" and parts[2] == "trigger" and parts[1] in names:
                from streamlets.trigger import Trigger, TriggerError

                try:
                    settings[parts[1]].trigger = Trigger.parse(str(value)).text()
                except TriggerError as e:
                    raise LocalConfigError(f"{where}: {key!r}: {e}") from None
                continue
            if len(parts) < 4 or parts[0] != "streamlets":
                raise LocalConfigError(f"{where}: {key!r} is not of the form streamlets.<name>.<section>.<key>")
            _, name, section, item = parts
            if name not in names:
                raise LocalConfigError(f"{where}: {key!r}: the blueprint has no streamlet {name!r} (it has {', '.join(sorted(names))})")
            if section not in SECTIONS:
                raise LocalConfigError(f"{where}: {key!r}: unknown section {section!r}; use one of {', '.join(SECTIONS)}")
            target = settings[name]
            if section == "config-parameters":
                target.config_parameters[item] = value
            elif section == "kubernetes":
                continue  # pod resources: the operator's, not the sandbox's
            elif section == "volume-mounts":
                target.volume_mounts[item] = str((base / str(value)).resolve())
            else:
                target.spark[item] = str(value).lower() if isinstance(value, bool) else str(value)
    return settings
