"""Class loading: a blueprint's or run config's `module.Class` to a concrete Streamlet subclass.

Part of the SDK layer: importing it does not import pyspark, so `blueprint verify` and `blueprint
graph` load an application's classes without Spark (unless the user's modules import it).
"""

from __future__ import annotations

import importlib
import re

from .errors import StreamletError
from .streamlet import Streamlet


class StreamletLoadError(StreamletError):
    """The class named in a blueprint or run config cannot be imported or is not a Streamlet.

    `code` says which (the verifier's problem codes): invalid-class-path, module-not-found,
    class-not-found, ambiguous-class, not-a-streamlet, abstract-streamlet, import-failed,
    invalid-definition (then `problems` lists the class's invalid declarations). `hint`: the nearest
    class names, when the blueprint's importer (blueprint.classes) found some.
    """

    def __init__(self, message: str, code: str = "import-failed", problems: list | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.problems = problems or []
        self.hint: str | None = None


# A dotted Python path, optionally with ':' before the class (`pkg.module:Class`).
_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


def load_streamlet_class(class_name: str) -> type[Streamlet]:
    """Import `module.Class` (or `module:Class`) and check it is a concrete Streamlet subclass.

    Raises StreamletLoadError (see its codes); exceptions raised by the user's module while it
    is imported propagate unchanged (the caller summarizes them).
    """
    if not isinstance(class_name, str) or not _CLASS_PATH.match(class_name):
        raise StreamletLoadError(f"{class_name!r} is not a class path of the form module.Class "
                                 "(Python identifiers separated by dots)", "invalid-class-path")
    module_name, sep, attr = class_name.replace(":", ".").rpartition(".")
    if not sep or not module_name:
        raise StreamletLoadError(f"{class_name!r} is not a class path of the form module.Class", "invalid-class-path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):  # the module itself, not one it imports
            raise StreamletLoadError(f"cannot import module {module_name!r} for {class_name!r}: {e}",
                                     "module-not-found") from None
        raise
    cls = getattr(module, attr, None)
    if cls is None:
        raise StreamletLoadError(f"module {module_name!r} has no class {attr!r}", "class-not-found")
    return check_streamlet_class(cls, class_name)


def check_streamlet_class(cls: object, class_name: str) -> type[Streamlet]:
    """`cls` if it is a concrete Streamlet subclass, else StreamletLoadError."""
    if not (isinstance(cls, type) and issubclass(cls, Streamlet)):
        raise StreamletLoadError(f"{class_name!r} is not a Streamlet subclass", "not-a-streamlet")
    if cls.is_abstract():
        raise StreamletLoadError(f"{class_name!r} does not implement create_logic(ctx)", "abstract-streamlet")
    return cls
