"""HTTP on the replica's side: the engine's serve::Request as a Starlette Request (Ray's
handler argument), the handler's return value as the engine's serve::Response, and a
FastAPI (any ASGI) app run on one request for @serve.ingress.

A plain handler sees the whole path (request.url.path, e.g. "/classify/v1"); an ASGI app
sees the path below the route prefix with the prefix as root_path, as Ray mounts it."""

import asyncio
import json
import traceback

from .exceptions import BadRequestError

try:
    from starlette.requests import Request as _StarletteRequest
    from starlette.responses import Response as _StarletteResponse
except ImportError as e:  # pragma: no cover - the package's dependency
    raise ImportError("prism.serve needs Starlette for its HTTP requests: apt-get install python3-starlette "
                      f"(scripts/install-deps.sh installs it) ({e})") from None

JSON = "application/json"


class Request(_StarletteRequest):
    """Starlette's Request, whose json() answers a body that is not JSON with
    BadRequestError (HTTP 400) instead of a JSONDecodeError (500)."""

    async def json(self):
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = json.loads(body)
            except ValueError as e:
                raise BadRequestError(f"invalid JSON in the request body: {e}") from None
        return self._json


async def _no_more_body():
    return {"type": "http.request", "body": b"", "more_body": False}


def scope(method, path, route_prefix, query, headers, for_asgi):
    """The ASGI scope of one request."""
    root_path = ""
    if for_asgi and route_prefix not in ("", "/"):
        root_path = route_prefix
        path = path[len(route_prefix):] or "/"
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": root_path,
        "query_string": query.encode("latin-1"),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "server": _server(headers), "client": None,
    }


def _server(headers):
    host = headers.get("host", "")
    name, _, port = host.rpartition(":")
    if name and port.isdigit():
        return (name, int(port))
    return (host or "127.0.0.1", 80)


def make_request(method, path, route_prefix, query, headers, body):
    """A Request whose body is already read (so a sync handler may use request._body, and
    `await request.body()` / `.json()` return at once)."""
    request = Request(scope(method, path, route_prefix, query, headers, False), _no_more_body)
    request._body = body
    return request


def _json_default(value):
    tolist = getattr(value, "tolist", None)  # NumPy arrays and scalars
    if callable(tolist):
        return tolist()
    for dump in ("model_dump", "dict"):  # pydantic models
        f = getattr(value, dump, None)
        if callable(f):
            return f()
    raise TypeError(f"a {type(value).__name__} is not JSON serializable: return a dict, list, str, bytes or "
                    "a starlette Response")


def to_response(result):
    """(status, body, content type, extra headers) for what a handler returned."""
    if isinstance(result, _StarletteResponse):
        if not hasattr(result, "body"):  # a StreamingResponse, FileResponse: run it as ASGI, whole
            loop = asyncio.new_event_loop()
            try:
                return loop.run_until_complete(_collect(result, scope("GET", "/", "/", "", {}, False)))
            finally:
                loop.close()
        return _from_raw(result.status_code, result.raw_headers, bytes(result.body))
    if isinstance(result, (bytes, bytearray, memoryview)):
        return 200, bytes(result), "application/octet-stream", {}
    if isinstance(result, str):
        return 200, result.encode(), "text/plain; charset=utf-8", {}
    return 200, json.dumps(result, default=_json_default).encode(), JSON, {}


def _from_raw(status, raw_headers, body):
    content_type = ""
    extra = {}
    for k, v in raw_headers:
        name = k.decode("latin-1").lower()
        if name == "content-type":
            content_type = v.decode("latin-1")
        elif name != "content-length":
            extra[name] = v.decode("latin-1")
    return status, body, content_type, extra


async def _collect(app, asgi_scope, body=b""):
    """Runs one request through an ASGI app (a FastAPI app, a Starlette Response) and
    returns what it sent."""
    sent = False
    start = {}
    chunks = []

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects from the app's view

    async def send(message):
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(asgi_scope, receive, send)
    return _from_raw(start.get("status", 500), start.get("headers", []), b"".join(chunks))


async def run_asgi(app, method, path, route_prefix, query, headers, body):
    return await _collect(app, scope(method, path, route_prefix, query, headers, True), body)


def error_response(e, where):
    """A handler's exception as HTTP: 400 for BadRequestError, else 500, with the error's
    type and message; the traceback goes to the replica's stderr."""
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, BadRequestError):
        return 400, json.dumps({"error": text}).encode(), JSON, {}
    print(f"prism.serve: {where} raised:\n{''.join(traceback.format_exception(type(e), e, e.__traceback__))}",
          end="", flush=True, file=__import__("sys").stderr)
    return 500, json.dumps({"error": text}).encode(), JSON, {}


def bind_class_routes(app, cls, current):
    """@serve.ingress on a class: FastAPI routes whose endpoints are the class's methods
    get the replica's instance as `self` (from `current`, a ContextVar set per request), as
    Ray's class-based views do. Idempotent (several replicas may share one app object)."""
    import inspect
    from fastapi import Depends
    from fastapi.dependencies.utils import get_body_field, get_dependant
    from fastapi.routing import APIRoute
    from starlette.routing import request_response

    # By qualified name: the class may have come by value (another copy of its functions
    # than the app's routes hold).
    methods = set()
    for klass in inspect.getmro(cls):
        methods.update(getattr(v, "__qualname__", None) for v in vars(klass).values() if inspect.isfunction(v))
    for route in app.routes:
        if not isinstance(route, APIRoute) or getattr(route, "_prism_bound", False):
            continue
        endpoint = route.endpoint
        if getattr(endpoint, "__qualname__", None) not in methods:
            continue
        signature = inspect.signature(endpoint)
        params = list(signature.parameters.values())
        if not params:
            continue
        first = params[0].replace(default=Depends(_servable_of(current)))
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params[1:]]
        endpoint.__signature__ = signature.replace(parameters=[first] + rest)
        route.dependant = get_dependant(path=route.path_format, call=endpoint)
        route.body_field = get_body_field(dependant=route.dependant, name=route.unique_id)
        route.app = request_response(route.get_route_handler())
        route._prism_bound = True


def _servable_of(current):
    def servable():
        return current.get()
    return servable
