"""prism._serve resolves the core from prism._prism: the replica's actor class registers in
the one function registry, and the module defines none of the core's own symbols."""
import glob
import os
import subprocess

import pytest

import prism
from prism import _prism


def test_one_core():
    # The registry prism._prism reads knows the replica's factory (an actor factory, not a
    # free function, so cpp_signature refuses it by kind, not as unknown).
    with pytest.raises(prism.exceptions.PrismError, match="actor factory"):
        _prism.cpp_signature("prism::serve::internal::ReplicaActor::Create")
    so = glob.glob(os.path.join(os.path.dirname(prism.__file__), "_serve*.so"))[0]
    defined = subprocess.run(["nm", "-DC", "--defined-only", so], capture_output=True, text=True).stdout
    for core_symbol in ("prism::internal::FunctionRegistry::Instance()", "prism::internal::Node::",
                        "prism::Init("):
        assert core_symbol not in defined, core_symbol
