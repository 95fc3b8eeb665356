"""Dataset, GroupedData and DataIterator: Ray Data's classes as thin handles on the C++
engine's (prism._data). Every transform appends an operator to the engine's plan; every
consumption runs it there; Python runs only the functions you pass."""

import builtins
import warnings

import numpy as np

import prism

from . import _udf

_DEFAULT_BATCH = 1024
_WHOLE_BLOCK = 1 << 62


def _ext():
    from . import _data
    return _data


def _check_ranks(what):
    """A Python UDF runs on every rank: prism.data must have been imported there before
    prism.init() (each rank runs the script and serves inside init)."""
    from . import _imported_after_init
    if _imported_after_init and prism.get_runtime_context().world_size > 1:
        raise prism.exceptions.PrismRuntimeError(
            f"prism.data.{what}: prism.data was imported after prism.init(), so the other ranks (which serve "
            "inside prism.init()) cannot run Python UDFs; put `import prism.data` at the top of the script, "
            "before prism.init()")


def _name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def _retry(retry_exceptions):
    """What the engine retries: every exception of the UDF (True) or none; a list of Python
    exception types is retried inside the call instead (_python_retry)."""
    if retry_exceptions is None or isinstance(retry_exceptions, bool):
        return retry_exceptions
    return None


def _python_retry(retry_exceptions, max_retries):
    if retry_exceptions is None or isinstance(retry_exceptions, bool):
        return None
    types = tuple(retry_exceptions)
    if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise TypeError(f"prism.data: retry_exceptions is {retry_exceptions!r}; give True, False or a list of "
                        "exception types")
    return types, int(max_retries)


def _concurrency(concurrency, compute, what):
    """(min, max) actors of a callable class's pool (max 0: the cluster's CPUs)."""
    if compute is not None:
        if not isinstance(compute, ActorPoolStrategy):
            raise ValueError(f"prism.data.{what}: compute must be an ActorPoolStrategy, not {compute!r}")
        return compute.min_size, compute.max_size
    if concurrency is None:
        return 1, 0
    if isinstance(concurrency, int) and not isinstance(concurrency, bool):
        return concurrency, concurrency
    if isinstance(concurrency, tuple) and len(concurrency) == 2:
        return int(concurrency[0]), int(concurrency[1])
    raise ValueError(f"prism.data.{what}: concurrency is {concurrency!r}; give n (a pool of n actors) or "
                     "(min, max)")


def _batch_size(batch_size, what):
    if batch_size == "default":
        return _DEFAULT_BATCH
    if batch_size is None:
        return _WHOLE_BLOCK
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"prism.data.{what}: batch_size is {batch_size!r}; give a positive number of rows "
                         "(or None: whole blocks)")
    return batch_size


class ActorPoolStrategy:
    """A callable class's actor pool (Ray's ActorPoolStrategy): `size` actors, or from
    `min_size` up to `max_size` (None: the cluster's CPUs)."""

    def __init__(self, *, size=None, min_size=None, max_size=None):
        if size is not None:
            min_size = max_size = size
        self.min_size = 1 if min_size is None else int(min_size)
        self.max_size = 0 if max_size is None else int(max_size)


class Schema:
    """A dataset's columns (Ray's Schema): names and types (NumPy dtypes; a column of arrays
    shows its row shape)."""

    def __init__(self, fields):
        self._fields = [(name, dtype, tuple(shape)) for name, dtype, shape in fields]

    @property
    def names(self):
        return [f[0] for f in self._fields]

    @property
    def types(self):
        out = []
        for _, dtype, shape in self._fields:
            t = np.dtype(object) if dtype == "string" else np.dtype(dtype)
            out.append(t if not shape else f"numpy.ndarray(shape={shape}, dtype={t})")
        return out

    def __eq__(self, other):
        return isinstance(other, Schema) and self._fields == other._fields

    def __repr__(self):
        rows = [(n, ("string" if d == "string" else d) + (str(list(s)) if s else "")) for n, d, s in self._fields]
        width = max([len("Column")] + [len(n) for n, _ in rows])
        lines = ["Column".ljust(width) + "  Type", "-" * 6 + " " * (width - 4) + "----"]
        lines += [n.ljust(width) + "  " + t for n, t in rows]
        return "\n".join(lines)


def _torch_batch(batch, dtypes, device, what):
    import torch
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only arrays: torch reads them in place
        for k, v in batch.items():
            if v.dtype == object:
                raise TypeError(f"prism.data.{what}: column {k!r} holds strings, which torch cannot hold; drop it "
                                "with drop_columns, or pass a collate_fn")
            t = torch.from_numpy(v)
            dtype = dtypes.get(k) if isinstance(dtypes, dict) else dtypes
            if dtype is not None:
                t = t.to(dtype)
            if device is not None and str(device) != "cpu":
                t = t.to(device)
            out[k] = t
    return out


def _device(device):
    if device == "auto":
        return None
    return device


class _Iterable:
    """What Dataset and DataIterator share: batches, rows and torch batches of an engine
    iterator (`_open(batch_size, prefetch, drop_last, shuffle, seed)`)."""

    def iter_batches(self, *, prefetch_batches=1, batch_size=256, batch_format="default", drop_last=False,
                     local_shuffle_buffer_size=None, local_shuffle_seed=None):
        """Batches of exactly batch_size rows (the last smaller unless drop_last), re-batched
        across blocks, in order; dicts of read-only NumPy arrays read in place (or pandas
        DataFrames). With local_shuffle_buffer_size, rows are shuffled within a buffer of
        that many rows (Ray's local shuffle)."""
        fmt = _udf.check_format(batch_format, "iter_batches")
        if batch_size is None:
            raise ValueError("prism.data.iter_batches: batch_size=None (whole blocks) is not supported here; give "
                             "a number of rows (batches are re-cut across blocks to exactly that many)")
        size = _batch_size(batch_size, "iter_batches")
        it = self._open(size, prefetch_batches, drop_last, local_shuffle_buffer_size or 0, local_shuffle_seed)
        return _batches(it, fmt)

    def iter_rows(self):
        """The rows as dicts."""
        for batch in self.iter_batches(batch_size=1024):
            yield from _udf.to_rows(batch)

    def iter_torch_batches(self, *, prefetch_batches=1, batch_size=256, dtypes=None, device="auto",
                           collate_fn=None, drop_last=False, local_shuffle_buffer_size=None,
                           local_shuffle_seed=None):
        """iter_batches with each column as a torch tensor (CPU tensors over the batch's bytes,
        no copy; moved to `device` if given). collate_fn, if given, gets the NumPy batch and
        returns what to yield."""
        for batch in self.iter_batches(prefetch_batches=prefetch_batches, batch_size=batch_size,
                                       drop_last=drop_last, local_shuffle_buffer_size=local_shuffle_buffer_size,
                                       local_shuffle_seed=local_shuffle_seed):
            if collate_fn is not None:
                yield collate_fn(batch)
            else:
                yield _torch_batch(batch, dtypes, _device(device), "iter_torch_batches")


def _batches(it, fmt):
    try:
        while True:
            batch = it.next()
            if batch is None:
                return
            yield _udf.to_format(batch, fmt, True) if fmt == "pandas" else batch
    finally:
        it.close()


class Dataset(_Iterable):
    """A lazy, streaming dataset (Ray's Dataset): a source and the operators on it, run by
    the C++ engine when consumed. Every transform returns a new Dataset."""

    def __init__(self, ds):
        self._ds = ds

    def _with(self, ds):
        return Dataset(ds)

    def _open(self, batch_size, prefetch, drop_last, shuffle, seed):
        return self._ds.iter_batches(batch_size, prefetch, drop_last, shuffle, seed)

    # ---- row and batch transforms ----

    def _rows(self, kind, fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs, concurrency,
              compute, num_cpus, num_gpus, max_retries, retry_exceptions):
        what = {"map": "map", "filter": "filter", "flat_map": "flat_map"}[kind]
        if not callable(fn):
            raise TypeError(f"prism.data.{what}: {fn!r} is not callable")
        _check_ranks(what)
        if isinstance(fn, type):
            return self._class(kind, fn, "default", _WHOLE_BLOCK, fn_args, fn_kwargs, fn_constructor_args,
                               fn_constructor_kwargs, False, concurrency, compute, num_cpus, num_gpus,
                               max_retries, retry_exceptions, what)
        blob = _udf.payload(kind, fn, fn_args=fn_args, fn_kwargs=fn_kwargs,
                            retry=_python_retry(retry_exceptions, max_retries))
        return self._with(self._ds.map_bound(kind, blob, _name(fn), max_retries, _retry(retry_exceptions)))

    def _class(self, kind, cls, fmt, batch_size, fn_args, fn_kwargs, ctor_args, ctor_kwargs, zero_copy,
               concurrency, compute, num_cpus, num_gpus, max_retries, retry_exceptions, what):
        lo, hi = _concurrency(concurrency, compute, what)
        blob = _udf.payload(kind, cls, fmt, fn_args, fn_kwargs, zero_copy,
                            constructor=(tuple(ctor_args or ()), dict(ctor_kwargs or {})),
                            retry=_python_retry(retry_exceptions, max_retries))
        return self._with(self._ds.map_batches_class(blob, cls.__name__, batch_size, lo, hi, float(num_cpus or 0),
                                                     float(num_gpus or 0), max_retries,
                                                     _retry(retry_exceptions)))

    def map(self, fn, *, fn_args=None, fn_kwargs=None, fn_constructor_args=None, fn_constructor_kwargs=None,
            num_cpus=None, num_gpus=None, concurrency=None, compute=None, max_retries=3, retry_exceptions=None,
            **ray_remote_args):
        """Applies fn (row dict -> row dict) to every row. A callable class runs in an actor pool."""
        return self._rows("map", fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs, concurrency,
                          compute, num_cpus, num_gpus, max_retries, retry_exceptions)

    def filter(self, fn, *, fn_args=None, fn_kwargs=None, fn_constructor_args=None, fn_constructor_kwargs=None,
               num_cpus=None, num_gpus=None, concurrency=None, compute=None, max_retries=3, retry_exceptions=None,
               **ray_remote_args):
        """Keeps the rows for which fn(row) is true."""
        return self._rows("filter", fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs,
                          concurrency, compute, num_cpus, num_gpus, max_retries, retry_exceptions)

    def flat_map(self, fn, *, fn_args=None, fn_kwargs=None, fn_constructor_args=None,
                 fn_constructor_kwargs=None, num_cpus=None, num_gpus=None, concurrency=None, compute=None,
                 max_retries=3, retry_exceptions=None, **ray_remote_args):
        """Replaces every row by the list of rows fn(row) returns."""
        return self._rows("flat_map", fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs,
                          concurrency, compute, num_cpus, num_gpus, max_retries, retry_exceptions)

    def map_batches(self, fn, *, batch_size=None, compute=None, batch_format="default",
                    zero_copy_batch=True, fn_args=None, fn_kwargs=None, fn_constructor_args=None,
                    fn_constructor_kwargs=None, num_cpus=None, num_gpus=None, concurrency=None, max_retries=3,
                    retry_exceptions=None, **ray_remote_args):
        """Applies fn to batches of batch_size rows (None, the default: whole blocks;
        "default": 1024) in batch_format ("default"/"numpy": dict of NumPy arrays; "pandas":
        DataFrame); fn returns a dict of arrays or a DataFrame (or yields them). With
        zero_copy_batch (the default, as in Ray) the arrays read the block in place and are
        read-only; False gives writable copies. A callable class is
        constructed once per actor of a pool of `concurrency` actors ((min, max) or n), with
        fn_constructor_args/kwargs."""
        if not callable(fn):
            raise TypeError(f"prism.data.map_batches: {fn!r} is not callable")
        fmt = _udf.check_format(batch_format, "map_batches")
        size = _batch_size(batch_size, "map_batches")
        _check_ranks("map_batches")
        if isinstance(fn, type):
            return self._class("batches", fn, fmt, size, fn_args, fn_kwargs, fn_constructor_args,
                               fn_constructor_kwargs, zero_copy_batch, concurrency, compute, num_cpus, num_gpus,
                               max_retries, retry_exceptions, "map_batches")
        if fn_constructor_args or fn_constructor_kwargs:
            raise ValueError("prism.data.map_batches: fn_constructor_args/kwargs are for a callable class, and "
                             f"{_name(fn)} is a function")
        blob = _udf.payload("batches", fn, fmt, fn_args, fn_kwargs, zero_copy_batch,
                            retry=_python_retry(retry_exceptions, max_retries))
        return self._with(self._ds.map_batches_bound(blob, _name(fn), size, max_retries, _retry(retry_exceptions)))

    def add_column(self, col, fn, *, batch_format="pandas", **kwargs):
        """Adds (or replaces) column `col`, fn(batch) giving its values (one per row)."""
        fmt = _udf.check_format(batch_format, "add_column")
        _check_ranks("add_column")
        blob = _udf.payload("add_column", fn, fmt, extra=col)
        return self._with(self._ds.map_batches_bound(blob, f"add_column({col})", _WHOLE_BLOCK, 3, None))

    def select_columns(self, cols):
        """Keeps these columns, in this order (a missing one fails the consumption, naming it)."""
        return self._with(self._ds.select_columns([cols] if isinstance(cols, str) else list(cols)))

    def drop_columns(self, cols):
        """Drops these columns."""
        return self._with(self._ds.drop_columns([cols] if isinstance(cols, str) else list(cols)))

    def rename_columns(self, names):
        """Renames columns ({old: new})."""
        names = dict(names)

        def rename(batch):
            return {names.get(k, k): v for k, v in batch.items()}
        rename.__name__ = "rename_columns"
        return self.map_batches(rename, batch_size=None, zero_copy_batch=True)

    def with_execution_options(self, *, task_timeout_s=600.0, object_store_budget_bytes=0,
                               max_tasks_in_flight_per_op=0, progress_bars=None):
        """Prism's: this plan run with these options (Ray's DataContext execution options, per
        dataset): task_timeout_s bounds every wait of a consumption (a task, a fetch, a
        streaming split's other consumers; prism.exceptions.GetTimeoutError, a TimeoutError,
        past it); object_store_budget_bytes (0: half the cluster's object store) and
        max_tasks_in_flight_per_op (0: twice the CPUs) bound the blocks and tasks in flight;
        progress_bars draws a line per operator on stderr (None: when it is a terminal)."""
        return self._with(self._ds.with_options(float(task_timeout_s), int(object_store_budget_bytes),
                                                int(max_tasks_in_flight_per_op), progress_bars))

    def limit(self, limit):
        """The first `limit` rows; the rest of the pipeline stops once they are read."""
        return self._with(self._ds.limit(int(limit)))

    # ---- all-to-all ----

    def repartition(self, num_blocks, *, shuffle=False):
        """num_blocks blocks of near-equal rows, in the same order (shuffled across blocks with shuffle)."""
        return self._with(self._ds.repartition(int(num_blocks), bool(shuffle)))

    def random_shuffle(self, *, seed=None, num_blocks=None):
        """A uniformly random permutation of the rows (the same seed: the same order at the same ranks)."""
        return self._with(self._ds.random_shuffle(seed))

    def sort(self, key, descending=False):
        """The rows sorted by column `key` (stable; NaN last)."""
        if isinstance(key, (list, tuple)):
            if len(key) != 1:
                raise ValueError(f"prism.data.sort: sorting by several columns ({list(key)}) is not supported; "
                                 "sort by one column")
            key = key[0]
        if isinstance(descending, (list, tuple)):
            descending = descending[0]
        return self._with(self._ds.sort(key, bool(descending)))

    def groupby(self, key):
        """Groups rows by column `key`, for count/sum/min/max/mean/std/aggregate/map_groups."""
        if isinstance(key, (list, tuple)):
            if len(key) != 1:
                raise ValueError(f"prism.data.groupby: grouping by several columns ({list(key)}) is not supported; "
                                 "group by one column (e.g. one you add with add_column)")
            key = key[0]
        if not isinstance(key, str) or not key:
            raise ValueError(f"prism.data.groupby: key is {key!r}; name one column")
        return GroupedData(self, key)

    def _global(self, kind, on, ddof=1):
        """A whole-dataset aggregate (Ray's Dataset.sum/min/max/mean/std): one value for one
        column, a dict for several, None for no rows. Computed by the engine's GroupBy over
        a constant key."""
        from .aggregate import AggregateFn
        cols = [on] if isinstance(on, str) else list(on)
        if not cols:
            raise ValueError(f"prism.data.{kind}: name at least one column (on=)")

        def key(batch):
            n = len(next(iter(batch.values()))) if batch else 0
            return dict(batch, __prism_all=np.zeros(n, dtype=np.int64))
        key.__name__ = kind
        keyed = self.map_batches(key)
        rows = GroupedData(keyed, "__prism_all").aggregate(*[AggregateFn(kind, c, ddof=ddof) for c in cols]).take(1)
        if not rows:
            return None
        values = {k: v for k, v in rows[0].items() if k != "__prism_all"}
        return next(iter(values.values())) if isinstance(on, str) else values

    def sum(self, on, ignore_nulls=True):
        """The sum of column `on` (a dict for a list of columns; None for no rows)."""
        return self._global("sum", on)

    def min(self, on, ignore_nulls=True):
        return self._global("min", on)

    def max(self, on, ignore_nulls=True):
        return self._global("max", on)

    def mean(self, on, ignore_nulls=True):
        return self._global("mean", on)

    def std(self, on, ddof=1, ignore_nulls=True):
        return self._global("std", on, ddof)

    def union(self, *others):
        """This dataset's rows, then each other's (same schema)."""
        for o in others:
            if not isinstance(o, Dataset):
                raise TypeError(f"prism.data.union takes Datasets, not {type(o).__name__}")
        return self._with(self._ds.union([o._ds for o in others]))

    def zip(self, other):
        """This dataset's columns and other's side by side (same row count; a clashing name gets "_1")."""
        if not isinstance(other, Dataset):
            raise TypeError(f"prism.data.zip takes a Dataset, not {type(other).__name__}")
        return self._with(self._ds.zip(other._ds))

    def split(self, n, *, equal=False, locality_hints=None):
        """n materialized datasets of consecutive blocks (with equal: exactly count // n rows each)."""
        return [MaterializedDataset(d) for d in self._ds.split(int(n), bool(equal))]

    def streaming_split(self, n, *, equal=False, locality_hints=None):
        """n DataIterators over one shared streaming execution, for n consumers on any ranks
        (a Train worker's shard): pass each to its consumer (they pickle)."""
        return [DataIterator(it) for it in self._ds.streaming_split(int(n), bool(equal))]

    # ---- consumption ----

    def take(self, limit=20):
        """The first `limit` rows as dicts."""
        rows = []
        for batch in self.limit(limit).iter_batches(batch_size=max(1, min(int(limit), 4096))):
            rows.extend(_udf.to_rows(batch))
        return rows

    def take_all(self, limit=None):
        """Every row as dicts (ValueError past `limit` rows)."""
        rows = []
        for batch in self.iter_batches(batch_size=4096):
            rows.extend(_udf.to_rows(batch))
            if limit is not None and len(rows) > limit:
                raise ValueError(f"prism.data.take_all: the dataset has more than {limit} rows")
        return rows

    def take_batch(self, batch_size=20, *, batch_format="default"):
        """The first batch_size rows as one batch. ValueError for an empty dataset."""
        fmt = _udf.check_format(batch_format, "take_batch")
        for batch in self.limit(batch_size).iter_batches(batch_size=batch_size, batch_format=fmt):
            return batch
        raise ValueError("prism.data.take_batch: the dataset is empty")

    def show(self, limit=20):
        for row in self.take(limit):
            print(row)

    def count(self):
        """The number of rows."""
        return self._ds.count()

    def schema(self):
        """The Schema of the first non-empty block (None for no rows)."""
        fields = self._ds.schema()
        return Schema(fields) if fields else None

    def columns(self):
        s = self.schema()
        return s.names if s is not None else []

    def num_blocks(self):
        return self._ds.num_blocks()

    def materialize(self):
        """Runs the plan once and keeps its blocks in the object store."""
        return MaterializedDataset(self._ds.materialize())

    def stats(self):
        """The latest execution's statistics, one line per operator."""
        return self._ds.stats_text()

    def to_pandas(self, limit=None):
        """The rows as one DataFrame (ValueError past `limit` rows)."""
        import pandas as pd
        if limit is not None:
            n = self.count()
            if n > limit:
                raise ValueError(f"prism.data.to_pandas: the dataset has {n} rows, more than limit={limit}")
        frames = list(self.iter_batches(batch_size=1 << 20, batch_format="pandas"))
        if not frames:
            return pd.DataFrame()
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def _write(self, fmt, path, column=""):
        if not isinstance(path, str) or not path:
            raise ValueError(f"prism.data.write_{fmt}: path is {path!r}; give a directory")
        self._ds.write(fmt, path, column)

    def write_csv(self, path, **kwargs):
        """Writes part-NNNNN.csv files and a _SUCCESS manifest into directory `path`."""
        self._write("csv", path)

    def write_json(self, path, **kwargs):
        """Writes part-NNNNN.json files (JSON lines) and _SUCCESS into directory `path`."""
        self._write("json", path)

    def write_numpy(self, path, *, column, **kwargs):
        """Writes column `column` as part-NNNNN.npy files and _SUCCESS into directory `path`."""
        self._write("numpy", path, column)

    def write_hdf5(self, path, **kwargs):
        """Writes part-NNNNN.h5 files (one dataset per column) and _SUCCESS (Prism's own)."""
        self._write("hdf5", path)

    def __repr__(self):
        return f"{type(self).__name__}(num_blocks={self._ds.num_blocks()})"

    def __iter__(self):
        return self.iter_rows()


class MaterializedDataset(Dataset):
    """A Dataset whose blocks are in the object store (materialize, split)."""

    def _with(self, ds):
        return Dataset(ds)


class DataIterator(_Iterable):
    """One consumer's share of streaming_split (Ray's DataIterator). Pickles, so it can be
    sent to a task, an actor or a Train worker on any rank; each iter_batches there starts
    that consumer's next epoch (the plan runs once all consumers have started it)."""

    def __init__(self, it):
        self._it = it

    def _open(self, batch_size, prefetch, drop_last, shuffle, seed):
        return self._it.iter_batches(batch_size, prefetch, drop_last, shuffle, seed)

    @property
    def split_index(self):
        return self._it.split_index

    @property
    def num_splits(self):
        return self._it.num_splits

    def __reduce__(self):
        return (_iterator_from_bytes, (self._it.to_bytes(),))

    def __repr__(self):
        return f"DataIterator(split={self.split_index} of {self.num_splits})"


def _iterator_from_bytes(blob):
    return DataIterator(_ext().DataIterator.from_bytes(blob))


class GroupedData:
    """A Dataset grouped by one column (Ray's GroupedData): one row per key, sorted by key."""

    def __init__(self, dataset, key):
        self._dataset = dataset
        self._key = key

    def _columns(self, on, what):
        if on is None:
            schema = self._dataset.schema()
            return [n for n in (schema.names if schema else []) if n != self._key]
        return [on] if isinstance(on, str) else list(on)

    def aggregate(self, *aggs):
        """Count(), Sum(col), Min(col), Max(col), Mean(col), Std(col) (prism.data.aggregate),
        each a column named as Ray names it ("count()", "sum(x)")."""
        from .aggregate import AggregateFn
        if not aggs:
            raise ValueError("prism.data.GroupedData.aggregate: give at least one aggregation (Count(), Sum(col), ...)")
        for a in aggs:
            if not isinstance(a, AggregateFn):
                raise TypeError(f"prism.data.GroupedData.aggregate takes prism.data.aggregate functions, not {a!r}")
        ds = Dataset(self._dataset._ds.aggregate(self._key, [(a.kind, a.on or "", a.ddof) for a in aggs]))
        renames = {a._default_name(): a.name for a in aggs if a.name != a._default_name()}
        return ds.rename_columns(renames) if renames else ds

    def _simple(self, kind, on, what, ddof=1):
        from .aggregate import AggregateFn
        return self.aggregate(*[AggregateFn(kind, c, ddof=ddof) for c in self._columns(on, what)])

    def count(self):
        return self.aggregate(__import__("prism.data.aggregate", fromlist=["Count"]).Count())

    def sum(self, on=None, ignore_nulls=True):
        return self._simple("sum", on, "sum")

    def min(self, on=None, ignore_nulls=True):
        return self._simple("min", on, "min")

    def max(self, on=None, ignore_nulls=True):
        return self._simple("max", on, "max")

    def mean(self, on=None, ignore_nulls=True):
        return self._simple("mean", on, "mean")

    def std(self, on=None, ddof=1, ignore_nulls=True):
        return self._simple("std", on, "std", ddof)

    def map_groups(self, fn, *, batch_format="default", fn_args=None, fn_kwargs=None, **kwargs):
        """Calls fn once per group with all its rows (a batch in batch_format) and concatenates
        what it returns."""
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"prism.data.map_groups takes a function, not {fn!r}")
        fmt = _udf.check_format(batch_format, "map_groups")
        _check_ranks("map_groups")
        blob = _udf.payload("groups", fn, fmt, fn_args, fn_kwargs)
        return Dataset(self._dataset._ds.map_groups_bound(self._key, blob, _name(fn)))


builtins_range = builtins.range
