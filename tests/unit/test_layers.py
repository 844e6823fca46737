"""The layers point one way and no module imports itself back (tests the import graph, counting
imports inside functions and type-only imports under `if TYPE_CHECKING:`: a type a module names
is a dependency too, and a circle closed by one is still a circle). The benchmark scripts in
bench/ import each other by bare name: their graph must have no circle either.

Layers, lowest first (README, Architecture): the SDK (streamlets/*.py but the facades), the
runtime (streamlets/runtime/), state operations (streamlets/state/); the blueprint spec
(model, loader, verify, problems, graph, configcheck, topics) over the SDK; deployment
(blueprint/deploy/), the sandbox (blueprint/sandbox/), then the CLIs (blueprint/cli/); the
operator (operator/streamlets_operator) over the runtime and deployment.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"streamlets": ROOT / "streamlets", "blueprint": ROOT / "blueprint",
            "streamlets_operator": ROOT / "operator" / "streamlets_operator"}

# The SDK's facades compose the layers under them (the test kit runs streamlets; the driver and
# the runner shim start one; the package's __init__ exports the runtime's StreamletContext and
# ControlInlet and the test kit's run_streamlet, imported on first use); every other top-level
# module of streamlets/ is the SDK proper.
FACADES = {"streamlets", "streamlets.testkit", "streamlets.driver", "streamlets.runner"}


def _modules() -> dict[str, Path]:
    out = {}
    for top, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Project modules `module` imports, anywhere in its body (functions, `if TYPE_CHECKING:`)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in known:  # `from pkg.mod import name`: the deepest known module
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (hit := resolve(alias.name)) is not None:
                    found.add(hit)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                hit = resolve(f"{prefix}.{alias.name}") or resolve(prefix)
                if hit is not None:
                    found.add(hit)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(module)
    # a package's __init__ importing its own submodules is not a dependency on the package
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        deps = _imports(name, path, known)
        # importing `a.b.c` runs `a/__init__` and `a/b/__init__` first: a real dependency too,
        # but not for modules inside that package (Python has started those inits already)
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    return graph


def bench_graph() -> dict[str, set[str]]:
    """bench/'s scripts and modules (imported by bare name, `from bench_map import ...`) and the
    ones each imports."""
    modules = {path.stem: path for path in (ROOT / "bench").glob("*.py")}
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def layer(module: str) -> str:
    if module.startswith("streamlets_operator"):
        return "operator"
    parts = module.split(".")
    if parts[0] == "streamlets":
        if module in FACADES:
            return "facade"
        if len(parts) > 1 and parts[1] in ("runtime", "state"):
            return parts[1]
        return "sdk"
    if len(parts) > 1 and parts[1] in ("deploy", "sandbox", "cli", "ops"):
        return parts[1]
    return "spec"


# What each layer may import (besides itself).
ALLOWED = {
    "sdk": set(),
    "runtime": {"sdk"},
    "state": {"sdk", "runtime"},
    "facade": {"sdk", "runtime", "state", "facade"},
    "spec": {"sdk", "runtime"},  # runtime: only streamlets.runtime.control's topic names (topics.py)
    "deploy": {"sdk", "runtime", "spec"},
    "ops": {"sdk", "runtime", "spec"},  # the operations API, metrics and web view over a backend
    "sandbox": {"sdk", "runtime", "state", "spec", "ops"},
    "cli": {"sdk", "runtime", "state", "spec", "deploy", "sandbox", "ops"},
    "operator": {"sdk", "runtime", "state", "deploy", "ops", "operator"},  # deploy: the CRD contract (crd.py)
}


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None


def test_no_import_cycles_in_bench():
    assert find_cycle(bench_graph()) is None


def test_the_check_finds_a_cycle_in_bench_when_one_is_added():
    graph = bench_graph()
    assert "flight_workload" in graph["bench_map"] and "flight_workload" in graph["bench_latency"]
    graph["flight_workload"] = graph["flight_workload"] | {"bench_latency"}
    cycle = find_cycle(graph)
    assert cycle is not None and "bench_latency" in cycle and "flight_workload" in cycle


def test_layers_point_one_way():
    wrong = sorted(f"{m} ({layer(m)}) imports {d} ({layer(d)})"
                   for m, deps in import_graph().items() for d in deps
                   if layer(d) != layer(m) and layer(d) not in ALLOWED[layer(m)])
    assert wrong == []


def test_the_check_finds_a_cycle_when_one_is_added():
    graph = import_graph()
    assert "streamlets.runtime.runner" in graph and "streamlets.state.restore" in graph["streamlets.state.restore"] | {
        "streamlets.state.restore"}
    graph["streamlets.runtime.runner"] = graph["streamlets.runtime.runner"] | {"streamlets.state.restore"}
    cycle = find_cycle(graph)
    assert cycle is not None and "streamlets.runtime.runner" in cycle and "streamlets.state.restore" in cycle


def test_the_parser_counts_type_only_imports_and_imports_inside_functions(tmp_path):
    pkg = tmp_path / "streamlets" / "runtime"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..state import y\n"
                              "def f():\n    from ..state.restore import check_restore\n")
    deps = _imports("streamlets.runtime.x", pkg / "x.py", {"streamlets.state", "streamlets.state.restore", "streamlets.state.y"})
    assert deps == {"streamlets.state.y", "streamlets.state.restore"}


@pytest.mark.parametrize("command", ["verify", "graph"])
def test_verify_and_graph_leave_pyspark_unimported(command):
    example = ROOT / "tests" / "unit" / "fixtures"
    blueprints = sorted(example.rglob("blueprint.yaml"))
    assert blueprints, "no fixture blueprint"
    code = ("import sys\nfrom blueprint.cli import app\n"
            "try:\n    app([%r, %r], prog_name='blueprint', standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print('pyspark' in sys.modules)" % (command, str(blueprints[0])))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "False", done.stdout + done.stderr  # the classes loaded, Spark did not
    assert ("sound (3 streamlets" in done.stdout) if command == "verify" else len(lines) > 3, done.stdout + done.stderr
