"""Importing the streamlet classes a blueprint names, with messages that point at the user's code.

import_streamlets never raises for a user's module: a class path that does not resolve, or a
module whose import fails, becomes a StreamletLoadError (streamlets.loading) naming the file and
line of the user's code and, where one exists, the nearest class names.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import Blueprint
from .problems import nearest, suggest

if TYPE_CHECKING:
    from streamlets.loading import StreamletLoadError
    from streamlets.streamlet import Streamlet

__all__ = ["import_streamlets", "summarize_failure"]


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
    return StreamletLoadError(f"cannot import module {module!r} for {class_path!r}: {summarize_failure(error, folder)}",
                              "import-failed")


def summarize_failure(error: BaseException, folder: str) -> str:
    """`Type: message (at file:line)` for an exception raised by the user's code: the deepest frame
    of it in the traceback (preferring files under `folder`, the blueprint's); a SyntaxError's own
    message already names its file and line."""
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
