// Scheduled kernel IR as an artifact stores it, so that loading one runs neither the lowering
// nor the schedule (compiler::reload): two sections,
//
//   "kernels.ir"      the kernels as printKernels writes them (parseKernels reads them back)
//   "kernels.values"  per kernel, what its text does not say: the graph value each buffer holds,
//                     the slice a buffer is of a concatenation's buffer, what its calls say in
//                     messages, and the schedule's notes
//       kernel k3_contraction
//       value %x 12:0                   (result 0 of the function's node 12, in node order)
//       view %c1 40:0 0 16 32           (Buffer::view: of node 40's result 0, element offset 0,
//                                        row length 16, row pitch 32)
//       call 0 origin /layer1/conv     (call 0 of the kernel, in pre-order: its node's name, its
//       call 0 loc 12 0 model.onnx        location, and why its post-ops stop where they do)
//       call 0 note epilogue loop after it: %21 has 2 uses
//       note convolution: oneDNN convolution (...)
//
// Values are named as module_index.h says. The fusion plan is a third section (stored_plan.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::compiler {

// What an artifact stores of a compiled program besides its module and its target's code: the
// two sections above and the fusion plan's (stored_plan.h).
struct StoredProgram {
  std::string ir, values, plan;
};

// `kernels` (scheduled, for a program of `f`) as the two sections (`plan` left empty).
StoredProgram storeKernels(const std::vector<kernel::Kernel>& kernels, const Function& f);

// The kernels of the two sections, their buffers bound to the values of `f` (the artifact's
// module), each verified; errors name `source` (the artifact) and what does not match.
StatusOr<std::vector<kernel::Kernel>> loadKernels(std::string_view ir, std::string_view values,
                                                  const Function& f, const std::string& source);

}  // namespace kiln::compiler
