"""Reading a blueprint file (YAML) into the model, and importing the streamlet classes it names.

The YAML is composed into nodes rather than loaded into plain values so that every streamlet
entry, topic entry and producer/consumer item keeps its line and column.

Scalars that must be text (class paths, port paths, names, topic config values) are taken as
written, so YAML 1.1 surprises such as `on` -> True or `1.10` -> 1.1 cannot change them.
"""

from __future__ import annotations

import difflib
import importlib
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import yaml
from pydantic import ValidationError
from yaml.constructor import SafeConstructor

from .model import Blueprint, Located, PortRef, StreamletRef, Topic, dns_label_from

if TYPE_CHECKING:
    from streamlets.runner import StreamletLoadError
    from streamlets.streamlet import Streamlet

TOP_LEVEL_KEYS = ("app-id", "streamlets", "topics")
TOPIC_KEYS = ("producers", "consumers", "name", "partitions", "replication-factor", "config")
_NULL_TAG = "tag:yaml.org,2002:null"


class BlueprintError(Exception):
    """The blueprint file is not a valid blueprint. `str()` is `file:line:column: message`."""

    def __init__(self, message: str, file: str | Path | None = None,
                 line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        return f"{where}: {self.message}" if where else self.message


class BlueprintReadError(BlueprintError):
    """The blueprint file cannot be read at all (missing, a folder, unreadable, not UTF-8)."""


def load_blueprint(path: str | Path) -> Blueprint:
    """Read and check the structure of the blueprint file at `path`.

    Checks types and required keys only; whether names resolve and ports connect is the
    verifier's job. `app-id` defaults to the file's folder name made a DNS label.
    Raises BlueprintReadError if the file cannot be read, BlueprintError (naming the file,
    line and column) for malformed YAML, wrong types, unknown keys or a missing `streamlets`.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise BlueprintReadError(f"cannot read blueprint: {reason}", path) from None
    return _Reader(path).blueprint(text)


class _Reader:
    """Turns the composed YAML node tree of one file into a Blueprint, checking types."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.constructor = SafeConstructor()

    def error(self, message: str, node: yaml.Node | None = None) -> BlueprintError:
        line, column = _position(node)
        return BlueprintError(message, self.path, line, column)

    def blueprint(self, text: str) -> Blueprint:
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            problem = ": ".join(p for p in (e.context, e.problem) if p)
            raise BlueprintError(f"malformed YAML: {problem}", self.path,
                                 mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
        except yaml.YAMLError as e:  # e.g. a reader error on a control character
            raise BlueprintError(f"malformed YAML: {e}", self.path) from None
        if root is None:
            raise BlueprintError("the blueprint is empty: expected a mapping with a `streamlets:` section", self.path, 1, 1)
        entries = self.mapping(root, "the blueprint", TOP_LEVEL_KEYS)
        if "streamlets" not in entries:
            raise self.error("the blueprint has no `streamlets:` section (instance name -> module.Class)", root)

        app_node = entries.get("app-id", (None, None))[1]
        if app_node is not None:
            app_id = self.text(app_node, "app-id")
            line, column = _position(app_node)
            app_position = Located(line=line, column=column)
        else:
            app_id = dns_label_from(self.path.resolve().parent.name)
            app_position = Located()

        streamlets_key, streamlets_node = entries["streamlets"]
        streamlets = dict(self.streamlets(streamlets_node))
        if not streamlets:
            raise self.error("`streamlets:` names no streamlet (expected instance name: module.Class)", streamlets_key)
        topics_node = entries.get("topics", (None, None))[1]
        topics = dict(self.topics(topics_node)) if topics_node is not None and not _is_null(topics_node) else {}
        return Blueprint(app_id=app_id, streamlets=streamlets, topics=topics, path=self.path,
                         app_id_position=app_position)

    def streamlets(self, node: yaml.Node) -> Iterator[tuple[str, StreamletRef]]:
        for name, (key, value) in self.mapping(node, "`streamlets:`").items():
            line, column = _position(key)
            class_name = self.text(value, f"the class of streamlet {name!r}")
            yield name, StreamletRef(name=name, class_name=class_name, line=line, column=column)

    def topics(self, node: yaml.Node) -> Iterator[tuple[str, Topic]]:
        for topic_id, (key, value) in self.mapping(node, "`topics:`").items():
            what = f"topic {topic_id!r}"
            fields = self.mapping(value, what, TOPIC_KEYS)
            line, column = _position(key)
            args: dict[str, Any] = {"id": topic_id, "line": line, "column": column}
            for role in ("producers", "consumers"):
                if role in fields:
                    args[role] = self.port_refs(fields[role][1], f"{role} of {what}")
            if "name" in fields:
                args["name"] = self.text(fields["name"][1], f"name of {what}")
            for k, attr in (("partitions", "partitions"), ("replication-factor", "replication_factor")):
                if k in fields:
                    args[attr] = self.positive_int(fields[k][1], f"{k} of {what}")
            if "config" in fields:
                args["config"] = {k: self.text(v, f"config {k!r} of {what}")
                                  for k, (_, v) in self.mapping(fields["config"][1], f"config of {what}").items()}
            try:
                yield topic_id, Topic(**args)
            except ValidationError as e:  # a safety net: the checks above should catch everything
                raise self.error(f"{what}: {e.errors()[0]['msg']}", key) from None

    def port_refs(self, node: yaml.Node, what: str) -> list[PortRef]:
        # A single scalar is accepted as a one-item list: `producers: flights.out`.
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if isinstance(node, yaml.MappingNode):
            raise self.error(f"{what} must be a list of port paths (streamlet.port)", node)
        refs = []
        for item in items:
            line, column = _position(item)
            refs.append(PortRef(text=self.text(item, f"an item of {what}"), line=line, column=column))
        return refs

    def mapping(self, node: yaml.Node, what: str,
                allowed: tuple[str, ...] | None = None) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key text -> (key node, value node). Keys must be scalars, unique and (if given) allowed."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(f"{what} must be a mapping, not {_kind(node)}", node)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise self.error(f"keys of {what} must be plain names, not {_kind(key)}", key)
            name = key.value
            if name in out:
                first = _position(out[name][0])[0]
                raise self.error(f"{what}: {name!r} is given twice (first on line {first})", key)
            if allowed is not None and name not in allowed:
                near = difflib.get_close_matches(name, allowed, n=1)
                hint = f"did you mean {near[0]!r}?" if near else f"expected one of: {', '.join(allowed)}"
                raise self.error(f"{what}: unknown key {name!r} ({hint})", key)
            out[name] = (key, value)
        return out

    def text(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or _is_null(node) or not str(node.value).strip():
            raise self.error(f"{what} must be text, not {_kind(node)}", node)
        return str(node.value).strip()

    def positive_int(self, node: yaml.Node, what: str) -> int:
        value = self.constructor.construct_object(node, deep=True) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            shown = repr(node.value) if isinstance(node, yaml.ScalarNode) else _kind(node)
            raise self.error(f"{what} must be a positive whole number, not {shown}", node)
        return value


def _position(node: yaml.Node | None) -> tuple[int | None, int | None]:
    """1-based (line, column) of a node; PyYAML's marks are 0-based."""
    if node is None or node.start_mark is None:
        return None, None
    return node.start_mark.line + 1, node.start_mark.column + 1


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


def _kind(node: yaml.Node | None) -> str:
    if node is None or _is_null(node):
        return "empty"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value)


# --- importing the streamlet classes ---------------------------------------------------------

def import_streamlets(blueprint: Blueprint) -> dict[str, "type[Streamlet] | StreamletLoadError"]:
    """Import the class of every streamlet instance: instance name -> class, or the load error.

    Class paths (`module.Class`) resolve against the blueprint's folder: it is put first on
    `sys.path` (and stays there, so the classes can be imported again later in this process).
    Never raises for a user's module: whatever its import raises (ImportError, SyntaxError,
    StreamletDefinitionError, any exception, even SystemExit) becomes a StreamletLoadError whose
    message summarizes it and names the user's file and line.
    """
    # Imported here: streamlets.runner imports pyspark (about a second, no JVM).
    from streamlets.runner import StreamletLoadError, load_streamlet_class

    folder = str(blueprint.folder)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    importlib.invalidate_caches()  # modules written after start-up (tests, generators) must be found
    out: dict[str, type[Streamlet] | StreamletLoadError] = {}
    for name, ref in blueprint.streamlets.items():
        try:
            out[name] = load_streamlet_class(ref.class_name)
        except StreamletLoadError as e:
            out[name] = e
        except (Exception, SystemExit) as e:  # the user's module failed while importing
            module = ref.class_name.replace(":", ".").rpartition(".")[0]
            out[name] = StreamletLoadError(f"cannot import module {module!r} for {ref.class_name!r}: "
                                           f"{_summary(e, folder)}")
    return out


def _summary(error: BaseException, folder: str) -> str:
    """`Type: message (at file:line)` naming the deepest frame of the user's code, if any."""
    text = f"{type(error).__name__}: {error}".rstrip(": ")
    if isinstance(error, SyntaxError):
        return text  # its message already names the file and line
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_user_file(f.filename)]
    # Frames in the blueprint's folder first: that is the code the user is working on.
    mine = [f for f in frames if f.filename.startswith(folder)] or frames
    if mine:
        frame = mine[-1]
        try:
            shown = str(Path(frame.filename).relative_to(folder))
        except ValueError:
            shown = frame.filename
        text += f" (at {shown}:{frame.lineno})"
    return text


_NOT_USER_CODE = tuple({sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parent.parent / "streamlets")})


def _is_user_file(filename: str) -> bool:
    """False for frozen modules, the standard library, installed packages and the SDK itself."""
    return not filename.startswith("<") and not filename.startswith(_NOT_USER_CODE) and filename != __file__
