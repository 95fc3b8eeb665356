"""@serve.deployment, Deployment, Application, serve.run and the calls around them.

A deployment's options are checked here (each bad one named, with what to do), then handed
to the engine as Deployment<PythonDeployment> options; its code and bound arguments travel
cloudpickled as the PythonDeployment's constructor argument. An Application among the bound
arguments (anywhere in lists, tuples and dicts) becomes a DeploymentHandle to its ingress,
and its deployments join the application (the engine's Application::Include).

Ray's deployment names are unique within an application; the engine's are unique in the
job, so the engine knows a deployment as "<app>:<name>"."""

import atexit
import dataclasses
import inspect
import json
import math
import threading

import cloudpickle

import prism

from . import _handle
from ._handle import DeploymentHandle, _cpp_name
from .exceptions import RayServeException

_serve = None  # prism._serve, set by prism.serve's __init__
_imported_initialized = False  # prism was initialized before prism.serve was imported

_DEFAULTS = {
    "num_replicas": 1, "max_ongoing_requests": 5, "max_queued_requests": -1, "autoscaling_config": None,
    "ray_actor_options": None, "user_config": None, "health_check_period_s": 10.0,
    "health_check_timeout_s": 30.0, "graceful_shutdown_timeout_s": 20.0,
}
_AUTOSCALING_DEFAULTS = {
    "min_replicas": 1, "max_replicas": 1, "initial_replicas": None, "target_ongoing_requests": 2.0,
    "upscale_delay_s": 30.0, "downscale_delay_s": 600.0, "look_back_period_s": 30.0, "metrics_interval_s": 0.1,
}
_ACTOR_OPTIONS = ("num_cpus", "num_gpus", "resources", "memory", "runtime_env")


@dataclasses.dataclass
class AutoscalingConfig:
    """Ray Serve's autoscaling_config (a dict with these keys works too). The replica count
    follows the ongoing requests per replica toward target_ongoing_requests, within
    [min_replicas, max_replicas]; see prism/serve/config.h for the rule."""
    min_replicas: int = 1
    max_replicas: int = 1
    initial_replicas: int = None
    target_ongoing_requests: float = 2.0
    upscale_delay_s: float = 30.0
    downscale_delay_s: float = 600.0
    look_back_period_s: float = 30.0
    metrics_interval_s: float = 0.1


def _int(name, value, low, what_to_do=""):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"prism.serve: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"prism.serve: {name} must be >= {low}, got {value}{what_to_do}")
    return value


def _seconds(name, value, positive=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"prism.serve: {name} must be a number of seconds, got {type(value).__name__} {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"prism.serve: {name} must be {'> 0' if positive else '>= 0'}, got {value}")
    return float(value)


def _check_autoscaling(config):
    if isinstance(config, AutoscalingConfig):
        config = dataclasses.asdict(config)
    if not isinstance(config, dict):
        raise TypeError(f"prism.serve: autoscaling_config must be a dict or serve.config.AutoscalingConfig, "
                        f"got {type(config).__name__}")
    unknown = sorted(set(config) - set(_AUTOSCALING_DEFAULTS))
    if unknown:
        raise ValueError(f"prism.serve: autoscaling_config has unknown keys {unknown}; the keys are "
                         f"{sorted(_AUTOSCALING_DEFAULTS)}")
    c = dict(_AUTOSCALING_DEFAULTS, **{k: v for k, v in config.items() if v is not None or k == "initial_replicas"})
    _int("autoscaling_config['min_replicas']", c["min_replicas"], 0)
    _int("autoscaling_config['max_replicas']", c["max_replicas"], 1)
    if c["min_replicas"] > c["max_replicas"]:
        raise ValueError(f"prism.serve: autoscaling_config: min_replicas ({c['min_replicas']}) is above "
                         f"max_replicas ({c['max_replicas']})")
    if c["initial_replicas"] is not None:
        _int("autoscaling_config['initial_replicas']", c["initial_replicas"], 0)
        if not c["min_replicas"] <= c["initial_replicas"] <= c["max_replicas"]:
            raise ValueError("prism.serve: autoscaling_config: initial_replicas must lie within "
                             "[min_replicas, max_replicas]")
    for key in ("target_ongoing_requests", "look_back_period_s", "metrics_interval_s"):
        c[key] = _seconds(f"autoscaling_config[{key!r}]", c[key])
    for key in ("upscale_delay_s", "downscale_delay_s"):
        c[key] = _seconds(f"autoscaling_config[{key!r}]", c[key], positive=False)
    return c


def _resources(options):
    """ray_actor_options as the engine's resources (Ray's default: one CPU)."""
    if options is None:
        return {"CPU": 1.0}
    if not isinstance(options, dict):
        raise TypeError(f"prism.serve: ray_actor_options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(_ACTOR_OPTIONS))
    if unknown:
        raise ValueError(f"prism.serve: ray_actor_options has unknown keys {unknown}; the keys are "
                         f"{list(_ACTOR_OPTIONS)}")
    resources = {"CPU": 1.0}
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        if options.get(key) is not None:
            value = options[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"prism.serve: ray_actor_options[{key!r}] must be a number >= 0, got {value!r}")
            resources[name] = float(value)
    for name, value in (options.get("resources") or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"prism.serve: ray_actor_options['resources'][{name!r}] must be a number >= 0, "
                             f"got {value!r}")
        resources[str(name)] = float(value)
    return {k: v for k, v in resources.items() if v > 0 or k == "CPU"}


def _check_options(options, name):
    """The options, checked: TypeError/ValueError naming the bad one."""
    out = dict(options)
    if out["num_replicas"] == "auto":
        out["num_replicas"] = 1
        if out["autoscaling_config"] is None:
            out["autoscaling_config"] = {"min_replicas": 1, "max_replicas": 100}
    elif out.get("_num_replicas_set") and out["autoscaling_config"] is not None:
        raise ValueError(f"prism.serve: deployment {name!r}: num_replicas and autoscaling_config are both set; "
                         "set one (autoscaling decides the count)")
    _int("num_replicas", out["num_replicas"], 0)
    _int("max_ongoing_requests", out["max_ongoing_requests"], 1)
    _int("max_queued_requests", out["max_queued_requests"], -1, " (-1: no limit)")
    if out["autoscaling_config"] is not None:
        out["autoscaling_config"] = _check_autoscaling(out["autoscaling_config"])
    out["resources"] = _resources(out["ray_actor_options"])
    if out["user_config"] is not None:
        try:
            out["user_config_json"] = json.dumps(out["user_config"])
        except (TypeError, ValueError) as e:
            raise TypeError(f"prism.serve: deployment {name!r}: user_config must be JSON-serializable ({e})") from None
    for key in ("health_check_period_s", "health_check_timeout_s"):
        _seconds(key, out[key])
    _seconds("graceful_shutdown_timeout_s", out["graceful_shutdown_timeout_s"], positive=False)
    return out


def _check_name(kind, name):
    if not isinstance(name, str) or not name or any(c in name for c in "#/:"):
        raise ValueError(f"prism.serve: the {kind} name must be a non-empty string without '#', '/' or ':', "
                         f"got {name!r}")
    return name


class Deployment:
    """A deployment (Ray's): `.options(...)` makes another with other options,
    `.bind(*args, **kwargs)` an Application to give serve.run. Immutable."""

    def __init__(self, target, name, options):
        self._target = target
        self._name = _check_name("deployment", name)
        self._options = _check_options(options, name)

    @property
    def name(self):
        return self._name

    @property
    def func_or_class(self):
        return self._target

    def __getattr__(self, key):
        options = self.__dict__.get("_options")
        if options is not None and key in _DEFAULTS:
            return options[key]
        raise AttributeError(key)

    def options(self, *, name=None, **options):
        """A copy with these options changed (the same keywords as @serve.deployment)."""
        unknown = sorted(set(options) - set(_DEFAULTS))
        if unknown:
            raise TypeError(f"prism.serve: Deployment.options() got unknown options {unknown}; the options "
                            f"are {sorted(_DEFAULTS) + ['name']}")
        merged = {k: v for k, v in self._options.items() if k in _DEFAULTS or k == "_num_replicas_set"}
        merged.update(options)
        if "num_replicas" in options:
            merged["_num_replicas_set"] = True
            if "autoscaling_config" not in options:
                merged["autoscaling_config"] = None
        elif "autoscaling_config" in options and options["autoscaling_config"] is not None:
            merged["_num_replicas_set"] = False
        return Deployment(self._target, name or self._name, merged)

    def bind(self, *args, **kwargs):
        """An Application of this deployment built with these arguments (values, or other
        Applications, which the constructor receives as DeploymentHandles)."""
        if not isinstance(self._target, type) and (args or kwargs):
            raise TypeError(f"prism.serve: {self._name!r} is a function deployment: bind() takes no arguments "
                            "(its calls pass them)")
        return Application(self, args, kwargs)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"prism.serve: deployment {self._name!r} cannot be called directly: "
                        f"serve.run({self._name}.bind(...)) and call it through the handle")

    def __repr__(self):
        return f"Deployment(name={self._name!r})"


class Application:
    """A bound deployment (Ray's Application): what serve.run deploys."""

    def __init__(self, deployment, args, kwargs):
        self._deployment = deployment
        self._args = args
        self._kwargs = kwargs

    def __repr__(self):
        return f"Application(ingress={self._deployment.name!r})"


def deployment(_func_or_class=None, *, name=None, **options):
    """@serve.deployment: a class or function as a deployment (Ray's decorator), with or
    without options: num_replicas, max_ongoing_requests, max_queued_requests,
    autoscaling_config, ray_actor_options, user_config, health_check_period_s,
    health_check_timeout_s, graceful_shutdown_timeout_s. Raises TypeError/ValueError naming
    a bad option."""
    unknown = sorted(set(options) - set(_DEFAULTS))
    if unknown:
        raise TypeError(f"prism.serve: @serve.deployment got unknown options {unknown}; the options are "
                        f"{sorted(_DEFAULTS) + ['name']}")

    def decorate(target):
        if not (isinstance(target, type) or inspect.isfunction(target) or inspect.ismethod(target)):
            raise TypeError(f"prism.serve: @serve.deployment decorates a class or a function, not a "
                            f"{type(target).__name__}")
        merged = dict(_DEFAULTS, **options)
        merged["_num_replicas_set"] = "num_replicas" in options
        return Deployment(target, name or target.__name__, merged)

    if _func_or_class is not None:
        if not callable(_func_or_class):
            raise TypeError("prism.serve: use @serve.deployment or @serve.deployment(options...), "
                            f"not @serve.deployment({_func_or_class!r})")
        return decorate(_func_or_class)
    return decorate


_pickled_targets = {}  # class or function -> its cloudpickle, made once


def _pickled(target):
    """The target's pickle, made once per target: a class pickled by value again after a
    replica in this process unpickled it (one rank) may come out in other bytes, and the
    engine would take new bytes for new code and replace the replicas instead of updating
    them in place."""
    blob = _pickled_targets.get(target)
    if blob is None:
        blob = _pickled_targets[target] = cloudpickle.dumps(target, protocol=5)
    return blob


_ingress_apps = {}  # class -> its ASGI app (@serve.ingress)


def _asgi_spec(target):
    """How a replica finds the class's ASGI app: ("ref", module, name) for an app that is a
    global of the class's module (every rank runs the same program, so it is there too; an
    app object often does not pickle), else ("value", app)."""
    app = _ingress_apps.get(target)
    if app is None:
        return None
    import sys
    module = sys.modules.get(target.__module__)
    for name, value in vars(module).items() if module is not None else ():
        if value is app:
            return ("ref", target.__module__, name)
    return ("value", app)


def ingress(app):
    """@serve.ingress(fastapi_app) on a deployment class: HTTP requests to the deployment go
    through the FastAPI (any ASGI) app, whose routes may be the class's methods (`self` is
    the replica's instance). Runs on the replica's event loop, behind Prism's HTTP server."""
    if not callable(app):
        raise TypeError(f"prism.serve: @serve.ingress takes an ASGI app (a FastAPI app), not {type(app).__name__}")

    def decorate(cls):
        if not isinstance(cls, type):
            raise TypeError("prism.serve: @serve.ingress(app) decorates a class (put it under @serve.deployment)")
        _ingress_apps[cls] = app
        cls._prism_ingress = True
        return cls
    return decorate


# ---- running -------------------------------------------------------------------------

_http_options = {"host": "127.0.0.1", "port": 8000}
_apps = {}  # name -> (ingress deployment name, route prefix)
_lock = threading.Lock()
_ran = False


def start(*, http_options=None, **_ignored):
    """Ray's serve.start: where the HTTP server listens ({"host", "port"}; default
    127.0.0.1:8000, port 0 for any free port). Takes effect when the first application with
    HTTP starts the server."""
    if http_options is None:
        return
    if not isinstance(http_options, dict):
        http_options = dict(vars(http_options))
    unknown = sorted(set(http_options) - {"host", "port", "location", "root_path"})
    if unknown:
        raise ValueError(f"prism.serve.start: http_options has unknown keys {unknown}; use host and port")
    if "port" in http_options:
        _int("http_options['port']", http_options["port"], 0)
        if http_options["port"] > 65535:
            raise ValueError(f"prism.serve.start: port must be <= 65535, got {http_options['port']}")
        _http_options["port"] = http_options["port"]
    if "host" in http_options:
        _http_options["host"] = str(http_options["host"])


def _require_driver(what):
    if not prism.is_initialized():
        prism._ensure_init()
    if prism.get_runtime_context().rank != 0:
        raise RuntimeError(f"prism.serve.{what} runs on the driver (rank 0)")
    if _imported_initialized and prism.get_runtime_context().world_size > 1:
        raise RuntimeError("prism.serve was imported after prism.init(): import it at the top of the script, "
                           "before prism.init(), so that every rank registers the replicas' code")


def _flatten(app, app_name, out, seen):
    """Appends app's deployments to `out` (dependencies first) and returns its handle."""
    if id(app) in seen:
        return seen[id(app)]
    dep = app._deployment
    handle = DeploymentHandle(dep.name, app_name)
    seen[id(app)] = handle

    def replace(value):
        if isinstance(value, Application):
            return _flatten(value, app_name, out, seen)
        if isinstance(value, list):
            return [replace(v) for v in value]
        if isinstance(value, tuple):
            return tuple(replace(v) for v in value)
        if isinstance(value, dict):
            return {k: replace(v) for k, v in value.items()}
        return value

    args = tuple(replace(a) for a in app._args)
    kwargs = {k: replace(v) for k, v in app._kwargs.items()}
    for other in out:
        if other["name"] == _cpp_name(app_name, dep.name):
            raise ValueError(f"prism.serve: two different deployments named {dep.name!r} in application "
                             f"{app_name!r}: give one another name with .options(name=...)")
    o = dep._options
    if o["user_config"] is not None and isinstance(dep._target, type) \
            and not hasattr(dep._target, "reconfigure"):
        raise ValueError(f"prism.serve: deployment {dep.name!r} has a user_config but its class has no "
                         "reconfigure(self, config) method")
    try:
        spec = cloudpickle.dumps((app_name, dep.name, _pickled(dep._target), args, kwargs,
                                  _asgi_spec(dep._target)), protocol=5)
    except Exception as e:
        raise TypeError(f"prism.serve: deployment {dep.name!r}: its class or bound arguments cannot be pickled "
                        f"({type(e).__name__}: {e})") from None
    out.append({
        "name": _cpp_name(app_name, dep.name), "spec": spec, "num_replicas": o["num_replicas"],
        "max_ongoing_requests": o["max_ongoing_requests"], "max_queued_requests": o["max_queued_requests"],
        "resources": o["resources"], "health_check_period_s": float(o["health_check_period_s"]),
        "health_check_timeout_s": float(o["health_check_timeout_s"]),
        "graceful_shutdown_timeout_s": float(o["graceful_shutdown_timeout_s"]),
        "user_config": o.get("user_config_json"), "autoscaling": o["autoscaling_config"],
    })
    return handle


def run(target, blocking=False, name="default", route_prefix="/", *, _ready_timeout_s=60.0, **_ignored):
    """Deploys the application (Ray's serve.run) and returns a DeploymentHandle to its
    ingress once every replica is up. route_prefix=None: no HTTP. Running an application of
    the same name again updates it (a new user_config or replica count in place, new code
    or arguments by replacing its replicas). blocking=True then serves until SIGTERM or
    SIGUSR1, drains the requests in flight and returns. Raises RuntimeError when a replica
    cannot start (its constructor's traceback), ValueError/TypeError on bad arguments."""
    global _ran
    if isinstance(target, Deployment):
        target = target.bind()
    if not isinstance(target, Application):
        raise TypeError(f"prism.serve.run takes an Application (deployment.bind(...)), not {type(target).__name__}")
    _check_name("application", name)
    if route_prefix is not None:
        if not isinstance(route_prefix, str) or not route_prefix.startswith("/"):
            raise ValueError(f"prism.serve.run: route_prefix must start with '/', got {route_prefix!r}")
        if len(route_prefix) > 1 and route_prefix.endswith("/"):
            raise ValueError(f"prism.serve.run: route_prefix must not end with '/' (except \"/\"), got {route_prefix!r}")
    _require_driver("run")
    deployments = []
    handle = _flatten(target, name, deployments, {})
    ingress_target = target._deployment._target
    if route_prefix is not None and isinstance(ingress_target, type) and not callable_instance(ingress_target):
        raise ValueError(f"prism.serve.run: the ingress deployment {target._deployment.name!r} has no __call__ "
                         "method (nor @serve.ingress) to handle HTTP requests: add one, or pass route_prefix=None")
    with _lock:
        _ran = True
        _serve.run(deployments, name, route_prefix, _http_options["host"], int(_http_options["port"]),
                   float(_ready_timeout_s))
        _apps[name] = (target._deployment.name, route_prefix)
    if blocking:
        _serve.run_until_stopped()
        with _lock:
            _apps.clear()
    return handle


def callable_instance(cls):
    return getattr(cls, "_prism_ingress", False) or callable(getattr(cls, "__call__", None)) and \
        "__call__" in {k for klass in cls.__mro__ if klass is not object for k in vars(klass)}


def shutdown():
    """Stops every application: no new HTTP requests, those in flight finish (up to
    graceful_shutdown_timeout_s), then the replicas and the HTTP server stop. A no-op when
    nothing runs."""
    with _lock:
        _apps.clear()
    if prism.is_initialized() and prism.get_runtime_context().rank == 0:
        _serve.shutdown()


def delete(name, _blocking=True):
    """Deletes application `name` (Ray's serve.delete): its route stops matching, calls in
    flight finish, its replicas stop. A no-op for an unknown name."""
    _require_driver("delete")
    with _lock:
        _serve.delete(name)
        _apps.pop(name, None)


def get_app_handle(name):
    """A handle to application `name`'s ingress deployment. Raises RayServeException when
    no such application runs. Driver only."""
    _require_driver("get_app_handle")
    with _lock:
        app = _apps.get(name)
    if app is None:
        raise RayServeException(f"prism.serve: no application named {name!r} is running "
                                f"(running: {sorted(_apps)})")
    return DeploymentHandle(app[0], name)


def get_deployment_handle(deployment_name, app_name=None):
    """A handle to deployment `deployment_name` of application `app_name` (default: the
    caller's own application inside a replica, else the one application that has such a
    deployment, else "default"). Any rank. Raises RayServeException when none runs."""
    if app_name is None:
        from . import _replica
        context = _replica.current.get()
        if context is not None:
            app_name = context.app_name
        elif prism.get_runtime_context().rank == 0:
            owners = [a for a, s in _status_apps().items() if deployment_name in s]
            app_name = owners[0] if len(owners) == 1 else "default"
        else:
            app_name = "default"
    if not _serve.exists(_cpp_name(app_name, deployment_name)):
        raise RayServeException(f"prism.serve: no deployment {deployment_name!r} runs in application "
                                f"{app_name!r} (serve.run it first)")
    return DeploymentHandle(deployment_name, app_name)


def get_replica_context():
    """Inside a replica's code: its ReplicaContext (app_name, deployment, replica_id,
    servable_object). Raises RayServeException elsewhere (Ray's)."""
    from . import _replica
    context = _replica.current.get()
    if context is None:
        raise RayServeException("prism.serve.get_replica_context() is called only inside a deployment's code")
    return context


# ---- status ----------------------------------------------------------------------------

@dataclasses.dataclass
class DeploymentStatusOverview:
    status: str
    replica_states: dict
    message: str = ""
    target_replicas: int = 0


@dataclasses.dataclass
class ApplicationStatusOverview:
    status: str
    message: str
    deployments: dict
    route_prefix: str = None


@dataclasses.dataclass
class ServeStatus:
    applications: dict
    proxies: dict = dataclasses.field(default_factory=dict)
    target_capacity: float = None
    http_address: str = ""


def _status_json():
    return json.loads(_serve.status())


def _status_apps():
    apps = {}
    for d in _status_json()["deployments"]:
        apps.setdefault(d["application"], set()).add(d["name"].split(":", 1)[1])
    return apps


def status():
    """Ray's serve.status(): applications (status RUNNING, DEPLOYING, UNHEALTHY) and their
    deployments (HEALTHY, UPDATING, UNHEALTHY, with replica_states {"RUNNING": n, ...}).
    http_address (Prism's) is where the HTTP server listens. Driver only."""
    _require_driver("status")
    raw = _status_json()
    apps = {}
    for name, prefix in raw["applications"].items():
        apps[name] = ApplicationStatusOverview("RUNNING", "", {}, prefix or None)
    for d in raw["deployments"]:
        app = apps.setdefault(d["application"], ApplicationStatusOverview("RUNNING", "", {}))
        states = {}
        for r in d["replicas"]:
            states[r["state"]] = states.get(r["state"], 0) + 1
        short = d["name"].split(":", 1)[1]
        app.deployments[short] = DeploymentStatusOverview(d["status"], states, d["message"], d["target_replicas"])
        if d["status"] == "UNHEALTHY":
            app.status, app.message = "UNHEALTHY", d["message"]
        elif d["status"] == "UPDATING" and app.status == "RUNNING":
            app.status = "DEPLOYING"
    return ServeStatus(apps, http_address=raw["endpoint"])


def _at_exit():
    if _ran and prism.is_initialized():
        try:
            if prism.get_runtime_context().rank == 0:
                _serve.shutdown()
        except Exception:
            pass


atexit.register(_at_exit)
