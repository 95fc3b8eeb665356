"""prism.data: Ray Data's Python API over Prism's C++ Data engine (one engine, two front
ends: plans, streaming execution, fusion, scheduling, shuffles, sorts, groups and writes are
C++; only your functions run in Python, on the rank that runs the block).

    import prism
    import prism.data            # on every rank, before prism.init(): UDFs run on every rank

    ds = prism.data.range(1000).map_batches(lambda b: {"id": b["id"] * 2})
    for batch in ds.iter_batches(batch_size=256):   # dicts of NumPy arrays
        ...

Import it at the top of the script (every rank runs the script and serves inside
prism.init()): a rank that has not imported prism.data cannot run a Python UDF, and the
consumption says so.
"""

import prism  # loads prism._prism, RTLD_GLOBAL, which _data resolves the core from

_data = prism._import_global("_data")  # RTLD_GLOBAL: prism._train resolves the Data engine from it
_imported_after_init = prism.is_initialized()

from ._dataset import (ActorPoolStrategy, DataIterator, Dataset, GroupedData, MaterializedDataset,  # noqa: E402
                       Schema)
from ._sources import (from_items, from_numpy, from_pandas, range, range_tensor, read_binary_files,  # noqa: E402
                       read_csv, read_hdf5, read_images, read_json, read_numpy)
from . import aggregate  # noqa: E402

__all__ = ["Dataset", "MaterializedDataset", "DataIterator", "GroupedData", "Schema", "ActorPoolStrategy",
           "range", "range_tensor", "from_items", "from_numpy", "from_pandas", "read_csv", "read_json",
           "read_numpy", "read_hdf5", "read_binary_files", "read_images", "aggregate"]
