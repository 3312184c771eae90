// Private to the ONNX frontend: lowerings that several op families share.
#pragma once

#include "frontend/onnx/op_context.h"

namespace kiln::onnx {

// numpy matmul: 1-D promotion, batch broadcasting (ops_math.cpp).
StatusOr<Value*> matmul(OpContext& c, Value* a, Value* b);
// (x - zero point) in i32; a 1-D zero point applies along `axis` of x.
StatusOr<Value*> minusZeroPoint(OpContext& c, Value* x, Value* zp, int64_t axis);
// A per-tensor or per-axis (1-D along `axis`) parameter broadcast to x's shape.
StatusOr<Value*> perAxis(OpContext& c, Value* p, Value* x, int64_t axis);
// round_half_even(x / scale) + zero point, saturated and converted to `out`.
StatusOr<Value*> quantize(OpContext& c, Value* x, Value* scale, Value* zp, DType out, int64_t axis);

// Reduction of x over `axes` (sorted, normalised) with ONNX's keepdims (ops_reduce.cpp).
Value* reduceKeep(OpContext& c, Value* x, const std::vector<int64_t>& axes, const std::string& kind,
                  bool keepdims);
// Mean over `axes` (keepdims); the reduced extents must be static.
StatusOr<Value*> meanKeep(OpContext& c, Value* x, const std::vector<int64_t>& axes);

// x[..., i, ...] for every i in `indices` (an integer tensor) along `axis`: ONNX Gather without
// negative-index handling (ops_index.cpp).
StatusOr<Value*> gatherAxis(OpContext& c, Value* x, Value* indices, int64_t axis);
// Indices (converted to i64) with negative entries wrapped once by the extent `dim`.
StatusOr<Value*> wrapNegative(OpContext& c, Value* indices, const Dim& dim);
// out[i...] = x[i... with idx[i...] along `axis`]: ONNX GatherElements (idx already wrapped).
StatusOr<Value*> gatherElements(OpContext& c, Value* x, Value* idx, int64_t axis);

// The spatial window of a convolution or pooling node: kernel extents and the strides,
// dilations and padding attributes, with auto_pad resolved against the input's spatial extents
// (ops_nn.cpp).
struct Window {
  std::vector<int64_t> kernel, strides, dilations, lo, hi;
};
// `x` is [N, C, spatial...]; `kernel` the window extents. Reads strides, dilations, pads and
// auto_pad.
StatusOr<Window> readWindow(OpContext& c, Value* x, std::vector<int64_t> kernel,
                            bool hasDilations = true);
// Static extents of dims [from, rank) of x; error for a symbolic one.
StatusOr<std::vector<int64_t>> staticDims(OpContext& c, Value* x, int64_t from,
                                          const std::string& what);

// Static slice along one axis (ops_slice.cpp).
Value* sliceAxis(Builder& b, Value* x, int64_t axis, int64_t start, int64_t limit,
                 int64_t stride = 1);

}  // namespace kiln::onnx
