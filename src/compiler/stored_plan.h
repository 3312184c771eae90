// The fusion plan as an artifact stores it (section "fusion.plan"), so that loading one does not
// plan fusion again: its report (`kiln explain`, the roofline, the run summary) and the costs a
// target reads from it are those of the compile that made the artifact. One line per fact,
// nodes and values named as module_index.h says, a text field last on its line:
//
//   plan 123456 0 1                   bytes unfused, symbolic, stores alongside reductions
//   kernel 3 contraction 12 4096 1024 65536     id, kind, anchor, bytes read and written, flops
//   nodes 10 11 12
//   inputs 4:0 5:0
//   outputs 12:0
//   chain 12:0                        the post-op chain: the value the call writes, then
//   step add 9:0 0 0 1                  a step: kind, operand, lo, hi, operand dims
//   stop an erf gelu ...                why the chain stops (may be empty)
//   custom inverted-residual block    a custom kernel: its fusion, then
//   custom-reason ...                   why, its steps (each an anchor and a chain), and
//   custom-step 7                       the values internal to it
//   internal 7:0
//   decision 10 12 1                  producer, consumer, fused; then how and why
//   how epilogue
//   reason ...
//   view 30:0 41:0 0 16 32            a value stored in a concatenation's buffer (ConcatViews)
//   writers 41:0 30:0 31:0
//   in-place 41
//   concat-note 41 in place: ...
#pragma once

#include <string>
#include <string_view>

#include "fusion/fusion.h"
#include "support/status.h"

namespace kiln::compiler {

std::string storePlan(const fusion::FusionPlan& plan, const Function& f);

// The plan of the section, its nodes and values those of `f` (the artifact's module); errors
// name `source` and the line that does not read.
StatusOr<fusion::FusionPlan> loadPlan(std::string_view text, const Function& f,
                                      const std::string& source);

}  // namespace kiln::compiler
