"""Search spaces (Ray's tune.uniform, tune.choice, tune.grid_search, ...) and how a trial's
config travels: the C++ engine keeps a config as text per key (train/config.h), so each key
has a codec that brings back the Python value exactly:

  "float"  uniform, quniform, loguniform, qloguniform, randn, qrandn: float(text)
  "int"    randint, qrandint, lograndint, qlograndint: int(text)
  "str"    the text itself
           (a choice, grid_search or constant whose values are all floats, all ints or all
           strs has the codec of that type and its values travel as themselves, so PBT and
           TPE see numbers)
  "any"    other choices, grid_searches and constants, sample_from: a bool, int, float or
           str whose text reads back as the same value and type travels as itself ("0.1",
           "3", "true", "adam"); anything else (a list, a tuple, None, 1.0 whose text is
           "1", the string "3" among ints) as tagged text: "json:<JSON>" when JSON gives it
           back exactly, else "pickle:<base64 cloudpickle>".

Nested dicts in param_space are flattened to "a/b" keys for the engine (as Ray's
flatten_dict) and unflattened for the trainable and Result.config."""

import base64
import json
import math
import re

import cloudpickle

from .. import _tune

_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|inf|nan)")
_JSON, _PICKLE = "json:", "pickle:"


class Domain:
    """A hyperparameter's distribution (Ray's tune.search.sample.Domain)."""

    codec = "any"

    def _cpp(self):
        raise NotImplementedError

    def __repr__(self):
        return repr(self._cpp())


class _Call(Domain):
    def __init__(self, maker, codec, *args):
        self._maker, self.codec, self._args = maker, codec, args
        self._cpp()  # bad bounds raise ValueError here, as Ray's constructors do

    def _cpp(self):
        return getattr(_tune, self._maker)(*self._args)


def values_codec(values):
    """The codec of a key whose values are `values`: "float", "int" or "str" when they all
    are (they travel as themselves, so PBT and TPE see numbers), else "any"."""
    kinds = {type(v) for v in values}
    if kinds == {float}:
        return "float"
    if kinds == {int} and all(-2**63 <= v < 2**63 for v in values):
        return "int"
    if kinds == {str}:
        return "str"
    return "any"


def encode_as(values, codec):
    return list(values) if codec != "any" else [encode(v) for v in values]


class Categorical(Domain):
    def __init__(self, categories):
        self.categories = list(categories)
        if not self.categories:
            raise ValueError("tune.choice: the list of categories is empty")
        self.codec = values_codec(self.categories)
        self._cpp()

    def _cpp(self):
        return _tune.choice(encode_as(self.categories, self.codec))


class Function(Domain):
    """sample_from: a value computed by func(spec) from the trial's other values
    (spec.config.<name>)."""

    def __init__(self, func):
        if not callable(func):
            raise TypeError(f"tune.sample_from takes a callable, not {type(func).__name__}")
        self.func = func

    def _cpp(self, codecs=None):
        return _tune.sample_from(_SampleFromCall(self.func, {} if codecs is None else codecs))


class _SampleFromCall:
    """What the engine calls on the driver: the partial config (text) -> encoded value."""

    def __init__(self, func, codecs):
        self.func = func
        self.codecs = codecs  # the whole space's, filled in by compile_space

    def __call__(self, partial):
        config = unflatten({k: decode(v, self.codecs.get(k, "any")) for k, v in partial.items()})
        return encode(self.func(_Spec(config)))


class _AttrDict(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _attr(value):
    if isinstance(value, dict):
        return _AttrDict({k: _attr(v) for k, v in value.items()})
    return value


class _Spec:
    """Ray's spec argument of sample_from functions: spec.config is the trial's config so far."""

    def __init__(self, config):
        self.config = _attr(config)

    def __getitem__(self, key):
        return getattr(self, key)


def uniform(lower, upper):
    return _Call("uniform", "float", float(lower), float(upper))


def quniform(lower, upper, q):
    return _Call("quniform", "float", float(lower), float(upper), float(q))


def loguniform(lower, upper, base=10):
    return _Call("loguniform", "float", float(lower), float(upper), float(base))


def qloguniform(lower, upper, q, base=10):
    return _Call("qloguniform", "float", float(lower), float(upper), float(q), float(base))


def randn(mean=0.0, sd=1.0):
    return _Call("randn", "float", float(mean), float(sd))


def qrandn(mean, sd, q):
    return _Call("qrandn", "float", float(mean), float(sd), float(q))


def randint(lower, upper):
    return _Call("randint", "int", int(lower), int(upper))


def qrandint(lower, upper, q=1):
    return _Call("qrandint", "int", int(lower), int(upper), int(q))


def lograndint(lower, upper, base=10):
    return _Call("lograndint", "int", int(lower), int(upper), float(base))


def qlograndint(lower, upper, q, base=10):
    return _Call("qlograndint", "int", int(lower), int(upper), int(q), float(base))


def choice(categories):
    return Categorical(categories)


def sample_from(func):
    return Function(func)


def grid_search(values):
    """Every one of `values` (Ray's {"grid_search": values}): the trials run the cross product
    of all grids, num_samples times."""
    values = list(values)
    if not values:
        raise ValueError("tune.grid_search: the list of values is empty")
    return {"grid_search": values}


def _is_grid(v):
    return isinstance(v, dict) and len(v) == 1 and "grid_search" in v


# ---- values as text ---------------------------------------------------------------------

def _same(a, b):
    """Equal and of the same types all the way down (1 is not 1.0, a list is not a tuple)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _decode_any(text):
    if text == "true":
        return True
    if text == "false":
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text.startswith(_JSON):
        return json.loads(text[len(_JSON):])
    if text.startswith(_PICKLE):
        return cloudpickle.loads(base64.b64decode(text[len(_PICKLE):]))
    return text


def encode(value):
    """A Python value as the engine takes it: itself when its text reads back exactly, else
    tagged text (see the module's docstring)."""
    if type(value) in (bool, int, float, str):
        if type(value) is not int or -2**63 <= value < 2**63:
            if _same(_decode_any(_tune.value_text(value)), value):
                return value
    try:
        text = json.dumps(value, allow_nan=True)
        if _same(json.loads(text), value):
            return _JSON + text
    except (TypeError, ValueError):
        pass
    return _PICKLE + base64.b64encode(cloudpickle.dumps(value)).decode()


def decode(text, codec):
    if codec == "str":
        return text
    if codec == "float":
        return float(text)
    if codec == "int":
        try:
            return int(text)
        except ValueError:
            return int(float(text))
    return _decode_any(text)


# ---- param spaces -----------------------------------------------------------------------

def flatten(space, prefix=""):
    """{"a": {"b": x}} -> {"a/b": x}; grid_search dicts and domains are leaves."""
    out = {}
    for key, value in space.items():
        if not isinstance(key, str):
            raise TypeError(f"param_space keys must be str, not {type(key).__name__} ({key!r})")
        name = prefix + key
        if isinstance(value, dict) and not _is_grid(value) and value:
            out.update(flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def unflatten(flat):
    out = {}
    for key, value in flat.items():
        parts = key.split("/")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
            if not isinstance(d, dict):
                break
        else:
            d[parts[-1]] = value
            continue
        out[key] = value
    return out


def to_domain(value, where="param_space", codecs=None):
    """(C++ domain, codec) of one param_space entry; `codecs` (the space's) is what a
    sample_from function's spec.config is decoded with."""
    if isinstance(value, Function):
        return value._cpp(codecs), "any"
    if isinstance(value, Domain):
        return value._cpp(), value.codec
    if _is_grid(value):
        values = list(value["grid_search"])
        if not values:
            raise ValueError(f"{where}: a grid_search with no values")
        codec = values_codec(values)
        return _tune.grid_search(encode_as(values, codec)), codec
    if callable(value) and not isinstance(value, type):
        return Function(value)._cpp(codecs), "any"  # Ray: a bare function is sample_from
    codec = values_codec([value])
    return _tune.constant(encode_as([value], codec)[0]), codec


def compile_space(param_space, where="param_space"):
    """[(key, C++ domain)] and {key: codec} of a (nested) param_space."""
    if param_space is None:
        param_space = {}
    if not isinstance(param_space, dict):
        raise TypeError(f"{where} must be a dict, not {type(param_space).__name__}")
    items, codecs = [], {}
    for key, value in sorted(flatten(param_space).items()):
        domain, codec = to_domain(value, where, codecs)
        items.append((key, domain))
        codecs[key] = codec
    _tune.validate_space(items)
    return items, codecs


def decode_config(text_config, codecs):
    return unflatten({k: decode(v, codecs.get(k, "any")) for k, v in text_config.items()})
