"""Python calls C++ functions registered with PRISM_REMOTE, and reads their results."""
import os

import numpy as np
import pytest

import prism

pytestmark = pytest.mark.skipif(not os.environ.get("PRISM_PYTHON_TESTLIB"),
                                reason="the C++ test library is built by CMake")


def test_scalars_and_strings():
    assert prism.get(prism.cpp_function("AddInts").remote(2, 40), timeout=30) == 42
    assert prism.get(prism.cpp_function("Scale").remote(1.5, 4), timeout=30) == 6.0
    assert prism.get(prism.cpp_function("Greet").remote("prism"), timeout=30) == "hello, prism"


def test_arrays_both_ways():
    ramp = prism.get(prism.cpp_function("Ramp").remote(5), timeout=30)
    assert isinstance(ramp, np.ndarray) and ramp.tolist() == [0, 1, 2, 3, 4]
    assert prism.get(prism.cpp_function("SumVector").remote(np.arange(10.0)), timeout=30) == 45.0
    assert prism.get(prism.cpp_function("SumVector").remote([1, 2, 3.5]), timeout=30) == 6.5


def test_cpp_result_as_argument():
    ramp = prism.cpp_function("Ramp").remote(4)
    # A C++ result into a C++ function, and into a Python task (decoded by its C++ type).
    assert prism.get(prism.cpp_function("SumVector").remote(ramp), timeout=30) == 6.0
    assert prism.get(prism.remote(lambda v: v.tolist()).remote(ramp), timeout=30) == [0, 1, 2, 3]


def test_cpp_errors():
    with pytest.raises(prism.exceptions.TaskError, match="was asked to fail"):
        prism.get(prism.cpp_function("Fail").remote(3), timeout=30)
    with pytest.raises(prism.exceptions.PrismError, match="no C\\+\\+ function registered"):
        prism.cpp_function("NoSuchFunction")
    with pytest.raises(TypeError, match="takes 2 argument"):
        prism.cpp_function("AddInts").remote(1)
    with pytest.raises(TypeError, match="cannot pass"):
        prism.cpp_function("AddInts").remote("x", 1)


def test_cpp_actor():
    acc = prism.cpp_actor("Accumulator::FactoryCreate", ("str", "double")).remote("acc", 1.0)
    add = acc.method("Accumulator::Add", ("double",), "double")
    assert prism.get([add.remote(1), add.remote(2.5)], timeout=30) == [2.0, 4.5]
    history = prism.get(acc.method("Accumulator::History", (), "vector<double>").remote(), timeout=30)
    assert history.tolist() == [2.0, 4.5]
    assert prism.get(acc.method("Accumulator::Name", (), "str").remote(), timeout=30) == "acc"
    with pytest.raises(prism.exceptions.PrismError, match="no C\\+\\+ actor factory"):
        prism.cpp_actor("NoSuch::FactoryCreate")
    with pytest.raises(TypeError, match="takes 2 argument"):
        prism.cpp_actor("Accumulator::FactoryCreate", ("str", "double")).remote("x")
