"""HOCON text -> pyhocon ConfigTree, with every value kept as written.

pyhocon reads an unquoted `10s`, `1h` or `512m` as a period (a timedelta or dateutil
relativedelta) while parsing, so a memory size `512m` arrives as "8 hours 32 minutes", and once a
substitution (`driver = ${small-pod}`) has moved it no position is left to find the text again.
HOCON itself keeps such values as strings until a program asks for a duration (Typesafe Config's
getDuration), and so do we: parse() turns pyhocon's period grammar off, and each setting's own
check reads its text (a CPU quantity, a memory size, a trigger interval).
"""

from __future__ import annotations

import threading
from typing import Any

_LOCK = threading.Lock()


def parse(text: str, *, resolve: bool = True) -> Any:
    """pyhocon's ConfigFactory.parse_string(text, resolve=resolve) without period values.
    Raises pyhocon's and pyparsing's parse errors (they carry line and column)."""
    import pyparsing
    from pyhocon import ConfigFactory, config_parser

    with _LOCK:  # the grammar is built per parse from this module global
        periods = config_parser.get_period_expr
        config_parser.get_period_expr = pyparsing.NoMatch
        try:
            return ConfigFactory.parse_string(text, resolve=resolve)
        finally:
            config_parser.get_period_expr = periods
