"""The command-line interfaces: `blueprint` (app: verify, graph, build, run; state: savepoint,
restore, state export/repartition, control) and `kubectl streamlets` (kubectl: deploy, status,
configure, savepoints and restore on a cluster). They share one exit-code contract: 0 sound or
done, 1 problems found or refused, 2 usage (a file or option that cannot be used).
"""

from .app import app, main

__all__ = ["app", "main"]
