"""Calling C++ from Python: prism.cpp_function("Name").remote(...) runs a function registered
with PRISM_REMOTE, and its ObjectRef reads the C++ result.

The registered function's pointer type, demangled (e.g. "double (*)(std::vector<double,
std::allocator<double> >, int)"), gives its parameter and return types; each Python argument
is converted to its parameter type (int, long, double, float, bool, std::string,
std::vector of double/float/int/long from NumPy arrays or sequences) and the result is read
back as the Python value (a vector as a read-only NumPy array). C++ functions are in this
process when a library that registers them is loaded on every rank before prism.init()
(load_library), or are linked into it.
"""

import ctypes
import os

from . import _prism
from .exceptions import PrismError
from ._remote import ObjectRef, _check_options, _placement, _resources, _TASK_OPTIONS


_STRING = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"


def load_library(path):
    """Loads a shared library whose PRISM_REMOTE functions become callable by name. Call it
    on every rank before prism.init() (every rank runs the script, so put it at the top)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"prism.load_library: no such file {path!r}")
    return ctypes.CDLL(os.path.abspath(path), mode=os.RTLD_GLOBAL | os.RTLD_NOW)


def _split_params(text):
    params, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            params.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        params.append(text[start:].strip())
    return params


def _plain(t):
    t = t.strip()
    for suffix in ("&&", "&"):
        if t.endswith(suffix):
            t = t[: -len(suffix)].strip()
    if t.endswith(" const"):
        t = t[: -len(" const")]
    if t.startswith("const "):
        t = t[len("const "):]
    return t


def parse_signature(signature):
    """(return type, [parameter types]) of a demangled "R (*)(A, B)"."""
    at = signature.find(" (*)(")
    if at < 0 or not signature.endswith(")"):
        raise TypeError(f"prism: cannot read the C++ signature {signature!r}")
    ret = _plain(signature[:at])
    params = [_plain(p) for p in _split_params(signature[at + len(" (*)("):-1])]
    return ret, params


class CppFunction:
    """A C++ function by its registered name. .remote(*args) -> ObjectRef of its result."""

    def __init__(self, name, options=None):
        _check_options(options or {}, _TASK_OPTIONS, f"C++ function {name}")
        self._name = name
        self._options = dict(options or {})
        self._signature = _prism.cpp_signature(name)
        self.return_type, self.param_types = parse_signature(self._signature)
        self._template = None

    def options(self, **options):
        return CppFunction(self._name, {**self._options, **options})

    def remote(self, *args):
        if len(args) != len(self.param_types):
            raise TypeError(f"prism: C++ function {self._name} ({self._signature}) takes "
                            f"{len(self.param_types)} argument(s), {len(args)} given")
        if self._template is None:
            o = self._options
            self._template = _prism.RequestTemplate(
                "task", self._name, name=o.get("name") or self._name, resources=_resources(o),
                max_retries=int(o.get("max_retries", 3)),
                retry_exceptions=bool(o.get("retry_exceptions", False)), **_placement(o))
        packed = []
        for i, (a, t) in enumerate(zip(args, self.param_types)):
            if isinstance(a, ObjectRef):
                if a._cpp_type != t:
                    raise TypeError(f"prism: argument {i} of {self._name} is a {t}, but the "
                                    f"ObjectRef holds {a._cpp_type or 'a Python object'}")
                packed.append(a)
            else:
                try:
                    packed.append(_prism.encode_cpp(t, a))
                except (TypeError, RuntimeError) as e:
                    raise TypeError(f"prism: argument {i} of {self._name} ({self._signature}): "
                                    f"cannot pass {type(a).__name__} as {t}: {e}") from None
        ref = self._template.submit(packed, [])
        return _prism._with_cpp_type(ref, self.return_type)


def cpp_function(name):
    """The C++ function registered (PRISM_REMOTE) as `name`. Raises PrismError if there is
    none in this process, or it is not a free function."""
    return CppFunction(name)


# C++ actors: a registered factory's and methods' types are not recorded in the registry
# (only free functions keep their pointer type), so the caller names them, in these short
# forms or as demangled C++ names.
_ALIASES = {
    "str": _STRING, "string": _STRING, "std::string": _STRING, "bytes": _STRING,
    "vector<double>": "std::vector<double, std::allocator<double> >",
    "vector<float>": "std::vector<float, std::allocator<float> >",
    "vector<int>": "std::vector<int, std::allocator<int> >",
    "vector<long>": "std::vector<long, std::allocator<long> >",
    "int64": "long", "int32": "int", "float64": "double", "float32": "float", "None": "void",
}


def _cpp_type(name):
    return _ALIASES.get(name, name)


def _pack_cpp(what, types, args):
    if len(args) != len(types):
        raise TypeError(f"prism: {what} takes {len(types)} argument(s), {len(args)} given")
    packed = []
    for i, (a, t) in enumerate(zip(args, types)):
        if isinstance(a, ObjectRef):
            if a._cpp_type != t:
                raise TypeError(f"prism: argument {i} of {what} is a {t}, but the ObjectRef holds "
                                f"{a._cpp_type or 'a Python object'}")
            packed.append(a)
            continue
        try:
            packed.append(_prism.encode_cpp(t, a))
        except (TypeError, RuntimeError) as e:
            raise TypeError(f"prism: argument {i} of {what}: cannot pass {type(a).__name__} as {t}: {e}") from None
    return packed


class CppActorMethod:
    """handle.method("Class::Method", arg_types, return_type).remote(args...)."""

    def __init__(self, handle, name, arg_types, return_type):
        self._name = name
        self._types = [_cpp_type(t) for t in arg_types]
        self._return = _cpp_type(return_type)
        self._template = _prism.RequestTemplate("actor_call", name, name=name,
                                                actor=handle._ref.id(), max_retries=0)

    def remote(self, *args):
        ref = self._template.submit(_pack_cpp(self._name, self._types, args), [])
        return _prism._with_cpp_type(ref, self._return)


class CppActorHandle:
    """A C++ actor made from Python. Keeps it alive while referenced."""

    def __init__(self, creation_ref, factory):
        self._ref = creation_ref
        self._factory = factory

    def method(self, name, arg_types=(), return_type="void"):
        """The method registered as `name` (PRISM_REMOTE(&Class::Method)), taking
        `arg_types` and returning `return_type` (e.g. ("int",), "int")."""
        return CppActorMethod(self, name, arg_types, return_type)

    def __repr__(self):
        return f"CppActorHandle({self._factory}, {self._ref.hex()})"


class CppActorClass:
    """prism.cpp_actor("Class::FactoryCreate", arg_types).remote(args...) -> CppActorHandle."""

    def __init__(self, factory, arg_types, options=None):
        options = dict(options or {})
        _check_options(options, {"name", "namespace", "max_restarts", "max_concurrency", "num_cpus",
                                 "num_gpus", "resources", "placement_group", "bundle_index",
                                 "scheduling_strategy", "memory"}, f"C++ actor {factory}")
        self._factory = factory
        self._types = [_cpp_type(t) for t in arg_types]
        self._options = options

    def options(self, **options):
        return CppActorClass(self._factory, self._types, {**self._options, **options})

    def remote(self, *args):
        o = self._options
        res = _resources(o)
        res.setdefault("CPU", 0.0)
        template = _prism.RequestTemplate(
            "actor", self._factory, name=o.get("name") or "", resources=res, max_retries=0,
            max_restarts=int(o.get("max_restarts", 0)), max_concurrency=int(o.get("max_concurrency", 1)),
            namespace=o.get("namespace") or "", **_placement(o))
        ref = template.submit(_pack_cpp(self._factory, self._types, args), [])
        return CppActorHandle(ref, self._factory)


def cpp_actor(factory, arg_types=()):
    """A C++ actor class by its registered factory (PRISM_REMOTE(Class::FactoryCreate)) and
    the factory's parameter types. Raises PrismError if no factory is registered as that."""
    if not _prism.is_cpp_factory(factory):
        raise PrismError(f"prism: no C++ actor factory registered as {factory!r} in this process "
                         "(PRISM_REMOTE(Class::FactoryCreate) in a library loaded with "
                         "prism.load_library on every rank, before prism.init)")
    return CppActorClass(factory, arg_types)
