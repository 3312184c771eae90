// Kiln's lstm and gru kernel for the CPU (rnn_kernel.h).
//
// Packed layout: per direction, ceil(H / 32) panels of [K][G*32] floats (G gates: 4 for the
// lstm, 3 for the gru). Column c of panel p is vector j = c / 16 (gate j / 2 in ONNX's order,
// i o f c or z r h; half j % 2) and lane c % 16: hidden unit 32p + 16 (j % 2) + c % 16. Units past
// H have zero weights and biases, so their states stay 0 (lstm: gates 0.5 and tanh(0); gru:
// h = (1 - z) tanh(0) + z 0), and they are never stored.
#include "codegen/cpu/rnn_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <immintrin.h>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/thread_pool.h"

namespace kiln::codegen::cpu {
namespace {

constexpr int64_t kLanes = 16;  // floats in a 512-bit register
constexpr int64_t kUnits = 32;  // hidden units per panel
// Rows per pass over a panel: 8 (lstm) or 6 (gru) accumulators per row, a broadcast per row and
// one weight register fit the 32 registers for up to 3 rows.
constexpr int kRows = 3;

#define KILN_AVX512 __attribute__((target("avx512f")))

struct RnnShape {
  bool lstm = true;
  int64_t gates = 4, steps = 0, batch = 0, input = 0, hidden = 0, dirs = 1, panels = 0;
  std::string direction;
  int64_t panelCols() const { return gates * kUnits; }
  int64_t cols() const { return panels * panelCols(); }  // packed gate columns per direction
};

StatusOr<RnnShape> rnnShape(const Node& n) {
  RnnShape s;
  s.lstm = n.op() == OpCode::Lstm;
  if (!s.lstm && n.op() != OpCode::Gru) return Status::error("not an lstm or gru");
  if (!s.lstm && !n.attrBool("linear_before_reset"))
    return Status::error("Kiln's gru kernel takes linear_before_reset (PyTorch's form) only");
  s.gates = s.lstm ? 4 : 3;
  if (n.numOperands() != (s.lstm ? 6u : 5u))
    return Status::error("expected x, w, r, b, h0 (and c0 for the lstm)");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> x, onednn::f32Dims(n.operand(0), "x"));
  for (size_t i = 1; i < n.numOperands(); ++i)
    KILN_RETURN_IF_ERROR(onednn::f32Dims(n.operand(i), "an operand").status());
  s.steps = x[0];
  s.batch = x[1];
  s.input = x[2];
  s.hidden = n.operand(2)->type().staticDims()[2];
  s.direction = n.attrEnum("direction");
  s.dirs = s.direction == "bidirectional" ? 2 : 1;
  s.panels = (s.hidden + kUnits - 1) / kUnits;
  for (size_t i = 1; i <= 3; ++i)
    KILN_RETURN_IF_ERROR(onednn::constantOperand(n, i, i == 1 ? "w" : i == 2 ? "r" : "b").status());
  return s;
}

// The ONNX row (gate g, unit h) that packed column c of panel p reads, or -1 past H.
int64_t packedRow(const RnnShape& s, int64_t p, int64_t c) {
  const int64_t j = c / kLanes, unit = p * kUnits + (j % 2) * kLanes + c % kLanes;
  return unit < s.hidden ? (j / 2) * s.hidden + unit : -1;
}

// Calls f(d, row, column) for every packed column (d * cols + column) with its ONNX row.
template <typename F>
void forEachColumn(const RnnShape& s, F f) {
  for (int64_t d = 0; d < s.dirs; ++d)
    for (int64_t p = 0; p < s.panels; ++p)
      for (int64_t c = 0; c < s.panelCols(); ++c)
        if (int64_t row = packedRow(s, p, c); row >= 0) f(d, row, p * s.panelCols() + c);
}

// r [D, G*H, H] as [D][panels][H][G*32], in a zeroed tensor: its data starts on a 64-byte
// boundary, so each 512-bit load of a panel row touches one cache line (from a std::vector's
// 16-byte boundary the recurrence streamed r from L2 at half the rate).
Tensor packRecurrent(const RnnShape& s, const Tensor& t) {
  const float* r = t.data<float>();
  const int64_t k = s.hidden, pc = s.panelCols();
  Tensor out(DType::F32, {s.dirs * s.cols() * k});
  forEachColumn(s, [&](int64_t d, int64_t row, int64_t col) {
    const float* src = r + (d * s.gates * s.hidden + row) * k;
    float* dst = out.mutableData<float>() + ((d * s.panels + col / pc) * k) * pc + col % pc;
    for (int64_t i = 0; i < k; ++i) dst[i * pc] = src[i];
  });
  return out;
}

// w [D, G*H, I] as the input projection's [I, D * cols] matrix, columns in packed order.
std::vector<float> projectionWeights(const RnnShape& s, const Tensor& t) {
  const float* w = t.data<float>();
  const int64_t n = s.dirs * s.cols();
  std::vector<float> out(static_cast<size_t>(s.input * n), 0.f);
  forEachColumn(s, [&](int64_t d, int64_t row, int64_t col) {
    const float* src = w + (d * s.gates * s.hidden + row) * s.input;
    float* dst = out.data() + d * s.cols() + col;
    for (int64_t i = 0; i < s.input; ++i) dst[i * n] = src[i];
  });
  return out;
}

// b [D, 2*G*H] (b_w then b_r) in [D][cols] packed column order: the projection's bias (b_w + b_r,
// but the gru candidate's b_r, which the reset gate scales) and, for the gru, the recurrent
// product's (the candidate's b_r, else 0).
std::vector<float> packBias(const RnnShape& s, const Tensor& t, bool recurrent) {
  const float* b = t.data<float>();
  std::vector<float> out(static_cast<size_t>(s.dirs * s.cols()), 0.f);
  forEachColumn(s, [&](int64_t d, int64_t row, int64_t col) {
    const float* bd = b + d * 2 * s.gates * s.hidden;
    const bool candidateOfGru = !s.lstm && row >= 2 * s.hidden;
    const float bw = bd[row], br = bd[s.gates * s.hidden + row];
    out[static_cast<size_t>(d * s.cols() + col)] =
        recurrent ? (candidateOfGru ? br : 0.f) : bw + (candidateOfGru ? 0.f : br);
  });
  return out;
}

// ---- AVX-512 code ----

KILN_AVX512 inline __m512 expPs(__m512 x) {
  // exp(x) = 2^n e^r, n = round(x / ln 2), |r| <= ln(2) / 2; e^r by its Taylor series to r^7
  // (relative error below 1e-8 there); ln 2 in two parts so that r is exact.
  x = _mm512_maskz_max_ps(0xFFFF, _mm512_maskz_min_ps(0xFFFF, x, _mm512_set1_ps(88.f)),
                          _mm512_set1_ps(-88.f));
  const __m512 n =
      _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040.f);
  for (float c : {1.f / 720.f, 1.f / 120.f, 1.f / 24.f, 1.f / 6.f, 0.5f, 1.f, 1.f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  return _mm512_maskz_scalef_ps(0xFFFF, p, n);
}

KILN_AVX512 inline __m512 sigmoidPs(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, expPs(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// tanh(x) = 2 sigmoid(2x) - 1 (absolute error ~1e-7 near 0, where tanh(x) ~ x).
KILN_AVX512 inline __m512 tanhPs(__m512 x) {
  return _mm512_fmsub_ps(_mm512_set1_ps(2.f), sigmoidPs(_mm512_add_ps(x, x)), _mm512_set1_ps(1.f));
}

// acc[r][j] += a row r (lda apart) times the panel of V vectors. The panel streams from L2
// once per step, read in order, which the hardware prefetchers follow: software prefetches
// took load slots and made the aligned recurrence 3-9% slower.
template <int R, int V>
KILN_AVX512 inline void panelProduct(const float* a, int64_t lda, int64_t k, const float* panel,
                                     __m512 (&acc)[R][V]) {
  for (int64_t i = 0; i < k; ++i) {
    __m512 av[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) av[r] = _mm512_set1_ps(a[r * lda + i]);
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) {
      const __m512 w = _mm512_loadu_ps(panel + i * V * kLanes + j * kLanes);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(av[r], w, acc[r][j]);
    }
  }
}

// The lanes of half u of a panel's `units` hidden units that exist (none: 0).
inline __mmask16 unitMask(int64_t units, int u) {
  const int64_t n = std::min<int64_t>(kLanes, units - u * kLanes);
  return n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}

// One step of R batch rows through one panel. hPrev: the rows' previous h (ldp apart; `off` the
// panel's first unit); xp: their input projections (ldx apart); c: their cell states (ldc apart,
// updated); h: where their new h goes (ldh apart); `units`: the panel's hidden units that exist.
struct StepRows {
  const float* hPrev;
  int64_t ldp, k;
  const float* panel;
  const float* xp;
  int64_t ldx, units, off;
  float* c;
  int64_t ldc;
  float* h;
  int64_t ldh;
  const float* recurrentBias;  // gru: the panel's recurrent bias (the candidate's b_r)
};

// lstm: gates = xp + h_prev r; c = f c + i g; h = o tanh(c).
template <int R>
KILN_AVX512 void lstmRows(const StepRows& a) {
  __m512 acc[R][8];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[r][j] = _mm512_loadu_ps(a.xp + r * a.ldx + j * kLanes);
  panelProduct<R, 8>(a.hPrev, a.ldp, a.k, a.panel, acc);
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      const __mmask16 m = unitMask(a.units, u);
      if (!m) continue;
      const __m512 i = sigmoidPs(acc[r][u]), o = sigmoidPs(acc[r][2 + u]);
      const __m512 f = sigmoidPs(acc[r][4 + u]), g = tanhPs(acc[r][6 + u]);
      float* cr = a.c + r * a.ldc + u * kLanes;
      const __m512 cv = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(m, cr), _mm512_mul_ps(i, g));
      _mm512_mask_storeu_ps(cr, m, cv);
      _mm512_mask_storeu_ps(a.h + r * a.ldh + u * kLanes, m, _mm512_mul_ps(o, tanhPs(cv)));
    }
}

// gru (linear_before_reset): z, r = sigmoid(xp + h_prev r_zr); n = tanh(xp_n + r (h_prev r_n +
// b_rn)); h = (1 - z) n + z h_prev.
template <int R>
KILN_AVX512 void gruRows(const StepRows& a) {
  __m512 acc[R][6];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_loadu_ps(a.xp + r * a.ldx + j * kLanes);
    acc[r][4] = _mm512_loadu_ps(a.recurrentBias + 4 * kLanes);
    acc[r][5] = _mm512_loadu_ps(a.recurrentBias + 5 * kLanes);
  }
  panelProduct<R, 6>(a.hPrev, a.ldp, a.k, a.panel, acc);
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      const __mmask16 m = unitMask(a.units, u);
      if (!m) continue;
      const __m512 z = sigmoidPs(acc[r][u]), reset = sigmoidPs(acc[r][2 + u]);
      const __m512 xn = _mm512_loadu_ps(a.xp + r * a.ldx + (4 + u) * kLanes);
      const __m512 n = tanhPs(_mm512_fmadd_ps(reset, acc[r][4 + u], xn));
      const __m512 prev = _mm512_maskz_loadu_ps(m, a.hPrev + r * a.ldp + a.off + u * kLanes);
      _mm512_mask_storeu_ps(a.h + r * a.ldh + u * kLanes, m,
                            _mm512_fmadd_ps(z, _mm512_sub_ps(prev, n), n));
    }
}

// ---- the kernel ----

using onednn::memory;

// The input projection of every step and direction: xp [S*B, D*cols] = x [S*B, I] w + bias, one
// oneDNN matrix product on weights it packed once.
class Projection {
 public:
  Projection(const RnnShape& s, const std::vector<float>& w, const std::vector<float>& bias) {
    const dnnl::engine& eng = onednn::cpuEngine();
    const int64_t m = s.steps * s.batch, n = s.dirs * s.cols();
    auto md = [](onednn::Dims d, memory::format_tag t) {
      return memory::desc(d, memory::data_type::f32, t);
    };
    src_ = md({m, s.input}, memory::format_tag::ab);
    dst_ = md({m, n}, memory::format_tag::ab);
    const memory::desc plain = md({s.input, n}, memory::format_tag::ab);
    const memory::desc biasMd = md({1, n}, memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(src_, md({s.input, n}, memory::format_tag::any), biasMd, dst_), attr,
        eng);
    prim_ = dnnl::matmul(pd);
    scratch_ = pd.scratchpad_desc();
    weights_ = memory(pd.weights_desc(), eng);
    memory from(plain, eng, const_cast<float*>(w.data()));
    dnnl::stream& stream = onednn::threadStream();
    dnnl::reorder(from, weights_).execute(stream, from, weights_);
    stream.wait();
    bias_ = memory(biasMd, eng);
    std::memcpy(bias_.get_data_handle(), bias.data(), bias.size() * sizeof(float));
    impl_ = pd.impl_info_str();
  }

  // Bytes of oneDNN's scratchpad, which run() takes at `scratch`.
  size_t scratchBytes() const { return scratch_.get_size(); }
  void run(const float* x, float* xp, void* scratchpad, int threads) const {
    onednn::OmpThreadsScope scope(threads);
    const dnnl::engine& eng = onednn::cpuEngine();
    memory scratch(scratch_, eng, scratchpad);
    dnnl::stream& stream = onednn::threadStream();
    prim_.execute(stream, {{DNNL_ARG_SRC, memory(src_, eng, const_cast<float*>(x))},
                           {DNNL_ARG_WEIGHTS, weights_},
                           {DNNL_ARG_BIAS, bias_},
                           {DNNL_ARG_DST, memory(dst_, eng, xp)},
                           {DNNL_ARG_SCRATCHPAD, scratch}});
    stream.wait();
  }
  const std::string& impl() const { return impl_; }

 private:
  memory::desc src_, dst_, scratch_;
  memory weights_, bias_;
  dnnl::primitive prim_;
  std::string impl_;
};

class RnnKernel final : public LibraryKernel {
 public:
  bool kilnsOwn() const override { return true; }
  RnnKernel(RnnShape s, const std::vector<float>& w, Tensor r, const std::vector<float>& bias,
            std::vector<float> recurrentBias, int threads, std::string description)
      : s_(std::move(s)), projection_(s_, w, bias), r_(std::move(r)),
        recurrentBias_(std::move(recurrentBias)), threads_(threads), pool_(threads),
        description_(std::move(description) + ", projection " + projection_.impl() + ")") {}

  // buffers: x, w, r, b, h0, (c0), y, y_h, (y_c).
  Status run(void* const* buffers) const override {
    const size_t out = s_.lstm ? 6 : 5;
    const auto* x = static_cast<const float*>(buffers[0]);
    const auto* h0 = static_cast<const float*>(buffers[4]);
    const auto* c0 = s_.lstm ? static_cast<const float*>(buffers[5]) : nullptr;
    auto* y = static_cast<float*>(buffers[out]);
    auto* yh = static_cast<float*>(buffers[out + 1]);
    auto* yc = s_.lstm ? static_cast<float*>(buffers[out + 2]) : nullptr;
    const int64_t rows = s_.steps * s_.batch, ldx = s_.dirs * s_.cols();
    // One scratch region: the projections, then oneDNN's scratchpad.
    const size_t xpBytes = (static_cast<size_t>(rows * ldx) * sizeof(float) + 63) / 64 * 64;
    std::byte* scratch = onednn::threadScratch(xpBytes + projection_.scratchBytes());
    auto* xp = reinterpret_cast<float*>(scratch);
    try {
      projection_.run(x, xp, scratch + xpBytes, threads_);
    } catch (const dnnl::error& e) {
      return Status::error(description_ + ": oneDNN error in the input projection: " + e.what());
    }
    // Two directions on two threads; otherwise each step's panels split over the threads.
    if (s_.dirs == 2 && pool_.numThreads() >= 2) {
      pool_.parallelFor(2, [&](int64_t begin, int64_t end) {
        for (int64_t d = begin; d < end; ++d) direction(d, xp, h0, c0, y, yh, yc, false);
      });
    } else {
      for (int64_t d = 0; d < s_.dirs; ++d) direction(d, xp, h0, c0, y, yh, yc, true);
    }
    return Status::ok();
  }
  std::string describe() const override { return description_; }

 private:
  // Direction d over all steps, on this thread or (shareSteps) on the pool's.
  void direction(int64_t d, const float* xp, const float* h0, const float* c0, float* y, float* yh,
                 float* yc, bool shareSteps) const {
    const int64_t B = s_.batch, H = s_.hidden, units = s_.panels * kUnits;
    const int64_t ldy = s_.dirs * H, ldx = s_.dirs * s_.cols();
    const bool reverse = s_.direction == "reverse" || d == 1;
    std::vector<float> c(static_cast<size_t>(c0 ? B * units : 0), 0.f);
    for (int64_t b = 0; c0 && b < B; ++b)
      std::memcpy(c.data() + b * units, c0 + (d * B + b) * H, static_cast<size_t>(H) * 4);
    // Step i (in processing order) for panel p.
    auto order = [&](int64_t i) { return reverse ? s_.steps - 1 - i : i; };
    auto stepAt = [&](int64_t i, int64_t p) {
      const int64_t t = order(i), prev = i == 0 ? -1 : order(i - 1);
      const float* hPrev = prev < 0 ? h0 + d * B * H : y + prev * B * ldy + d * H;
      step(d, p, hPrev, prev < 0 ? H : ldy, xp + t * B * ldx + d * s_.cols(),
           c0 ? c.data() : nullptr, y + t * B * ldy + d * H);
    };
    if (shareSteps && pool_.numThreads() > 1 && s_.panels > 1) {
      stepsOnTeam(stepAt);
    } else {
      for (int64_t i = 0; i < s_.steps; ++i)
        for (int64_t p = 0; p < s_.panels; ++p) stepAt(i, p);
    }
    const int64_t last = order(s_.steps - 1);
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(yh + (d * B + b) * H, y + last * B * ldy + b * ldy + d * H,
                  static_cast<size_t>(H) * 4);
      if (yc) std::memcpy(yc + (d * B + b) * H, c.data() + b * units, static_cast<size_t>(H) * 4);
    }
  }

  // Runs stepAt(i, p) for every step i, in order, and panel p on the pool's threads, in one
  // parallel region: each thread claims its own share of the panels first (their r stays in its
  // core's cache from step to step), then any still unclaimed, then waits until the step is
  // done. A thread waits only for panels that a running thread claimed, so a team of fewer
  // threads (a nested region runs on one) still finishes.
  void stepsOnTeam(const std::function<void(int64_t, int64_t)>& stepAt) const {
    const int64_t P = s_.panels, T = pool_.numThreads();
    std::vector<std::atomic<int64_t>> claimed(static_cast<size_t>(P));  // next step to claim
    std::atomic<int64_t> done{0}, joined{0};                            // panel-steps done
    pool_.parallelFor(T, [&](int64_t, int64_t) {
      const int64_t me = joined.fetch_add(1) % T, lo = P * me / T, hi = P * (me + 1) / T;
      for (int64_t i = done.load(std::memory_order_acquire) / P; i < s_.steps; ++i) {
        auto take = [&](int64_t p) {
          int64_t expected = i;
          if (!claimed[static_cast<size_t>(p)].compare_exchange_strong(expected, i + 1,
                                                                       std::memory_order_acq_rel))
            return;
          stepAt(i, p);
          done.fetch_add(1, std::memory_order_release);
        };
        for (int64_t p = lo; p < hi; ++p) take(p);
        for (int64_t p = 0; p < P; ++p) take(p);
        while (done.load(std::memory_order_acquire) < (i + 1) * P) _mm_pause();
      }
    });
  }

  // Panel p of one step for every batch row: xp, c and h at the step's first row.
  void step(int64_t d, int64_t p, const float* hPrev, int64_t ldp, const float* xp, float* c,
            float* h) const {
    const int64_t B = s_.batch, H = s_.hidden, units = s_.panels * kUnits, pc = s_.panelCols();
    const int64_t ldy = s_.dirs * H, ldx = s_.dirs * s_.cols(), off = p * kUnits;
    StepRows a{hPrev,
               ldp,
               H,
               r_.data<float>() + (d * s_.panels + p) * H * pc,
               xp + p * pc,
               ldx,
               std::min(kUnits, H - off),
               off,
               c ? c + off : nullptr,
               units,
               h + off,
               ldy,
               s_.lstm ? nullptr : recurrentBias_.data() + d * s_.cols() + p * pc};
    auto rows = [&](auto fn, int64_t b) {
      StepRows at = a;
      at.hPrev += b * ldp;
      at.xp += b * ldx;
      if (at.c) at.c += b * units;
      at.h += b * ldy;
      fn(at);
    };
    int64_t b = 0;
    for (; b + kRows <= B; b += kRows) rows(s_.lstm ? lstmRows<kRows> : gruRows<kRows>, b);
    for (; b < B; ++b) rows(s_.lstm ? lstmRows<1> : gruRows<1>, b);
  }

  RnnShape s_;
  Projection projection_;
  Tensor r_;                          // packed
  std::vector<float> recurrentBias_;  // gru: packed, the candidate's b_r
  int threads_;
  ThreadPool pool_;
  std::string description_;
};

}  // namespace

bool rnnKernelRuns() { return __builtin_cpu_supports("avx512f"); }

StatusOr<std::unique_ptr<LibraryKernel>> createRnnKernel(const Node& n, int threads, bool probe) {
  if (!rnnKernelRuns()) return Status::error("Kiln's recurrence kernel needs AVX-512F");
  KILN_ASSIGN_OR_RETURN(RnnShape s, rnnShape(n));
  const std::string description =
      std::string("Kiln ") + (s.lstm ? "lstm" : "gru") + " (" + s.direction + ", " +
      std::to_string(s.steps) + " steps, batch " + std::to_string(s.batch) + ", hidden " +
      std::to_string(s.hidden) +
      ": input projection of all steps as one product, each step r's product with the gates "
      "in registers, r packed once in " +
      std::to_string(s.panels) + " panels of 32 units";
  if (probe) return onednn::makeProbedKernel(description + ")");
  KILN_ASSIGN_OR_RETURN(const Tensor* w, onednn::constantOperand(n, 1, "w"));
  KILN_ASSIGN_OR_RETURN(const Tensor* r, onednn::constantOperand(n, 2, "r"));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, onednn::constantOperand(n, 3, "b"));
  return std::unique_ptr<LibraryKernel>(std::make_unique<RnnKernel>(
      s, projectionWeights(s, *w), packRecurrent(s, *r), packBias(s, *b, false),
      s.lstm ? std::vector<float>{} : packBias(s, *b, true), threads, description));
}

}  // namespace kiln::codegen::cpu
