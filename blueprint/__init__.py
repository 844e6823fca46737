"""Blueprints: applications of streamlets connected through Kafka topics.

The spec at this package's top level (model, loader, verify, problems, graph, configcheck,
topics: no Spark at import), deployment in blueprint.deploy (the CRD contract, `blueprint
build`), the local sandbox in blueprint.sandbox (`blueprint run`: an embedded Kafka broker and
local Spark) and the commands in blueprint.cli (`blueprint`, `kubectl streamlets`). See README,
Architecture.

The spec's public API, exported here (but `verify` itself: `blueprint.verify` stays the module,
so import the function from it)::

    from blueprint import build_graph, load_blueprint, resolve, to_text
    from blueprint.verify import verify

    bp = load_blueprint("blueprint.yaml")     # Blueprint; BlueprintLoadError names file, line, column
    problems = verify(bp)                     # list[Problem], errors and warnings, in report order
    print(to_text(build_graph(bp, resolve(bp).descriptors)))
"""

from .errors import BlueprintError
from .graph import (
    AppGraph,
    GraphvizError,
    GraphvizMissingError,
    build_graph,
    render_image,
    to_dot,
    to_mermaid,
    to_text,
)
from .loader import BlueprintLoadError, BlueprintReadError, import_streamlets, load_blueprint
from .model import Blueprint, LoadProblem, PortPath, PortRef, StreamletRef, Topic
from .problems import Problem
from .verify import Binding, InstantiationError, Resolved, check, resolve

__all__ = [
    "AppGraph", "Binding", "Blueprint", "BlueprintError", "BlueprintLoadError", "BlueprintReadError",
    "GraphvizError", "GraphvizMissingError", "InstantiationError", "LoadProblem", "PortPath", "PortRef", "Problem",
    "Resolved", "StreamletRef", "Topic", "build_graph", "check", "import_streamlets", "load_blueprint",
    "render_image", "resolve", "to_dot", "to_mermaid", "to_text",
]
