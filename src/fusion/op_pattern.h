// How each op takes part in fusion, and what it costs: the facts the fusion planner and its cost
// model need about single ops. (TVM calls these op patterns; XLA decides the same per
// instruction.)
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/ir.h"

namespace kiln::fusion {

enum class OpPattern : uint8_t {
  // constant, parameter: buffers that kernels read, not computation.
  Buffer,
  // Each output element is computed from the elements at the same index of its operands (after
  // their broadcasts): the math ops, convert, select, clamp, compare, and the composites gelu and
  // batch_norm_inference (whose per-channel operands are read at the channel's index).
  Elementwise,
  // Each output element is one input element at a computed index (or a value computed from the
  // index alone): broadcast_in_dim, reshape, transpose, slice, reverse, pad, concatenate, iota.
  // Free to recompute: index arithmetic only.
  Injective,
  // Reads many input elements per output element along some axes: reduce, argmax, argmin,
  // reduce_window (pooling), and the row composites softmax, log_softmax, layer_norm.
  Reduction,
  // dot_general, convolution: library kernels (oneDNN on the CPU, cuBLASLt/cuDNN on the GPU) that
  // read their operands from memory and take an elementwise epilogue.
  Contraction,
  // attention: its own kernel (no S x S score matrix in memory).
  Attention,
  // sort, top_k, cumsum, scatter, dynamic_update_slice, and (until they have a loop lowering)
  // gather, dynamic_slice, resize, grid_sample: a kernel of their own, never fused.
  Opaque,
};

std::string_view patternName(OpPattern p);  // "elementwise", "injective", ...

OpPattern patternOf(const Node& n);

// Elements of a value's type with every symbolic dimension taken as 1 (a lower bound; the planner
// works on specialised functions where every dimension is static).
int64_t elementsOf(const Value& v);
int64_t bytesOf(const Value& v);

// Floating-point (or integer) operations of one node, counted the usual way: 2*M*N*K for a matrix
// product, one per element for simple elementwise ops, a small constant per element for the
// transcendental ones and the composites.
double flopsOf(const Node& n);

}  // namespace kiln::fusion
