"""prism.serve: Ray Serve's Python API over Prism's C++ Serve engine (one engine, two front
ends: the controller, routers, replicas' placement, health checks, autoscaling and the
HTTP server are C++; only the deployments' code runs in Python).

    from prism import serve
    from starlette.requests import Request

    @serve.deployment(num_replicas=2)
    class Echo:
        async def __call__(self, request: Request):
            return {"got": await request.json()}

    handle = serve.run(Echo.bind(), route_prefix="/echo")   # http://127.0.0.1:8000/echo
    serve.run(...)  # ... handle.remote(request).result()

Import it at the top of the script, on every rank (before prism.init(), which serve.run
calls if you did not): replicas run on the worker ranks and need this module there.
"""

import prism  # loads prism._prism, RTLD_GLOBAL, which _serve resolves the core from

_imported_initialized = prism.is_initialized()
_serve = prism._import_global("_serve")

from . import _api, _handle, _replica  # noqa: E402,F401 (_replica: imported before any replica thread)

_api._serve = _serve
_handle._serve = _serve
_api._imported_initialized = _imported_initialized

from . import exceptions  # noqa: E402
from ._api import (Application, AutoscalingConfig, Deployment, delete, deployment,  # noqa: E402
                   get_app_handle, get_deployment_handle, get_replica_context, ingress, run, shutdown, start,
                   status)
from ._handle import DeploymentHandle, DeploymentResponse  # noqa: E402
from .batching import batch  # noqa: E402
from . import config, handle  # noqa: E402

__all__ = ["deployment", "Deployment", "Application", "run", "start", "shutdown", "delete", "status",
           "get_app_handle", "get_deployment_handle", "get_replica_context", "ingress", "batch",
           "DeploymentHandle", "DeploymentResponse", "AutoscalingConfig", "exceptions", "config", "handle"]
