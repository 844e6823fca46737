"""The Kubernetes API, through the official client: create-or-replace of the children by their
spec-hash annotation, listing and deleting what an application owns. API failures become kopf
errors: TemporaryError (retried) for transient ones, PermanentError for rejected manifests."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import kopf

from .render import ANNOTATION_HASH, LABEL_APP, SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION
from streamlets.errors import StreamletError

_lock = threading.Lock()
_client = None


def api_client():
    """One ApiClient per process: in-cluster config, else KUBECONFIG / ~/.kube/config."""
    global _client
    with _lock:
        if _client is None:
            from kubernetes import client, config

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            _client = client.ApiClient()
        return _client


def core():
    """The Kubernetes CoreV1Api on the operator's API client."""
    from kubernetes import client

    return client.CoreV1Api(api_client())


def custom():
    """The Kubernetes CustomObjectsApi on the operator's API client."""
    from kubernetes import client

    return client.CustomObjectsApi(api_client())


class NotFound(StreamletError):
    pass


def call(what: str, fn: Callable, *args, **kwargs) -> Any:
    """fn(*args, **kwargs) with API errors mapped: 404 -> NotFound, 400/403/422 -> PermanentError,
    anything else (409, 429, 5xx, connection errors) -> TemporaryError."""
    from kubernetes.client.exceptions import ApiException

    try:
        return fn(*args, **kwargs)
    except ApiException as e:
        if e.status == 404:
            raise NotFound(what) from None
        detail = _message(e)
        if e.status in (400, 403, 422):
            raise kopf.PermanentError(f"{what}: the API server refused it ({e.status}): {detail}") from None
        raise kopf.TemporaryError(f"{what}: {e.status} {detail}", delay=5) from None
    except Exception as e:  # urllib3 connection errors, timeouts and the like: retried
        raise kopf.TemporaryError(f"{what}: {type(e).__name__}: {e}", delay=5) from None


def _message(e) -> str:
    import json

    try:
        return json.loads(e.body).get("message") or e.reason
    except Exception:
        return str(e.reason)


def _hash(obj: dict[str, Any] | None) -> str | None:
    if obj is None:
        return None
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HASH)


# --- Secrets ------------------------------------------------------------------------------------

def get_secret(ns: str, name: str) -> dict | None:
    """Secret `name` in `ns` as a plain dict (API field names), or None if there is none; other API errors as
    `call` maps them."""
    try:
        return api_client().sanitize_for_serialization(call(f"reading Secret {name}", core().read_namespaced_secret, name, ns))
    except NotFound:
        return None


def apply_secret(desired: dict[str, Any]) -> str | None:
    """Create or replace the Secret; None if it was up to date, else 'created' or 'replaced'."""
    meta = desired["metadata"]
    ns, name = meta["namespace"], meta["name"]
    existing = get_secret(ns, name)
    if existing is None:
        call(f"creating Secret {name}", core().create_namespaced_secret, ns, desired)
        return "created"
    if _hash(existing) == _hash(desired) and existing.get("data") == desired.get("data"):
        return None
    body = {**desired, "metadata": {**meta, "resourceVersion": existing["metadata"]["resourceVersion"]}}
    call(f"replacing Secret {name}", core().replace_namespaced_secret, name, ns, body)
    return "replaced"


# --- SparkApplications --------------------------------------------------------------------------

def get_spark_app(ns: str, name: str) -> dict | None:
    """SparkApplication `name` in `ns` as a dict, or None if there is none."""
    try:
        return call(f"reading SparkApplication {name}", custom().get_namespaced_custom_object,
                    SPARK_GROUP, SPARK_VERSION, ns, SPARK_PLURAL, name)
    except NotFound:
        return None


# How long a replacement waits, within one handler call, for the old SparkApplication to be gone
# (seconds); the Spark Operator puts no finalizer on it, so it is gone at once.
REPLACE_WAIT = 30.0


def apply_spark_app(desired: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Create the SparkApplication, or replace it when its spec-hash differs: (object, what was done:
    'created', 'replaced' or None when it was up to date).

    A replacement deletes the old SparkApplication and creates the new one once the old one is gone
    (its driver pod goes with it: the Spark Operator's webhook makes the application its owner).
    It is not an update in place: the Spark Operator handles a spec update as best effort (its event
    filter sets the state to INVALIDATING and gives up on a conflict), and an update landing while
    the driver ended (a stop with a savepoint before an upgrade) left the application COMPLETED on
    the new spec, never run again. Raises kopf.TemporaryError (retried) while the old one is still
    there after REPLACE_WAIT seconds."""
    meta = desired["metadata"]
    ns, name = meta["namespace"], meta["name"]
    existing = get_spark_app(ns, name)
    done = "created"
    if existing is not None:
        deleting = bool(existing["metadata"].get("deletionTimestamp"))
        if not deleting and _hash(existing) == _hash(desired):
            return existing, None
        if not deleting:
            delete_spark_app(ns, name)
        deadline = time.monotonic() + REPLACE_WAIT
        while get_spark_app(ns, name) is not None:
            if time.monotonic() > deadline:
                raise kopf.TemporaryError(f"SparkApplication {name} was deleted to be created with its new spec, "
                                          "and is not gone yet", delay=5)
            time.sleep(0.5)
        done = "replaced"
    try:
        obj = call(f"creating SparkApplication {name}", custom().create_namespaced_custom_object,
                   SPARK_GROUP, SPARK_VERSION, ns, SPARK_PLURAL, desired)
    except NotFound:
        raise kopf.TemporaryError("the SparkApplication CRD (sparkoperator.k8s.io/v1beta2) is not installed: "
                                  "install the Kubernetes Spark Operator", delay=15) from None
    return obj, done


# --- claims -------------------------------------------------------------------------------------

def ensure_claim(desired: dict[str, Any]) -> bool:
    """Create the claim if missing (a claim's spec is immutable: never replaced). True if created."""
    meta = desired["metadata"]
    try:
        call(f"reading PersistentVolumeClaim {meta['name']}", core().read_namespaced_persistent_volume_claim,
             meta["name"], meta["namespace"])
        return False
    except NotFound:
        pass
    from kubernetes.client.exceptions import ApiException

    try:
        core().create_namespaced_persistent_volume_claim(meta["namespace"], desired)
    except ApiException as e:
        if e.status != 409:  # created meanwhile: fine
            call(f"creating PersistentVolumeClaim {meta['name']}", _raise, e)
    return True


def claim_access_modes(ns: str, name: str) -> list[str] | None:
    """The access modes of the claim `name` as it exists (its status once bound, else its spec), or
    None if there is no such claim."""
    try:
        claim = call(f"reading PersistentVolumeClaim {name}", core().read_namespaced_persistent_volume_claim, name, ns)
    except NotFound:
        return None
    return list((claim.status and claim.status.access_modes) or claim.spec.access_modes or [])


def _raise(e):
    raise e


# --- what an application owns -------------------------------------------------------------------

def _owned(items: list[dict], uid: str) -> list[dict]:
    return [i for i in items if any(r.get("uid") == uid for r in (i.get("metadata") or {}).get("ownerReferences") or [])]


def owned_spark_apps(ns: str, app: str, uid: str) -> list[dict]:
    """The SparkApplications in `ns` labelled with application `app` whose owner references include `uid`; []
    if the SparkApplication CRD is not installed."""
    try:
        found = call("listing SparkApplications", custom().list_namespaced_custom_object, SPARK_GROUP, SPARK_VERSION,
                     ns, SPARK_PLURAL, label_selector=f"{LABEL_APP}={app}")
    except NotFound:  # no CRD: nothing to own
        return []
    return _owned(found.get("items") or [], uid)


def owned_secrets(ns: str, app: str, uid: str) -> list[dict]:
    """The Secrets in `ns` labelled with application `app` and owned by `uid`, as dicts."""
    found = call("listing Secrets", core().list_namespaced_secret, ns, label_selector=f"{LABEL_APP}={app}")
    return _owned(api_client().sanitize_for_serialization(found).get("items") or [], uid)


def owned_claims(ns: str, app: str, uid: str) -> list[dict]:
    """The PersistentVolumeClaims in `ns` labelled with application `app` and owned by `uid`, as dicts."""
    found = call("listing PersistentVolumeClaims", core().list_namespaced_persistent_volume_claim, ns,
                 label_selector=f"{LABEL_APP}={app}")
    return _owned(api_client().sanitize_for_serialization(found).get("items") or [], uid)


def delete_spark_app(ns: str, name: str) -> None:
    """Delete SparkApplication `name` in `ns`; one already gone is fine."""
    try:
        call(f"deleting SparkApplication {name}", custom().delete_namespaced_custom_object,
             SPARK_GROUP, SPARK_VERSION, ns, SPARK_PLURAL, name)
    except NotFound:
        pass


def delete_secret(ns: str, name: str) -> None:
    """Delete Secret `name` in `ns`; one already gone is fine."""
    try:
        call(f"deleting Secret {name}", core().delete_namespaced_secret, name, ns)
    except NotFound:
        pass


def delete_claim(ns: str, name: str) -> None:
    """Delete PersistentVolumeClaim `name` in `ns`; one already gone is fine."""
    try:
        call(f"deleting PersistentVolumeClaim {name}", core().delete_namespaced_persistent_volume_claim, name, ns)
    except NotFound:
        pass
