"""The Streamlets on Spark operator (kopf): `kopf run --module=streamlets_operator`.

Importing the package registers the handlers (handlers.py) and the operations server's startup
(api.py: the REST API, web view and /metrics of blueprint.ops over the Kubernetes API). The other
modules have one job each: render.py (spec -> child manifests, pure), topics.py (Kafka topics),
status.py (status and Events), kube.py (the Kubernetes API calls), commands.py (control-stream
commands), metrics.py (the operator's own Prometheus metrics), scrape.py (the drivers' metrics pages),
autoscaling.py (the autoscaler's decisions per streamlet; its timer is in handlers.py).
"""

from . import api, handlers  # noqa: F401  (register the kopf handlers)
