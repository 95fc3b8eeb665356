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
from ._remote import ObjectRef, _check_options, _placement, _resources, _TASK_OPTIONS


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
