// Resolving symbolic dimensions (internal to src/passes: shared by specialize-shapes and
// propagate-shapes). Symbols are classes of a union-find; a class may carry a static extent.
// Facts come from the op semantics: what the type rules compute from operand types, plus the
// relations the rules cannot state for symbols (reshape's element count, broadcast_in_dim and
// convert keeping extents, "same" convolutions and windows keeping spatial extents).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln::shapes {

using Bindings = std::map<std::string, int64_t>;

// Unifies the dimensions of `f` as its ops imply, starting from `fixed` (symbol -> extent; symbols
// absent from f are ignored), and rewrites every type to the representatives: a class with an
// extent becomes static, a class of several symbols takes the name seen first (parameters first).
// Slices that kept a whole symbolic dimension get that dimension's extent as limit. Returns
// whether any type changed. Errors: a symbol forced to two extents, or a node that no longer
// type-checks under the bindings (both name the node).
StatusOr<bool> resolveFunctionShapes(Function& f, const Bindings& fixed);

}  // namespace kiln::shapes
