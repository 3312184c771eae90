// The register code Kiln's own convolution kernels share (grouped_conv_kernel.h,
// pointwise_conv_kernel.h, inverted_residual.h): the 1x1 tile's sums, and the post-ops applied to
// a vector of 16 output channels before it is stored, with the swish they compute there.
#pragma once

#include <immintrin.h>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

#define KILN_AVX512 __attribute__((target("avx512f")))

// Every lane: the masked forms of max, min and permutes, whose unmasked forms pass GCC 12 an
// undefined vector that -Wmaybe-uninitialized reports (GCC bug 105593).
inline constexpr __mmask16 kAllLanes = 0xffff;

// x * sigmoid(x) in 17 operations, where oneDNN's swish post-op takes about 25 (its division
// alone about 10 cycles a vector): sigmoid(x) = 1 / (1 + e^-x), e^-x = 2^n e^-r with n =
// round(-x log2(e)) and r = x + n ln(2) (ln(2) in two parts, so that r is exact), e^-r on |r| <=
// ln(2) / 2 by a degree-5 minimax polynomial (relative error 2.1e-7), 2^n by vscalefps, the
// reciprocal by rcp14 and one Newton step (relative error about 2^-28). x is capped at 80
// (sigmoid is 1 in f32 well before); below -87, where e^-x would overflow, the result is 0
// (|swish| < 2e-36 there); NaN stays NaN (the capped value is finite, x times it is NaN).
KILN_AVX512 inline __m512 swishPs(__m512 x) {
  const __m512 xc = _mm512_mask_min_ps(x, kAllLanes, x, _mm512_set1_ps(80.f));
  __m512 n = _mm512_mul_ps(xc, _mm512_set1_ps(-1.44269504088896341f));
  n = _mm512_mask_roundscale_ps(n, kAllLanes, n, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(-8.29765496e-3f);  // e^-r: the coefficients of e^r, odd ones negated
  for (float c : {4.1915382e-2f, -1.66675747e-1f, 4.99988949e-1f, -9.99999692e-1f, 1.00000007f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 d = _mm512_add_ps(_mm512_mask_scalef_ps(p, kAllLanes, p, n), one);
  __m512 q = _mm512_mask_rcp14_ps(d, kAllLanes, d);
  q = _mm512_fmadd_ps(q, _mm512_fnmadd_ps(d, q, one), q);
  const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_NLT_UQ);
  return _mm512_maskz_mul_ps(kept, x, q);
}

// acc[i][j] += sum over k < in of x[i * in + k] * w[k * out + 16 j + lane], for the lanes of
// mask[j]: a tile of NP pixels (rows of x, `in` channels each) by NV vectors of output channels
// (w: the tile's first column of weights, `out` a row), the input broadcast from memory and each
// weight vector loaded once for the NP pixels. The 1x1 layers of Kiln's kernels sum so.
template <int NP, int NV>
KILN_AVX512 inline void accumulateTile(const float* x, int64_t in, const float* w, int64_t out,
                                       const __mmask16* mask, __m512 (&acc)[NP][NV]) {
  for (int64_t k = 0; k < in; ++k) {
    __m512 wv[NV];
#pragma GCC unroll 6
    for (int j = 0; j < NV; ++j) wv[j] = _mm512_maskz_loadu_ps(mask[j], w + k * out + j * 16);
#pragma GCC unroll 12
    for (int i = 0; i < NP; ++i) {
      const __m512 xv = _mm512_set1_ps(x[i * in + k]);
#pragma GCC unroll 6
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
}

// A post-op as the kernels apply it to a vector of 16 output channels.
struct Epilogue {
  kernel::PostOp::Kind kind = kernel::PostOp::Kind::Add;
  int operand = -1;      // Add, Mul: the index among the post-op operands
  bool whole = false;    // the operand has the result's shape (else a vector along channels)
  float lo = 0, hi = 0;  // Clamp
};

// The post-ops as the kernels apply them: adds and muls of a per-channel vector or of an operand
// of the result's shape, clamps and swish; or why not.
StatusOr<std::vector<Epilogue>> epilogueOf(const std::vector<kernel::PostOp>& postOps,
                                           const std::vector<int64_t>& result);

// Applies the post-ops to v, the 16 channels from c0 of the output element at `at` (operands:
// the add/mul post-ops' buffers, in order), and stores it to y + at.
KILN_AVX512 inline void finish(const std::vector<Epilogue>& epilogue, const float* const* operands,
                               float* y, __m512 v, int64_t at, int64_t c0) {
  using Kind = kernel::PostOp::Kind;
  for (const Epilogue& e : epilogue) {
    if (e.kind == Kind::Clamp) {
      v = _mm512_mask_max_ps(v, kAllLanes, v, _mm512_set1_ps(e.lo));
      v = _mm512_mask_min_ps(v, kAllLanes, v, _mm512_set1_ps(e.hi));
      continue;
    }
    if (e.kind == Kind::Swish) {
      v = swishPs(v);
      continue;
    }
    const __m512 u = _mm512_loadu_ps(operands[e.operand] + (e.whole ? at : c0));
    v = e.kind == Kind::Add ? _mm512_add_ps(v, u) : _mm512_mul_ps(v, u);
  }
  _mm512_storeu_ps(y + at, v);
}

}  // namespace kiln::codegen::cpu
