"""kopf handlers of StreamletApplications (streamlets.io/v1alpha1).

create / update / resume -> reconcile: validate, topics, checkpoint claim, per streamlet a Secret
and a SparkApplication (created, or deleted and created again only when its spec-hash changed),
children of streamlets no longer in the spec deleted, status written. Idempotent: an operator killed midway
converges when kopf re-runs the handler (progress is kept in annotations).
delete -> the children go (no garbage collector is assumed); topics only with deleteTopicsOnDelete.
timer -> status refreshed from the SparkApplications' states.
timer -> autoscaled streamlets evaluated and, active, scaled in place (autoscaling.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from . import autoscaling, commands, kafka, kube, metrics, render, scrape, status, topics
from blueprint.deploy.crd import GROUP, PLURAL, VERSION
from blueprint.deploy.spec import ApplicationSpec
from streamlets.kafka_security import KafkaConnection

STATUS_INTERVAL = float(os.environ.get("STREAMLETS_STATUS_INTERVAL", "30"))
KAFKA_TIMEOUT = float(os.environ.get("STREAMLETS_KAFKA_TIMEOUT", "15"))
ANNOTATION_PREFIX = GROUP


def plain(value: Any) -> Any:
    """kopf's bodies are read-only views: plain dicts and lists, for rendering and JSON."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def peering_priority(env: Mapping[str, str]) -> int:
    """This replica's kopf peering priority: STREAMLETS_PEERING_PRIORITY, else its start time in
    milliseconds. kopf freezes every operator when two of the same priority share a peering
    object, so replicas must differ; the newest one handles resources and the others wait (a
    rolling update hands over to the new version). A replica that dies stops renewing its peering
    record, and after STREAMLETS_PEERING_LIFETIME seconds (kopf's peering lifetime, default 60)
    the next one takes over."""
    if env.get("STREAMLETS_PEERING_PRIORITY"):
        return int(env["STREAMLETS_PEERING_PRIORITY"])
    return int(time.time() * 1000)


# --- settings -----------------------------------------------------------------------------------

@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: logging.Logger, **_: Any) -> None:
    """kopf's startup settings: progress, diff base and finalizer under the streamlets.io
    annotations prefix, Events from log lines at $STREAMLETS_POSTING_LEVEL (default WARNING),
    $STREAMLETS_MAX_WORKERS handler threads (default 8), a watch timeout of
    $STREAMLETS_WATCH_TIMEOUT seconds (default 300), peering from $STREAMLETS_PEERING_NAME or
    $STREAMLETS_STANDALONE (else kopf's command line) with this replica's peering_priority."""
    # The status schema is structural (kopf's status.kopf would be pruned): progress in annotations.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = f"{ANNOTATION_PREFIX}/finalizer"
    # Log messages posted as Events: warnings and errors (handler failures). The operator's own
    # Events (Deployed, TopicsCreated, InvalidSpec, ...) are posted whatever the level; INFO would
    # add one per status refresh.
    settings.posting.level = logging.getLevelName(os.environ.get("STREAMLETS_POSTING_LEVEL", "WARNING").upper())
    settings.execution.max_workers = int(os.environ.get("STREAMLETS_MAX_WORKERS", "8"))
    settings.watching.server_timeout = int(os.environ.get("STREAMLETS_WATCH_TIMEOUT", "300"))
    # Peering: the command line (--standalone, --peering) unless the environment says otherwise.
    if os.environ.get("STREAMLETS_PEERING_NAME"):
        settings.peering.name = os.environ["STREAMLETS_PEERING_NAME"]
        settings.peering.mandatory = True
        settings.peering.standalone = False
    elif os.environ.get("STREAMLETS_STANDALONE", "").lower() in ("1", "true", "yes"):
        settings.peering.standalone = True
    if not settings.peering.standalone and not settings.peering.priority:  # kopf run --priority wins
        settings.peering.priority = peering_priority(os.environ)
        settings.peering.lifetime = int(os.environ.get("STREAMLETS_PEERING_LIFETIME", settings.peering.lifetime))
    kube.api_client()  # fail early on a missing configuration
    logger.info("streamlets operator configured (status refresh every %ss)", STATUS_INTERVAL)


# --- reconcile ----------------------------------------------------------------------------------

@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(body: kopf.Body, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
    """Create, update (of the spec) and resume: deploy the application (_reconcile) and write its status.
    Raises kopf.PermanentError for an invalid spec or a refused deployment (no retry), kopf.TemporaryError
    for Kafka or API trouble and for unexpected errors (retried after 10 to 60 seconds, reported as
    InternalError)."""
    app = plain(body)
    try:
        with metrics.handling("reconcile", reconcile=True):
            try:
                _reconcile(app, patch, logger)
            except (kopf.PermanentError, kopf.TemporaryError):
                raise
            except Exception as e:  # a bug: reported, retried later, never an unhandled exception
                logger.exception("reconcile failed unexpectedly")
                message = f"internal error: {type(e).__name__}: {e}"
                patch.status.update(status.transient_status(app, "Deployed", "InternalError", message))
                raise kopf.TemporaryError(message, delay=60) from None
    finally:
        metrics.track_phase(app, patch)


def _reconcile(app: dict[str, Any], patch: kopf.Patch, logger: logging.Logger) -> None:
    problems = render.validate(app["spec"])
    if problems:
        message = "invalid spec: " + "; ".join(problems)
        patch.status.update(status.failed_status(app, "InvalidSpec", message))
        status.event(app, "InvalidSpec", message, warning=True)
        raise kopf.PermanentError(message)

    spec = render.typed(app["spec"])  # valid: validate() found nothing
    try:
        topic_states = topics.ensure_topics(_kafka(app, spec), topics.desired_topics(spec),
                                            timeout=KAFKA_TIMEOUT)
    except topics.TopicError as e:
        patch.status.update(status.transient_status(app, "TopicsReady", "KafkaError", str(e)))
        status.event(app, "KafkaError", str(e), warning=True)
        raise kopf.TemporaryError(str(e), delay=10) from None
    missing = [t["name"] for t in topic_states if t["state"] == "Missing"]
    if missing:
        message = f"unmanaged topic(s) missing: {', '.join(missing)}"
        patch.status.update(status.transient_status(app, "TopicsReady", "TopicsMissing", message))
        patch.status["topics"] = topic_states
        raise kopf.TemporaryError(message, delay=30)
    created_topics = [t["name"] for t in topic_states if t["state"] == "Created"]
    if created_topics:
        status.event(app, "TopicsCreated", f"created topic(s) {', '.join(created_topics)}")

    try:
        rendered = render.render_all(app, claim_modes=_claim_modes(app, spec))
    except render.SpecError as e:  # validate() passed: the run config model or the checkpoint claim objects
        patch.status.update(status.failed_status(app, "InvalidSpec", str(e)))
        status.event(app, "InvalidSpec", str(e), warning=True)
        raise kopf.PermanentError(str(e)) from None

    _savepoint_before_upgrade(app, rendered, patch, logger)
    try:
        if rendered["claim"] is not None and kube.ensure_claim(rendered["claim"]):
            status.event(app, "ClaimCreated", f"created PersistentVolumeClaim {rendered['claim']['metadata']['name']}")
        spark_apps: dict[str, dict | None] = {}
        changed = []
        for streamlet, (secret, spark_app) in rendered["streamlets"].items():
            kube.apply_secret(secret)
            obj, done = kube.apply_spark_app(spark_app)
            spark_apps[streamlet] = obj
            if done:
                changed.append(f"{streamlet} ({done})")
        removed = _remove_obsolete(app, set(rendered["streamlets"]))
    except kopf.PermanentError as e:
        patch.status.update(status.failed_status(app, "DeployFailed", str(e), condition_type="Deployed"))
        status.event(app, "DeployFailed", str(e), warning=True)
        raise
    except kopf.TemporaryError as e:
        patch.status.update(status.transient_status(app, "Deployed", "DeployRetrying", str(e)))
        raise

    if changed or removed:
        message = "deployed " + ", ".join(changed) if changed else ""
        if removed:
            message += ("; " if message else "") + "removed " + ", ".join(removed)
        status.event(app, "Deployed", message)
        logger.info(message)
    patch.status.update(status.deployed_status(app, spark_apps, topics=topic_states))


def _kafka(app: dict[str, Any], spec: ApplicationSpec) -> KafkaConnection:
    """The application's Kafka as the operator's clients reach it (streamlets_operator.kafka: the
    secrets spec.kafka.security names, read from their Secrets; those of spec.schemaRegistry checked to
    exist, for the pods that mount them). A Secret or key that is missing is
    a topics.TopicError: reported on TopicsReady and retried, like an unreachable broker."""
    try:
        kafka.check_registry_secrets(spec, app["metadata"]["namespace"])
        return kafka.connection(spec, app["metadata"]["namespace"])
    except kafka.KafkaSecretError as e:
        raise topics.TopicError(str(e)) from None


def _claim_modes(app: dict[str, Any], spec) -> list[str] | None:
    """The access modes of the application's checkpoint claim as it exists in the cluster (None: not
    yet, or no claim: the state is on an object store)."""
    if render.object_store(spec):
        return None
    return kube.claim_access_modes(app["metadata"]["namespace"], render.claim_name(app["metadata"]["name"], spec))


def _savepoint_before_upgrade(app: dict[str, Any], rendered: dict[str, Any], patch: kopf.Patch,
                              logger: logging.Logger) -> None:
    """Upgrade mode `savepoint` (as in Flink's Kubernetes operator): before a running streamlet's
    SparkApplication is replaced, it stops with a savepoint through the control stream (Flink's
    stop-with-savepoint: its queries stop, then the savepoint is taken, so the new pods continue
    from the checkpoints exactly where the savepoint is). A failed savepoint holds the upgrade back
    (retried; upgrade mode last-state skips it); an unanswered one means the streamlet is not
    running, and it upgrades with the last state of its checkpoints."""
    spec, meta = render.typed(app["spec"]), app["metadata"]  # rendered: the spec is valid
    if spec.upgrade_mode != "savepoint":
        return
    existing = {sa["metadata"].get("labels", {}).get(render.LABEL_STREAMLET): sa
                for sa in kube.owned_spark_apps(meta["namespace"], meta["name"], meta["uid"])
                if not sa["metadata"].get("deletionTimestamp")}  # one being replaced was stopped already
    changing = [n for n, (_, sa) in rendered["streamlets"].items() if n in existing and
                existing[n]["metadata"].get("annotations", {}).get(render.ANNOTATION_HASH)
                != sa["metadata"]["annotations"][render.ANNOTATION_HASH]]
    if not changing:
        return
    reason = f"before upgrade to generation {meta.get('generation')}"
    try:
        entries = commands.send_all(spec, [{"id": f"upgrade-{meta.get('generation')}-{name}", "command": "savepoint",
                                            "target": name, "args": {"reason": reason, "stop": "true"}}
                                           for name in changing],
                                    timeout=commands.UPGRADE_TIMEOUT, source="upgrade", kafka=_kafka(app, spec))
    except Exception as e:  # Kafka trouble: the upgrade waits
        raise kopf.TemporaryError(f"savepoint before upgrade: {e}", delay=30) from None
    old = app.get("status") or {}
    patch.status["commands"] = commands.appended(old, "commands", entries)
    patch.status["savepoints"] = commands.appended(old, "savepoints", commands.savepoint_entries(entries, "upgrade"))
    # A streamlet that does not answer is not running: nothing to save beyond its checkpoints, so
    # it upgrades with its last state (Flink's last-state fallback). An error holds the upgrade.
    skipped = [e["streamlet"] for e in entries if e["status"] == "no-answer"]
    if skipped:
        status.event(app, "SavepointSkipped", f"{', '.join(skipped)} did not answer (not running): upgraded "
                     "with the last state of the checkpoints", warning=True)
    failed = [e for e in entries if e["status"] == "error"]
    if failed:
        message = "savepoint before upgrade failed: " + "; ".join(f"{e['streamlet']}: {e['message']}" for e in failed)
        patch.status.update(status.transient_status(app, "Deployed", "SavepointFailed", message))
        status.event(app, "SavepointFailed", message, warning=True)
        raise kopf.TemporaryError(message + " (retrying; upgradeMode last-state upgrades without one)", delay=30)
    taken = [e for e in entries if e["status"] == "ok"]
    if taken:
        message = "savepoint(s) before upgrade: " + ", ".join(f"{e['streamlet']} -> {e['location']}" for e in taken)
        status.event(app, "SavepointTaken", message)
        logger.info(message)


# --- control-stream commands --------------------------------------------------------------------

@kopf.on.field(GROUP, VERSION, PLURAL, field=("metadata", "annotations", commands.REQUEST_ANNOTATION))
def on_command(body: kopf.Body, new: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
    """A command asked through the annotation (kubectl streamlets savepoint|state): sent on the
    control stream; each streamlet's result goes to status.commands (and status.savepoints), within
    the request's timeout (kopf handles one change of the application at a time, so a change made
    meanwhile waits for it)."""
    if not new:
        return
    app = plain(body)
    try:
        request = commands.parse_request(new)
        entries = commands.send(app["spec"], request, timeout=request["timeout"],
                                kafka=_kafka(app, render.typed(app["spec"])))
    except Exception as e:  # a bad request or Kafka trouble: said once, never re-sent by a retry
        status.event(app, "CommandRefused", f"{type(e).__name__}: {e}" if not isinstance(e, commands.RequestError)
                     else str(e), warning=True)
        logger.warning("command not sent: %s", e)
        return
    old = app.get("status") or {}
    patch.status["commands"] = commands.appended(old, "commands", entries)
    taken = commands.savepoint_entries(entries, request["args"].get("reason", "requested"))
    if taken:
        patch.status["savepoints"] = commands.appended(old, "savepoints", taken)
    summary = ", ".join(f"{e['streamlet']} {e['status']}" for e in entries)
    status.event(app, "CommandDone", f"{request['command']} ({request['id']}): {summary}",
                 warning=any(e["status"] != "ok" for e in entries))
    logger.info("command %s %s: %s", request["command"], request["id"], summary)


def _periodic_savepoint(app: dict[str, Any], patch: kopf.Patch, logger: logging.Logger) -> None:
    """spec.savepoints.periodicSeconds: a savepoint of every streamlet when the last one is that old."""
    spec = render.typed(app["spec"])  # refresh_status runs this for a valid, handled generation only
    every = (spec.savepoints.periodic_seconds if spec.savepoints else None) or 0
    old = app.get("status") or {}
    last = old.get("lastPeriodicSavepoint")
    if not every or (last and (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(last.replace("Z", "+00:00"))
                               ).total_seconds() < every):
        return
    entries = commands.send(spec, {"id": f"periodic-{uuid.uuid4().hex[:8]}", "command": "savepoint", "target": None,
                                          "args": {"reason": "periodic"}}, source="periodic", kafka=_kafka(app, spec))
    patch.status["lastPeriodicSavepoint"] = commands.now()
    patch.status["commands"] = commands.appended(old, "commands", entries)
    patch.status["savepoints"] = commands.appended(old, "savepoints", commands.savepoint_entries(entries, "periodic"))
    logger.info("periodic savepoint: %s", ", ".join(f"{e['streamlet']} {e['status']}" for e in entries))


def _remove_obsolete(app: dict[str, Any], keep: set[str]) -> list[str]:
    meta = app["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    removed = []
    for sa in kube.owned_spark_apps(ns, name, uid):
        streamlet = sa["metadata"].get("labels", {}).get(render.LABEL_STREAMLET)
        if streamlet not in keep:
            kube.delete_spark_app(ns, sa["metadata"]["name"])
            removed.append(streamlet or sa["metadata"]["name"])
    for secret in kube.owned_secrets(ns, name, uid):
        if secret["metadata"].get("labels", {}).get(render.LABEL_STREAMLET) not in keep:
            kube.delete_secret(ns, secret["metadata"]["name"])
    return removed


# --- delete -------------------------------------------------------------------------------------

@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
    """Delete the application's SparkApplications and Secrets, its checkpoint claim unless
    spec.storage.existingClaim lends it, and with spec.deleteTopicsOnDelete its managed topics. Raises
    kopf.TemporaryError (retried after 10 seconds) when Kafka cannot delete the topics."""
    app = plain(body)
    metrics.forget(app)
    autoscaling.SCALERS.keep(app["metadata"]["namespace"], app["metadata"]["name"], set())
    meta = app["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    try:
        spec: ApplicationSpec | None = render.typed(app.get("spec") or {})
    except ValidationError as e:
        # An invalid spec (never deployed, or stored before a CRD change) must not block the
        # deletion: the children go, but the claim and the topics stay, as their data cannot be
        # told apart from a claim the spec lends (existingClaim) or topics it never asked to delete.
        logger.warning("the spec of %s/%s is invalid, so its checkpoint claim and topics are kept: %s", ns, name, e)
        spec = None
    for sa in kube.owned_spark_apps(ns, name, uid):
        kube.delete_spark_app(ns, sa["metadata"]["name"])
    for secret in kube.owned_secrets(ns, name, uid):
        kube.delete_secret(ns, secret["metadata"]["name"])
    if spec is not None and not (spec.storage and spec.storage.existing_claim):
        for claim in kube.owned_claims(ns, name, uid):
            kube.delete_claim(ns, claim["metadata"]["name"])
    if spec is not None and spec.delete_topics_on_delete:
        names = [t.name for t in topics.desired_topics(spec) if t.managed]
        try:
            topics.delete_topics(_kafka(app, spec), names, timeout=KAFKA_TIMEOUT)
        except topics.TopicError as e:
            raise kopf.TemporaryError(str(e), delay=10) from None
        logger.info("deleted topics %s", ", ".join(names))
    logger.info("deleted the children of %s/%s", ns, name)


# --- status refresh -----------------------------------------------------------------------------

@kopf.timer(GROUP, VERSION, PLURAL, interval=STATUS_INTERVAL, initial_delay=min(STATUS_INTERVAL, 5.0))
def refresh_status(body: kopf.Body, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
    """The streamlets' states from their SparkApplications (once the current generation is handled
    and valid; reconcile writes everything else). A SparkApplication deleted behind the operator's
    back is created again."""
    app = plain(body)
    meta, old = app["metadata"], app.get("status") or {}
    if meta.get("deletionTimestamp") or old.get("observedGeneration") != meta.get("generation"):
        return
    if any(c.get("type") in ("Valid", "Deployed") and c.get("status") == "False" for c in old.get("conditions") or []):
        return
    try:
        found = {sa["metadata"]["labels"].get(render.LABEL_STREAMLET): sa
                 for sa in kube.owned_spark_apps(meta["namespace"], meta["name"], meta["uid"])}
    except (kopf.TemporaryError, kopf.PermanentError):
        return  # next time
    try:
        names = [s.name for s in render.typed(app["spec"]).streamlets]
    except ValidationError:  # not handled yet (reconcile reports it as InvalidSpec)
        return
    missing = [n for n in names if n not in found]
    if missing:  # deleted by someone else: put back (the spec has not changed, so nothing else did)
        try:
            rendered = render.render_all(app, claim_modes=_claim_modes(app, render.typed(app["spec"])))["streamlets"]
            for n in missing:
                secret, spark_app = rendered[n]
                kube.apply_secret(secret)
                found[n], _ = kube.apply_spark_app(spark_app)
            status.event(app, "Recreated", f"recreated the SparkApplication(s) of {', '.join(missing)}")
            logger.info("recreated the SparkApplication(s) of %s", ", ".join(missing))
        except (render.SpecError, kopf.TemporaryError, kopf.PermanentError) as e:
            logger.warning("could not recreate %s: %s", ", ".join(missing), e)
    new = status.deployed_status(app, {n: found.get(n) for n in names})
    patch.status.update(new)
    metrics.track_phase(app, patch)
    try:
        _periodic_savepoint(app, patch, logger)
    except Exception as e:  # Kafka trouble: the next refresh tries again
        logger.warning("periodic savepoint: %s", e)


# --- autoscaling --------------------------------------------------------------------------------

@kopf.timer(GROUP, VERSION, PLURAL, interval=autoscaling.INTERVAL, initial_delay=autoscaling.INTERVAL)
def autoscale(body: kopf.Body, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
    """The autoscaled streamlets (spec.streamlets[].autoscaling.mode passive or active) of a handled,
    valid application: each driver scraped, a decision made, applied in place when active
    (autoscaling.py); the decision in status.streamlets.<name>.autoscaling, an Event for a change."""
    app = plain(body)
    meta, old = app["metadata"], app.get("status") or {}
    ns, name = meta["namespace"], meta["name"]
    if meta.get("deletionTimestamp") or old.get("observedGeneration") != meta.get("generation"):
        return
    try:
        spec = render.typed(app["spec"])
    except ValidationError:
        return
    on = autoscaling.autoscaled(spec)
    names = {s.name for s, _, _ in on}
    autoscaling.SCALERS.keep(ns, name, names)
    metrics.forget_autoscaled(ns, name, names)
    # a streamlet whose autoscaling was turned off loses its autoscaler status
    streamlets: dict[str, Any] = {n: {"autoscaling": None} for n, entry in (old.get("streamlets") or {}).items()
                                  if n not in names and (entry or {}).get("autoscaling")}
    if streamlets:
        patch.status["streamlets"] = streamlets
    if not on:
        return
    pages = scrape.driver_samples(app, [s.name for s, _, _ in on])
    now = time.time()
    sent: list[dict[str, Any]] = []
    for s, auto, real_time in on:
        prev = ((old.get("streamlets") or {}).get(s.name) or {}).get("autoscaling") or {}
        scaler = autoscaling.SCALERS.get(ns, name, s.name, auto, autoscaling.state_from_status(prev))

        def send(executors: int, reason: str, target: str = s.name) -> tuple[str, str]:
            request = {"id": f"autoscale-{uuid.uuid4().hex[:8]}", "command": "scale", "target": target,
                       "args": {"executors": str(executors), "reason": reason[:500]}}
            try:
                entries = commands.send(spec, request, timeout=autoscaling.SCALE_TIMEOUT, source="autoscaler",
                                        kafka=_kafka(app, spec))
            except Exception as e:  # Kafka trouble: tried again at the next evaluation
                return "error", f"{type(e).__name__}: {e}"
            sent.extend(entries)
            return (entries[0]["status"], entries[0]["message"]) if entries else ("no-answer", "no result")

        out = scaler.step(pages.get(s.name, "not scraped"), now, send, real_time)
        d = out.decision
        last = {**prev, "lastScaled": f"{d.current} -> {d.target}", "lastScaledAt": commands.now()} \
            if out.applied and d is not None else prev
        streamlets[s.name] = {"autoscaling": autoscaling.status_of(auto.mode, d, scaler.autoscaler.state,
                                                                   error=out.error, last=last)}
        metrics.autoscaler_decision(ns, name, s.name, auto.mode, d.current if d else None, d.target if d else None,
                                    d.direction if d else None, out.applied or out.recommended)
        if out.event:
            reason, message, warning = out.event
            status.event(app, reason, message, warning=warning)
            (logger.warning if warning else logger.info)(message)
    patch.status["streamlets"] = streamlets
    if sent:
        patch.status["commands"] = commands.appended(old, "commands", sent)
