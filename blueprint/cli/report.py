"""The problem report in text, for people and grep: `blueprint verify`, and `blueprint build` /
`kubectl streamlets deploy` when nothing was built (on stderr there)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from ..model import Blueprint
from ..problems import GROUPS, Problem, report_order

_STYLE = {"error": "bold red", "warning": "bold yellow"}


def print_problems(file: Path, blueprint: Blueprint | None, problems: list[Problem],
                errors: int, warnings: int, failed: bool) -> None:
    """Problems grouped under a heading per kind (see problems.GROUPS), then a summary line.

    Each problem is one line `file:line:column: severity: message (hint: ...)`, for people and grep.
    """
    # rich colours only when stdout is a terminal; soft_wrap keeps one problem per line for grep.
    console = Console(highlight=False, soft_wrap=True)
    group = None
    for p in report_order(problems):
        if p.group != group:
            group = p.group
            console.print(Text(f"{GROUPS.get(group, group)}:", style="bold underline"))
        where = ":".join(str(x) for x in (p.file, p.line, p.column) if x is not None)
        line = Text.assemble("  ", (where, "bold"), ": ", (p.severity, _STYLE[p.severity]), ": ", p.message)
        if p.hint:
            line.append(f" (hint: {p.hint})", style="dim")
        console.print(line)
    counts = ", ".join(_count(n, word) for n, word in ((errors, "error"), (warnings, "warning")) if n)
    if failed:
        summary = Text.assemble((f"{file}: ", "bold"), ("not sound", "bold red"), f": {counts}")
    else:
        size = f"{_count(len(blueprint.streamlets), 'streamlet')}, {_count(len(blueprint.topics), 'topic')}"
        summary = Text.assemble((f"{file}: ", "bold"), ("sound", "bold green"), f" ({size})")
        if warnings:
            summary.append(f" with {counts}")
    console.print(summary)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
