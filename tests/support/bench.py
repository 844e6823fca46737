"""Loading a benchmark script (bench/<name>.py) as a module for its smoke tests."""

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


@contextmanager
def bench_module(name: str):
    """bench/<name>.py imported as module `name` (registered in sys.modules while in use, as the
    benchmark's own imports of its sibling modules expect); it and the bench/ modules it imported
    are unregistered afterwards."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for added in set(sys.modules) - before:
            if Path(getattr(sys.modules[added], "__file__", None) or "/").parent == BENCH:
                sys.modules.pop(added, None)
