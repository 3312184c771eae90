#include "codegen/cpu/llvm_math.h"

#include "llvm/IR/Intrinsics.h"

namespace kiln::codegen::cpu {
namespace {

llvm::Value* c(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

// a * b + c as llvm.fmuladd: one fused multiply-add where the target has them (the polynomials
// below are approximations whose error bounds hold with or without the single rounding).
llvm::Value* mulAdd(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner evaluation of sum coeffs[i] * t^i (coeffs from the highest degree down).
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* t, std::initializer_list<double> coeffs) {
  llvm::Value* acc = nullptr;
  for (double k : coeffs) acc = acc ? mulAdd(b, acc, t, c(b, k)) : c(b, k);
  return acc;
}

// x clamped to [lo, hi], NaN left NaN: compares and selects, one vmaxps and one vminps on x86,
// where llvm.maxnum / minnum add a NaN test and blend each (the callers test for NaN anyway).
llvm::Value* clamp(llvm::IRBuilder<>& b, llvm::Value* x, double lo, double hi) {
  llvm::Value* y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, lo)), c(b, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(y, c(b, hi)), c(b, hi), y);
}

}  // namespace

llvm::Value* emitExpF32(llvm::IRBuilder<>& b, llvm::Value* x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two parts so that
  // n * hi is exact), exp(r) on |r| <= ln2/2 by a degree-6 polynomial (Cephes' expf
  // coefficients), 2^n applied as two factors 2^(n/2) and 2^(n - n/2) built in the exponent bits,
  // so that n up to 128 needs no special case (results above FLT_MAX come out as inf).
  // Results below FLT_MIN are 0 (off by less than FLT_MIN): x is clamped where every step stays
  // a normal float, since on x86 each operation that makes or reads a denormal takes a microcode
  // assist, 16x slower (a causal softmax's masked half computes exp(-inf)).
  const double lnMin = -87.33654;  // ln(FLT_MIN) = -87.3365447, rounded up to a float
  llvm::Value* xc = clamp(b, x, lnMin, 88.8);
  llvm::Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven,
                                          b.CreateFMul(xc, c(b, 1.44269504088896341)));
  llvm::Value* r = mulAdd(b, n, c(b, -0.693359375), xc);
  r = mulAdd(b, n, c(b, 2.12194440e-4), r);
  llvm::Value* p = horner(b, r,
                          {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                           1.6666665459e-1, 5.0000001201e-1});
  llvm::Value* er = b.CreateFAdd(mulAdd(b, b.CreateFMul(p, r), r, r), c(b, 1.0));
  llvm::Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
  llvm::Value* n1 = b.CreateAShr(ni, 1);
  llvm::Value* n2 = b.CreateSub(ni, n1);
  auto pow2 = [&](llvm::Value* k) {  // 2^k for k in [-126, 127]: (k + 127) << 23 as float bits
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, b.getInt32(127)), 23), b.getFloatTy());
  };
  llvm::Value* y = b.CreateFMul(b.CreateFMul(er, pow2(n1)), pow2(n2));
  // Above the clamp 2^128 times exp(r) is inf; below it the result is 0. NaN's n is poison in
  // the integer steps: NaN is selected.
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, lnMin)), c(b, 0.0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value* emitErfF32(llvm::IRBuilder<>& b, llvm::Value* x) {
  // erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (beyond, erf is +-1 in f32): a rational
  // minimax approximation of degree 13/8 (the coefficients of Eigen's and XLA's f32 erf).
  llvm::Value* xc = clamp(b, x, -4.0, 4.0);
  llvm::Value* x2 = b.CreateFMul(xc, xc);
  llvm::Value* p = horner(b, x2,
                          {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                           -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                           -1.60960333262415e-02});
  llvm::Value* q = horner(b, x2,
                          {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                           -7.37332916720468e-03, -1.42647390514189e-02});
  llvm::Value* y = b.CreateFDiv(b.CreateFMul(xc, p), q);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value* emitTanhF32(llvm::IRBuilder<>& b, llvm::Value* x) {
  // On a = |x|, as Cephes' tanhf: below 0.625 the odd polynomial a + a^3 P(a^2) (no cancellation
  // near 0), above it 1 - 2 / (e^2a + 1) (e^2a >= 3.49, so the difference loses no digits; inf
  // for large a gives exactly 1); then x's sign, so tanh(-0) = -0. Both are computed and one
  // selected: the loop stays straight-line for the vectorizers.
  llvm::Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value* z = b.CreateFMul(a, a);
  llvm::Value* p = horner(b, z,
                          {-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                           -3.33332819422e-1});
  llvm::Value* small = mulAdd(b, b.CreateFMul(p, z), a, a);
  llvm::Value* e = emitExpF32(b, b.CreateFAdd(a, a));
  llvm::Value* large = b.CreateFSub(c(b, 1.0), b.CreateFDiv(c(b, 2.0), b.CreateFAdd(e, c(b, 1.0))));
  llvm::Value* y = b.CreateSelect(b.CreateFCmpOLT(a, c(b, 0.625)), small, large);
  y = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, y, x);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

}  // namespace kiln::codegen::cpu
