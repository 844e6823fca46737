"""The Streamlets on Spark operator (kopf): `kopf run --module=streamlets_operator`.

Importing the package registers the handlers (handlers.py). The other modules have one job each:
render.py (spec -> child manifests, pure), topics.py (Kafka topics), status.py (status and
Events), kube.py (the Kubernetes API calls).
"""

from . import handlers  # noqa: F401  (registers the kopf handlers)
