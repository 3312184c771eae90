// Loop lowering of the ops that anchor opaque kernels: cumsum, sort, top_k, scatter, resize and
// grid_sample. Each becomes whole-buffer loop nests that compute the node's results from its
// operands with the semantics of the reference kernels (src/interp/eval_reductions.cpp,
// src/interp/eval_data_movement.cpp) to the last bit:
//
//   - cumsum: per position off the axis, a serial running sum along it in a local accumulator
//     (f32 sums in f64, f16/bf16 in f32, integers wrap), rounded to the dtype as it is stored;
//   - sort, top_k: per element, its rank in its row (the number of elements ordered before it,
//     ties by index, so the order is stable; NaN last ascending, first descending); an element
//     whose rank is below k is written at its rank with its index. O(n^2) per row, no
//     data-dependent control flow beyond one `if`, an element per GPU thread. A target that runs
//     a row on one thread (the CPU) selects top_k's k elements of that order in k passes
//     instead, O(n k), when k is at most a sixteenth of the row;
//   - scatter: a copy of the operand, then a serial nest over the scatter points in row-major
//     order (so duplicate indices combine in order) that skips windows not entirely inside;
//   - resize: nearest is a gather (one source index per output coordinate of each dim); linear
//     and cubic compute each dim's source coordinate, taps and weights in f64 and sum the taps
//     of the resized dims in nested loops, in the order of the reference's separable passes;
//   - grid_sample: per output point, the source coordinates and tap weights in f64 after the
//     padding mode, then per channel the 1, 2x2 or 4x4 taps (taps outside read 0 with zeros).
//   - nonzero, unique, non_max_suppression (results of run-time size, padded to a bound): one
//     serial nest each with running values in local scratch (unique and non_max_suppression
//     in lower_dynamic_sizes.cpp): O(K^2) slice comparisons for unique, O(N^2) per class for
//     non_max_suppression (past 4096 slices or boxes, the library call).
//
// Needs: static shapes. Returns nullopt for a case it leaves to the library call (sort and top_k
// rows longer than 4096 elements, where O(n^2) ranking costs too much; unique and
// non_max_suppression past 4096 slices or boxes). Errors name the node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fusion/fusion.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// The statement that computes the results of `n` (one of the ops above) into the buffers
// `results` from the buffers `operands` (both in the node's order; dims from the node's static
// types), or nullopt when `n` is not one of these ops or a case it does not lower.
// Sort and top_k rows longer than `sortRows` allows (fusion::FusionPlan::sortRows) give nullopt:
// the library call runs them.
StatusOr<std::optional<StmtRef>> lowerOpaqueOp(const Node& n,
                                               const std::vector<std::string>& operands,
                                               const std::vector<std::string>& results,
                                               fusion::SortRowLimits sortRows = {});

// unique and non_max_suppression (lower_dynamic_sizes.cpp), called by lowerOpaqueOp; nullopt
// past 4096 slices (unique) or boxes (non_max_suppression), which the library call (the
// reference kernel, a sort) runs instead.
StatusOr<std::optional<StmtRef>> lowerDynamicSizeOp(const Node& n,
                                                    const std::vector<std::string>& operands,
                                                    const std::vector<std::string>& results);

// Fresh names in an opaque kernel's lowering: loop variables ("i3"), and local scratch buffers
// distinct from the kernel's buffers `in` and `out`.
class OpaqueNames {
 public:
  OpaqueNames(const std::vector<std::string>& in, const std::vector<std::string>& out)
      : in_(in), out_(out) {}
  std::string fresh(const char* prefix) { return prefix + std::to_string(vars_++); }
  std::string local(const char* base);

 private:
  const std::vector<std::string>& in_;
  const std::vector<std::string>& out_;
  int vars_ = 0;
};

}  // namespace kiln::kernel
