// Kiln's grouped convolution for the CPU. See grouped_conv_kernel.h.
#include "codegen/cpu/grouped_conv_kernel.h"

#include <algorithm>
#include <immintrin.h>
#include <string>
#include <utility>

#include "codegen/cpu/avx512_conv.h"
#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/thread_pool.h"

namespace kiln::codegen::cpu {
namespace {

constexpr int64_t kLanes = 16;  // f32 lanes of a 512-bit vector
// Output pixels computed together along a row: 8 independent accumulators keep two FMA units of
// latency 4 busy (a pixel's sum over its window is one chain); 4 for the row's remainder.
constexpr int kPixels = 8;

// The convolution's extents and element strides (channels have stride 1 in every operand).
struct Shape {
  int64_t batch = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0, width = 0;  // width: channels a group
  int64_t xN = 0, xH = 0, xW = 0, yN = 0, yH = 0, yW = 0, wJ = 0, wKh = 0, wKw = 0;
};

struct Args {
  const float* x;
  const float* w;
  float* y;
  const float* const* operands;
};

// Input channel J of each group of CG (2 or 4) channels of x, broadcast in the group's lanes:
// a group lies within a 128-bit lane, so one in-lane shuffle does it.
template <int CG, int J>
__attribute__((target("avx512f"))) inline __m512 groupInput(__m512 x) {
  if constexpr (CG == 4) return _mm512_mask_permute_ps(x, kAllLanes, x, J * 0x55);
  return _mm512_mask_permute_ps(x, kAllLanes, x, J ? 0xf5 : 0xa0);
}

// acc[p] += (input channel J of each group of xv[p]) * (the weights at w), for each J.
template <int CG, int P, int J>
__attribute__((target("avx512f"))) inline void input(const float* w, const __m512* xv,
                                                     __m512* acc) {
  const __m512 wv = _mm512_loadu_ps(w);
  for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(groupInput<CG, J>(xv[p]), wv, acc[p]);
}
template <int CG, int P, int... J>
__attribute__((target("avx512f"))) inline void inputs(const float* w, int64_t wJ, const __m512* xv,
                                                      __m512* acc,
                                                      std::integer_sequence<int, J...>) {
  (input<CG, P, J>(w + J * wJ, xv, acc), ...);
}

// pixels3's step for input channel J of one window row: x at the row's first input pixel, w
// at the tap kw = 0's weights for J.
template <int CG, int P, int J>
__attribute__((target("avx512f"))) inline void row3(const float* x, int64_t xW, const float* w,
                                                    int64_t wKw, __m512* acc) {
  __m512 in[P + 2];
  for (int q = 0; q < P + 2; ++q) in[q] = groupInput<CG, J>(_mm512_loadu_ps(x + q * xW));
  for (int kw = 0; kw < 3; ++kw) {
    const __m512 wv = _mm512_loadu_ps(w + kw * wKw);
    for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(in[p + kw], wv, acc[p]);
  }
}

template <int CG, int P, int... J>
__attribute__((target("avx512f"))) inline void rows3(const float* x, int64_t xW, const float* w,
                                                     int64_t wJ, int64_t wKw, __m512* acc,
                                                     std::integer_sequence<int, J...>) {
  (row3<CG, P, J>(x, xW, w + J * wJ, wKw, acc), ...);
}

// Output pixels ow0 .. ow0 + P - 1 of the row whose valid input rows are rows[0..nr) (at window
// rows khs[..]), channels c0 .. c0 + 15: every tap of the window lies inside the input row
// unless `checked` (then P is 1 and taps outside are skipped).
template <int CG, int P>
__attribute__((target("avx512f"))) inline void
pixels(const Shape& s, const Args& a, const float* const* rows, const int64_t* khs, int nr,
       int64_t ow0, int64_t c0, bool checked, __m512* acc) {
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int r = 0; r < nr; ++r) {
    const float* wrow = a.w + khs[r] * s.wKh + c0;
    const float* xrow = rows[r] + c0;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const int64_t iw = ow0 * s.sw - s.pw + kw * s.dw;
      if (checked && (iw < 0 || iw >= s.w)) continue;
      __m512 xv[P];
      for (int p = 0; p < P; ++p) xv[p] = _mm512_loadu_ps(xrow + (iw + p * s.sw) * s.xW);
      const float* wk = wrow + kw * s.wKw;
      inputs<CG, P>(wk, s.wJ, xv, acc, std::make_integer_sequence<int, CG>{});
    }
  }
}

// As `pixels` for a window 3 wide at stride 1 and no dilation, inside the row: the P + 2 input
// pixels the three taps of P outputs read are broadcast in their groups once per input channel
// and used three times (a third of the permutes `pixels` makes).
template <int CG, int P>
__attribute__((target("avx512f"))) inline void
pixels3(const Shape& s, const Args& a, const float* const* rows, const int64_t* khs, int nr,
        int64_t ow0, int64_t c0, __m512* acc) {
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int r = 0; r < nr; ++r) {
    const float* xrow = rows[r] + c0 + (ow0 - s.pw) * s.xW;
    const float* wrow = a.w + khs[r] * s.wKh + c0;
    rows3<CG, P>(xrow, s.xW, wrow, s.wJ, s.wKw, acc, std::make_integer_sequence<int, CG>{});
  }
}

// Output row `oh` of image `n`, every channel.
template <int CG>
__attribute__((target("avx512f"))) void outputRow(const Shape& s,
                                                  const std::vector<Epilogue>& epilogue,
                                                  const Args& a, int64_t n, int64_t oh) {
  const float* rows[16];
  int64_t khs[16];
  int nr = 0;
  for (int64_t kh = 0; kh < s.kh; ++kh) {
    const int64_t ih = oh * s.sh - s.ph + kh * s.dh;
    if (ih < 0 || ih >= s.h) continue;
    rows[nr] = a.x + n * s.xN + ih * s.xH;
    khs[nr++] = kh;
  }
  // Pixels [lo, hi) have every tap of the window inside the row.
  const int64_t lo = std::min(s.ow, (s.pw + s.sw - 1) / s.sw);
  const int64_t last = s.w - 1 + s.pw - (s.kw - 1) * s.dw;  // the largest ow * sw that fits
  const int64_t hi = last < 0 ? lo : std::clamp(last / s.sw + 1, lo, s.ow);
  const int64_t out = n * s.yN + oh * s.yH;
  const bool three = s.kw == 3 && s.sw == 1 && s.dw == 1;
  __m512 acc[kPixels];
  for (int64_t c0 = 0; c0 < s.c; c0 += kLanes) {
    auto store = [&](int64_t ow, int count) {
      for (int p = 0; p < count; ++p)
        finish(epilogue, a.operands, a.y, acc[p], out + (ow + p) * s.yW + c0, c0);
    };
    // The pixels whose window passes the row's left end, blocks inside the row, its right end.
    int64_t ow = 0;
    for (; ow < lo; ++ow) {
      pixels<CG, 1>(s, a, rows, khs, nr, ow, c0, true, acc);
      store(ow, 1);
    }
    for (; three && ow + kPixels <= hi; ow += kPixels) {
      pixels3<CG, kPixels>(s, a, rows, khs, nr, ow, c0, acc);
      store(ow, kPixels);
    }
    for (; ow + kPixels <= hi; ow += kPixels) {
      pixels<CG, kPixels>(s, a, rows, khs, nr, ow, c0, false, acc);
      store(ow, kPixels);
    }
    for (; ow + kPixels / 2 <= hi; ow += kPixels / 2) {
      pixels<CG, kPixels / 2>(s, a, rows, khs, nr, ow, c0, false, acc);
      store(ow, kPixels / 2);
    }
    for (; ow < s.ow; ++ow) {
      pixels<CG, 1>(s, a, rows, khs, nr, ow, c0, ow >= hi, acc);
      store(ow, 1);
    }
  }
}

class GroupedConvKernel final : public LibraryKernel {
 public:
  bool kilnsOwn() const override { return true; }
  GroupedConvKernel(Shape s, std::vector<Epilogue> epilogue, int threads, std::string description)
      : s_(s), epilogue_(std::move(epilogue)), pool_(threads),
        description_(std::move(description)) {}

  Status run(void* const* buffers) const override {
    std::vector<const float*> operands;  // the add/mul post-ops' operands, in order
    for (const Epilogue& e : epilogue_)
      if (e.operand >= 0) operands.push_back(static_cast<const float*>(buffers[3 + e.operand]));
    const Args a{static_cast<const float*>(buffers[0]), static_cast<const float*>(buffers[1]),
                 static_cast<float*>(buffers[2]), operands.data()};
    auto row = s_.width == 2 ? outputRow<2> : outputRow<4>;
    pool_.parallelFor(s_.batch * s_.oh, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) row(s_, epilogue_, a, r / s_.oh, r % s_.oh);
    });
    return Status::ok();
  }
  std::string describe() const override { return description_; }

 private:
  Shape s_;
  std::vector<Epilogue> epilogue_;
  ThreadPool pool_;
  std::string description_;
};

}  // namespace

bool groupedConvKernelRuns() { return __builtin_cpu_supports("avx512f"); }

StatusOr<std::unique_ptr<LibraryKernel>>
createGroupedConvKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                        bool probe) {
  if (!groupedConvKernelRuns()) return Status::error("Kiln's grouped kernel needs AVX-512F");
  KILN_ASSIGN_OR_RETURN(const onednn::ConvAxes c, onednn::convAxes(n));
  if (c.ns != 2 || c.groups < 2) return Status::error("not a 2-D grouped convolution");
  const int64_t width = c.kO / c.groups;
  if (c.inC != c.kO || (width != 2 && width != 4) || c.kO % kLanes != 0)
    return Status::error("groups of other than 2 or 4 channels in and out");
  // src and dst: [N, C, H, W] axes; weights: [G, out, in, kh, kw].
  const auto &x = c.src, &y = c.dst, &w = c.wei;
  if (x[1].stride != 1 || y[1].stride != 1 || w[1].stride != 1 || w[0].stride != width ||
      y[3].stride != c.kO || y[2].stride != y[3].ext * c.kO ||
      y[0].stride != y[2].ext * y[2].stride)
    return Status::error("channels not innermost and dense");
  Shape s;
  s.batch = x[0].ext, s.c = c.kO, s.h = x[2].ext, s.w = x[3].ext, s.oh = y[2].ext, s.ow = y[3].ext;
  s.kh = w[3].ext, s.kw = w[4].ext, s.sh = c.strides[0], s.sw = c.strides[1];
  s.dh = c.rhsDil[0], s.dw = c.rhsDil[1], s.ph = c.lo[0], s.pw = c.lo[1], s.width = width;
  s.xN = x[0].stride, s.xH = x[2].stride, s.xW = x[3].stride;
  s.yN = y[0].stride, s.yH = y[2].stride, s.yW = y[3].stride;
  s.wJ = w[2].stride, s.wKh = w[3].stride, s.wKw = w[4].stride;
  if (s.kh > 16) return Status::error("a window of more than 16 rows");
  KILN_ASSIGN_OR_RETURN(std::vector<Epilogue> epilogue,
                        epilogueOf(postOps, n.result(0)->type().staticDims()));
  const std::string description =
      "Kiln grouped " + c.what + "): " + std::to_string(width) + " channels a group, " +
      std::to_string(kLanes / width) +
      " groups in a vector of 16 channels, each group's inputs broadcast in its lanes by a "
      "shuffle; oneDNN's kernel computes a group in 16 lanes";
  if (probe) return onednn::makeProbedKernel(description);
  return std::unique_ptr<LibraryKernel>(
      std::make_unique<GroupedConvKernel>(s, std::move(epilogue), threads, description));
}

}  // namespace kiln::codegen::cpu
