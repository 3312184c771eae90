// Vectorizable f32 math for the CPU code generator: exp and erf as straight-line arithmetic
// (polynomials, range reduction, bit manipulation) that LLVM's vectorizers turn into AVX code,
// where a libm call would keep the loop scalar. Accuracy (measured against the double-precision
// libm result rounded to f32, by tests/unit/fast_math_test.cpp): exp within 2 ulp for results
// >= FLT_MIN and within 2e-38 absolute below (denormals), inf above 88.72, NaN for NaN; erf
// within 5e-7 absolute (about 7 ulp near +-1). docs/codegen.md, "Numerics".
#pragma once

#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen::cpu {

// x and the result are f32 (scalar; the vectorizers widen them).
llvm::Value* emitExpF32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emitErfF32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emitTanhF32(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace kiln::codegen::cpu
