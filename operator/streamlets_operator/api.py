"""The operations API on a cluster (blueprint.ops): the StreamletApplications this operator manages,
their live figures scraped from each streamlet's driver, dead letters, savepoints and control
commands, plus the operator's own metrics (metrics.py). Served by the operator itself (the startup
handler below, on kopf's event loop) on $STREAMLETS_API_PORT (default 8081; 0 or `off`: not served).

Kubernetes decides who may do what, as for kubectl: a caller's bearer token is authenticated with a
TokenReview, and each request is authorized with a SubjectAccessReview of the caller's verb on the
application (streamletapplications.streamlets.io): list, get, or patch for commands and savepoints.
The operator acts with its own credentials only after the review allowed the caller the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import kopf
from pydantic import ValidationError

from blueprint.deploy.crd import GROUP, PLURAL, REQUEST_ANNOTATION, RESULT_GRACE_SECONDS, VERSION
from blueprint.deploy.spec import ApplicationSpec
from blueprint.ops.backend import BadRequest, Forbidden, NotFound, OpsError, Unauthorized
from blueprint.ops.deadletters import recent_dead_letters
from blueprint.ops.figures import RateTracker, Sample, fill
from blueprint.ops.model import (ApplicationSummary, AutoscalingView, ApplicationView, CommandRequest, CommandResultView, DeadLetterView,
                                 SavepointView, StreamletView, TopicView, Verb)
from streamlets.kafka_security import KafkaConnection
from streamlets.runtime.runconfig import port_setting
from streamlets.runtime.system_topics import dead_letter_topic

from . import commands, kafka, kube, metrics, render, scrape

log = logging.getLogger("streamlets.operator.api")

API_PORT_ENV = "STREAMLETS_API_PORT"
API_PORT = 8081  # kopf's liveness endpoint is on 8080 (the chart's livenessProbe.port, the image's CMD)
SCRAPE_TIMEOUT = scrape.TIMEOUT
REVIEW_CACHE_SECONDS = 5.0
# The Spark Operator's labels on a SparkApplication's driver pod.
SPARK_ROLE, SPARK_APP_NAME = render.SPARK_ROLE, render.SPARK_APP_NAME
# A SparkApplication's state (status.applicationState.state) -> a streamlet's status in the API.
STATES = {"RUNNING": "running", "SUBMITTED": "starting", "PENDING": "starting", "PENDING_SUBMISSION": "starting",
          "PENDING_RERUN": "restarting", "RESTARTING": "restarting", "INVALIDATING": "starting", "RESUMING": "starting",
          "FAILED": "failed", "SUBMISSION_FAILED": "failed", "FAILING": "failed", "UNKNOWN": "failed",
          "COMPLETED": "stopped", "SUCCEEDING": "stopped", "SUSPENDED": "stopped", "SUSPENDING": "stopped"}


class Timeout(OpsError):
    """The operator did not record a command's results in time."""

    status = 504


class Caller(NamedTuple):
    """Who the TokenReview says the token belongs to (what a SubjectAccessReview needs)."""

    user: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


def api_port(env: dict[str, str] | os._Environ | None = None) -> int | None:
    """$STREAMLETS_API_PORT, else API_PORT; None when it is 0 or `off`. ValueError for anything else."""
    return port_setting(API_PORT_ENV, API_PORT, env)


def watched_namespaces(env: dict[str, str] | os._Environ | None = None) -> list[str] | None:
    """The namespaces the operator watches ($STREAMLETS_WATCH_NAMESPACES, comma-separated, as the
    chart sets it); None: every namespace."""
    text = (os.environ if env is None else env).get("STREAMLETS_WATCH_NAMESPACES", "")
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names or None


def _spec(item: dict[str, Any]) -> ApplicationSpec | None:
    """The resource's spec as its model (blueprint.deploy.spec), or None when it does not validate:
    the API shows every resource the operator sees, also one it cannot deploy (status Failed), as
    an application without streamlets, topics or Kafka."""
    try:
        return render.typed(item.get("spec") or {})
    except ValidationError:
        return None


def _dead_letter_topic(spec: ApplicationSpec | None, name: str) -> str:
    """An application's dead-letter topic: spec.deadLetterTopic, else the system topic of its app
    id (spec.appId, else the resource's name `name`; streamlets.runtime.system_topics)."""
    return (spec.dead_letter_topic if spec else None) or dead_letter_topic(spec.app_id if spec else name)


class OperatorBackend:
    """OpsBackend over the Kubernetes API: the applications of the watched namespaces."""

    requires_token = True

    def __init__(self, namespaces: list[str] | None = None, command_timeout: float | None = None,
                 scrape_timeout: float = SCRAPE_TIMEOUT) -> None:
        self.namespaces = namespaces
        # the operator sends and waits up to commands.TIMEOUT; then it writes the status
        self.command_timeout = command_timeout if command_timeout is not None else commands.TIMEOUT + RESULT_GRACE_SECONDS
        self.scrape_timeout = scrape_timeout
        self.rates = RateTracker()
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[float, Caller]] = {}
        self._reviews: dict[tuple, tuple[float, bool, str]] = {}
        self._app_locks: dict[tuple[str, str], threading.Lock] = {}

    # --- who may do what ----------------------------------------------------------------------

    def authorize(self, token: str | None, verb: Verb, namespace: str | None, name: str | None) -> Caller:
        """The caller behind a bearer token, after Kubernetes allowed it `verb` on the application
        `namespace`/`name` (all applications when name is None). Authenticates with a TokenReview and
        authorizes with a SubjectAccessReview (a list of every namespace needs no review: the result is
        filtered per namespace). Raises Unauthorized without a token or for one the API server rejects,
        BadRequest for a verb other than list without a namespace, Forbidden with Kubernetes' reason,
        OpsError when a review cannot be made."""
        if not token:
            raise Unauthorized("no credentials: send a Kubernetes bearer token (Authorization: Bearer <token>; "
                               "kubectl create token ... makes one)")
        caller = self._authenticate(token)
        if verb == "list" and namespace is None:
            return caller
        if namespace is None:
            raise BadRequest(f"{verb} needs a namespace")
        allowed, reason = self._review(caller, verb, namespace, name)
        if not allowed:
            what = f'{PLURAL}.{GROUP} "{name}"' if name else f"{PLURAL}.{GROUP}"
            raise Forbidden(f'{what} is forbidden: User "{caller.user}" cannot {verb} resource "{PLURAL}" in API group '
                            f'"{GROUP}" in the namespace "{namespace}"' + (f": {reason}" if reason else ""))
        return caller

    def _authenticate(self, token: str) -> Caller:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        try:
            result = client.AuthenticationV1Api(kube.api_client()).create_token_review(review)
        except ApiException as e:
            raise OpsError(f"cannot review the token (TokenReview: {e.status} {scrape.api_message(e)})") from None
        status = result.status
        if status is None or not status.authenticated or status.user is None:
            raise Unauthorized("the token is not valid" + (f": {status.error}" if status is not None and status.error else ""))
        user = status.user
        caller = Caller(user.username or "", user.uid or "", tuple(user.groups or ()),
                        tuple(sorted((k, tuple(v or ())) for k, v in (user.extra or {}).items())))
        with self._lock:
            if len(self._tokens) > 1000:
                self._tokens.clear()
            self._tokens[key] = (now + REVIEW_CACHE_SECONDS, caller)
        return caller

    def _review(self, caller: Caller, verb: str, namespace: str, name: str | None) -> tuple[bool, str]:
        """A SubjectAccessReview of `verb` on the application (or on all of them in the namespace,
        name None) for the caller; (allowed, the reason the authorizer gave), cached a few seconds."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        key = (caller, verb, namespace, name)
        now = time.monotonic()
        with self._lock:
            cached = self._reviews.get(key)
            if cached is not None and cached[0] > now:
                return cached[1], cached[2]
        attributes = client.V1ResourceAttributes(group=GROUP, resource=PLURAL, verb=verb, namespace=namespace, name=name)
        spec = client.V1SubjectAccessReviewSpec(user=caller.user, uid=caller.uid or None, groups=list(caller.groups),
                                                extra={k: list(v) for k, v in caller.extra} or None,
                                                resource_attributes=attributes)
        try:
            result = client.AuthorizationV1Api(kube.api_client()).create_subject_access_review(
                client.V1SubjectAccessReview(spec=spec))
        except ApiException as e:
            raise OpsError(f"cannot review the access (SubjectAccessReview: {e.status} {scrape.api_message(e)})") from None
        allowed = bool(result.status and result.status.allowed and not result.status.denied)
        reason = (result.status.reason or "") if result.status else ""
        with self._lock:
            if len(self._reviews) > 10000:
                self._reviews.clear()
            self._reviews[key] = (now + REVIEW_CACHE_SECONDS, allowed, reason)
        return allowed, reason

    # --- reading ------------------------------------------------------------------------------

    def _read(self, namespace: str, name: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        if self.namespaces is not None and namespace not in self.namespaces:
            raise NotFound(f"no application {namespace}/{name}: the operator does not watch namespace {namespace}")
        try:
            return kube.custom().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                raise NotFound(f"no application {namespace}/{name}") from None
            raise OpsError(f"reading {namespace}/{name}: {e.status} {scrape.api_message(e)}") from None

    def _list(self) -> list[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        try:
            if self.namespaces is None:
                return kube.custom().list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items") or []
            return [item for ns in self.namespaces
                    for item in kube.custom().list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL).get("items") or []]
        except ApiException as e:
            raise OpsError(f"listing applications: {e.status} {scrape.api_message(e)}") from None

    @staticmethod
    def _summary(item: dict[str, Any]) -> ApplicationSummary:
        meta, spec, st = item["metadata"], _spec(item), item.get("status") or {}
        # an invalid spec's streamlets are counted as listed (as status.failed_status does)
        count = len(spec.streamlets) if spec else len((item.get("spec") or {}).get("streamlets") or [])
        return ApplicationSummary(namespace=meta["namespace"], name=meta["name"], app_id=spec.app_id if spec else meta["name"],
                                  phase=st.get("phase") or "Pending", ready=st.get("ready") or f"0/{count}")

    def applications(self, caller: Caller) -> list[ApplicationSummary]:
        """Every application the operator sees that the caller may get (a review per namespace)."""
        items = self._list()
        allowed = {ns: self._review(caller, "get", ns, None)[0] for ns in {i["metadata"]["namespace"] for i in items}}
        return sorted((self._summary(i) for i in items if allowed[i["metadata"]["namespace"]]),
                      key=lambda s: (s.namespace, s.name))

    def application(self, namespace: str, name: str) -> ApplicationView:
        """The application's view (blueprint.ops.model.ApplicationView: streamlets, topics, dead-letter topic)
        with the live figures scraped from its streamlets' drivers (rates from this backend's RateTracker).
        Raises NotFound for an application the operator does not watch or that does not exist."""
        item = self._read(namespace, name)
        view = self._view(item)
        samples = self._scrape(item, view)
        return fill(view, samples, self.rates)

    def _view(self, item: dict[str, Any]) -> ApplicationView:
        spec, st = _spec(item), item.get("status") or {}
        states = st.get("streamlets") or {}
        streamlets = []
        for s in spec.streamlets if spec else []:
            port_topics = s.port_topics or {}
            ports = {kind: {p["name"]: port_topics[p["name"]] for p in s.descriptor.get(kind) or []
                            if p.get("name") in port_topics} for kind in ("inlets", "outlets")}
            live = states.get(s.name) or {}
            auto = live.get("autoscaling") or {}
            autoscaling = AutoscalingView(
                mode=auto["mode"], target_executors=auto.get("targetExecutors"), direction=auto.get("direction"),
                held=auto.get("held"), reason=auto.get("reason"), last_scaled=auto.get("lastScaled"),
                last_scaled_at=auto.get("lastScaledAt")) if auto.get("mode") not in (None, "off") else None
            streamlets.append(StreamletView(name=s.name, class_name=s.class_name,
                                            status=STATES.get(live.get("state") or "", "unknown"), inlets=ports["inlets"],
                                            outlets=ports["outlets"], restarts=live.get("restarts"),
                                            autoscaling=autoscaling))
        topics = [TopicView(id=t.id, name=t.name, producers=list(t.producers), consumers=list(t.consumers))
                  for t in ((spec.topics if spec else None) or [])]
        return ApplicationView(**self._summary(item).model_dump(), streamlets=streamlets, topics=topics,
                               dead_letter_topic=_dead_letter_topic(spec, item["metadata"]["name"]))

    def _scrape(self, item: dict[str, Any], view: ApplicationView) -> list[Sample]:
        """Every streamlet driver's samples (scrape.driver_samples); a streamlet whose driver cannot
        be read gets metrics_error."""
        found = scrape.driver_samples(item, [sv.name for sv in view.streamlets], self.scrape_timeout)
        samples: list[Sample] = []
        for sv in view.streamlets:
            got = found.get(sv.name, [])
            if isinstance(got, str):
                sv.metrics_error = got
            else:
                samples += got
        return samples

    def dead_letters(self, namespace: str, name: str, limit: int) -> list[DeadLetterView]:
        """The newest `limit` records of the application's dead-letter topic, read from the spec's Kafka (else
        $STREAMLETS_KAFKA_BOOTSTRAP_SERVERS; [] when neither is known). Raises NotFound as application()
        does."""
        spec = _spec(self._read(namespace, name))
        bootstrap: str | KafkaConnection | None
        if spec is None:
            bootstrap = os.environ.get("STREAMLETS_KAFKA_BOOTSTRAP_SERVERS")
        else:
            try:  # with spec.kafka.security's secrets (the application's status says when one is missing)
                bootstrap = kafka.connection(spec, namespace)
            except kafka.KafkaSecretError:
                return []
        if not bootstrap:
            return []
        return recent_dead_letters(bootstrap, _dead_letter_topic(spec, name), limit)

    def savepoints(self, namespace: str, name: str) -> list[SavepointView]:
        """The savepoints recorded in the application's status.savepoints (the last 50 the operator took),
        oldest first. Raises NotFound as application() does."""
        st = self._read(namespace, name).get("status") or {}
        return [SavepointView(streamlet=sp["streamlet"], name=sp["name"], location=sp.get("location") or "",
                              batch_ids=dict(sp.get("batchIds") or {}), time=sp.get("time") or "", reason=sp.get("reason"))
                for sp in st.get("savepoints") or []]

    # --- acting -------------------------------------------------------------------------------

    def command(self, namespace: str, name: str, request: CommandRequest) -> list[CommandResultView]:
        """What `kubectl streamlets savepoint|state` does: the request annotation, which the
        operator's on_command handler sends on the control stream; then the results, once the
        handler has recorded them in status.commands (at most `command_timeout` seconds)."""
        from kubernetes.client.exceptions import ApiException

        item = self._read(namespace, name)
        spec = _spec(item)
        names = [s.name for s in spec.streamlets] if spec else []
        if request.target is not None and request.target not in names:
            raise NotFound(f"the application {namespace}/{name} has no streamlet {request.target!r}")
        wanted = {"id": uuid.uuid4().hex, "command": request.command, "target": request.target, "args": dict(request.args)}
        try:
            commands.parse_request(json.dumps(wanted))
        except commands.RequestError as e:
            raise BadRequest(str(e)) from None
        expected = {request.target} if request.target else set(names)
        with self._lock:
            app_lock = self._app_locks.setdefault((namespace, name), threading.Lock())
        # One request at a time per application: the handler sees the annotation's latest value only.
        if not app_lock.acquire(timeout=self.command_timeout):
            raise Timeout(f"another command to {namespace}/{name} is still running")
        try:
            try:
                kube.custom().patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name,
                    {"metadata": {"annotations": {REQUEST_ANNOTATION: json.dumps(wanted)}}})
            except ApiException as e:
                raise OpsError(f"cannot ask the operator: {e.status} {scrape.api_message(e)}") from None
            deadline = time.monotonic() + self.command_timeout
            while True:
                st = self._read(namespace, name).get("status") or {}
                entries = [e for e in st.get("commands") or [] if e.get("id") == wanted["id"]]
                if {e.get("streamlet") for e in entries} >= expected:
                    return [CommandResultView(id=e["id"], command=e.get("command", request.command), streamlet=e["streamlet"],
                                              status=e.get("status", ""), message=e.get("message") or "",
                                              location=e.get("location") or "") for e in entries]
                if time.monotonic() > deadline:
                    raise Timeout(f"no result for {request.command} within {self.command_timeout:.0f} s "
                                  f"(kubectl describe sapp {name} -n {namespace} shows the operator's events)")
                time.sleep(0.5)
        finally:
            app_lock.release()

    def metrics(self) -> tuple[bytes, str]:
        """The operator's own metrics in Prometheus' text format: (body, content type)."""
        return metrics.exposition()


# --- the server, on kopf's loop -----------------------------------------------------------------

@kopf.on.startup()
async def serve(memo: Any, logger: "logging.Logger | logging.LoggerAdapter[Any]", **_: Any) -> None:
    """Start the operations server (blueprint.ops.server) on $STREAMLETS_API_PORT. A port that
    cannot be bound costs an error line: the operator carries on without the API."""
    from aiohttp import web

    from blueprint.ops.server import make_app

    try:
        port = api_port()
    except ValueError as e:
        logger.error("operations API not served: %s", e)
        return
    if port is None:
        logger.info("operations API not served (%s is off)", API_PORT_ENV)
        return
    host = os.environ.get("STREAMLETS_API_HOST", "0.0.0.0")
    # The server runs the backend's blocking calls in the loop's default executor; a command waits
    # for its results, so give it threads of its own (kopf's handlers have kopf's executor).
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=32, thread_name_prefix="streamlets-api"))
    runner = web.AppRunner(make_app(OperatorBackend(watched_namespaces())), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as e:
        logger.error("operations API not served: cannot listen on %s:%d: %s", host, port, e)
        await runner.cleanup()
        return
    memo["streamlets_api_runner"] = runner
    logger.info("operations API on http://%s:%d (/api/v1, /metrics, /)", host, port)


@kopf.on.cleanup()
async def stop_serving(memo: Any, **_: Any) -> None:
    """kopf's cleanup: stop the operations server that serve() started, if it runs."""
    runner = memo.get("streamlets_api_runner")
    if runner is not None:
        await runner.cleanup()
