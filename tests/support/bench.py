"""Loading a benchmark script (bench/<name>.py) as a module for its smoke tests."""

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


@contextmanager
def bench_module(name: str):
    """bench/<name>.py imported as module `name` (registered in sys.modules while in use, as the
    benchmark's own imports of bench_map expect); unregistered afterwards."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.modules.pop("bench_map", None)
