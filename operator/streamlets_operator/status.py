"""The application's status (a merge patch for the status subresource) and its Events.

phase: Failed (invalid spec), Pending (nothing deployed yet), Deploying, Running (every streamlet
RUNNING), Degraded (some streamlet failed or restarting). A streamlet is RESTARTING, not RUNNING,
while its SparkApplication waits for a rerun (PENDING_RERUN) or runs less than SETTLE_SECONDS after
a restart: a crash-looping streamlet's short RUNNING spells never make the application Running/Ready.
Conditions: Valid, TopicsReady, Deployed, Ready; a condition keeps its lastTransitionTime while its status stays the same.
"""

from __future__ import annotations

import datetime
from typing import Any

import kopf

from .render import ANNOTATION_HASH, spark_app_name

FAILED_STATES = {"FAILED", "SUBMISSION_FAILED", "FAILING", "UNKNOWN"}
RUNNING = "RUNNING"
RESTARTING = "RESTARTING"  # derived: see the module doc
SETTLE_SECONDS = 120.0  # a restarted streamlet counts as running once it ran this long


def now() -> str:
    """The current UTC time as Kubernetes writes it in conditions: `2026-01-02T03:04:05Z` (seconds)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(previous: list[dict] | None, type_: str, ok: bool | None, reason: str, message: str,
              generation: int | None) -> dict[str, Any]:
    """A Kubernetes status condition of `type_`: status True, False or (ok None) Unknown, with `reason` and
    `message` (cut to 32,000 characters). lastTransitionTime is kept from `previous` while the status stays
    the same, else now; observedGeneration when `generation` is given."""
    status = "Unknown" if ok is None else ("True" if ok else "False")
    before = next((c for c in previous or [] if c.get("type") == type_), None)
    since = before["lastTransitionTime"] if before and before.get("status") == status and before.get("lastTransitionTime") else now()
    out = {"type": type_, "status": status, "reason": reason, "message": message[:32000], "lastTransitionTime": since}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def _age(timestamp: str | None, at: datetime.datetime | None = None) -> float | None:
    """Seconds since an RFC 3339 time (None if absent or unreadable)."""
    if not timestamp:
        return None
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=datetime.timezone.utc)
    return ((at or datetime.datetime.now(datetime.timezone.utc)) - then).total_seconds()


def streamlet_status(app: str, name: str, sa: dict[str, Any] | None, *,
                     at: datetime.datetime | None = None) -> dict[str, Any]:
    """One entry of status.streamlets from the streamlet's SparkApplication (None: not created yet);
    `at` is now (for tests)."""
    entry: dict[str, Any] = {"sparkApplication": spark_app_name(app, name)}
    if sa is None:
        entry["state"] = "PENDING"
        return entry
    entry["specHash"] = (sa["metadata"].get("annotations") or {}).get(ANNOTATION_HASH, "")
    st = sa.get("status") or {}
    app_state = st.get("applicationState") or {}
    entry["state"] = app_state.get("state") or "SUBMITTED"
    if app_state.get("errorMessage"):
        entry["message"] = str(app_state["errorMessage"])[:2000]
    executors = st.get("executorState") or {}
    entry["executors"] = sum(1 for s in executors.values() if s == RUNNING) if executors else 0
    entry["restarts"] = max(0, int(st.get("submissionAttempts") or 0) - 1) if st else 0
    if st.get("lastSubmissionAttemptTime"):
        entry["lastDeployed"] = st["lastSubmissionAttemptTime"]
    else:
        entry["lastDeployed"] = sa["metadata"].get("creationTimestamp") or now()
    if entry["state"] == "PENDING_RERUN":
        entry["state"] = RESTARTING
    elif entry["state"] == RUNNING and entry["restarts"] > 0:
        age = _age(st.get("lastSubmissionAttemptTime"), at)
        if age is not None and age < SETTLE_SECONDS:
            entry["state"] = RESTARTING
    return entry


def phase_of(states: list[str]) -> str:
    """The application's phase from its SparkApplications' states: Pending (none yet, or all pending), Running
    (all running), Degraded (any failed or restarting), else Deploying."""
    if not states:
        return "Pending"
    if all(s == RUNNING for s in states):
        return "Running"
    if any(s in FAILED_STATES or s == RESTARTING for s in states):
        return "Degraded"
    if all(s == "PENDING" for s in states):
        return "Pending"
    return "Deploying"


def deployed_status(body: dict[str, Any], spark_apps: dict[str, dict | None], *,
                    topics: list[dict] | None = None, message: str | None = None,
                    at: datetime.datetime | None = None) -> dict[str, Any]:
    """The status of a valid application from its SparkApplications (streamlet -> object or None);
    `at` is now (for tests)."""
    meta, old = body["metadata"], body.get("status") or {}
    gen = meta.get("generation")
    app = meta["name"]
    prev = old.get("conditions") or []
    streamlets = {name: streamlet_status(app, name, sa, at=at) for name, sa in spark_apps.items()}
    states = [s["state"] for s in streamlets.values()]
    running = sum(1 for s in states if s == RUNNING)
    phase = phase_of(states)
    all_there = all(sa is not None for sa in spark_apps.values())
    failed = sorted(n for n, s in streamlets.items() if s["state"] in FAILED_STATES)
    restarting = sorted(n for n, s in streamlets.items() if s["state"] == RESTARTING)
    ready_reason = {"Running": "AllRunning", "Degraded": "StreamletsFailed" if failed else "StreamletsRestarting"}.get(
        phase, "NotRunning")
    conds = [
        condition(prev, "Valid", True, "SpecValid", "the spec is valid", gen),
        _kept(prev, "TopicsReady", gen) if topics is None else
        condition(prev, "TopicsReady", all(t.get("state") != "Missing" for t in topics), "TopicsReady"
                  if all(t.get("state") != "Missing" for t in topics) else "TopicsMissing",
                  ", ".join(f"{t['name']}: {t['state']}" for t in topics), gen),
        condition(prev, "Deployed", all_there, "Deployed" if all_there else "Deploying",
                  f"{sum(sa is not None for sa in spark_apps.values())}/{len(spark_apps)} SparkApplications exist", gen),
        condition(prev, "Ready", phase == "Running", ready_reason,
                  f"{running}/{len(states)} streamlets running" + (f"; failed: {', '.join(failed)}" if failed else "")
                  + (f"; restarting: {', '.join(restarting)}" if restarting else ""), gen),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "observedGeneration": gen,
        "streamletCount": len(streamlets),
        "ready": f"{running}/{len(streamlets)}",
        "message": message or f"{running}/{len(streamlets)} streamlets running",
        "conditions": [c for c in conds if c is not None],
        # merge patch: streamlets no longer in the spec are removed with null
        "streamlets": {**{n: None for n in (old.get("streamlets") or {}) if n not in streamlets}, **streamlets},
    }
    if topics is not None:
        status["topics"] = topics
    return status


def _kept(prev: list[dict], type_: str, gen: int | None) -> dict | None:
    before = next((c for c in prev if c.get("type") == type_), None)
    return dict(before) if before else None


def failed_status(body: dict[str, Any], reason: str, message: str, *, condition_type: str = "Valid") -> dict[str, Any]:
    """Status of an application that cannot be deployed (invalid spec: condition Valid=False)."""
    meta, old = body["metadata"], body.get("status") or {}
    gen = meta.get("generation")
    prev = old.get("conditions") or []
    conds = [condition(prev, condition_type, False, reason, message, gen)]
    if condition_type != "Valid":
        conds.insert(0, condition(prev, "Valid", True, "SpecValid", "the spec is valid", gen))
    conds.append(condition(prev, "Ready", False, reason, message, gen))
    keep = [c for c in prev if c.get("type") not in {c2["type"] for c2 in conds}]
    return {"phase": "Failed", "observedGeneration": gen, "message": message[:32000],
            # the raw list: an invalid spec (Valid=False) need not be an ApplicationSpec
            "streamletCount": len(body["spec"].get("streamlets") or []), "conditions": conds + keep}


def transient_status(body: dict[str, Any], condition_type: str, reason: str, message: str) -> dict[str, Any]:
    """A retried step failed (Kafka unreachable, API error): that condition False, phase kept or Pending."""
    meta, old = body["metadata"], body.get("status") or {}
    gen = meta.get("generation")
    prev = old.get("conditions") or []
    cond = condition(prev, condition_type, False, reason, message, gen)
    others = [c for c in prev if c.get("type") != condition_type]
    phase = old.get("phase") if old.get("phase") not in (None, "Failed") else "Pending"
    return {"phase": phase, "message": message[:32000], "conditions": [*others, cond]}


def event(body: dict[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
    """A Kubernetes Event on the application (kopf posts it in the background; never raises)."""
    try:
        # kopf.event, not kopf.info/warn: those are filtered by settings.posting.level
        kopf.event(body, type="Warning" if warning else "Normal", reason=reason, message=message)
    except Exception:  # events are best effort
        pass
