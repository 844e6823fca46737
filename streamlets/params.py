"""Config parameters: typed, documented settings of a streamlet, set per deployment.

Values come, highest first, from command-line `key=value`, config files given at run or deploy
time (`streamlets.<name>.config-parameters.<key>`), and the parameter's default.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, ClassVar

from .errors import ConfigError

_DURATION_UNITS = {
    "ns": 1e-9, "nano": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "micro": 1e-6, "micros": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1, "second": 1, "seconds": 1, "m": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
}
_MEMORY_UNITS = {"": 1, "b": 1, "byte": 1, "bytes": 1}
for _i, (_p, _si, _iec) in enumerate(
    [("k", "kilo", "kibi"), ("m", "mega", "mebi"), ("g", "giga", "gibi"), ("t", "tera", "tebi")], start=1
):
    # As Typesafe Config (Cloudflow's config library): K/Ki/KiB are powers of 2, kB powers of 10.
    _MEMORY_UNITS.update({_p: 1024**_i, _p + "i": 1024**_i, _p + "ib": 1024**_i, _iec + "byte": 1024**_i,
                          _iec + "bytes": 1024**_i, _p + "b": 1000**_i, _si + "byte": 1000**_i, _si + "bytes": 1000**_i})
_AMOUNT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: Any) -> timedelta:
    """Parse a duration such as "10s", "1500 ms", "2 minutes" (Typesafe Config's format).

    A bare number is milliseconds, as in Typesafe Config. Raises ValueError.
    """
    if isinstance(text, timedelta):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return timedelta(milliseconds=text)
    m = _AMOUNT.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or (unit and unit not in _DURATION_UNITS):
        raise ValueError(f"{text!r} is not a duration (examples: 500ms, 10s, 2 minutes, 1h)")
    return timedelta(seconds=float(m.group(1)) * (_DURATION_UNITS[unit] if unit else 1e-3))


def parse_memory_size(text: Any) -> int:
    """Parse a memory size such as "512M", "1 GiB", "100kB" into bytes (Typesafe Config's format)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _AMOUNT.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _MEMORY_UNITS:
        raise ValueError(f"{text!r} is not a memory size (examples: 512M, 1 GiB, 100kB)")
    return int(float(m.group(1)) * _MEMORY_UNITS[unit])


class ConfigParameter:
    """A config parameter: `key`, human `description`, optional `default`.

    `parse(raw)` turns a value from a config file or the command line into the typed value the
    logic receives, raising ConfigError naming the key.
    """

    type_name: ClassVar[str] = "string"

    def __init__(self, key: str, description: str = "", default: Any = None) -> None:
        self.key = key
        self.description = description
        self.default = default

    def convert(self, raw: Any) -> Any:  # overridden per type; raises ValueError
        """The typed value of `raw` (text from a config file or the command line, or a YAML/HOCON value);
        overridden per type. Raises ValueError (or TypeError) with what was expected."""
        return raw

    def parse(self, raw: Any) -> Any:
        """`convert(raw)`, with a failure as ConfigError naming the key and the type (`config parameter
        'window' (duration): ...`)."""
        try:
            return self.convert(raw)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"config parameter {self.key!r} ({self.type_name}): {e}") from None

    @property
    def pattern(self) -> str | None:
        """The regular expression a value must match (RegExpParameter's), else None; descriptors and the CRD
        carry it."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r}, default={self.default!r})"


class StringParameter(ConfigParameter):
    """A string value."""

    type_name = "string"

    def convert(self, raw: Any) -> str:
        """`raw` as text; ValueError for a mapping or a list."""
        if isinstance(raw, (dict, list)):
            raise ValueError(f"expected a string, got {type(raw).__name__}")
        return str(raw)


class RegExpParameter(StringParameter):
    """A string that must fully match `pattern` (a Python regular expression)."""

    type_name = "string"

    def __init__(self, key: str, description: str = "", pattern: str = ".*", default: Any = None) -> None:
        super().__init__(key, description, default)
        self._pattern = pattern
        try:
            self._regex: re.Pattern[str] | None = re.compile(pattern)
            self.pattern_error: str | None = None
        except re.error as e:  # reported with the streamlet's name when its class is checked
            self._regex, self.pattern_error = None, f"invalid regular expression {pattern!r}: {e}"

    @property
    def pattern(self) -> str:
        """The declared pattern, as written (values must match it whole: re.fullmatch)."""
        return self._pattern

    def convert(self, raw: Any) -> str:
        """`raw` as text if it matches the pattern whole; ValueError naming the value and the pattern
        otherwise, or the pattern's own error if it does not compile."""
        value = super().convert(raw)
        if self._regex is None:
            raise ValueError(self.pattern_error)
        if not self._regex.fullmatch(value):
            raise ValueError(f"{value!r} does not match the pattern {self._pattern!r}")
        return value


class IntegerParameter(ConfigParameter):
    """A whole number in the 32-bit range (Cloudflow's int32: -2,147,483,648 to 2,147,483,647)."""

    type_name = "int32"
    MIN, MAX = -(2**31), 2**31 - 1

    def convert(self, raw: Any) -> int:
        """`raw` as an int in the 32-bit range (MIN..MAX, as Typesafe Config's getInt); ValueError for a
        fraction, a boolean, text that is no whole number or a value out of range."""
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError(f"{raw!r} is not a whole number (examples: 42, -7, 100000)")
        try:
            value = int(str(raw).strip()) if isinstance(raw, str) else int(raw)
        except (ValueError, TypeError):
            raise ValueError(f"{raw!r} is not a whole number (examples: 42, -7, 100000)") from None
        if not self.MIN <= value <= self.MAX:
            raise ValueError(f"{value} is outside the 32-bit range {self.MIN}..{self.MAX}")
        return value


class DoubleParameter(ConfigParameter):
    """A floating-point number."""

    type_name = "double"

    def convert(self, raw: Any) -> float:
        """`raw` as a float (`0.5`, `1e-3`, `100`); ValueError for a boolean or text that is no number."""
        try:
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        except (ValueError, TypeError):
            raise ValueError(f"{raw!r} is not a number (examples: 0.5, 100, -2.5, 1e-3)") from None


class BooleanParameter(ConfigParameter):
    """true/false (also yes/no, on/off, as HOCON)."""

    type_name = "bool"
    _WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}

    def convert(self, raw: Any) -> bool:
        """`raw` as a bool: true/yes/on or false/no/off (any case, HOCON's words); ValueError otherwise."""
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word not in self._WORDS:
            raise ValueError(f"expected true or false, got {raw!r}")
        return self._WORDS[word]


class DurationParameter(ConfigParameter):
    """A duration ("10s", "2 minutes"); the logic gets a datetime.timedelta."""

    type_name = "duration"

    def convert(self, raw: Any) -> timedelta:
        """`raw` as a timedelta (parse_duration: `10s`, `1500 ms`, `2 minutes`); ValueError for other text."""
        return parse_duration(raw)


class MemorySizeParameter(ConfigParameter):
    """A memory size ("512M", "1 GiB"); the logic gets a number of bytes (int)."""

    type_name = "memorysize"

    def convert(self, raw: Any) -> int:
        """`raw` in bytes (an int as is, text such as 512M or 1 GiB as Typesafe Config's memory sizes, binary
        units); ValueError for anything else (parse_memory_size)."""
        return parse_memory_size(raw)


def parameter_for(key: str, type_name: str | None, pattern: str | None = None) -> ConfigParameter:
    """The ConfigParameter of a declaration carried as data (a descriptor's config_parameters
    entry: key, `type_name` as a class's ConfigParameter.type_name, pattern), to check a value
    against it: a RegExpParameter when there is a pattern, else the class of that type name
    (StringParameter for one it does not know)."""
    if pattern:
        return RegExpParameter(key, pattern=pattern)
    kinds = {cls.type_name: cls for cls in (StringParameter, IntegerParameter, DoubleParameter, BooleanParameter,
                                            DurationParameter, MemorySizeParameter)}
    return kinds.get(type_name or "", StringParameter)(key)
