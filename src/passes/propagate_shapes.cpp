// propagate-shapes: the shape solver (shape_solver.h) without fixed bindings.
#include "passes/propagate_shapes.h"

#include "passes/shape_solver.h"

namespace kiln {

StatusOr<bool> propagateShapes(Module& m) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    KILN_ASSIGN_OR_RETURN(bool c, shapes::resolveFunctionShapes(*f, {}));
    changed = changed || c;
  }
  return changed;
}

}  // namespace kiln
