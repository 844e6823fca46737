"""What serves the operations API: a backend per setting (the sandbox's, the operator's), and the
errors every backend raises, each with its HTTP status."""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import BlueprintError
from .model import (ApplicationSummary, ApplicationView, CommandRequest, CommandResultView, DeadLetterView, SavepointView,
                    Verb)


class OpsError(BlueprintError):
    """An operations API request that cannot be served; `status` is its HTTP status."""

    status = 500


class BadRequest(OpsError):
    status = 400


class Unauthorized(OpsError):
    """No credentials, or credentials Kubernetes does not accept (TokenReview)."""

    status = 401


class Forbidden(OpsError):
    """Kubernetes' RBAC does not give the caller the verb on the application (SubjectAccessReview)."""

    status = 403


class NotFound(OpsError):
    status = 404


class OpsBackend(Protocol):
    """The applications a server shows, with their live figures, and the control actions.

    Every method may raise OpsError; methods block (the server calls them off its event loop).
    `authorize` runs before every request: `verb` is Kubernetes' verb on the application resource
    (streamletapplications.streamlets.io): list for the list, get to read one, patch to send a
    command or take a savepoint (what `kubectl streamlets savepoint` needs). It returns the caller
    (whatever the backend needs later: `applications` lists only what the caller may see);
    for `list` with no namespace it only authenticates."""

    requires_token: bool

    def authorize(self, token: str | None, verb: Verb, namespace: str | None, name: str | None) -> Any:
        """Check the caller's `token` for `verb` on the application (or, for list with no namespace, only
        authenticate); return the caller. Unauthorized (401) or Forbidden (403) otherwise."""

    def applications(self, caller: Any) -> list[ApplicationSummary]:
        """The applications `caller` (what authorize returned) may see."""

    def application(self, namespace: str, name: str) -> ApplicationView:
        """One application with its live figures; NotFound if there is none of that name."""

    def dead_letters(self, namespace: str, name: str, limit: int) -> list[DeadLetterView]:
        """The newest `limit` dead letters of the application (newest first)."""

    def savepoints(self, namespace: str, name: str) -> list[SavepointView]:
        """The application's savepoints."""

    def command(self, namespace: str, name: str, request: CommandRequest) -> list[CommandResultView]:
        """Run a control command on the application's streamlets (all, or `request.target`): one result per
        streamlet. BadRequest for an unknown command, NotFound for an unknown target."""

    def metrics(self) -> tuple[bytes, str]:
        """The Prometheus exposition this server adds (body, content type)."""
        ...
