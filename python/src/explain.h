// Executable.explain(): what `kiln explain` prints, as Python data, from the same structures
// (the fusion plan, the kernel IR's library calls, the buffer plan) rather than its text.
#pragma once

#include <pybind11/pybind11.h>

#include "runtime/executable.h"

namespace kiln::python {

// A dict: "kernels" (each with its ops, inputs, outputs, bytes, flops and library calls),
// "decisions" (every producer -> consumer edge with fused, how and reason), "memory" (the
// buffer plan: arena, lower bound, values in place, each value's storage), "library_calls"
// (what runs each call), "text" (the plan as `kiln explain` prints it), "guards" (guards()).
pybind11::dict explain(const runtime::Executable& exe);

// The executable's guards: a dict per symbolic dim of its inputs, with "symbol", "value" (the
// size compiled for) and "checks" (a list of (input name, dim)).
pybind11::list guards(const runtime::Executable& exe);

}  // namespace kiln::python
