#pragma once
// prism._tune.python_searcher: a Python object as the C++ Tuner's searcher (python_searcher.cc).

#include <pybind11/pybind11.h>

namespace prism::python::tune_binding {

/// Adds python_searcher(bridge, name) -> Searcher to prism._tune.
void BindPythonSearcher(pybind11::module_& m);

}  // namespace prism::python::tune_binding
