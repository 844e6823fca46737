"""The operations server (aiohttp): the REST API under /api/v1 (JSON, described by /openapi.json),
Prometheus metrics at /metrics, and the read-only web view under / and /ui.

Routes (every one authorized by the backend first; see blueprint.ops.backend for the verbs):

    GET  /api/v1/applications                                             list
    GET  /api/v1/namespaces/{namespace}/applications/{name}               get: graph, streamlets, topics
    GET  /api/v1/namespaces/{namespace}/applications/{name}/dead-letters  get (?limit=20, at most 500)
    GET  /api/v1/namespaces/{namespace}/applications/{name}/savepoints    get
    POST /api/v1/namespaces/{namespace}/applications/{name}/savepoints    patch ({"streamlet": ..., "reason": ...})
    POST /api/v1/namespaces/{namespace}/applications/{name}/commands      patch ({"command", "target", "args"})
    GET  /metrics, /openapi.json, /healthz                                no authorization
    GET  /, /ui/namespaces/{namespace}/applications/{name}, /login        the web view (list, get)

Credentials are Kubernetes bearer tokens: the `Authorization: Bearer <token>` header, or for the
web view the cookie set by /login. Errors are JSON `{"error": ..., "status": ...}` (HTML for the
web view) with the status of blueprint.ops.backend's OpsError subclasses, and so are aiohttp's own
answers under /api/ (404 no route, 405 method, 413 body too large).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any, Callable

from aiohttp import web
from pydantic import BaseModel, ValidationError

from . import view
from .backend import BadRequest, OpsBackend, OpsError, Unauthorized
from .model import CommandRequest, SavepointRequest

log = logging.getLogger("streamlets.ops")

COOKIE = "streamlets_token"
BACKEND: web.AppKey[OpsBackend] = web.AppKey("backend", OpsBackend)


def _token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.cookies.get(COOKIE) or None


def _json(data: Any, status: int = 200) -> web.Response:
    if isinstance(data, BaseModel):
        body = data.model_dump_json()
    else:
        body = json.dumps([d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in data]
                          if isinstance(data, list) else data)
    return web.Response(text=body, status=status, content_type="application/json")


async def _call(request: web.Request, verb: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Authorize the request (verb on the path's application), then call `fn(*args)`; a `fn`
    that wants the caller (applications) gets it first."""
    backend = request.app[BACKEND]
    ns, name = request.match_info.get("namespace"), request.match_info.get("name")
    caller = await asyncio.to_thread(backend.authorize, _token(request), verb, ns, name)  # type: ignore[arg-type]
    if fn == backend.applications:
        args = (caller, *args)
    return await asyncio.to_thread(fn, *args)


@web.middleware
async def _errors(request: web.Request, handler):
    html = not request.path.startswith("/api/")
    try:
        return await handler(request)
    except OpsError as e:
        if html and isinstance(e, Unauthorized) and request.app[BACKEND].requires_token:
            raise web.HTTPFound("/login") from None
        if html:
            return web.Response(text=view.page("error", f"<h1>{e.status}</h1><p>{view.escape(str(e))}</p>", refresh=False),
                                status=e.status, content_type="text/html")
        return web.Response(text=json.dumps({"error": str(e), "status": e.status}), status=e.status,
                            content_type="application/json")
    except web.HTTPException as e:  # aiohttp's own: no route (404), method (405), body too large (413)...
        if html or e.status < 400:
            raise
        if isinstance(e, web.HTTPMethodNotAllowed):
            text = f"method {e.method} not allowed on {request.path} (allowed: {', '.join(sorted(e.allowed_methods))})"
        elif isinstance(e, web.HTTPNotFound):
            text = f"no such path: {request.path}"
        else:
            text = e.text if e.text and not e.text.startswith(f"{e.status}:") else e.reason
        headers = {k: v for k, v in e.headers.items() if k.lower() == "allow"}
        return web.Response(text=json.dumps({"error": text, "status": e.status}), status=e.status, headers=headers,
                            content_type="application/json")
    except Exception as e:  # one line in the log, a 500 with the message to the caller
        log.exception("%s %s failed", request.method, request.path)
        return web.Response(text=json.dumps({"error": f"{type(e).__name__}: {e}", "status": 500}), status=500,
                            content_type="application/json")


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    try:
        data = await request.json() if request.can_read_body else {}
        return model.model_validate(data)
    except (ValueError, ValidationError) as e:
        detail = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()) \
            if isinstance(e, ValidationError) else str(e)
        raise BadRequest(f"request body: {detail}") from None


# --- the API ---------------------------------------------------------------------------------

async def list_applications(request: web.Request) -> web.Response:
    """GET /api/v1/applications: the ApplicationSummary list the caller may see (OpsBackend.applications);
    401/403 as `authorize` decides."""
    backend = request.app[BACKEND]
    return _json(await _call(request, "list", backend.applications))


async def get_application(request: web.Request) -> web.Response:
    """GET /api/v1/namespaces/{namespace}/applications/{name}: the ApplicationView with live figures; 404 for
    an unknown application."""
    backend, m = request.app[BACKEND], request.match_info
    return _json(await _call(request, "get", backend.application, m["namespace"], m["name"]))


async def get_dead_letters(request: web.Request) -> web.Response:
    """GET .../dead-letters?limit=N: the newest N (1..500, default 20) dead letters of the application's dead-
    letter topic; 400 if `limit` is not a whole number."""
    backend, m = request.app[BACKEND], request.match_info
    try:
        limit = min(max(int(request.query.get("limit", "20")), 1), 500)
    except ValueError:
        raise BadRequest(f"limit must be a whole number, not {request.query['limit']!r}") from None
    return _json(await _call(request, "get", backend.dead_letters, m["namespace"], m["name"], limit))


async def get_savepoints(request: web.Request) -> web.Response:
    """GET .../savepoints: the application's savepoints (a SavepointView list, in the backend's order)."""
    backend, m = request.app[BACKEND], request.match_info
    return _json(await _call(request, "get", backend.savepoints, m["namespace"], m["name"]))


async def take_savepoint(request: web.Request) -> web.Response:
    """POST .../savepoints (SavepointRequest: streamlet, reason): a `savepoint` control command through the
    backend; one CommandResultView per targeted streamlet. 400 for a malformed body."""
    backend, m = request.app[BACKEND], request.match_info
    body: SavepointRequest = await _body(request, SavepointRequest)
    command = CommandRequest(command="savepoint", target=body.streamlet, args={"reason": body.reason})
    return _json(await _call(request, "patch", backend.command, m["namespace"], m["name"], command))


async def send_command(request: web.Request) -> web.Response:
    """POST .../commands (CommandRequest: command, target, args): a control command through the backend; one
    CommandResultView per targeted streamlet. 400 for a malformed body or unknown command."""
    backend, m = request.app[BACKEND], request.match_info
    body: CommandRequest = await _body(request, CommandRequest)
    return _json(await _call(request, "patch", backend.command, m["namespace"], m["name"], body))


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics: the backend's Prometheus exposition (text format, the backend's content type); no
    authorization, as Prometheus scrapes it."""
    body, content_type = await asyncio.to_thread(request.app[BACKEND].metrics)
    return web.Response(body=body, headers={"Content-Type": content_type})


async def openapi(request: web.Request) -> web.Response:
    """GET /openapi.json: the API's OpenAPI 3 document (blueprint.ops.openapi), with bearer security when the
    backend requires a token."""
    from .openapi import document

    return web.json_response(document(secured=request.app[BACKEND].requires_token))


async def healthz(request: web.Request) -> web.Response:
    """GET /healthz: `ok` (200) while the server's event loop runs."""
    return web.Response(text="ok")


# --- the web view ----------------------------------------------------------------------------

def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


async def index(request: web.Request) -> web.Response:
    """GET /: the web view's list of applications; with one application and no token (the sandbox), a redirect
    to its page."""
    backend = request.app[BACKEND]
    apps = await _call(request, "list", backend.applications)
    if len(apps) == 1 and not backend.requires_token:  # the sandbox: its one application
        raise web.HTTPFound(view.app_path(apps[0].namespace, apps[0].name))
    return _html(view.applications_page(apps))


async def application_page(request: web.Request) -> web.Response:
    """GET /ui/namespaces/{namespace}/applications/{name}: the application's web page (graph, streamlets,
    topics, the 20 newest dead letters, savepoints)."""
    backend, m = request.app[BACKEND], request.match_info
    ns, name = m["namespace"], m["name"]
    app = await _call(request, "get", backend.application, ns, name)
    letters, savepoints = await asyncio.gather(asyncio.to_thread(backend.dead_letters, ns, name, 20),
                                               asyncio.to_thread(backend.savepoints, ns, name))
    return _html(view.application_page(app, letters, savepoints))


async def login_form(request: web.Request) -> web.Response:
    """GET /login: the sign-in page (a Kubernetes bearer token) of a server that requires one."""
    return _html(view.login_page())


async def login(request: web.Request) -> web.Response:
    """POST /login (form field `token`): checks the token with the backend (`authorize` for list) and keeps it
    in a cookie; the form again, with the reason, on 401."""
    form = await request.post()
    token = str(form.get("token") or "").strip()
    try:
        await asyncio.to_thread(request.app[BACKEND].authorize, token, "list", None, None)
    except Unauthorized as e:
        return web.Response(text=view.login_page(str(e)), status=401, content_type="text/html")
    except OpsError:
        pass  # a valid token without the list right may still read single applications
    response = web.HTTPFound("/")
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", secure=request.secure)
    raise response


def make_app(backend: OpsBackend) -> web.Application:
    """The aiohttp application serving `backend` (see the module's routes)."""
    app = web.Application(middlewares=[_errors])
    app[BACKEND] = backend
    base = "/api/v1/namespaces/{namespace}/applications/{name}"
    app.add_routes([
        web.get("/api/v1/applications", list_applications),
        web.get(base, get_application),
        web.get(base + "/dead-letters", get_dead_letters),
        web.get(base + "/savepoints", get_savepoints),
        web.post(base + "/savepoints", take_savepoint),
        web.post(base + "/commands", send_command),
        web.get("/metrics", metrics),
        web.get("/openapi.json", openapi),
        web.get("/healthz", healthz),
        web.get("/", index),
        web.get("/ui/namespaces/{namespace}/applications/{name}", application_page),
        web.get("/login", login_form),
        web.post("/login", login),
    ])
    return app


class OpsServer:
    """The server on its own thread and event loop (the sandbox); `start()` returns once it
    listens, `port` is the bound port (0 asks for a free one). The operator runs make_app on
    kopf's loop instead."""

    def __init__(self, backend: OpsBackend, host: str = "127.0.0.1", port: int = 0) -> None:
        self.backend, self.host, self.port = backend, host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "OpsServer":
        """Serve on a thread of its own and return self once listening; raises OSError naming host, port and
        the reason when it cannot listen (a port in use). Port 0 takes a free port (`port` then holds it)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                self._runner = web.AppRunner(make_app(self.backend), access_log=None)
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.host, self.port)
                loop.run_until_complete(site.start())
                server = getattr(site, "_server", None)
                if server is not None and server.sockets:
                    self.port = server.sockets[0].getsockname()[1]
            except BaseException as e:  # reported to start()'s caller
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="streamlets-ops", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise OSError(f"cannot serve on {self.host}:{self.port}: {failure[0]}")
        return self

    @property
    def url(self) -> str:
        """`http://<host>:<port>`, the base URL of the API and the web view."""
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop the event loop and wait up to 10 seconds for the server's thread; a server never started is
        left as is."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
