"""Reading a blueprint file (YAML, or Cloudflow's HOCON) into the model (blueprint.model).

The file is composed into nodes (blueprint.nodes) rather than loaded into plain values so that
every streamlet entry, topic entry and producer/consumer item keeps its line and column.

Scalars that must be text (class paths, port paths, names, topic config values) are taken as
written, so YAML 1.1 surprises such as `on` -> True or `1.10` -> 1.1 cannot change them.

Importing the classes a blueprint names is blueprint.classes' job; `import_streamlets` and the
errors (blueprint.errors) are exported here too, where the callers have always found them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml
from pydantic import ValidationError
from yaml.constructor import SafeConstructor

from .classes import import_streamlets
from .errors import BlueprintError, BlueprintLoadError, BlueprintReadError
from .model import Blueprint, LoadProblem, Located, PortRef, StreamletRef, Topic, dns_label_from
from .nodes import HOCON_SUFFIXES, compose, is_null, kind, position
from .problems import suggest

__all__ = ["TOPIC_ALIASES", "TOPIC_KEYS", "TOP_LEVEL_KEYS", "BlueprintError", "BlueprintLoadError",
           "BlueprintReadError", "import_streamlets", "load_blueprint"]

TOP_LEVEL_KEYS = ("app-id", "streamlets", "topics")
TOPIC_KEYS = ("producers", "consumers", "name", "partitions", "replication-factor", "config", "managed", "schema-registry")
TOPIC_ALIASES = {"replicas": "replication-factor"}  # Cloudflow's spelling


def load_blueprint(path: str | Path) -> Blueprint:
    """Read and check the structure of the blueprint file at `path`: YAML, or Cloudflow's HOCON
    (`blueprint.conf`, suffix .conf or .hocon, with or without the `blueprint { }` wrapper).

    Checks types and required keys only; whether names resolve and ports connect is the
    verifier's job. Entries with structural problems (unknown keys, duplicates, wrong types) are
    skipped and listed in `Blueprint.load_problems`. `app-id` defaults to the file's folder name
    made a DNS label. Raises BlueprintReadError if the file cannot be read, BlueprintLoadError
    (naming the file, line and column) when no blueprint can be made of it: malformed YAML or
    HOCON, not a mapping, no or an empty `streamlets` section.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise BlueprintReadError(f"cannot read blueprint: {reason}", path, code="unreadable-file") from None
    reader = _Reader(path)
    return reader.blueprint(compose(path, text))


class _Reader:
    """Turns the node tree of one file into a Blueprint, checking types.

    Structural problems are noted and the entry skipped, so that one run reports them all;
    only a file that yields no blueprint at all raises.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.constructor = SafeConstructor()
        self.problems: list[LoadProblem] = []

    def note(self, code: str, message: str, node: yaml.Node | None = None) -> None:
        line, column = position(node)
        self.problems.append(LoadProblem(code=code, message=message, line=line, column=column))

    def fatal(self, code: str, message: str, node: yaml.Node | None = None) -> BlueprintLoadError:
        line, column = position(node)
        return BlueprintLoadError(message, self.path, line, column, code, list(self.problems))

    def blueprint(self, root: yaml.Node | None) -> Blueprint:
        if root is None or is_null(root):
            raise BlueprintLoadError("the blueprint is empty: expected a mapping with a `streamlets:` section",
                                 self.path, 1, 1, "missing-streamlets")
        if not isinstance(root, yaml.MappingNode):
            raise self.fatal("malformed-blueprint", f"the blueprint must be a mapping with a `streamlets:` section, "
                                                    f"not {kind(root)}", root)
        entries = self.mapping(root, "the blueprint", TOP_LEVEL_KEYS)
        if "streamlets" not in entries:
            raise self.fatal("missing-streamlets", "the blueprint has no `streamlets:` section "
                                                   "(instance name -> module.Class)", root)

        app_node = entries.get("app-id", (None, None))[1]
        app_id = self.text(app_node, "app-id") if app_node is not None else None
        if app_id is not None:
            line, column = position(app_node)
            app_position = Located(line=line, column=column)
        else:
            app_id = dns_label_from(self.path.resolve().parent.name)
            app_position = Located()

        streamlets_key, streamlets_node = entries["streamlets"]
        if not is_null(streamlets_node) and not isinstance(streamlets_node, yaml.MappingNode):
            raise self.fatal("wrong-type", f"`streamlets:` must be a mapping (instance name: module.Class), "
                                           f"not {kind(streamlets_node)}", streamlets_node)
        streamlets = dict(self.streamlets(streamlets_node)) if not is_null(streamlets_node) else {}
        if not streamlets and not any(p.code == "wrong-type" for p in self.problems):
            raise self.fatal("empty-streamlets", "`streamlets:` names no streamlet "
                                                 "(expected instance name: module.Class)", streamlets_key)
        topics_node = entries.get("topics", (None, None))[1]
        topics = dict(self.topics(topics_node)) if topics_node is not None and not is_null(topics_node) else {}
        return Blueprint(app_id=app_id, streamlets=streamlets, topics=topics, path=self.path,
                         app_id_position=app_position, load_problems=self.problems)

    def streamlets(self, node: yaml.Node) -> Iterator[tuple[str, StreamletRef]]:
        for name, (key, value) in self.mapping(node, "`streamlets:`", duplicate="duplicate-streamlet").items():
            line, column = position(key)
            class_name = self.text(value, f"the class of streamlet {name!r}")
            if class_name is not None:
                yield name, StreamletRef(name=name, class_name=class_name, line=line, column=column)

    def topics(self, node: yaml.Node) -> Iterator[tuple[str, Topic]]:
        for topic_id, (key, value) in self.mapping(node, "`topics:`", duplicate="duplicate-topic").items():
            what = f"topic {topic_id!r}"
            if isinstance(value, yaml.MappingNode):  # Cloudflow's names and its `topic { name, ... }` block
                value = _cloudflow_topic(value)
            fields = self.mapping(value, what, TOPIC_KEYS)
            line, column = position(key)
            args: dict[str, Any] = {"id": topic_id, "line": line, "column": column}
            for role in ("producers", "consumers"):
                if role in fields:
                    args[role] = self.port_refs(fields[role][1], f"{role} of {what}")
            if "name" in fields:
                args["name"] = self.text(fields["name"][1], f"name of {what}")
            for k, attr in (("partitions", "partitions"), ("replication-factor", "replication_factor")):
                if k in fields:
                    args[attr] = self.positive_int(fields[k][1], f"{k} of {what}")
            for k, attr in (("managed", "managed"), ("schema-registry", "schema_registry")):
                if k in fields:
                    args[attr] = self.boolean(fields[k][1], f"{k} of {what}")
            if "config" in fields:
                config = self.mapping(fields["config"][1], f"config of {what}")
                args["config"] = {k: t for k, (_, v) in config.items()
                                  if (t := self.text(v, f"config {k!r} of {what}")) is not None}
            args = {k: v for k, v in args.items() if v is not None}
            try:
                yield topic_id, Topic(**args)
            except ValidationError as e:  # a safety net: the checks above should catch everything
                self.note("wrong-type", f"{what}: {e.errors()[0]['msg']}", key)

    def port_refs(self, node: yaml.Node, what: str) -> list[PortRef]:
        # A single scalar is accepted as a one-item list: `producers: flights.out`.
        if is_null(node):
            return []
        if isinstance(node, yaml.MappingNode):
            self.note("wrong-type", f"{what} must be a list of port paths (streamlet.port)", node)
            return []
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        refs = []
        for item in items:
            line, column = position(item)
            text = self.text(item, f"an item of {what}")
            if text is not None:
                refs.append(PortRef(text=text, line=line, column=column))
        return refs

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...] | None = None,
                duplicate: str = "duplicate-key") -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key text -> (key node, value node). Keys must be scalars, unique and (if given) allowed;
        other entries are noted as problems and left out."""
        if not isinstance(node, yaml.MappingNode):
            self.note("wrong-type", f"{what} must be a mapping, not {kind(node)}", node)
            return {}
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                self.note("wrong-type", f"keys of {what} must be plain names, not {kind(key)}", key)
                continue
            name = key.value
            if name in out:
                first = position(out[name][0])[0]
                self.note(duplicate, f"{what}: {name!r} is given twice (first on line {first})", key)
                continue
            if allowed is not None and name not in allowed:
                hint = suggest(name, allowed, "expected one of")
                self.note("unknown-key", f"{what}: unknown key {name!r} ({hint})", key)
                continue
            out[name] = (key, value)
        return out

    def text(self, node: yaml.Node, what: str) -> str | None:
        if not isinstance(node, yaml.ScalarNode) or is_null(node) or not str(node.value).strip():
            self.note("wrong-type", f"{what} must be text, not {kind(node)}", node)
            return None
        return str(node.value).strip()

    def positive_int(self, node: yaml.Node, what: str) -> int | None:
        value = self._construct(node)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            shown = repr(node.value) if isinstance(node, yaml.ScalarNode) else kind(node)
            self.note("wrong-type", f"{what} must be a positive whole number, not {shown}", node)
            return None
        return value

    def boolean(self, node: yaml.Node, what: str) -> bool | None:
        value = self._construct(node)
        hocon = self.path.suffix in HOCON_SUFFIXES
        if isinstance(value, str) and hocon:
            value = _hocon_boolean(value)  # HOCON's yes/no, on/off
        if not isinstance(value, bool):
            allowed = "true or false (or yes/no, on/off)" if hocon else "true or false"
            self.note("wrong-type", f"{what} must be {allowed}, not {kind(node)}", node)
            return None
        return value

    def _construct(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return None
        try:
            return self.constructor.construct_object(node, deep=True)
        except Exception:  # e.g. an int tag on text that is no number
            return None


def _hocon_boolean(text: str) -> bool | None:
    """`text` as a HOCON boolean by pyhocon's conversion (true/yes/on, false/no/off), else None."""
    from pyhocon import ConfigTree
    from pyhocon.exceptions import ConfigException

    tree = ConfigTree()
    tree.put("value", text)
    try:
        return tree.get_bool("value")
    except ConfigException:
        return None


def _cloudflow_topic(node: yaml.MappingNode) -> yaml.MappingNode:
    """Cloudflow's topic keys in ours: `replicas`, and `topic { name, partitions, replicas }`."""
    pairs = []
    for key, value in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name == "topic" and isinstance(value, yaml.MappingNode):
            pairs.extend(_cloudflow_topic(value).value)
            continue
        if name in TOPIC_ALIASES:
            key = yaml.ScalarNode(key.tag, TOPIC_ALIASES[name], start_mark=key.start_mark)
        pairs.append((key, value))
    return yaml.MappingNode(node.tag, pairs, start_mark=node.start_mark)


# --- importing the streamlet classes ---------------------------------------------------------
