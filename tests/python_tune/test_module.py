"""prism._tune resolves the core from prism._prism: its registrations land in the one
function registry (so prism._prism finds the trampoline and the engine's RunTrial), and it
defines none of the core's own symbols."""
import glob
import os
import subprocess

import prism
from prism import _prism, _tune


def test_one_core():
    assert "prism::train::Config" in _prism.cpp_signature("prism::python::tune_binding::PrismTunePythonTrial")
    assert _prism.cpp_signature("prism::tune::internal::RunTrial")
    so = glob.glob(os.path.join(os.path.dirname(prism.__file__), "_tune*.so"))[0]
    defined = subprocess.run(["nm", "-DC", "--defined-only", so], capture_output=True, text=True).stdout
    for core_symbol in ("prism::internal::FunctionRegistry::Instance()", "prism::internal::Node::",
                        "prism::Init("):
        assert core_symbol not in defined, core_symbol
    assert _tune._core_registry_address() != 0
