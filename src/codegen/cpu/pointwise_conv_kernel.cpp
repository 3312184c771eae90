// Kiln's 1x1 convolution for the CPU. See pointwise_conv_kernel.h.
#include "codegen/cpu/pointwise_conv_kernel.h"

#include <algorithm>
#include <string>
#include <utility>

#include "codegen/cpu/avx512_conv.h"
#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/thread_pool.h"

namespace kiln::codegen::cpu {
namespace {

constexpr int64_t kLanes = 16;  // f32 lanes of a 512-bit vector
// A column block: up to 6 vectors of output channels; a tile holds up to 24 accumulators (and
// the block's weight vectors and a broadcast input in the other 8 registers).
constexpr int kBlockVectors = 6, kTileAccumulators = 24;
// Pixels a thread's work item covers: a multiple of every tile height (24 / vectors).
constexpr int64_t kItemPixels = 48;

struct Shape {
  int64_t pixels = 0, in = 0, out = 0;  // K input channels, N output channels
};

struct Args {
  const float* x;
  const float* w;
  float* y;
  const float* bias;  // the first post-op's per-channel operand, summed from the start; or null
  const float* const* operands;
};

// Pixels p0 .. p0 + NP - 1 by vectors v0 .. v0 + NV - 1 of output channels: sums over the K
// input channels (x[p][k] broadcast, times the weights' row k) in registers, then the post-ops.
template <int NP, int NV>
KILN_AVX512 void tile(const Shape& s, const std::vector<Epilogue>& epilogue, const Args& a,
                      int64_t p0, int64_t v0) {
  __m512 acc[NP][NV];
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < NV; ++j)
      acc[i][j] = a.bias ? _mm512_loadu_ps(a.bias + (v0 + j) * kLanes) : _mm512_setzero_ps();
  __mmask16 mask[NV];  // whole vectors: the output channels are a multiple of 16
  for (int j = 0; j < NV; ++j) mask[j] = kAllLanes;
  accumulateTile<NP, NV>(a.x + p0 * s.in, s.in, a.w + v0 * kLanes, s.out, mask, acc);
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < NV; ++j) {
      const int64_t c0 = (v0 + j) * kLanes;
      finish(epilogue, a.operands, a.y, acc[i][j], (p0 + i) * s.out + c0, c0);
    }
}

// Pixels [p0, p1) of column block v0 (NV vectors): tiles of 24 / NV pixels, then single pixels.
template <int NV>
KILN_AVX512 void block(const Shape& s, const std::vector<Epilogue>& epilogue, const Args& a,
                       int64_t p0, int64_t p1, int64_t v0) {
  constexpr int kPixels = std::min(12, kTileAccumulators / NV);
  int64_t p = p0;
  for (; p + kPixels <= p1; p += kPixels) tile<kPixels, NV>(s, epilogue, a, p, v0);
  for (; p < p1; ++p) tile<1, NV>(s, epilogue, a, p, v0);
}

using BlockFn = void (*)(const Shape&, const std::vector<Epilogue>&, const Args&, int64_t, int64_t,
                         int64_t);
constexpr BlockFn kBlocks[kBlockVectors] = {block<1>, block<2>, block<3>,
                                            block<4>, block<5>, block<6>};

class PointwiseConvKernel final : public LibraryKernel {
 public:
  bool kilnsOwn() const override { return true; }
  // A first post-op that adds a per-channel vector (a bias) initialises the sums instead.
  PointwiseConvKernel(Shape s, std::vector<Epilogue> epilogue, int threads, std::string description)
      : s_(s), epilogue_(std::move(epilogue)), pool_(threads),
        description_(std::move(description)) {
    if (!epilogue_.empty() && epilogue_[0].kind == kernel::PostOp::Kind::Add &&
        !epilogue_[0].whole) {
      bias_ = true;
      epilogue_.erase(epilogue_.begin());
      for (Epilogue& e : epilogue_)
        if (e.operand >= 0) --e.operand;
    }
  }

  Status run(void* const* buffers) const override {
    std::vector<const float*> operands;  // the add/mul post-ops' operands, in order
    for (const Epilogue& e : epilogue_)
      if (e.operand >= 0)
        operands.push_back(static_cast<const float*>(buffers[3 + bias_ + e.operand]));
    const Args a{static_cast<const float*>(buffers[0]), static_cast<const float*>(buffers[1]),
                 static_cast<float*>(buffers[2]),
                 bias_ ? static_cast<const float*>(buffers[3]) : nullptr, operands.data()};
    const int64_t vectors = s_.out / kLanes;
    const int64_t items = (s_.pixels + kItemPixels - 1) / kItemPixels;
    // Threads take runs of pixels (of every channel), as oneDNN's 1x1 kernels split nhwc.
    pool_.parallelFor(items, [&](int64_t begin, int64_t end) {
      const int64_t p1 = std::min(s_.pixels, end * kItemPixels);
      for (int64_t q = begin * kItemPixels; q < p1; q += kItemPixels)
        for (int64_t v0 = 0; v0 < vectors; v0 += kBlockVectors) {
          const int64_t nv = std::min<int64_t>(kBlockVectors, vectors - v0);
          kBlocks[nv - 1](s_, epilogue_, a, q, std::min(p1, q + kItemPixels), v0);
        }
    });
    return Status::ok();
  }
  std::string describe() const override { return description_; }

 private:
  Shape s_;
  std::vector<Epilogue> epilogue_;
  bool bias_ = false;
  ThreadPool pool_;
  std::string description_;
};

// Whether the axes (batch, channels, spatial...) hold `channels` innermost and their pixels
// dense, one after another.
bool densePixels(const std::vector<onednn::Axis>& axes, int64_t channels) {
  if (axes[1].ext > 1 && axes[1].stride != 1) return false;
  int64_t next = channels;  // the stride the next-outer pixel dim must have
  for (size_t i = axes.size(); i-- > 2;) {
    if (axes[i].ext > 1 && axes[i].stride != next) return false;
    next *= axes[i].ext;
  }
  return axes[0].ext == 1 || axes[0].stride == next;
}

bool hasSwish(const std::vector<Epilogue>& epilogue) {
  return std::any_of(epilogue.begin(), epilogue.end(),
                     [](const Epilogue& e) { return e.kind == kernel::PostOp::Kind::Swish; });
}

}  // namespace

StatusOr<std::unique_ptr<LibraryKernel>>
createPointwiseConvKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                          bool probe) {
  if (!__builtin_cpu_supports("avx512f")) return Status::error("Kiln's 1x1 kernel needs AVX-512F");
  KILN_ASSIGN_OR_RETURN(const onednn::ConvAxes c, onednn::convAxes(n));
  auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
  };
  if (c.groups != 1 || !all(c.window, 1) || !all(c.strides, 1) || !all(c.lo, 0) || !all(c.hi, 0) ||
      !all(c.lhsDil, 1))
    return Status::error("not a 1x1 convolution of stride 1 without padding, one group");
  if (c.kO % kLanes != 0) return Status::error("output channels not a multiple of 16");
  // Weights: [out, in, 1...]; the tiles read row k (input channel) of out contiguous floats.
  const onednn::Axis &wo = c.wei[0], &wi = c.wei[1];
  if (!densePixels(c.src, c.inC) || !densePixels(c.dst, c.kO) || (wo.ext > 1 && wo.stride != 1) ||
      (wi.ext > 1 && wi.stride != c.kO))
    return Status::error("channels not innermost and dense (nhwc, hwio)");
  KILN_ASSIGN_OR_RETURN(std::vector<Epilogue> epilogue,
                        epilogueOf(postOps, n.result(0)->type().staticDims()));
  if (!hasSwish(epilogue))
    return Status::error("no swish post-op (oneDNN's kernel is as fast without one)");
  const int64_t panel = c.inC * std::min<int64_t>(c.kO, kBlockVectors * kLanes) * 4;
  if (panel > kPointwiseMaxPanelBytes)
    return Status::error("a column block's weights (" + std::to_string(panel) +
                         " bytes) do not stay in L1 (kPointwiseMaxPanelBytes)");
  Shape s;
  s.in = c.inC, s.out = c.kO, s.pixels = c.src[0].ext;
  for (size_t i = 2; i < c.src.size(); ++i) s.pixels *= c.src[i].ext;
  const std::string description =
      "Kiln 1x1 " + c.what +
      "): its swish post-op in registers, 17 vector operations where oneDNN's takes about 25";
  if (probe) return onednn::makeProbedKernel(description);
  return std::unique_ptr<LibraryKernel>(
      std::make_unique<PointwiseConvKernel>(s, std::move(epilogue), threads, description));
}

}  // namespace kiln::codegen::cpu
