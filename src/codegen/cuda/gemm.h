// Which dot_general calls a GPU matrix-product library (cuBLASLt) takes, as one strided batch
// of row-major products C[b] = op(A[b]) op(B[b]). Decided from the call's attributes and buffer
// shapes alone (no toolkit), so the schedule records the choice and its reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernel/kernel_ir.h"

namespace kiln::codegen::cuda {

struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool lhsTransposed = false;  // the lhs is stored [batch, K, M]
  bool rhsTransposed = false;  // the rhs is stored [batch, N, K]
  DType type = DType::F32;
  bool tf32 = false;        // f32 products on TF32 tensor cores (--precision tf32)
  std::string str() const;  // "f32 12 x [128 x 64] . [64 x 128]"
};

// The product `call` (a dot_general of kernel `k`; its post-ops aside) as a GemmShape, or nullopt
// with `why` saying what the library cannot take: operand and result types other than one of
// f32, f16, bf16; more than one contracting dim; free dims on both sides of the contracting
// one; batch dims not leading in the same order. Free dims flatten: x[B, S, H] . w[H, O] is
// one [B * S, H] . [H, O] product.
std::optional<GemmShape> gemmShape(const kernel::Kernel& k, const kernel::Stmt& call,
                                   std::string* why);

// What cuBLASLt's epilogue applies of a call's post-ops, D = act(alpha A . B + C + bias): the
// leading post-ops that are at most one mul by a constant scalar, first (alpha: attention's
// scale), at most one add of an operand of the result's shape and type (C, read with beta = 1),
// at most one add of a vector along N (the bias), then at most one relu or tanh gelu (cuBLASLt's
// GELU is the tanh approximation). The post-ops after `taken` run as loops.
struct GemmEpilogue {
  enum class Act : uint8_t { None, Relu, GeluTanh };
  int scale = -1;  // the post-op whose constant is alpha, or -1
  double alpha = 1.0;
  int residual = -1;  // the post-op whose operand is C, or -1
  int bias = -1;      // the post-op whose operand is the bias, or -1
  Act act = Act::None;
  size_t taken = 0;
  std::string str() const;  // "residual + bias + relu" ("none" when nothing is taken)
};

// The epilogue of `call` (with GemmShape `g`); `why` says why it stops before the last post-op.
GemmEpilogue gemmEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, const GemmShape& g,
                          std::string* why);

}  // namespace kiln::codegen::cuda
