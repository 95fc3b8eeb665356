#pragma once
// prism._tune's stoppers (stoppers.cc): the engine's built-in stoppers, and one trampoline
// for a stopper written in Python.

#include <pybind11/pybind11.h>

namespace prism::python::tune_binding {

/// Adds Stopper and the stopper factories (maximum_iteration_stopper, ...,
/// python_stopper) to prism._tune.
void BindStoppers(pybind11::module_& m);

}  // namespace prism::python::tune_binding
