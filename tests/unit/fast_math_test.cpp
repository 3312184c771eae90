// The CPU backend's vectorizable f32 exp, sigmoid, tanh and erf (src/codegen/cpu/llvm_math.h)
// against libm in double rounded to f32 (what the interpreter computes), over dense sweeps and
// the special values. Bounds: exp within 2 ulp where the result is a normal float, within 2e-38
// absolute below that; erf within 5e-7 absolute; sigmoid within 3 ulp or 1e-37 absolute; tanh
// within 3 ulp; inf,
// NaN and signed zeros as libm gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/text/text.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kN = 200003;

// Runs `op` elementwise on `x` with the CPU backend.
std::vector<float> runOp(const std::string& op, const std::vector<float>& x) {
  std::string n = std::to_string(x.size());
  auto m = parseModule("func @main(%x: f32[" + n + "]) -> (f32[" + n + "]) {\n  %y = f32[" + n +
                           "] " + op + "(%x)\n  return %y\n}\n",
                       "fast_math.kir");
  EXPECT_TRUE(m.isOk());
  auto exe = Executable::compile(std::move(*m), CompileOptions{});
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  Tensor in(DType::F32, {static_cast<int64_t>(x.size())});
  std::memcpy(in.mutableBytes(), x.data(), x.size() * sizeof(float));
  auto out = (*exe)->run(std::vector<Tensor>{in});
  EXPECT_TRUE(out.isOk());
  const float* y = (*out)[0].data<float>();
  return std::vector<float>(y, y + x.size());
}

std::vector<float> sweep(double lo, double hi) {
  std::vector<float> x;
  for (int64_t i = 0; i < kN; ++i) x.push_back(static_cast<float>(lo + (hi - lo) * i / (kN - 1)));
  for (float s :
       {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e-30f,
        -1e-30f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})
    x.push_back(s);
  return x;
}

double ulps(float got, float want) {
  float up = std::nextafter(want, std::numeric_limits<float>::infinity());
  return std::abs(double(got) - double(want)) / (double(up) - double(want));
}

void expectSpecial(float got, float want, float x, const char* what) {
  if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << what << "(" << x << ")";
  else EXPECT_EQ(got, want) << what << "(" << x << ")";
}

// The largest ulp error of `op` over `x` against `ref` (double) rounded to f32, for normal
// results; results below FLT_MIN must be within `tiny` absolute, and special inputs or results
// (inf, NaN) must be exactly libm's.
double worstUlps(const char* op, const std::vector<float>& x, double (*ref)(double), double tiny) {
  std::vector<float> y = runOp(op, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float want = static_cast<float>(ref(double(x[i])));
    if (!std::isfinite(want) || !std::isfinite(x[i])) {
      expectSpecial(y[i], want, x[i], op);
    } else if (std::abs(want) >= std::numeric_limits<float>::min()) {
      worst = std::max(worst, ulps(y[i], want));
    } else {
      EXPECT_LE(std::abs(double(y[i]) - double(want)), tiny) << op << "(" << x[i] << ")";
    }
  }
  std::printf("%s: max %.2f ulp\n", op, worst);
  return worst;
}

TEST(FastMath, Exp) {
  EXPECT_LE(worstUlps(
                "exp", sweep(-110, 95), [](double v) { return std::exp(v); }, 2e-38),
            2.0);
}

TEST(FastMath, Erf) {
  std::vector<float> x = sweep(-6, 6);
  std::vector<float> y = runOp("erf", x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float want = static_cast<float>(std::erf(double(x[i])));
    if (std::isnan(x[i])) expectSpecial(y[i], want, x[i], "erf");
    else worst = std::max(worst, std::abs(double(y[i]) - double(want)));
  }
  EXPECT_LE(worst, 5e-7);
  std::printf("erf: max abs error %.3g\n", worst);
}

TEST(FastMath, Tanh) {
  EXPECT_LE(worstUlps(
                "tanh", sweep(-12, 12), [](double v) { return std::tanh(v); }, 1e-38),
            3.0);
  // Its odd part keeps tiny values and -0; its other part saturates exactly.
  std::vector<float> y = runOp("tanh", {-0.0f, 1e-30f, -1e-30f, 10.0f, -100.0f});
  EXPECT_TRUE(y[0] == 0.0f && std::signbit(y[0])) << "tanh(-0) = " << y[0];
  EXPECT_EQ(y[1], 1e-30f);
  EXPECT_EQ(y[2], -1e-30f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], -1.0f);
}

TEST(FastMath, Sigmoid) {
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  EXPECT_LE(worstUlps("sigmoid", sweep(-100, 100), sigmoid, 1e-37), 3.0);
}

}  // namespace
}  // namespace kiln::runtime
