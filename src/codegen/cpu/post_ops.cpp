#include "codegen/cpu/post_ops.h"

#include <algorithm>
#include <cmath>

namespace kiln::codegen::cpu {
namespace {

using kernel::PostOp;

float eltwise(const PostOp& p, float x) {
  switch (p.kind) {
    case PostOp::Kind::Clamp:
      return std::min(std::max(x, static_cast<float>(p.lo)), static_cast<float>(p.hi));
    case PostOp::Kind::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case PostOp::Kind::Tanh: return std::tanh(x);
    case PostOp::Kind::Gelu: return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
    case PostOp::Kind::GeluTanh: {
      const float k = static_cast<float>(std::sqrt(2.0 / M_PI));
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case PostOp::Kind::Add:
    case PostOp::Kind::Mul: break;
  }
  return x;
}

}  // namespace

void applyPostOps(const std::vector<PostOp>& ops, const std::vector<int64_t>& shape, float* result,
                  const void* const* operands) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  size_t next = 0;
  for (const PostOp& p : ops) {
    if (p.kind != PostOp::Kind::Add && p.kind != PostOp::Kind::Mul) {
      for (int64_t i = 0; i < total; ++i) result[i] = eltwise(p, result[i]);
      continue;
    }
    const float* b = static_cast<const float*>(operands[next++]);
    // The operand's stride along each result dim (0 where it is broadcast).
    std::vector<int64_t> stride(shape.size(), 0);
    int64_t s = 1;
    for (size_t j = p.operandShape.size(); j-- > 0;) {
      if (p.operandShape[j] != 1) stride[static_cast<size_t>(p.operandDims[j])] = s;
      s *= p.operandShape[j];
    }
    std::vector<int64_t> idx(shape.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < total; ++i) {
      result[i] = p.kind == PostOp::Kind::Add ? result[i] + b[off] : result[i] * b[off];
      // Next multi-index, keeping the operand offset in step.
      for (size_t d = shape.size(); d-- > 0;) {
        off += stride[d];
        if (++idx[d] < shape[d]) break;
        off -= stride[d] * shape[d];
        idx[d] = 0;
      }
    }
  }
}

}  // namespace kiln::codegen::cpu
