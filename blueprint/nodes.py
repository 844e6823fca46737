"""Text with positions: a YAML or HOCON file as PyYAML's node tree, in which every key, list item
and scalar keeps its line and column (what the blueprint reader and the config check walk, so
that each problem names where it is).

YAML is composed by PyYAML (libyaml's parser where PyYAML was built with it: about ten times
faster, with the same marks). pyhocon keeps no positions: its tree is turned into nodes and each
key and list item is found again in the text, in order (best effort; blueprint.hocon parses).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import BlueprintLoadError

__all__ = ["HOCON_SUFFIXES", "LOADER", "NULL_TAG", "compose", "compose_hocon", "compose_yaml", "is_null", "kind",
           "position"]

HOCON_SUFFIXES = (".conf", ".hocon")
NULL_TAG = "tag:yaml.org,2002:null"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose(path: Path, text: str) -> yaml.Node | None:
    """The node tree of `text`, the contents of the file at `path`: HOCON for the suffixes in
    HOCON_SUFFIXES, YAML otherwise (compose_hocon, compose_yaml); raises as they do."""
    return compose_hocon(path, text) if path.suffix in HOCON_SUFFIXES else compose_yaml(path, text)


def compose_yaml(path: Path, text: str) -> yaml.Node | None:
    """YAML `text` (of the file at `path`, named in errors) as PyYAML's node tree; None for an
    empty document. BlueprintLoadError (malformed-blueprint, with line and column) if malformed."""
    try:
        return yaml.compose(text, Loader=LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = ": ".join(p for p in (e.context, e.problem) if p)
        raise BlueprintLoadError(f"malformed YAML: {problem}", path,
                             mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    except yaml.YAMLError as e:  # e.g. a reader error on a control character
        raise BlueprintLoadError(f"malformed YAML: {e}", path) from None


def compose_hocon(path: Path, text: str) -> yaml.Node | None:
    """HOCON `text` (Cloudflow's blueprint.conf, a deploy config) as the node tree the YAML reader
    walks, with best-effort positions; None for an empty one. A file whose only key is `blueprint`
    is read from inside it. BlueprintLoadError (malformed-blueprint) if malformed.

    pyhocon keeps no positions, so each key and list item is found again in the text, in order.
    """
    from pyhocon import ConfigTree

    from . import hocon

    try:
        tree = hocon.parse(text)
    except Exception as e:  # pyparsing's errors carry line and column
        line, column = getattr(e, "lineno", None), getattr(e, "col", None)
        message = str(getattr(e, "msg", None) or e).splitlines()[0] if str(e) else type(e).__name__
        raise BlueprintLoadError(f"malformed HOCON: {message}", path, line, column) from None
    locator = _Locator(text)
    prefix: list[str] = []
    if not isinstance(tree, ConfigTree):  # a top-level list (`[...]`): reported like YAML's
        return _node(tree, locator, prefix, (0, 0))
    if list(tree.keys()) == ["blueprint"] and isinstance(tree["blueprint"], ConfigTree):
        tree, prefix = tree["blueprint"], ["blueprint"]
    if not tree:
        return None
    return _node(tree, locator, prefix, (0, 0))


def _node(value: Any, locator: "_Locator", path: list[str], at: tuple[int, int]) -> yaml.Node:
    mark = yaml.Mark(None, 0, at[0], at[1], None, None)
    if isinstance(value, dict):
        pairs = []
        for raw_key, item in value.items():
            key = _unquote(str(raw_key))  # pyhocon keeps the quotes of "spark.sql.x" = 1
            where = locator.key(path, key)
            key_node = yaml.ScalarNode("tag:yaml.org,2002:str", key, start_mark=yaml.Mark(None, 0, *where, None, None))
            pairs.append((key_node, _node(item, locator, [*path, key], where)))
        return yaml.MappingNode("tag:yaml.org,2002:map", pairs, start_mark=mark)
    if isinstance(value, list):
        return yaml.SequenceNode("tag:yaml.org,2002:seq",
                                 [_node(v, locator, path, locator.item(path, str(v))) for v in value], start_mark=mark)
    if value is None or type(value).__name__ == "NoneValue":
        return yaml.ScalarNode(NULL_TAG, "null", start_mark=mark)
    if isinstance(value, bool):
        return yaml.ScalarNode("tag:yaml.org,2002:bool", str(value).lower(), start_mark=mark)
    if isinstance(value, int):
        return yaml.ScalarNode("tag:yaml.org,2002:int", str(value), start_mark=mark)
    if isinstance(value, float):
        return yaml.ScalarNode("tag:yaml.org,2002:float", repr(value), start_mark=mark)
    return yaml.ScalarNode("tag:yaml.org,2002:str", str(value), start_mark=mark)


def _unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


class _Locator:
    """Finds keys and list items of a HOCON text again: 0-based (line, column), searched forward
    from the parent's line so that equal names in different sections resolve to their own line."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.found: dict[tuple[str, ...], tuple[int, int]] = {}
        self.items: dict[tuple[str, ...], int] = {}  # where the next list item search starts

    def key(self, parent: list[str], key: str) -> tuple[int, int]:
        start = self.found.get(tuple(parent), (0, 0))[0]
        pattern = re.compile(r'(?:^|[\s{,.])"?(' + re.escape(key) + r')"?\s*(?:[=:{.]|\+=)')
        where = self._search(pattern, start) or (start, 0)
        self.found[(*parent, key)] = where
        return where

    def item(self, parent: list[str], text: str) -> tuple[int, int]:
        start = self.items.get(tuple(parent), self.found.get(tuple(parent), (0, 0))[0])
        where = self._search(re.compile(r'(?:^|[\s\[,"])(' + re.escape(text) + r')(?:$|[\s\],"])'), start) or (start, 0)
        self.items[tuple(parent)] = where[0]
        return where

    def _search(self, pattern: re.Pattern[str], start: int) -> tuple[int, int] | None:
        for n in range(start, len(self.lines)):
            line = self.lines[n].split("#", 1)[0] if "#" in self.lines[n] and '"' not in self.lines[n] else self.lines[n]
            m = pattern.search(line)
            if m:
                return n, m.start(1)
        return None


def position(node: yaml.Node | None) -> tuple[int | None, int | None]:
    """1-based (line, column) of a node; PyYAML's marks are 0-based."""
    if node is None or node.start_mark is None:
        return None, None
    return node.start_mark.line + 1, node.start_mark.column + 1


def is_null(node: yaml.Node) -> bool:
    """True for YAML's null (`~`, `null`, nothing) and HOCON's null."""
    return isinstance(node, yaml.ScalarNode) and node.tag == NULL_TAG


def kind(node: yaml.Node | None) -> str:
    """What a node is, for messages: `empty`, `a mapping`, `a list` or the scalar's text quoted."""
    if node is None or is_null(node):
        return "empty"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value)
