"""The Python side of prism.data's UDFs: what the driver packs (payload) and what the
trampoline in prism._data runs on the rank that runs a block (load_runner,
load_class_runner), with the batch conversions between the engine's columns (a dict of
NumPy arrays, read in place) and Ray's batch formats and rows.

A runner takes a batch as prism._data gives it (dict of read-only NumPy arrays; strings as
object arrays) and returns a dict of NumPy arrays of the engine's dtypes (normalize), which
prism._data wraps in place."""

import traceback

import cloudpickle
import numpy as np

from .. import _worker

FORMATS = ("default", "numpy", "pandas")


def check_format(batch_format, what):
    """The batch format Ray's name means ("default" and None are NumPy). Raises ValueError."""
    if batch_format is None:
        return "default"
    if batch_format not in FORMATS:
        if batch_format == "pyarrow":
            raise ValueError(f"prism.data.{what}: batch_format='pyarrow' is not supported (prism.data has no "
                             "Arrow); use 'numpy' (dicts of NumPy arrays) or 'pandas'")
        raise ValueError(f"prism.data.{what}: batch_format={batch_format!r} is not one of 'default', "
                         "'numpy' or 'pandas'")
    return batch_format


def payload(kind, fn, batch_format="default", fn_args=(), fn_kwargs=None, zero_copy_batch=False, extra=None,
            constructor=None, retry=None):
    """The bytes the engine carries to every call: the function (or class and its
    constructor's arguments), its kind and how to call it; `retry` = (exception types,
    max_retries) retries a call that raised one of them, in place (Ray's retry_exceptions
    as a list of types)."""
    try:
        return cloudpickle.dumps((kind, fn, batch_format, tuple(fn_args or ()), dict(fn_kwargs or {}),
                                  zero_copy_batch, extra, constructor, retry))
    except Exception as e:
        raise TypeError(f"prism.data: cannot pickle {getattr(fn, '__name__', fn)!r} to send it to the ranks "
                        f"({type(e).__name__}: {e}); capture only picklable values in it") from None


def describe(exc):
    """A UDF's exception as the trampoline leaves with it (prism._worker's format), its
    traceback starting at the user's code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return _worker._pickled(text, exc, f"{type(exc).__module__}.{type(exc).__qualname__}")


# ---- batches -------------------------------------------------------------------------------

def to_format(batch, batch_format, zero_copy=False):
    """A batch from prism._data in `batch_format`: NumPy arrays (copied unless zero_copy, so
    that the function may write to them, as Ray's zero_copy_batch=False) or a DataFrame."""
    if batch_format == "pandas":
        import pandas as pd
        return pd.DataFrame({k: (v if v.ndim == 1 else list(v)) for k, v in batch.items()})
    if zero_copy:
        return batch
    return {k: (v if v.flags.writeable else v.copy()) for k, v in batch.items()}


def _is_dataframe(x):
    return type(x).__name__ == "DataFrame" and type(x).__module__.startswith("pandas")


def column(name, value, what="the function"):
    """One column as a NumPy array of a dtype the engine holds (float32/64, int32/64, uint8,
    bool; strings as object arrays; arrays of rows stacked). Raises TypeError/ValueError
    naming the column and what to do."""
    if isinstance(value, np.ndarray):
        a = value
    elif type(value).__name__ == "Series" and type(value).__module__.startswith("pandas"):
        a = value.to_numpy()
    elif type(value).__name__ == "Tensor" and type(value).__module__.startswith("torch"):
        a = value.detach().cpu().numpy()
    elif isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (str, bytes)):
            a = np.empty(len(value), dtype=object)
            a[:] = value
        elif value and isinstance(value[0], (np.ndarray, list, tuple)):
            try:
                a = np.stack([np.asarray(x) for x in value])
            except ValueError:
                raise ValueError(f"prism.data: the rows of column {name!r} are arrays of different shapes; a "
                                 "column holds one shape (pad or resize them)") from None
        else:
            a = np.asarray(value)
    else:
        raise TypeError(f"prism.data: {what} returned column {name!r} as a {type(value).__name__}; give one "
                        "value per row (a NumPy array, a list or a pandas Series)")
    if a.ndim == 0:
        raise ValueError(f"prism.data: {what} returned column {name!r} as a 0-d array; give one value per row")
    kind = a.dtype.kind
    if kind == "O":
        if len(a) and isinstance(a[0], (np.ndarray, list, tuple)):
            try:
                a = np.stack([np.asarray(x) for x in a])
            except ValueError:
                raise ValueError(f"prism.data: the rows of column {name!r} are arrays of different shapes; a "
                                 "column holds one shape (pad or resize them)") from None
            return column(name, a, what)
        return a
    if kind in "US":
        return a.astype(object)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if kind == "f":
        return a if a.itemsize in (4, 8) else a.astype(np.float32)
    if kind == "b":
        return a
    if kind == "i":
        return a if a.itemsize in (4, 8) else a.astype(np.int32)
    if kind == "u":
        if a.itemsize == 1:
            return a
        if a.itemsize == 2:
            return a.astype(np.int32)
        if a.itemsize == 8 and len(a) and a.max() > np.iinfo(np.int64).max:
            raise TypeError(f"prism.data: column {name!r} holds uint64 values past int64's range; prism.data "
                            "holds int64 at most")
        return a.astype(np.int64)
    raise TypeError(f"prism.data: column {name!r} has dtype {a.dtype}, which prism.data does not hold "
                    "(float32, float64, int32, int64, uint8, bool, strings, arrays of these)")


def normalize(out, what="the function"):
    """A function's batch (dict of columns or DataFrame) as a dict of engine arrays."""
    if _is_dataframe(out):
        out = {str(c): out[c].to_numpy() for c in out.columns}
    elif not isinstance(out, dict):
        raise TypeError(f"prism.data: {what} returned a {type(out).__name__}; return a dict of column name to "
                        "NumPy array (or list), or a pandas DataFrame")
    cols = {}
    rows = None
    for k, v in out.items():
        if not isinstance(k, str):
            raise TypeError(f"prism.data: {what} returned a column named {k!r}; column names are str")
        a = column(k, v, what)
        if rows is None:
            rows = len(a)
        elif len(a) != rows:
            first = next(iter(cols))
            raise ValueError(f"prism.data: {what} returned column {k!r} with {len(a)} rows and {first!r} with "
                             f"{rows}; every column needs one value per row")
        cols[k] = a
    return cols


def to_rows(batch):
    """The rows of a batch as dicts: scalars as Python values, array rows as NumPy arrays."""
    if not batch:
        return []
    keys = list(batch)
    values = [v.tolist() if v.ndim == 1 else list(v) for v in batch.values()]
    return [dict(zip(keys, row)) for row in zip(*values)]


def from_rows(rows, what="the function"):
    """Rows (dicts) as a batch; every row must have the same columns."""
    if not rows:
        return {}
    first = rows[0]
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise TypeError(f"prism.data: {what} returned a {type(r).__name__} for a row; return a dict of "
                            "column name to value")
        if len(r) != len(first) or any(k not in r for k in first):
            raise ValueError(f"prism.data: {what} returned rows with different columns: {sorted(first)} and "
                             f"{sorted(r)} (row {i}); every row needs the same columns")
    return normalize({k: [r[k] for r in rows] for k in first}, what)


def concat(batches):
    """Batches (dicts of engine arrays) of one schema, one after another."""
    batches = [b for b in batches if b]
    if not batches:
        return {}
    if len(batches) == 1:
        return batches[0]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


# ---- runners ---------------------------------------------------------------------------------

def _name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def _runner(kind, fn, batch_format, args, kwargs, zero_copy, extra):
    name = _name(fn)
    if kind == "map":
        what = f"map's function {name}"

        def run(batch):
            out = []
            for row in to_rows(batch):
                r = fn(row, *args, **kwargs)
                if not isinstance(r, dict):
                    raise TypeError(f"prism.data: {what} returned a {type(r).__name__}; return a dict (the new "
                                    "row); to return several rows use flat_map")
                out.append(r)
            return from_rows(out, what)
        return run
    if kind == "filter":
        def run(batch):
            keep = np.fromiter((bool(fn(row, *args, **kwargs)) for row in to_rows(batch)), dtype=bool)
            if keep.all():
                return dict(batch)
            return {k: v[keep] for k, v in batch.items()}
        return run
    if kind == "flat_map":
        what = f"flat_map's function {name}"

        def run(batch):
            out = []
            for row in to_rows(batch):
                rows = fn(row, *args, **kwargs)
                if isinstance(rows, dict):
                    raise TypeError(f"prism.data: {what} returned a dict; return a list of rows (dicts)")
                out.extend(rows)
            return from_rows(out, what)
        return run
    if kind in ("batches", "groups"):
        what = f"{'map_batches' if kind == 'batches' else 'map_groups'}'s function {name}"

        def run(batch):
            out = fn(to_format(batch, batch_format, zero_copy), *args, **kwargs)
            if hasattr(out, "__next__") or type(out).__name__ == "generator":
                return concat([normalize(o, what) for o in out])
            return normalize(out, what)
        return run
    if kind == "add_column":
        what = f"add_column({extra!r})'s function {name}"

        def run(batch):
            values = fn(to_format(batch, batch_format, True), *args, **kwargs)
            out = dict(batch)
            out[extra] = column(extra, values, what)
            if batch and len(out[extra]) != len(next(iter(batch.values()))):
                raise ValueError(f"prism.data: {what} returned {len(out[extra])} values for a batch of "
                                 f"{len(next(iter(batch.values())))} rows; return one value per row")
            return out
        return run
    raise ValueError(f"prism.data: unknown UDF kind {kind!r}")


class _Retrying:
    """fn, called again (up to max_retries times) when it raises one of `types`."""

    def __init__(self, fn, types, max_retries):
        self.fn, self.types, self.max_retries = fn, types, max_retries
        self.__name__ = _name(fn)

    def __call__(self, *args, **kwargs):
        attempt = 0
        while True:
            try:
                return self.fn(*args, **kwargs)
            except self.types:
                if attempt >= self.max_retries:
                    raise
                attempt += 1


def _with_retry(fn, retry):
    return fn if not retry else _Retrying(fn, tuple(retry[0]), retry[1])


def load_runner(blob):
    """The runner of a function payload (prism._data caches it per payload)."""
    kind, fn, batch_format, args, kwargs, zero_copy, extra, _, retry = cloudpickle.loads(blob)
    return _runner(kind, _with_retry(fn, retry), batch_format, args, kwargs, zero_copy, extra)


def load_class_runner(blob):
    """A callable class's instance (constructed here, in its actor) as a runner."""
    kind, cls, batch_format, args, kwargs, zero_copy, extra, constructor, retry = cloudpickle.loads(blob)
    ctor_args, ctor_kwargs = constructor or ((), {})
    instance = cls(*ctor_args, **ctor_kwargs)
    return _runner(kind, _with_retry(instance, retry), batch_format, args, kwargs, zero_copy, extra)
