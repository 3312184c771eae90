// Strided slices in kernel IR: a buffer that holds a slice of another value's memory (a
// concatenation its producers write in place, fusion/concat_views.h) keeps its value's flat
// row-major indices in the lowering; this step maps them onto the memory's rows. Element i of
// such a buffer lives at (i / rowLength) * pitch + i % rowLength from the buffer's start, and
// the index simplifier then folds the division away where the loop bounds allow (a loop over a
// slice's channels: `row * pitch + c`).
#pragma once

#include <map>

#include "fusion/concat_views.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// The memory index of element `i` of view `v` (i itself when its rows are contiguous).
ExprRef viewIndex(const Buffer::View& v, const ExprRef& i);

// `s` with the index of every load, store and reduce of a strided buffer of `k` mapped by
// viewIndex. Each statement goes through it once: the lowering's, and each one a later step
// adds (a call expanded into loops, post-ops as loops).
StmtRef indexViews(const Kernel& k, const StmtRef& s);

// `k` with library call `call` writing its result to a new dense Temp buffer, which a loop nest
// then copies into the strided result buffer: for a library that has no fast kernel storing
// strided (the target's schedule decides). An error when the call's result is not strided.
StatusOr<Kernel> resultThroughTemp(const Kernel& k, const Stmt& call);

// Gives each buffer of `kernels` that holds a value of `views` its view, maps the kernels'
// accesses (indexViews) and simplifies their indices. An error names a kernel whose code cannot
// store strided (a custom kernel keeps its own storage).
Status applyViews(std::vector<Kernel>& kernels,
                  const std::map<const Value*, fusion::StoredView>& views);

}  // namespace kiln::kernel
