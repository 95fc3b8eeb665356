"""prism._data resolves the core from prism._prism (one function registry; it defines none
of the core's symbols), and prism._train resolves the Data engine from prism._data (one
engine per process: a TorchTrainer's datasets are prism.data's)."""
import glob
import os
import subprocess

import prism
from prism.data import _data


def _defined(name):
    so = glob.glob(os.path.join(os.path.dirname(prism.__file__), f"{name}*.so"))[0]
    return subprocess.run(["nm", "-DC", "--defined-only", so], capture_output=True, text=True).stdout


def test_one_core():
    assert "prism::data::Block" in prism._prism.cpp_signature(_data.trampoline_name())
    defined = _defined("_data")
    for core_symbol in ("prism::internal::FunctionRegistry::Instance()", "prism::internal::Node::", "prism::Init("):
        assert core_symbol not in defined, core_symbol
    assert "prism::data::Dataset::Count() const" in defined
    assert _data._class_udf_registered()


def test_one_data_engine():
    if not glob.glob(os.path.join(os.path.dirname(prism.__file__), "_train*.so")):
        return  # built without Train
    defined = _defined("_train")
    for engine_symbol in ("prism::data::Dataset::Count() const", "prism::data::Block::FromColumns",
                          "prism::data::internal::RegisterClassUdf"):
        assert engine_symbol not in defined, engine_symbol
    from prism.train import _session
    ext = _session.ext()  # loads after prism._data and resolves the engine from it
    assert ext is not None


def test_batches_cross_without_copies():
    import numpy as np
    a = np.arange(10, dtype=np.float64)
    out = _data.roundtrip({"a": a, "s": np.array(["x", "yz"] * 5, dtype=object)})
    assert np.shares_memory(out["a"], a)  # wrapped in place, read back in place
    assert out["s"].tolist() == ["x", "yz"] * 5
