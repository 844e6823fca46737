"""Reading a blueprint file (YAML) into the model, and importing the streamlet classes it names.

The YAML is composed into nodes rather than loaded into plain values so that every streamlet
entry, topic entry and producer/consumer item keeps its line and column.

Scalars that must be text (class paths, port paths, names, topic config values) are taken as
written, so YAML 1.1 surprises such as `on` -> True or `1.10` -> 1.1 cannot change them.
"""

from __future__ import annotations

import importlib
import re
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import yaml
from pydantic import ValidationError
from yaml.constructor import SafeConstructor

from .errors import BlueprintError  # noqa: F401  (the root; BlueprintLoadError is the loader's)
from .model import Blueprint, LoadProblem, Located, PortRef, StreamletRef, Topic, dns_label_from
from .problems import nearest, suggest

if TYPE_CHECKING:
    from streamlets.loading import StreamletLoadError
    from streamlets.streamlet import Streamlet

TOP_LEVEL_KEYS = ("app-id", "streamlets", "topics")
TOPIC_KEYS = ("producers", "consumers", "name", "partitions", "replication-factor", "config", "managed")
TOPIC_ALIASES = {"replicas": "replication-factor"}  # Cloudflow's spelling
HOCON_SUFFIXES = (".conf", ".hocon")
_NULL_TAG = "tag:yaml.org,2002:null"
# libyaml's parser where PyYAML was built with it: about ten times faster, with the same marks.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class BlueprintLoadError(BlueprintError):
    """The blueprint file is not a valid blueprint. `str()` is `file:line:column: message`.

    `code` is the verifier's problem code (malformed-blueprint, missing-streamlets,
    empty-streamlets, wrong-type, ...); `problems` holds what the loader had found before it had
    to stop, so that a report can show everything at once.
    """

    def __init__(self, message: str, file: str | Path | None = None, line: int | None = None,
                 column: int | None = None, code: str = "malformed-blueprint",
                 problems: list[LoadProblem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column
        self.code = code
        self.problems = problems or []

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        return f"{where}: {self.message}" if where else self.message


class BlueprintReadError(BlueprintLoadError):
    """The blueprint file cannot be read at all (missing, a folder, unreadable, not UTF-8)."""


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
    root = _hocon_root(path, text) if path.suffix in HOCON_SUFFIXES else _yaml_root(path, text)
    return reader.blueprint(root)


def _yaml_root(path: Path, text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = ": ".join(p for p in (e.context, e.problem) if p)
        raise BlueprintLoadError(f"malformed YAML: {problem}", path,
                             mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    except yaml.YAMLError as e:  # e.g. a reader error on a control character
        raise BlueprintLoadError(f"malformed YAML: {e}", path) from None


def _hocon_root(path: Path, text: str) -> yaml.Node | None:
    """Cloudflow's blueprint.conf as the node tree the YAML reader walks, with best-effort positions.

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
        return yaml.ScalarNode(_NULL_TAG, "null", start_mark=mark)
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
        line, column = _position(node)
        self.problems.append(LoadProblem(code=code, message=message, line=line, column=column))

    def fatal(self, code: str, message: str, node: yaml.Node | None = None) -> BlueprintLoadError:
        line, column = _position(node)
        return BlueprintLoadError(message, self.path, line, column, code, list(self.problems))

    def blueprint(self, root: yaml.Node | None) -> Blueprint:
        if root is None or _is_null(root):
            raise BlueprintLoadError("the blueprint is empty: expected a mapping with a `streamlets:` section",
                                 self.path, 1, 1, "missing-streamlets")
        if not isinstance(root, yaml.MappingNode):
            raise self.fatal("malformed-blueprint", f"the blueprint must be a mapping with a `streamlets:` section, "
                                                    f"not {_kind(root)}", root)
        entries = self.mapping(root, "the blueprint", TOP_LEVEL_KEYS)
        if "streamlets" not in entries:
            raise self.fatal("missing-streamlets", "the blueprint has no `streamlets:` section "
                                                   "(instance name -> module.Class)", root)

        app_node = entries.get("app-id", (None, None))[1]
        app_id = self.text(app_node, "app-id") if app_node is not None else None
        if app_id is not None:
            line, column = _position(app_node)
            app_position = Located(line=line, column=column)
        else:
            app_id = dns_label_from(self.path.resolve().parent.name)
            app_position = Located()

        streamlets_key, streamlets_node = entries["streamlets"]
        if not _is_null(streamlets_node) and not isinstance(streamlets_node, yaml.MappingNode):
            raise self.fatal("wrong-type", f"`streamlets:` must be a mapping (instance name: module.Class), "
                                           f"not {_kind(streamlets_node)}", streamlets_node)
        streamlets = dict(self.streamlets(streamlets_node)) if not _is_null(streamlets_node) else {}
        if not streamlets and not any(p.code == "wrong-type" for p in self.problems):
            raise self.fatal("empty-streamlets", "`streamlets:` names no streamlet "
                                                 "(expected instance name: module.Class)", streamlets_key)
        topics_node = entries.get("topics", (None, None))[1]
        topics = dict(self.topics(topics_node)) if topics_node is not None and not _is_null(topics_node) else {}
        return Blueprint(app_id=app_id, streamlets=streamlets, topics=topics, path=self.path,
                         app_id_position=app_position, load_problems=self.problems)

    def streamlets(self, node: yaml.Node) -> Iterator[tuple[str, StreamletRef]]:
        for name, (key, value) in self.mapping(node, "`streamlets:`", duplicate="duplicate-streamlet").items():
            line, column = _position(key)
            class_name = self.text(value, f"the class of streamlet {name!r}")
            if class_name is not None:
                yield name, StreamletRef(name=name, class_name=class_name, line=line, column=column)

    def topics(self, node: yaml.Node) -> Iterator[tuple[str, Topic]]:
        for topic_id, (key, value) in self.mapping(node, "`topics:`", duplicate="duplicate-topic").items():
            what = f"topic {topic_id!r}"
            if isinstance(value, yaml.MappingNode):  # Cloudflow's names and its `topic { name, ... }` block
                value = _cloudflow_topic(value)
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
            if "managed" in fields:
                args["managed"] = self.boolean(fields["managed"][1], f"managed of {what}")
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
        if _is_null(node):
            return []
        if isinstance(node, yaml.MappingNode):
            self.note("wrong-type", f"{what} must be a list of port paths (streamlet.port)", node)
            return []
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        refs = []
        for item in items:
            line, column = _position(item)
            text = self.text(item, f"an item of {what}")
            if text is not None:
                refs.append(PortRef(text=text, line=line, column=column))
        return refs

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...] | None = None,
                duplicate: str = "duplicate-key") -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key text -> (key node, value node). Keys must be scalars, unique and (if given) allowed;
        other entries are noted as problems and left out."""
        if not isinstance(node, yaml.MappingNode):
            self.note("wrong-type", f"{what} must be a mapping, not {_kind(node)}", node)
            return {}
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                self.note("wrong-type", f"keys of {what} must be plain names, not {_kind(key)}", key)
                continue
            name = key.value
            if name in out:
                first = _position(out[name][0])[0]
                self.note(duplicate, f"{what}: {name!r} is given twice (first on line {first})", key)
                continue
            if allowed is not None and name not in allowed:
                hint = suggest(name, allowed, "expected one of")
                self.note("unknown-key", f"{what}: unknown key {name!r} ({hint})", key)
                continue
            out[name] = (key, value)
        return out

    def text(self, node: yaml.Node, what: str) -> str | None:
        if not isinstance(node, yaml.ScalarNode) or _is_null(node) or not str(node.value).strip():
            self.note("wrong-type", f"{what} must be text, not {_kind(node)}", node)
            return None
        return str(node.value).strip()

    def positive_int(self, node: yaml.Node, what: str) -> int | None:
        value = self._construct(node)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            shown = repr(node.value) if isinstance(node, yaml.ScalarNode) else _kind(node)
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
            self.note("wrong-type", f"{what} must be {allowed}, not {_kind(node)}", node)
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
    A bare class name (`Ingress`, as Cloudflow allowed) is looked up among the Streamlet classes
    defined in the folder's modules; none or several is an error (class-not-found,
    ambiguous-class). Never raises for a user's module: whatever its import raises (ImportError,
    SyntaxError, StreamletDefinitionError, any exception, even SystemExit) becomes a
    StreamletLoadError whose message summarizes it and names the user's file and line.
    """
    from streamlets.loading import StreamletLoadError, load_streamlet_class

    folder = str(blueprint.folder)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    importlib.invalidate_caches()  # modules written after start-up (tests, generators) must be found
    out: dict[str, type[Streamlet] | StreamletLoadError] = {}
    by_name: dict[str, list[str]] | None = None  # bare class name -> class paths, scanned once
    for name, ref in blueprint.streamlets.items():
        class_path = ref.class_name
        try:
            if "." not in class_path and ":" not in class_path and class_path.isidentifier():
                if by_name is None:
                    by_name = _streamlet_classes_in(blueprint.folder)
                class_path = _resolve_bare_name(class_path, by_name, blueprint.folder)
            out[name] = load_streamlet_class(class_path)
        except StreamletLoadError as e:
            if e.code in ("module-not-found", "class-not-found") and "." in class_path.replace(":", "."):
                e.hint = _class_path_hint(class_path, e.code, blueprint.folder)
            out[name] = e
        except (Exception, SystemExit) as e:  # the user's module failed while importing
            out[name] = _import_failure(e, class_path, folder)
    return out


def _resolve_bare_name(class_name: str, by_name: dict[str, list[str]], folder: Path) -> str:
    from streamlets.loading import StreamletLoadError

    candidates = by_name.get(class_name, [])
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        error = StreamletLoadError(f"no Streamlet class named {class_name!r} in the modules of {folder}",
                                   "class-not-found")
        error.hint = suggest(class_name, by_name, f"Streamlet classes in {folder}")
        raise error
    raise StreamletLoadError(f"{class_name!r} is ambiguous: it names {', '.join(sorted(candidates))}",
                             "ambiguous-class")


def _class_path_hint(class_path: str, code: str, folder: Path) -> str:
    """The hint for a class path that does not resolve, with the nearest names as for ports
    (problems.suggest), naming only classes that exist: of the module's Streamlet classes for
    class-not-found; for module-not-found, the Streamlet classes of the blueprint's folder of that
    name in other modules, else the nearest class paths there (else where class paths resolve)."""
    module_name, _, attr = class_path.replace(":", ".").rpartition(".")
    if code == "class-not-found":
        module = sys.modules.get(module_name)
        names = [n for n, v in vars(module).items() if _is_streamlet_class(v)] if module is not None else []
        return suggest(attr, names, f"Streamlet classes in module {module_name!r}",
                       form=f"{module_name}.{{}}")
    try:  # importing the folder's modules: one that fails on import is the user's to fix
        classes = _streamlet_classes_in(folder)
    except (Exception, SystemExit):
        classes = {}
    same_name = classes.get(attr, [])
    if same_name:  # the class exists, in another module
        return suggest(class_path, same_name, f"Streamlet classes named {attr!r} in {folder}")
    paths = [path for found in classes.values() for path in found]
    if not nearest(class_path, paths):
        return f"class paths resolve against the blueprint's folder {folder}"
    return suggest(class_path, paths, "Streamlet classes")


def _is_streamlet_class(value: Any) -> bool:
    from streamlets.streamlet import Streamlet

    return isinstance(value, type) and issubclass(value, Streamlet) and not value.is_abstract()


def _streamlet_classes_in(folder: Path) -> dict[str, list[str]]:
    """Class name -> `module.Class` paths of the Streamlet subclasses defined in `folder`'s modules.

    Modules that fail to import are skipped here (naming them fully reports their error).
    """
    import pkgutil

    from streamlets.streamlet import Streamlet

    found: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages([str(folder)], onerror=lambda _: None):
        leaf = info.name.rpartition(".")[2]
        if leaf.startswith(("test", "_")) or leaf in ("conftest", "setup"):
            continue
        try:
            module = importlib.import_module(info.name)
        except (Exception, SystemExit):
            continue
        for attr, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, Streamlet) and value.__module__ == info.name
                    and not value.is_abstract()):
                found.setdefault(attr, []).append(f"{info.name}.{attr}")
    return found


def _import_failure(error: BaseException, class_path: str, folder: str) -> "StreamletLoadError":
    from streamlets.errors import StreamletDefinitionError
    from streamlets.loading import StreamletLoadError

    module = class_path.replace(":", ".").rpartition(".")[0]
    if isinstance(error, StreamletDefinitionError):  # the class declares something invalid
        where = _user_frame(error, folder)
        return StreamletLoadError(f"{error}{f' (at {where})' if where else ''}", "invalid-definition",
                                  [p._replace(message=f"{p.message}{f' (class at {where})' if where else ''}")
                                   for p in error.problems])
    return StreamletLoadError(f"cannot import module {module!r} for {class_path!r}: {_summary(error, folder)}",
                              "import-failed")


def _summary(error: BaseException, folder: str) -> str:
    """`Type: message (at file:line)` naming the deepest frame of the user's code, if any."""
    text = f"{type(error).__name__}: {error}".rstrip(": ")
    if isinstance(error, SyntaxError):
        return text  # its message already names the file and line
    where = _user_frame(error, folder)
    return f"{text} (at {where})" if where else text


def _user_frame(error: BaseException, folder: str) -> str | None:
    """`file:line` of the deepest frame of the user's code in the error's traceback, if any."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_user_file(f.filename)]
    # Frames in the blueprint's folder first: that is the code the user is working on.
    mine = [f for f in frames if f.filename.startswith(folder)] or frames
    if not mine:
        return None
    frame = mine[-1]
    try:
        shown = str(Path(frame.filename).relative_to(folder))
    except ValueError:
        shown = frame.filename
    return f"{shown}:{frame.lineno}"


_NOT_USER_CODE = tuple({sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parent.parent / "streamlets")})


def _is_user_file(filename: str) -> bool:
    """False for frozen modules, the standard library, installed packages and the SDK itself."""
    return not filename.startswith("<") and not filename.startswith(_NOT_USER_CODE) and filename != __file__
