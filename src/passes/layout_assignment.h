// layout-assignment: puts convolutions in the layout the target prefers and moves the transposes
// this needs to the edges of the graph.
#pragma once

#include <memory>
#include <string_view>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/status.h"

namespace kiln {

// Where a convolution wants its feature dimension.
enum class ConvLayout {
  Keep,              // leave every convolution as it is
  ChannelsFirst,     // NCHW input/output, OIHW kernel: "bf01_oi01->bf01"
  ChannelsLast,      // NHWC input/output, HWIO kernel: "b01f_01io->b01f"
  ChannelsLastOhwi,  // NHWC input/output, OHWI kernel: "b01f_o01i->b01f" (cuDNN's NHWC)
};

// What a backend prefers. New preferences (matmul operand layouts, blocked formats) go here as
// fields, not as flags of the pass.
struct LayoutTarget {
  ConvLayout convolution = ConvLayout::ChannelsLast;

  // The CPU backend (oneDNN and the vectorised loops read channels contiguously): NHWC.
  static LayoutTarget cpu() { return LayoutTarget{ConvLayout::ChannelsLast}; }
};

// "nhwc" (channels last), "nhwc-ohwi", "nchw" (channels first) or "keep"
// (kiln-opt --layout-assignment=nchw).
StatusOr<LayoutTarget> parseLayoutTarget(std::string_view text);

// Rewrites every convolution whose dimension_numbers differ from the target's into one in the
// target layout, with transposes of its input and kernel before it and of its result after it, so
// each rewrite keeps the value the rest of the graph sees. Then it sinks transposes toward the
// outputs: through elementwise ops (when the transposes it frees at least match the ones it adds,
// the other operands being transposed the same way, scalars, broadcasts or constants), through
// reduce, reduce_window, nearest resize, batch_norm_inference and concatenates of operands
// transposed alike; and it merges transpose pairs (an inverse pair disappears). A transpose counts
// as freed when its op is its only user or when every user takes it below itself (SiLU's x *
// sigmoid(x), a pyramid of poolings and a concatenate over one value); a reduce that at least
// halves its operand sinks it even when it is not freed. A chain of convolutions with
// elementwise ops, pooling and concatenates between them thus keeps transposes only where the graph
// starts and ends. Returns whether anything changed.
//
// Needs: a verified module.
// Leaves true: the module verifies; every convolution with rank >= 3 is in the target layout
// (unless Keep); results are unchanged bit for bit (only data movement was added or removed).
// Transposes of constants (the kernels) are left for constant-fold.
// Does not: choose layouts for other ops (dot_general, pooling by itself); move transposes
// upward toward the inputs; push transposes through reshapes.
StatusOr<bool> assignLayout(Module& m, const LayoutTarget& target);

// The registry entry: the CPU target.
StatusOr<bool> assignLayoutForCpu(Module& m);

// The pass object for another target (kiln-opt --layout-assignment=nchw).
std::unique_ptr<Pass> makeLayoutAssignmentPass(LayoutTarget target);

}  // namespace kiln
