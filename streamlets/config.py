"""Typed config-parameter values of a running streamlet."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from .errors import ConfigError
from .params import ConfigParameter


class StreamletConfig(Mapping[str, Any]):
    """Config-parameter values by key, converted to each parameter's type.

    Index with the key or the parameter object: `ctx.config["window"]`, `ctx.config[self.window]`.
    Built from raw values (config files, command line) layered over the declared defaults;
    raises ConfigError for unknown keys, wrong types, failed validation or missing values.
    """

    def __init__(self, streamlet: str, parameters: tuple[ConfigParameter, ...], raw: Mapping[str, Any]) -> None:
        known = {p.key: p for p in parameters}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ConfigError(
                f"streamlet {streamlet!r}: unknown config parameter(s) {', '.join(unknown)}; "
                f"declared: {', '.join(known) or 'none'}"
            )
        values: dict[str, Any] = {}
        for key, param in known.items():
            if key in raw and raw[key] is not None:
                try:
                    values[key] = param.parse(raw[key])
                except ConfigError as e:
                    raise ConfigError(f"streamlet {streamlet!r}: {e}") from None
            elif param.default is not None:
                values[key] = param.default
            else:
                raise ConfigError(
                    f"streamlet {streamlet!r}: config parameter {key!r} has no default and no value; "
                    f"set streamlets.{streamlet}.config-parameters.{key}"
                )
        self._values = values

    def __getitem__(self, key: str | ConfigParameter) -> Any:
        return self._values[key.key if isinstance(key, ConfigParameter) else key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"StreamletConfig({self._values!r})"
