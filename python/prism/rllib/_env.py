"""Python environments inside prism::rl's C++ env runners (src/python/rllib/python_env.h).

A Python env (a class with gymnasium's reset/step, or a creator given to register_env) gets a
name of its own, "python:<name>:<hash>", registered in prism::rl's registry on every rank
with the cloudpickled (creator, env_config); the C++ factory there calls make_adapter, and
every reset and step of the env goes through EnvAdapter, which checks what the env returns
and raises TypeError/ValueError naming the env, the call and what it must return."""

import hashlib
import inspect
import traceback

import cloudpickle
import numpy as np

from .. import _worker

_registry = {}  # register_env's: name -> creator(env_config)
_REGISTER_TIMEOUT_S = 60.0


def register_env(name, env_creator):
    """Registers `env_creator(env_config) -> env` under `name` (Ray's
    ray.tune.registry.register_env), for .environment(name). Call it on the driver; the
    creator travels to the env runners cloudpickled."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_env: the name must be a non-empty str, not {name!r}")
    if not callable(env_creator):
        raise TypeError(f"register_env({name!r}): env_creator must be callable (env_config -> env), not "
                        f"{type(env_creator).__name__}")
    _registry[name] = env_creator


class _ClassCreator:
    """A Python env class as a creator: cls(env_config), or cls() if it takes no argument
    (RLlib calls env classes with the EnvContext)."""

    def __init__(self, cls):
        self.cls = cls

    def __call__(self, env_config):
        try:
            params = [p for p in inspect.signature(self.cls).parameters.values()
                      if p.kind not in (p.VAR_KEYWORD,)]
        except (TypeError, ValueError):
            params = [None]
        return self.cls(env_config) if params else self.cls()


def python_env_name(env, env_config):
    """(engine name, pickled creator) of a Python env spec: a class or a register_env name;
    (env, None) for a name of prism::rl's registry."""
    if isinstance(env, str):
        creator = _registry.get(env)
        if creator is None:
            return env, None
        label = env
    elif isinstance(env, type):
        creator = _ClassCreator(env)
        label = env.__qualname__
    else:
        raise TypeError(f".environment(env): env must be a registered name (str) or a Python env class, not "
                        f"{type(env).__name__}")
    pickled = cloudpickle.dumps((creator, dict(env_config or {})))
    return f"python:{label}:{hashlib.sha1(pickled).hexdigest()[:12]}", pickled


def register_everywhere(name, pickled):
    from .. import _rllib
    _rllib.register_python_env(name, pickled, _REGISTER_TIMEOUT_S)


# ---- inside the env runners ---------------------------------------------------------------

def make_adapter(pickled, name):
    creator, env_config = cloudpickle.loads(pickled)
    env = creator(dict(env_config))
    return EnvAdapter(env, name.split(":")[1] if name.startswith("python:") else name)


def _space_spec(space, env_name, which):
    if space is None:
        raise TypeError(f"prism.rllib: the environment {env_name} has no {which}: set self.{which} to a "
                        "prism.rllib.spaces.Box or Discrete in its __init__ (gymnasium's shape)")
    if hasattr(space, "n") and not hasattr(space, "low"):
        n = int(space.n)
        if int(getattr(space, "start", 0)) != 0:
            raise ValueError(f"prism.rllib: {env_name}.{which} is {space!r}; a Discrete space must start at 0")
        return ("discrete", n)
    if hasattr(space, "low") and hasattr(space, "high") and hasattr(space, "shape"):
        shape = [int(s) for s in space.shape]
        low = np.ascontiguousarray(np.broadcast_to(np.asarray(space.low, np.float32), shape)).ravel()
        high = np.ascontiguousarray(np.broadcast_to(np.asarray(space.high, np.float32), shape)).ravel()
        return ("box", low, high, shape)
    raise TypeError(f"prism.rllib: {env_name}.{which} is a {type(space).__name__}; prism::rl takes a Box "
                    "(low, high, shape) or a Discrete (n): use prism.rllib.spaces.Box / Discrete")


class EnvAdapter:
    """The C++ PythonEnv's view of a user's env: reset(seed) -> float32 observation;
    step(action) -> (observation, reward, terminated, truncated), each checked."""

    def __init__(self, env, name):
        self.env = env
        self.name = name
        self._obs = _space_spec(getattr(env, "observation_space", None), name, "observation_space")
        self._act = _space_spec(getattr(env, "action_space", None), name, "action_space")
        self._obs_size = 1 if self._obs[0] == "discrete" else int(np.prod(self._obs[3]))
        self._act_shape = None if self._act[0] == "discrete" else tuple(self._act[3])
        for method in ("reset", "step"):
            if not callable(getattr(env, method, None)):
                raise TypeError(f"prism.rllib: the environment {name} has no {method}() method; an env has "
                                "gymnasium's reset(seed=, options=) -> (obs, info) and step(action) -> "
                                "(obs, reward, terminated, truncated, info)")
        try:
            params = inspect.signature(env.reset).parameters
            self._reset_options = "options" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            self._reset_options = True

    def spaces(self):
        return self._obs, self._act

    def _observation(self, obs, call):
        try:
            a = np.asarray(obs, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise TypeError(f"prism.rllib: {self.name}.{call} returned an observation that is not numeric "
                            f"({type(obs).__name__}: {e})") from None
        if a.size != self._obs_size:
            raise ValueError(f"prism.rllib: {self.name}.{call} returned an observation of shape {a.shape} "
                             f"({a.size} values); its observation_space holds {self._obs_size} "
                             f"({self._obs[0]} {self._obs[3] if self._obs[0] == 'box' else ''})".rstrip())
        return a.reshape(-1) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1)

    def reset(self, seed):
        if self._reset_options:
            r = self.env.reset(seed=seed, options=None)
        else:
            r = self.env.reset(seed=seed)
        if not isinstance(r, tuple) or len(r) != 2:
            got = f"a tuple of {len(r)}" if isinstance(r, tuple) else f"a {type(r).__name__}"
            raise TypeError(f"prism.rllib: {self.name}.reset(seed=, options=) must return (observation, info) "
                            f"as gymnasium's reset does; it returned {got}")
        return self._observation(r[0], "reset()")

    def step(self, action):
        if self._act_shape is not None:
            action = action.reshape(self._act_shape)
        r = self.env.step(action)
        if not isinstance(r, tuple) or len(r) != 5:
            got = f"a tuple of {len(r)}" if isinstance(r, tuple) else f"a {type(r).__name__}"
            hint = " (gym's old 4-tuple: split done into terminated and truncated)" if got == "a tuple of 4" else ""
            raise TypeError(f"prism.rllib: {self.name}.step(action) must return (observation, reward, "
                            f"terminated, truncated, info) as gymnasium's step does; it returned {got}{hint}")
        obs, reward, terminated, truncated, _ = r
        try:
            reward = float(reward)
        except (TypeError, ValueError):
            raise TypeError(f"prism.rllib: {self.name}.step(action) returned a reward of type "
                            f"{type(reward).__name__}; it must be a number") from None
        return self._observation(obs, "step()"), reward, bool(terminated), bool(truncated)


def describe(exc_type, exc, tb):
    """The text a Python env's exception travels as: its traceback from the user's code on,
    then the pickled exception (prism._worker's format, which prism raises again)."""
    if exc is None:
        exc = exc_type()
    if tb is not None:
        exc = exc.with_traceback(tb)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    if tb is not None and tb.tb_frame.f_code.co_filename == __file__ and isinstance(exc, (TypeError, ValueError)) \
            and str(exc).startswith("prism.rllib:"):
        text = f"{type(exc).__name__}: {exc}\n"  # the adapter's own check: the message says it all
    else:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    return _worker._pickled(text, exc, f"{type(exc).__module__}.{type(exc).__qualname__}")
