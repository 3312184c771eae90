// Data-dependent output sizes at a program's boundary.
//
// An op whose result size depends on the data (`nonzero`, and through it ONNX NonZero and
// Compress) computes a result padded to a bound known at compile time and the true size as a
// value of its own; `set_dimension_size(x, size) {dimension = d}` says that dimension d of x
// has `size` elements (XLA's bounded dynamism). Buffers, kernels and types keep the bound.
//
// exposeDynamicSizes rewrites a function so that every `set_dimension_size` is gone and the
// sizes are outputs of their own, and says which output dims they size; a program runs the
// result as any other and trimDynamicOutputs cuts its outputs to their true sizes. Before that
// it moves each `set_dimension_size` past the consumers for which padding is harmless, so that
// it reaches the outputs:
//   elementwise(sds(x, s){d}, ...)  -> sds(elementwise(x, ...), s){d}  (every sized operand
//                                       sized by the same value on the same dim)
//   transpose(sds(x, s){d}){perm}   -> sds(transpose(x)){perm^-1(d)}
//   gather(a, sds(i, s){d})         -> sds(gather(a, i)){the result dim of index dim d}
// (padding elements compute padding elements, which are cut off at the end), and answers the
// size queries of the sized values:
//   get_dimension_size(sds(x, s){d}){d} -> s;  get_dimension_size(sds(x, s){d}){e} -> of x
// Any other consumer (a reduction, a reshape, a gather from a sized operand, ...) is an error
// naming it.
//
// It does not propagate sizes into symbolic dims: a sized value is consumed only by the ops
// above. A size is an ordinary i64[] value (ONNX Shape and Size compute with it).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln {

// Output `output` has, along `dim`, as many elements as the value of output `sizeOutput` (an
// i64[] the rewrite appended), clamped to [0, extent].
struct DynamicDim {
  size_t output = 0;
  int64_t dim = 0;
  size_t sizeOutput = 0;
  bool operator==(const DynamicDim&) const = default;
};

// Rewrites f as above; empty when f has no set_dimension_size (f is then unchanged).
StatusOr<std::vector<DynamicDim>> exposeDynamicSizes(Function& f);

// Cuts each sized output to its size and drops the size outputs (those from index `visible`
// on). Errors when the outputs do not match `dims`.
Status trimDynamicOutputs(std::span<const DynamicDim> dims, size_t visible,
                          std::vector<Tensor>& outputs);

// The first `size` entries of t along `dim` (size clamped to [0, extent]).
Tensor trimDim(const Tensor& t, int64_t dim, int64_t size);

// One line per dim ("output dim sizeOutput"), for artifacts; and back.
std::string dynamicDimsText(std::span<const DynamicDim> dims);
StatusOr<std::vector<DynamicDim>> parseDynamicDims(std::string_view text, size_t outputs);

}  // namespace kiln
