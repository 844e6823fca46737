"""The sandbox's operations backend (`blueprint run --ui PORT`): the running application, its live
figures from the runtime's metrics registry (streamlets.runtime.metrics), its dead letters and
savepoints, and control commands run in-process by the runtime. No credentials: the server listens
on the loopback interface only unless told otherwise."""

from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blueprint.ops.backend import NotFound, BadRequest
from blueprint.ops.deadletters import recent_dead_letters
from blueprint.ops.figures import RateTracker, fill, samples_of
from blueprint.ops.model import (ApplicationSummary, ApplicationView, CommandRequest, CommandResultView, DeadLetterView,
                                 SavepointView, StreamletView, TopicView, Verb)
from blueprint.model import Blueprint
from blueprint.topics import dead_letter_topic
from streamlets.runtime.layout import StateLayout
from streamlets.streamlet import Streamlet

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from streamlets.kafka_security import KafkaConnection

    from streamlets.runtime.runner import StreamletRuntime

NAMESPACE = "local"
log = logging.getLogger("streamlets.sandbox")


class SavepointsOption(Protocol):
    """The sandbox option the backend reads: the savepoint root (None: `<state dir>/savepoints`)."""

    @property
    def savepoints(self) -> str | None:
        """`--savepoints`: the savepoint root, or None for `<state dir>/savepoints`."""


class SandboxView(Protocol):
    """What the backend reads of a running sandbox (blueprint.sandbox.run.Sandbox satisfies it;
    named here as a protocol, so that this module does not import the sandbox that starts it).
    `runtime` is None until the streamlets start; a `supervisor` attribute, when present, names the
    streamlets it is restarting."""

    @property
    def bp(self) -> Blueprint:
        """The blueprint the sandbox runs."""

    @property
    def classes(self) -> Mapping[str, type]:
        """Instance name -> its streamlet class."""

    @property
    def runtime(self) -> StreamletRuntime | None:
        """The StreamletRuntime, None until the streamlets start."""

    @property
    def state_dir(self) -> Path:
        """The sandbox's state folder (`.streamlets/<app-id>` by default)."""

    @property
    def options(self) -> SavepointsOption:
        """The sandbox's options (SandboxOptions); the backend reads `savepoints`."""


class SandboxBackend:
    """Serves one Sandbox's application as namespace `local`, name = the app id."""

    requires_token = False

    def __init__(self, sandbox: SandboxView, registry: "CollectorRegistry", bootstrap: "str | KafkaConnection") -> None:
        self.sandbox = sandbox
        self.registry = registry
        self.bootstrap = bootstrap
        self.rates = RateTracker()
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start_sampling(self, interval: float = 1.0) -> None:
        """Look at the application every `interval` seconds, so that topics' rates (records per
        second between looks, figures.RateTracker) are known when a page or the API first asks."""
        def sample() -> None:
            while not self._stop.wait(interval):
                try:
                    self.application(NAMESPACE, self.sandbox.bp.app_id)
                except Exception as e:  # a look that fails (broker restarting) is retried next time
                    log.debug("ops sampling: %s", e)

        self._sampler = threading.Thread(target=sample, name="streamlets-ops-sampler", daemon=True)
        self._sampler.start()

    def stop(self) -> None:
        """Stop sampling (start_sampling) and wait up to 10 seconds for the sampler's thread."""
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(10)

    def authorize(self, token: str | None, verb: Verb, namespace: str | None, name: str | None) -> None:
        """Everyone may do everything: the loopback interface is the boundary (no token is asked for)."""
        return None  # the loopback interface is the boundary: every caller may do everything

    def _check(self, namespace: str, name: str) -> None:
        if (namespace, name) != (NAMESPACE, self.sandbox.bp.app_id):
            raise NotFound(f"no application {namespace}/{name} (this sandbox runs {NAMESPACE}/{self.sandbox.bp.app_id})")

    def _statuses(self) -> dict[str, str]:
        runtime = self.sandbox.runtime
        supervisor = getattr(self.sandbox, "supervisor", None)
        restarting = supervisor.restarting if supervisor is not None else frozenset()
        out = {}
        for name in self.sandbox.bp.streamlets:
            ctx = runtime.contexts.get(name) if runtime is not None else None
            if ctx is None:
                out[name] = "starting"
            elif name in restarting:
                out[name] = "restarting"
            elif any(not q.isActive and q.exception() is not None for q in ctx.queries):
                out[name] = "failed"
            elif ctx.queries and all(q.isActive for q in ctx.queries):
                out[name] = "running"
            else:
                out[name] = "stopped"
        return out

    def _summary(self, statuses: dict[str, str]) -> ApplicationSummary:
        bp = self.sandbox.bp
        running = sum(1 for s in statuses.values() if s == "running")
        phase = "Running" if running == len(statuses) else ("Failed" if "failed" in statuses.values() else "Degraded")
        return ApplicationSummary(namespace=NAMESPACE, name=bp.app_id, app_id=bp.app_id, phase=phase,
                                  ready=f"{running}/{len(statuses)}")

    def applications(self, caller: object = None) -> list[ApplicationSummary]:
        """The sandbox's one application, as namespace `local`."""
        return [self._summary(self._statuses())]

    def application(self, namespace: str, name: str) -> ApplicationView:
        """The application with its streamlets' statuses (starting, running, restarting, failed, stopped),
        their topics and the figures of the runtime's metrics registry; NotFound for another
        namespace/name."""
        self._check(namespace, name)
        bp, sandbox = self.sandbox.bp, self.sandbox
        statuses = self._statuses()
        streamlets = []
        for s in bp.streamlets:
            cls: type[Streamlet] = sandbox.classes[s]
            shape = cls.shape()
            ctx = sandbox.runtime.contexts.get(s) if sandbox.runtime is not None else None
            topics: dict[str, str] = ctx.run.topics if ctx is not None else {}
            inlets = {p.name: topics[p.name] for p in shape.inlets if p.name in topics}
            outlets = {p.name: topics[p.name] for p in shape.outlets if p.name in topics}
            streamlets.append(StreamletView(name=s, class_name=cls.class_name(), status=statuses[s], inlets=inlets, outlets=outlets))
        topic_views = [TopicView(id=tid, name=t.kafka_name(bp.app_id), producers=[r.text for r in t.producers],
                            consumers=[r.text for r in t.consumers]) for tid, t in bp.topics.items()]
        view = ApplicationView(**self._summary(statuses).model_dump(), streamlets=streamlets, topics=topic_views,
                               dead_letter_topic=dead_letter_topic(bp))
        return fill(view, samples_of(self.registry.collect()), self.rates)

    def dead_letters(self, namespace: str, name: str, limit: int) -> list[DeadLetterView]:
        """The newest `limit` records of the application's dead-letter topic (blueprint.ops.deadletters);
        NotFound for another application."""
        self._check(namespace, name)
        return recent_dead_letters(self.bootstrap, dead_letter_topic(self.sandbox.bp), limit)

    def savepoints(self, namespace: str, name: str) -> list[SavepointView]:
        """The application's savepoints under the savepoint root (streamlets.state.savepoint.list_savepoints);
        [] if the root cannot be read."""
        from streamlets.state.savepoint import batch_ids, list_savepoints

        self._check(namespace, name)
        root = self.sandbox.options.savepoints or StateLayout(str(self.sandbox.state_dir)).savepoints
        try:
            found = list_savepoints(root, self.sandbox.bp.app_id)
        except OSError:
            return []
        return [SavepointView(streamlet=sp["streamlet"], name=sp["id"], location=sp["path"], time=sp["created_at"],
                              reason=sp.get("reason"), batch_ids=batch_ids(sp))
                for sp in found]

    def command(self, namespace: str, name: str, request: CommandRequest) -> list[CommandResultView]:
        """Runs the command on each targeted streamlet in-process (StreamletRuntime.control), as the
        control stream's listener would."""
        from streamlets.runtime.control import COMMANDS

        self._check(namespace, name)
        runtime = self.sandbox.runtime
        if runtime is None:
            raise NotFound("the application is still starting")
        if request.command not in COMMANDS or request.command == "custom":
            raise BadRequest(f"command must be one of {', '.join(c for c in COMMANDS if c != 'custom')}, not {request.command!r}")
        targets = list(runtime.contexts) if request.target is None else [request.target]
        if request.target is not None and request.target not in runtime.contexts:
            raise NotFound(f"the application has no running streamlet {request.target!r}")
        command_id = uuid.uuid4().hex
        out = []
        for streamlet in targets:
            try:
                outcome = runtime.control(streamlet, request.command, dict(request.args), command_id)
                out.append(CommandResultView(id=command_id, command=request.command, streamlet=streamlet, status="ok",
                                             message=outcome.message, location=outcome.location or ""))
            except Exception as e:  # the command failed; the streamlet carries on
                out.append(CommandResultView(id=command_id, command=request.command, streamlet=streamlet, status="error",
                                             message=str(e).splitlines()[0] if str(e) else type(e).__name__))
        return out

    def metrics(self) -> tuple[bytes, str]:
        """The runtime's Prometheus registry in the text exposition format: (body, content type)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
