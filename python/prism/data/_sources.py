"""prism.data's sources (Ray's ray.data.range, from_*, read_*): the C++ engine's readers,
or blocks made here from in-memory values and put into the object store."""

import builtins
import json as _json

import numpy as np

import prism

from . import _udf
from ._dataset import Dataset, _check_ranks


def _ext():
    prism._ensure_init()
    from . import _data
    return _data


def _blocks(n):
    return 0 if n is None else int(n)


def _paths(paths, what):
    if isinstance(paths, str):
        return [paths]
    if isinstance(paths, (list, tuple)) and paths and all(isinstance(p, str) for p in paths):
        return list(paths)
    raise ValueError(f"prism.data.{what}: paths is {paths!r}; give a file, a directory, a glob or a list of them")


def _each(paths, what, read):
    datasets = [read(p) for p in _paths(paths, what)]
    return datasets[0] if len(datasets) == 1 else datasets[0].union(*datasets[1:])


def range(n, *, override_num_blocks=None, parallelism=-1):
    """Rows 0..n-1 in an int64 column "id"."""
    return Dataset(_ext().range(int(n), _blocks(override_num_blocks)))


def range_tensor(n, *, shape=(1,), override_num_blocks=None, parallelism=-1):
    """Rows 0..n-1 as arrays of `shape` filled with the row's index, in column "data"."""
    shape = tuple(int(s) for s in shape)

    def fill(batch):
        ids = batch["id"]
        return {"data": np.broadcast_to(ids.reshape((-1,) + (1,) * len(shape)), (len(ids),) + shape).copy()}
    fill.__name__ = "range_tensor"
    _check_ranks("range_tensor")
    return range(n, override_num_blocks=override_num_blocks).map_batches(fill, batch_size=None, zero_copy_batch=True)


def _from_batches(batches):
    return Dataset(_ext().from_blocks([_udf.normalize(b, "from_*") for b in batches]))


def from_items(items, *, override_num_blocks=None, parallelism=-1):
    """A dataset of these items: dicts are rows; anything else becomes a row {"item": x}."""
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"prism.data.from_items takes a list, not {type(items).__name__}")
    rows = [x if isinstance(x, dict) else {"item": x} for x in items]
    if not rows:
        return _from_batches([{}])
    n = _blocks(override_num_blocks) or min(len(rows), 200)
    n = max(1, min(n, len(rows)))
    bounds = np.linspace(0, len(rows), n + 1).astype(int)
    return _from_batches([_udf.from_rows(rows[a:b], "from_items") for a, b in zip(bounds[:-1], bounds[1:]) if b > a])


def from_numpy(ndarrays):
    """A dataset of one block per array, its rows in column "data"."""
    arrays = ndarrays if isinstance(ndarrays, list) else [ndarrays]
    for a in arrays:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"prism.data.from_numpy takes NumPy arrays, not {type(a).__name__}")
    return _from_batches([{"data": a} for a in arrays])


def from_numpy_refs(ndarrays):
    return from_numpy(prism.get(ndarrays))


def from_pandas(dfs):
    """A dataset of one block per DataFrame."""
    frames = dfs if isinstance(dfs, list) else [dfs]
    for f in frames:
        if not _udf._is_dataframe(f):
            raise TypeError(f"prism.data.from_pandas takes pandas DataFrames, not {type(f).__name__}")
    return _from_batches(frames)


_CSV_TYPES = {int: "int64", float: "float64", bool: "bool", str: "string", np.int64: "int64",
              np.float64: "float64", np.bool_: "bool"}


def read_csv(paths, *, delimiter=",", column_types=None, override_num_blocks=None, parallelism=-1, **kwargs):
    """CSV files with a header row (a file, directory, glob or list), read in byte ranges by
    tasks on every rank. column_types ({"col": int | float | bool | str}) overrides the
    types inferred from the first MiB."""
    types = {}
    for k, v in (column_types or {}).items():
        t = _CSV_TYPES.get(v, v)
        if t not in ("int64", "float64", "bool", "string"):
            raise ValueError(f"prism.data.read_csv: column_types[{k!r}] is {v!r}; use int, float, bool or str")
        types[k] = t
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"prism.data.read_csv: delimiter is {delimiter!r}; give one character")
    ext = _ext()
    return _each(paths, "read_csv", lambda p: Dataset(ext.read_csv(p, delimiter, _blocks(override_num_blocks), types)))


def read_numpy(paths, *, override_num_blocks=None, parallelism=-1, **kwargs):
    """.npy files as column "data", read in row ranges."""
    ext = _ext()
    return _each(paths, "read_numpy", lambda p: Dataset(ext.read_numpy(p, _blocks(override_num_blocks))))


def read_hdf5(paths, *, datasets=None, override_num_blocks=None, **kwargs):
    """HDF5 files (Prism's own): one column per dataset (all when None), read in row ranges."""
    ext = _ext()
    names = [datasets] if isinstance(datasets, str) else list(datasets or [])
    return _each(paths, "read_hdf5", lambda p: Dataset(ext.read_hdf5(p, names, _blocks(override_num_blocks))))


def read_binary_files(paths, *, include_paths=False, override_num_blocks=None, parallelism=-1, **kwargs):
    """One row per file: "bytes" (and "path" with include_paths)."""
    ext = _ext()
    return _each(paths, "read_binary_files",
                 lambda p: Dataset(ext.read_binary_files(p, bool(include_paths), _blocks(override_num_blocks))))


def _parse_json(batch, include_paths):
    rows = []
    for i, blob in enumerate(batch["bytes"]):
        text = blob.decode("utf-8") if isinstance(blob, bytes) else blob
        stripped = text.lstrip()
        if stripped.startswith("["):
            items = _json.loads(stripped)
        else:
            items = []
            for n, line in enumerate(text.splitlines()):
                if line.strip():
                    try:
                        items.append(_json.loads(line))
                    except ValueError as e:
                        raise ValueError(f"prism.data.read_json: {batch['path'][i]}, line {n + 1}: {e}") from None
        for item in items:
            if not isinstance(item, dict):
                raise ValueError(f"prism.data.read_json: {batch['path'][i]} holds a {type(item).__name__}, "
                                 "not an object per row")
            if include_paths:
                item = dict(item, path=batch["path"][i])
            rows.append(item)
    return _udf.from_rows(rows, "read_json")


def read_json(paths, *, lines=True, include_paths=False, override_num_blocks=None, parallelism=-1, **kwargs):
    """JSON lines files (or files of one JSON array of objects): one row per object, parsed
    by tasks on every rank (a file per block)."""
    _check_ranks("read_json")

    def read(p):
        files = Dataset(_ext().read_binary_files(p, True, _blocks(override_num_blocks)))
        return files.map_batches(_parse_json, batch_size=1, zero_copy_batch=True, fn_args=(include_paths,))
    return _each(paths, "read_json", read)


def _decode_images(batch, size, mode, include_paths):
    import io

    from PIL import Image
    images, paths = [], []
    for i, blob in enumerate(batch["bytes"]):
        try:
            img = Image.open(io.BytesIO(blob))
            if mode is not None:
                img = img.convert(mode)
            if size is not None:
                img = img.resize((size[1], size[0]))
        except Exception as e:
            raise ValueError(f"prism.data.read_images: cannot decode {batch['path'][i]}: {e}") from None
        images.append(np.asarray(img))
        paths.append(batch["path"][i])
    shapes = {im.shape for im in images}
    if len(shapes) > 1:
        raise ValueError(f"prism.data.read_images: images of different shapes {sorted(shapes)} in one block; pass "
                         "size=(height, width) to resize them")
    out = {"image": np.stack(images) if images else np.zeros((0,), np.uint8)}
    if include_paths:
        out["path"] = np.array(paths, dtype=object)
    return out


def read_images(paths, *, size=None, mode=None, include_paths=False, override_num_blocks=None, parallelism=-1,
                **kwargs):
    """Image files decoded with PIL (Debian's python3-pil) into column "image" (uint8,
    height x width [x channels]); size=(height, width) resizes, mode converts ("RGB", "L")."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise ImportError("prism.data.read_images needs PIL: apt-get install python3-pil") from None
    _check_ranks("read_images")

    def read(p):
        files = Dataset(_ext().read_binary_files(p, True, _blocks(override_num_blocks)))
        return files.map_batches(_decode_images, batch_size=None, zero_copy_batch=True,
                                 fn_args=(size, mode, include_paths))
    return _each(paths, "read_images", read)


builtins_range = builtins.range
