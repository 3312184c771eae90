// Kiln's panel product: see panel_product.h.
#include "codegen/cpu/panel_product.h"

#include <algorithm>
#include <cstdint>
#include <immintrin.h>
#include <optional>
#include <string>

#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/thread_pool.h"
#include "ir/op.h"
#include "support/large_buffer.h"

#define KILN_AVX512 __attribute__((target("avx512f")))

namespace kiln::codegen::cpu {
namespace {

constexpr int64_t kPanel = 64;       // columns of a panel: four vectors
constexpr int kRowsPerPass = 6;      // 6 x 4 accumulators, 4 weight vectors and a broadcast
constexpr int64_t kChunksAhead = 1;  // the chunk fetched while one is computed (panel_product.h)

// Why the kernel does not take an f32 product of m x k x n, or "".
std::string shapeRefusal(int64_t m, int64_t k, int64_t n) {
  if (m != 1 && (m < kPanelProductMinRows || m > kPanelProductMaxRows))
    return std::to_string(m) + " rows (it takes 1, or " + std::to_string(kPanelProductMinRows) +
           " to " + std::to_string(kPanelProductMaxRows) + ")";
  if (n % kPanel != 0) return "N = " + std::to_string(n) + " is not a multiple of 64";
  if (k * n * 4 < kPanelProductMinWeightBytes) return "weights that stay in cache";
  return "";
}

// What the kernel reads of dot_general `n`.
struct Shape {
  int64_t m = 0, k = 0, n = 0;
  bool rhsTransposed = false;  // weights [N, K]
};

std::optional<Shape> shapeOf(const Node& n, std::string& why) {
  if (n.op() != OpCode::DotGeneral || n.numOperands() != 2) return std::nullopt;
  auto fail = [&](std::string w) -> std::optional<Shape> {
    why = std::move(w);
    return std::nullopt;
  };
  const Value* lhs = n.operand(0);
  const Value* rhs = n.operand(1);
  if (lhs->type().dtype() != DType::F32 || rhs->type().dtype() != DType::F32 ||
      !lhs->type().isStatic() || !rhs->type().isStatic())
    return fail("not f32 of static shape");
  if (!n.attrInts("lhs_batch").empty() || !n.attrInts("rhs_batch").empty())
    return fail("batch dims");
  const std::vector<int64_t> x = lhs->type().staticDims(), w = rhs->type().staticDims();
  const std::vector<int64_t> lc = n.attrInts("lhs_contracting"), rc = n.attrInts("rhs_contracting");
  if (x.empty() || lc != std::vector<int64_t>{int64_t(x.size()) - 1} || w.size() != 2 ||
      rc.size() != 1)
    return fail("not rows [..., K] against 2-D weights");
  const Node* def = rhs->def();
  if (!def || def->op() != OpCode::Constant) return fail("the weights are not a constant");
  Shape s;
  s.rhsTransposed = rc[0] == 1;
  s.k = x.back();
  s.n = w[s.rhsTransposed ? 0 : 1];
  s.m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) s.m *= x[i];
  if (w[s.rhsTransposed ? 1 : 0] != s.k) return fail("K differs");
  if (std::string w = shapeRefusal(s.m, s.k, s.n); !w.empty()) return fail(w);
  return s;
}

// Rows [0, R) of C (+)= A x rows [0, k) of a panel (64 floats a row) at `c` (row stride ldc), A's
// rows lda apart; `add`: onto what C holds (a later chunk of K). Fetches rows [fetchFrom, fetchTo)
// of `ahead` into L2, one row (four lines) every `every` steps.
template <int R>
KILN_AVX512 void rows(const float* a, int64_t lda, int64_t k, const float* panel, float* c,
                      int64_t ldc, bool add, const float* ahead, int64_t fetchFrom, int64_t fetchTo,
                      int64_t every) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j)
      acc[r][j] = add ? _mm512_loadu_ps(c + r * ldc + j * 16) : _mm512_setzero_ps();
  int64_t fetch = fetchFrom;
  for (int64_t i = 0; i < k; ++i) {
    if (ahead && i % every == 0 && fetch < fetchTo) {
      const char* line = reinterpret_cast<const char*>(ahead + fetch * kPanel);
      for (int l = 0; l < 4; ++l) _mm_prefetch(line + 64 * l, _MM_HINT_T1);
      ++fetch;
    }
    const float* wr = panel + i * kPanel;
    // Unaligned loads: an artifact's panels need not lie on 64 bytes (aligned ones cost the same).
    const __m512 w0 = _mm512_loadu_ps(wr), w1 = _mm512_loadu_ps(wr + 16),
                 w2 = _mm512_loadu_ps(wr + 32), w3 = _mm512_loadu_ps(wr + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + i]);
      acc[r][0] = _mm512_fmadd_ps(av, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(av, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(av, w3, acc[r][3]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(c + r * ldc + j * 16, acc[r][j]);
}

// Rows of K in a chunk: a panel deeper than kPanelProductChunkDepth is computed in even chunks of
// its rows, C holding the sums between chunks.
int64_t chunkDepth(int64_t k) {
  const int64_t chunks = (k + kPanelProductChunkDepth - 1) / kPanelProductChunkDepth;
  return (k + chunks - 1) / chunks;
}

using RowsFn = void (*)(const float*, int64_t, int64_t, const float*, float*, int64_t, bool,
                        const float*, int64_t, int64_t, int64_t);
constexpr RowsFn kRows[kRowsPerPass + 1] = {nullptr, rows<1>, rows<2>, rows<3>,
                                            rows<4>, rows<5>, rows<6>};

class PanelProduct final : public LibraryKernel {
 public:
  bool kilnsOwn() const override { return true; }
  PanelProduct(Shape s, const float* panels, std::shared_ptr<const void> owner, bool prepacked,
               int threads)
      : s_(s), panels_(panels), owner_(std::move(owner)), prepacked_(prepacked), pool_(threads) {}

  Status run(void* const* buffers) const override {
    const float* a = static_cast<const float*>(buffers[0]);
    float* c = static_cast<float*>(buffers[2]);
    const int64_t count = s_.n / kPanel;
    const int64_t depth = chunkDepth(s_.k);
    const int64_t passes = (s_.m + kRowsPerPass - 1) / kRowsPerPass;
    // Each pass fetches its share of the next chunk's rows, spread over its steps.
    const int64_t share = (depth + passes - 1) / passes;
    const int64_t every = std::max<int64_t>(1, depth / std::max<int64_t>(share, 1));
    // Each thread takes one run of panels and fetches ahead within it.
    const int64_t threads = std::min<int64_t>(pool_.numThreads(), count);
    pool_.parallelFor(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
        for (int64_t p = begin; p < end; ++p)
          for (int64_t k0 = 0; k0 < s_.k; k0 += depth) {
            const int64_t kc = std::min(depth, s_.k - k0);
            const int64_t row = p * s_.k + k0;  // the chunk's first row among all panels' rows
            const float* chunk = panels_ + row * kPanel;
            // Rows past the thread's run are not fetched; one row leaves it to the hardware.
            const int64_t fetchEnd =
                fetches() ? std::min(kc, end * s_.k - row - kChunksAhead * depth) : 0;
            for (int64_t pass = 0, r = 0; r < s_.m; ++pass, r += kRowsPerPass) {
              const int rowsHere = int(std::min<int64_t>(kRowsPerPass, s_.m - r));
              kRows[rowsHere](a + r * s_.k + k0, s_.k, kc, chunk, c + r * s_.n + p * kPanel, s_.n,
                              k0 > 0,
                              fetchEnd > 0 ? chunk + kChunksAhead * depth * kPanel : nullptr,
                              pass * share, std::min(fetchEnd, (pass + 1) * share), every);
            }
          }
      }
    });
    return Status::ok();
  }

  std::string describe() const override {
    return "Kiln panel product (" + std::to_string(s_.m) + "x" + std::to_string(s_.k) + "x" +
           std::to_string(s_.n) + (s_.rhsTransposed ? ", rhs transposed" : "") +
           ", weights in panels of 64 columns computed in chunks of " +
           std::to_string(chunkDepth(s_.k)) + " rows" +
           (fetches() ? " fetched one chunk ahead" : " streamed by the hardware's prefetchers") +
           ", constant weights " + (prepacked_ ? "prepacked" : "packed") + ")";
  }

  bool holdsWeights() const override { return true; }

  std::optional<PackedWeights> packedWeights() const override {
    PackedWeights w;
    w.layout = layoutText(s_);
    w.bytes = std::string_view(reinterpret_cast<const char*>(panels_),
                               size_t(s_.k * s_.n) * sizeof(float));
    w.owner = owner_;
    return w;
  }

  static std::string layoutText(const Shape& s) {
    return "kiln panels of 64 columns, K " + std::to_string(s.k) + ", N " + std::to_string(s.n);
  }

 private:
  // Whether a pass fetches the next chunk: not for one row, whose single pass over the
  // weights the hardware's stream prefetcher keeps up with.
  bool fetches() const { return s_.m >= kPanelProductMinRows; }

  Shape s_;
  const float* panels_;
  std::shared_ptr<const void> owner_;
  bool prepacked_;
  ThreadPool pool_;
};

}  // namespace

bool panelProductTakes(int64_t m, int64_t k, int64_t n, int threads, std::string* why) {
  std::string reason = onednn::avx512() ? shapeRefusal(m, k, n) : "no AVX-512";
  if (reason.empty()) {
    const int64_t share = k * n * 4 / std::max(threads, 1);
    if (threads <= 1 || share >= kPanelProductMinWeightBytesPerThread) return true;
    reason = std::to_string(k * n * 4 / 1024) + " KiB of weights over " + std::to_string(threads) +
             " threads";
  }
  if (why) *why = reason;
  return false;
}

bool panelProductTakes(const Node& n, int threads, std::string* why) {
  std::string reason;
  std::optional<Shape> s = shapeOf(n, reason);
  if (s) return panelProductTakes(s->m, s->k, s->n, threads, why);
  if (why) *why = onednn::avx512() ? reason : "no AVX-512";
  return false;
}

StatusOr<std::unique_ptr<LibraryKernel>>
createPanelProduct(const Node& n, int threads, const PackedWeights* prepacked, bool probe) {
  std::string why;
  std::optional<Shape> s = shapeOf(n, why);
  if (!s || !onednn::avx512()) return Status::error("no panel product: " + why);
  const size_t bytes = size_t(s->k * s->n) * sizeof(float);
  const std::string layout = PanelProduct::layoutText(*s);
  if (probe) {
    PanelProduct k(*s, nullptr, nullptr, false, threads);
    return onednn::makeProbedKernel(k.describe());
  }
  if (prepacked && prepacked->layout == layout && prepacked->bytes.size() == bytes)
    return std::unique_ptr<LibraryKernel>(
        new PanelProduct(*s, reinterpret_cast<const float*>(prepacked->bytes.data()),
                         prepacked->owner, true, threads));
  const ConstantData& data = n.operand(1)->def()->constantData();
  if (!data.tensor.defined() || size_t(data.tensor.numElements()) * sizeof(float) != bytes)
    return Status::error("the weights are stored only in the layout " +
                         (prepacked ? prepacked->layout : std::string("(none)")) +
                         ", and the panel product packs them as " + layout);
  const float* w = reinterpret_cast<const float*>(data.tensor.bytes());
  std::shared_ptr<std::byte> owner = allocateLarge(bytes);
  float* panels = reinterpret_cast<float*>(owner.get());
  for (int64_t p = 0; p < s->n / kPanel; ++p)
    for (int64_t i = 0; i < s->k; ++i)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t col = p * kPanel + j;
        panels[(p * s->k + i) * kPanel + j] =
            s->rhsTransposed ? w[col * s->k + i] : w[i * s->n + col];
      }
  return std::unique_ptr<LibraryKernel>(new PanelProduct(*s, panels, owner, false, threads));
}

}  // namespace kiln::codegen::cpu
