// The cuda target's f32 erf (kiln_erf in cuda_prelude.h, the CPU's rational form) against libm
// in double rounded to f32, over a dense sweep and the special values, on the GPU. Bound: 1e-6
// absolute (the approximation's 4.2e-7, measured on the CPU by fast_math_test.cpp, plus the
// approximate reciprocal's 1 ulp of a quotient below 1), +-inf included; NaN stays NaN and zeros
// keep their sign.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cuda_test_util.h"
#include "ir/text/text.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

TEST(CudaDevice, ErfWithinAMillionthOfLibm) {
  KILN_REQUIRE_GPU();
  constexpr int64_t kN = 200003;
  std::vector<float> x;
  for (int64_t i = 0; i < kN; ++i) x.push_back(static_cast<float>(-6.0 + 12.0 * i / (kN - 1)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})
    x.push_back(s);
  const std::string n = std::to_string(x.size());
  auto m = parseModule("func @main(%x: f32[" + n + "]) -> (f32[" + n + "]) {\n  %y = f32[" + n +
                           "] erf(%x)\n  return %y\n}\n",
                       "erf.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  CompileOptions o;
  o.backend = "cuda";
  auto exe = Executable::compile(std::move(*m), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  Tensor in(DType::F32, {static_cast<int64_t>(x.size())});
  std::memcpy(in.mutableBytes(), x.data(), x.size() * sizeof(float));
  auto out = (*exe)->run(std::vector<Tensor>{in});
  ASSERT_TRUE(out.isOk()) << out.status().str();
  const float* y = (*out)[0].data<float>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::erf(double(x[i])));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << "erf(NaN) = " << y[i];
    } else {
      if (x[i] == 0.0f) {
        EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "erf(" << x[i] << ") = " << y[i];
      }
      worst = std::max(worst, std::abs(double(y[i]) - double(want)));
    }
  }
  EXPECT_LE(worst, 1e-6);
  std::printf("erf on the GPU: max abs error %.3g\n", worst);
}

}  // namespace
}  // namespace kiln::runtime
