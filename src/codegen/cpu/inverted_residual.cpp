// The inverted-residual block kernel (inverted_residual.h): AVX-512 code for a row of each layer,
// and the row pipeline over them.
#include "codegen/cpu/inverted_residual.h"

#include <algorithm>
#include <cmath>
#include <immintrin.h>
#include <limits>
#include <optional>
#include <vector>

#include "codegen/cpu/avx512_conv.h"
#include "codegen/cpu/onednn_internal.h"
#include "ir/op.h"

namespace kiln::codegen::cpu {
namespace {

constexpr int64_t kLanes = 16;  // floats in a 512-bit register
// Tiles of NV (up to kTileVectors) vectors of output channels by up to kTileAccumulators / NV
// pixels (at most kTilePixels): 24 accumulators, NV weight vectors and a broadcast in the 32
// registers.
constexpr int64_t kTileVectors = 6, kTilePixels = 12, kTileAccumulators = 24;
// The most bytes of 1x1 weights (expand and project together) a block may have: the row pipeline
// reads them again for every output row, so they must stay in the core's caches. In mobilenet_v2
// (the model compiled both ways in one process, runs alternating) the blocks of 15-48 KiB made
// it 3.1% faster at 1 thread and 13% at 2 than oneDNN's calls; fusing the blocks of up to 200 KB
// as well made it 1.6% slower at 1 thread (2.1% faster at 2), up to 800 KB 2.9% slower (3.9%
// faster).
constexpr int64_t kMaxWeightBytes = 64 << 10;

// The lanes of channel vector `v` of `channels` that exist (the last may be partial).
__mmask16 laneMask(int64_t channels, int64_t v) {
  const int64_t n = std::min<int64_t>(kLanes, channels - v * kLanes);
  return static_cast<__mmask16>((1u << n) - 1u);
}

// min(max(v, lo), hi). (The zero-masking forms: GCC 12 warns that the plain ones read an
// undefined register.)
__attribute__((target("avx512f"))) inline __m512 clampPs(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v, lo), hi);
}

// One tile of a 1x1 convolution: NP pixels by NV vectors of channels, accumulated in registers
// over the `in` input channels. x: the tile's first pixel; w: the weights' first column of the
// tile (rows of `out`); y and residual: the tile's first output element.
template <int NP, int NV>
__attribute__((target("avx512f"))) void
pointwiseTile(const float* x, int64_t in, const float* w, int64_t out, const __mmask16* mask,
              const __m512* bias, __m512 lo, __m512 hi, const float* residual, float* y) {
  __m512 acc[NP][NV];
  __mmask16 m[NV];
#pragma GCC unroll 6
  for (int j = 0; j < NV; ++j) m[j] = mask[j];
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < NV; ++j) acc[i][j] = bias[j];
  accumulateTile<NP, NV>(x, in, w, out, m, acc);
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < NV; ++j) {
      __m512 r = clampPs(acc[i][j], lo, hi);
      if (residual)
        r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m[j], residual + i * out + j * kLanes));
      _mm512_mask_storeu_ps(y + i * out + j * kLanes, m[j], r);
    }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, const __mmask16*,
                        const __m512*, __m512, __m512, const float*, float*);
// kTiles[np - 1][nv - 1]
#define KILN_TILES(NP)                                                                      \
  {                                                                                         \
    pointwiseTile<NP, 1>, pointwiseTile<NP, 2>, pointwiseTile<NP, 3>, pointwiseTile<NP, 4>, \
        pointwiseTile<NP, 5>, pointwiseTile<NP, 6>                                          \
  }
constexpr TileFn kTiles[kTilePixels][kTileVectors] = {
    KILN_TILES(1), KILN_TILES(2), KILN_TILES(3), KILN_TILES(4),  KILN_TILES(5),  KILN_TILES(6),
    KILN_TILES(7), KILN_TILES(8), KILN_TILES(9), KILN_TILES(10), KILN_TILES(11), KILN_TILES(12)};
#undef KILN_TILES

// y[p][n] = clamp(bias[n] + sum_k x[p][k] * w[k][n], lo, hi) (+ residual[p][n]) for `pixels`
// pixels: a 1x1 convolution of a row, x of `in` channels, w in hwio order (in x out), y of `out`
// channels. Groups of up to 6 vectors of channels (96), each over tiles of as many pixels as
// leave 24 accumulators (4 pixels for 6 vectors, 12 for 2).
__attribute__((target("avx512f"))) void pointwiseRow(const float* x, int64_t pixels, int64_t in,
                                                     const float* w, const float* bias, int64_t out,
                                                     float lo, float hi, const float* residual,
                                                     float* y) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const int64_t vectors = (out + kLanes - 1) / kLanes;
  for (int64_t v0 = 0; v0 < vectors; v0 += kTileVectors) {
    const int64_t nv = std::min(kTileVectors, vectors - v0);
    const int64_t tilePixels = std::min(kTilePixels, kTileAccumulators / nv);
    __mmask16 mask[kTileVectors] = {};
    __m512 b[kTileVectors];
    for (int64_t j = 0; j < nv; ++j) {
      mask[j] = laneMask(out, v0 + j);
      b[j] = _mm512_maskz_loadu_ps(mask[j], bias + (v0 + j) * kLanes);
    }
    for (int64_t p0 = 0; p0 < pixels; p0 += tilePixels) {
      const int64_t np = std::min(tilePixels, pixels - p0);
      const int64_t at = p0 * out + v0 * kLanes;
      kTiles[np - 1][nv - 1](x + p0 * in, in, w + v0 * kLanes, out, mask, b, vlo, vhi,
                             residual ? residual + at : nullptr, y + at);
    }
  }
}

// Four output pixels ox..ox+3 of a depthwise row whose taps are all inside the row: each input
// column is loaded once for the outputs that use it (6 loads per row of taps at stride 1, 9 at
// stride 2, for 12 multiply-adds).
template <int S>
__attribute__((target("avx512f"))) inline void
depthwiseFour(const float* const r[3], int64_t channels, __mmask16 mask, const __m512* wv, __m512 b,
              __m512 lo, __m512 hi, int64_t ox, float* y) {
  constexpr int kColumns = 3 * S + 3;
  const int64_t ix = ox * S - 1;
  __m512 acc[4] = {b, b, b, b};
#pragma GCC unroll 3
  for (int dy = 0; dy < 3; ++dy) {
    __m512 col[kColumns];
#pragma GCC unroll 9
    for (int i = 0; i < kColumns; ++i)
      col[i] = _mm512_maskz_loadu_ps(mask, r[dy] + (ix + i) * channels);
#pragma GCC unroll 4
    for (int o = 0; o < 4; ++o)
#pragma GCC unroll 3
      for (int dx = 0; dx < 3; ++dx)
        acc[o] = _mm512_fmadd_ps(col[o * S + dx], wv[dy * 3 + dx], acc[o]);
  }
#pragma GCC unroll 4
  for (int o = 0; o < 4; ++o)
    _mm512_mask_storeu_ps(y + (ox + o) * channels, mask, clampPs(acc[o], lo, hi));
}

// Output pixel ox of a depthwise row, any of whose taps may be padding.
__attribute__((target("avx512f"))) inline void depthwiseOne(const float* const r[3], int64_t width,
                                                            int64_t channels, int64_t stride,
                                                            __mmask16 mask, const __m512* wv,
                                                            __m512 b, __m512 lo, __m512 hi,
                                                            int64_t ox, float* y) {
  const int64_t ix = ox * stride - 1;
  __m512 acc = b;
  for (int64_t dy = 0; dy < 3; ++dy) {
    if (ix >= 0)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, r[dy] + ix * channels), wv[dy * 3], acc);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, r[dy] + (ix + 1) * channels), wv[dy * 3 + 1],
                          acc);
    if (ix + 2 < width)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, r[dy] + (ix + 2) * channels),
                            wv[dy * 3 + 2], acc);
  }
  _mm512_mask_storeu_ps(y + ox * channels, mask, clampPs(acc, lo, hi));
}

// One output row of a 3x3 depthwise convolution with padding 1: rows[dy] is input row
// y * stride - 1 + dy (null where that is padding), each `width` pixels of `channels`; w in hwio
// order (3 x 3 x channels). Writes outWidth pixels.
__attribute__((target("avx512f"))) void depthwiseRow(const float* const rows[3], int64_t width,
                                                     int64_t channels, int64_t stride,
                                                     const float* w, const float* bias, float lo,
                                                     float hi, int64_t outWidth, float* y) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const int64_t vectors = (channels + kLanes - 1) / kLanes;
  // Output pixels [1, interiorEnd) read no padding column.
  const int64_t interiorEnd = std::min(outWidth, (width - 2) / stride + 1);
  for (int64_t v = 0; v < vectors; ++v) {
    const __mmask16 mask = laneMask(channels, v);
    const int64_t c = v * kLanes;
    __m512 wv[9];
    for (int64_t t = 0; t < 9; ++t)
      wv[t] = rows[t / 3] ? _mm512_maskz_loadu_ps(mask, w + t * channels + c) : _mm512_setzero_ps();
    const __m512 b = _mm512_maskz_loadu_ps(mask, bias + c);
    // A padded row's weights are zero; read another row in its place.
    const float* r[3];
    for (int64_t dy = 0; dy < 3; ++dy) r[dy] = (rows[dy] ? rows[dy] : rows[1]) + c;
    int64_t ox = 0;
    if (outWidth > 0) depthwiseOne(r, width, channels, stride, mask, wv, b, vlo, vhi, ox++, y + c);
    for (; ox + 4 <= interiorEnd; ox += 4) {
      if (stride == 1) depthwiseFour<1>(r, channels, mask, wv, b, vlo, vhi, ox, y + c);
      else depthwiseFour<2>(r, channels, mask, wv, b, vlo, vhi, ox, y + c);
    }
    for (; ox < outWidth; ++ox)
      depthwiseOne(r, width, channels, stride, mask, wv, b, vlo, vhi, ox, y + c);
  }
}

// The convolution's shapes if it is 2-D f32 on nhwc with hwio weights, else null.
struct ConvShape {
  std::vector<int64_t> x, w, y;
};
std::optional<ConvShape> nhwcConv(const Node& n) {
  if (n.op() != OpCode::Convolution || n.numOperands() != 2 || n.numResults() != 1) return {};
  for (const Value* v : {n.operand(0), n.operand(1), n.result(0)})
    if (v->type().dtype() != DType::F32 || !v->type().isStatic() || v->type().rank() != 4)
      return {};
  auto dn = convDimensionNumbers(n.attrs(), 4);
  if (!dn || dn->inputBatch != 0 || dn->inputFeature != 3 ||
      dn->inputSpatial != std::vector<int64_t>{1, 2} ||
      dn->kernelSpatial != std::vector<int64_t>{0, 1} || dn->kernelInput != 2 ||
      dn->kernelOutput != 3 || dn->outputBatch != 0 || dn->outputFeature != 3 ||
      dn->outputSpatial != std::vector<int64_t>{1, 2} || n.attrInt("batch_group_count") != 1)
    return {};
  ConvWindow win = convWindow(n.attrs(), 2);
  for (const auto* l : {&win.lhsDil, &win.rhsDil})
    for (int64_t d : *l)
      if (d != 1) return {};
  return ConvShape{n.operand(0)->type().staticDims(), n.operand(1)->type().staticDims(),
                   n.result(0)->type().staticDims()};
}

// The post-ops `ops` as: a per-channel bias (an add over the channel dim, 3, of `channels`)
// first, then at most one clamp, and (when `residual` is given) at most one add of an operand of
// the result's shape `dims` last. Null when they are not of that form.
std::optional<std::pair<float, float>> biasClamp(const std::vector<kernel::PostOp>& ops,
                                                 int64_t channels, const std::vector<int64_t>& dims,
                                                 bool* residual) {
  using K = kernel::PostOp::Kind;
  std::pair<float, float> clamp{-std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::infinity()};
  size_t i = 0;
  if (ops.empty() || ops[0].kind != K::Add ||
      ops[0].operandShape != std::vector<int64_t>{channels} ||
      ops[0].operandDims != std::vector<int64_t>{3})
    return {};
  ++i;
  if (i < ops.size() && ops[i].kind == K::Clamp) {
    clamp = {static_cast<float>(ops[i].lo), static_cast<float>(ops[i].hi)};
    ++i;
  }
  if (residual) *residual = false;
  if (residual && i < ops.size() && ops[i].kind == K::Add && ops[i].operandShape == dims &&
      ops[i].operandDims == std::vector<int64_t>{0, 1, 2, 3}) {
    *residual = true;
    ++i;
  }
  if (i != ops.size()) return {};
  return clamp;
}

}  // namespace

bool invertedResidualAvailable() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

StatusOr<std::unique_ptr<InvertedResidualKernel>>
InvertedResidualKernel::create(const Layer& expand, const Layer& depthwise, const Layer& project) {
  if (!invertedResidualAvailable()) return Status::error("needs AVX-512");
  auto e = nhwcConv(*expand.node), d = nhwcConv(*depthwise.node), p = nhwcConv(*project.node);
  if (!e || !d || !p) return Status::error("a layer is not a 2-D f32 convolution on nhwc/hwio");
  // (The caller checks that each layer reads the previous one's result after its post-ops.)
  auto window = [](const Node& n) { return convWindow(n.attrs(), 2); };
  ConvWindow we = window(*expand.node), wd = window(*depthwise.node), wp = window(*project.node);
  auto ones = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  auto zeros = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
  };
  const int64_t mid = e->y[3];
  if (e->w[0] != 1 || e->w[1] != 1 || !ones(we.strides) || !zeros(we.lo) || !zeros(we.hi) ||
      expand.node->attrInt("feature_group_count") != 1)
    return Status::error("the first layer is not a 1x1 convolution of stride 1");
  if (p->w[0] != 1 || p->w[1] != 1 || !ones(wp.strides) || !zeros(wp.lo) || !zeros(wp.hi) ||
      project.node->attrInt("feature_group_count") != 1)
    return Status::error("the last layer is not a 1x1 convolution of stride 1");
  const int64_t stride = wd.strides[0];
  if (d->w != std::vector<int64_t>{3, 3, 1, mid} ||
      depthwise.node->attrInt("feature_group_count") != mid || wd.strides[1] != stride ||
      (stride != 1 && stride != 2) || wd.lo != std::vector<int64_t>{1, 1} ||
      wd.hi != std::vector<int64_t>{1, 1})
    return Status::error("the middle layer is not a 3x3 depthwise convolution of stride 1 or 2, "
                         "padding 1");
  std::unique_ptr<InvertedResidualKernel> k(new InvertedResidualKernel());
  Shape& s = k->s_;
  s.batch = e->x[0];
  s.height = e->x[1];
  s.width = e->x[2];
  s.in = e->x[3];
  s.mid = mid;
  s.out = p->y[3];
  s.stride = stride;
  s.outHeight = d->y[1];
  s.outWidth = d->y[2];
  if (k->weightBytes() > kMaxWeightBytes)
    return Status::error("the 1x1 weights are larger than " + std::to_string(kMaxWeightBytes) +
                         " bytes");
  auto ec = biasClamp(*expand.postOps, mid, e->y, nullptr);
  auto dc = biasClamp(*depthwise.postOps, mid, d->y, nullptr);
  auto pc = biasClamp(*project.postOps, s.out, p->y, &k->residual_);
  if (!ec || !dc || !pc || !std::isinf(pc->first) || !std::isinf(pc->second))
    return Status::error("the post-ops are not a bias and a clamp (and a residual last)");
  k->expandClamp_ = {ec->first, ec->second};
  k->depthwiseClamp_ = {dc->first, dc->second};
  return k;
}

void InvertedResidualKernel::runRows(void* const* const args[3], int64_t image, int64_t y0,
                                     int64_t y1, float* scratch) const {
  const Shape& s = s_;
  const float* x = static_cast<const float*>(args[0][0]) + image * s.height * s.width * s.in;
  const float* w1 = static_cast<const float*>(args[0][1]);
  const float* b1 = static_cast<const float*>(args[0][3]);
  const float* w2 = static_cast<const float*>(args[1][1]);
  const float* b2 = static_cast<const float*>(args[1][3]);
  const float* w3 = static_cast<const float*>(args[2][1]);
  const float* b3 = static_cast<const float*>(args[2][3]);
  const int64_t outImage = image * s.outHeight * s.outWidth * s.out;
  const float* residual = residual_ ? static_cast<const float*>(args[2][4]) + outImage : nullptr;
  float* y = static_cast<float*>(args[2][2]) + outImage;
  const int64_t rowSize = s.width * s.mid;
  float* ring = scratch;                 // 3 expanded rows, row r at r % 3
  float* dwRow = scratch + 3 * rowSize;  // one depthwise output row
  const float inf = std::numeric_limits<float>::infinity();
  int64_t expanded = std::max<int64_t>(0, y0 * s.stride - 1) - 1;  // the last row in the ring
  for (int64_t oy = y0; oy < y1; ++oy) {
    const int64_t top = oy * s.stride - 1;
    for (int64_t r = std::max(expanded + 1, std::max<int64_t>(top, 0));
         r <= std::min(top + 2, s.height - 1); ++r) {
      pointwiseRow(x + r * s.width * s.in, s.width, s.in, w1, b1, s.mid, expandClamp_.lo,
                   expandClamp_.hi, nullptr, ring + (r % 3) * rowSize);
      expanded = r;
    }
    const float* rows[3];
    for (int64_t dy = 0; dy < 3; ++dy) {
      const int64_t r = top + dy;
      rows[dy] = r >= 0 && r < s.height ? ring + (r % 3) * rowSize : nullptr;
    }
    depthwiseRow(rows, s.width, s.mid, s.stride, w2, b2, depthwiseClamp_.lo, depthwiseClamp_.hi,
                 s.outWidth, dwRow);
    const int64_t at = oy * s.outWidth * s.out;
    pointwiseRow(dwRow, s.outWidth, s.mid, w3, b3, s.out, -inf, inf,
                 residual ? residual + at : nullptr, y + at);
  }
}

void InvertedResidualKernel::run(void* const* const args[3], const ThreadPool& pool) const {
  const Shape& s = s_;
  // Each part of the output rows (one per thread, per image) has its own ring.
  const int64_t parts = std::min<int64_t>(pool.numThreads(), s.outHeight);
  const size_t scratchFloats = static_cast<size_t>((3 * s.width + s.outWidth) * s.mid);
  pool.parallelFor(s.batch * parts, [&](int64_t begin, int64_t end) {
    // 64-byte aligned, so that a row's 512-bit loads each touch one cache line.
    auto* scratch = reinterpret_cast<float*>(onednn::threadScratch(scratchFloats * sizeof(float)));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t image = i / parts, part = i % parts;
      runRows(args, image, s.outHeight * part / parts, s.outHeight * (part + 1) / parts, scratch);
    }
  });
}

int64_t InvertedResidualKernel::weightBytes() const {
  return (s_.in * s_.mid + s_.mid * s_.out) * static_cast<int64_t>(sizeof(float));
}

int64_t InvertedResidualKernel::maxWeightBytes() { return kMaxWeightBytes; }

std::string InvertedResidualKernel::describe() const {
  const Shape& s = s_;
  return "Kiln inverted-residual block (" + std::to_string(s.in) + " -> " + std::to_string(s.mid) +
         " -> " + std::to_string(s.out) + " channels, " + std::to_string(s.height) + "x" +
         std::to_string(s.width) + ", depthwise stride " + std::to_string(s.stride) +
         (residual_ ? ", residual" : "") + ", rows fused)";
}

}  // namespace kiln::codegen::cpu
