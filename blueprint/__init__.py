"""Blueprints: applications of streamlets connected through Kafka topics.

The spec at this package's top level (model, loader, verify, problems, graph, configcheck,
topics: no Spark at import), deployment in blueprint.deploy (the CRD contract, `blueprint
build`), the local sandbox in blueprint.sandbox (`blueprint run`: an embedded Kafka broker and
local Spark) and the commands in blueprint.cli (`blueprint`, `kubectl streamlets`). See README,
Architecture.
"""
