// Kiln's 1x1 convolution (codegen/cpu/pointwise_conv_kernel.h) and the swish it computes in
// registers (codegen/cpu/avx512_conv.h): which calls it takes, its values against the
// reference interpreter with the post-ops applied in double, at 1 and 2 threads.
//
// Tolerances: swishPs against double, 5e-7 relative where |swish| >= 1e-30 (its e^-r polynomial
// is good to 2.1e-7, the reciprocal to 2^-28, and r is exact: 2.8e-7 measured), else 1e-30
// absolute (below x = -87 it returns 0). The kernel: 1e-5 of the largest value, f32 sums of up
// to 64 products of values in [-1, 1] in another order than the reference's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/avx512_conv.h"
#include "codegen/cpu/onednn.h"
#include "interp/interpreter.h"
#include "library_kernel_util.h"

namespace kiln::codegen::cpu {
namespace {

using kernel::PostOp;

bool avx512() { return __builtin_cpu_supports("avx512f"); }

KILN_AVX512 float swishOf(float x) {
  float out[16];
  _mm512_storeu_ps(out, swishPs(_mm512_set1_ps(x)));
  return out[0];
}

TEST(PointwiseConv, SwishAgainstDouble) {
  if (!avx512()) GTEST_SKIP() << "swishPs needs AVX-512";
  std::vector<float> xs{-1e30f, -100.f, -87.5f, -87.f, -60.f, -20.f, -3.f, -1.f, -1e-3f, -1e-30f,
                        0.f,    1e-30f, 1e-3f,  0.5f,  1.f,   3.f,   20.f, 79.f, 81.f,   1e30f};
  for (float x = -90.f; x <= 90.f; x += 0.0137f) xs.push_back(x);
  for (float x : xs) {
    const double want = double(x) / (1.0 + std::exp(-double(x)));
    const double got = swishOf(x);
    if (std::fabs(want) < 1e-30) EXPECT_LE(std::fabs(got), 1e-30) << x;
    else EXPECT_LE(std::fabs(got - want), 5e-7 * std::fabs(want)) << x << ": " << got;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(swishOf(inf), inf);
  EXPECT_EQ(swishOf(-inf), 0.f);  // sigmoid(-inf) = 0: the limit of x sigmoid(x)
  EXPECT_TRUE(std::isnan(swishOf(std::numeric_limits<float>::quiet_NaN())));
}

// A 1x1 convolution of x: f32[n, h, w, in] (nhwc) by a parameter w: f32[1, 1, in, out] (hwio),
// of `stride` and `pad` on every side.
OneOp conv(int64_t n, int64_t h, int64_t w, int64_t in, int64_t out, int64_t stride = 1,
           int64_t pad = 0) {
  auto dims = [](std::vector<int64_t> d) {
    std::string s = "f32[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  };
  const int64_t oh = (h + 2 * pad - 1) / stride + 1, ow = (w + 2 * pad - 1) / stride + 1;
  const std::string s = std::to_string(stride), p = std::to_string(pad);
  return parseOp(
      "%x: " + dims({n, h, w, in}) + ", %w: " + dims({1, 1, in, out}), dims({n, oh, ow, out}),
      "convolution(%x, %w) {window_strides = [" + s + ", " + s + "], padding_low = [" + p + ", " +
          p + "], padding_high = [" + p + ", " + p + "], dimension_numbers = \"b01f_01io->b01f\"}");
}

PostOp kind(PostOp::Kind k) {
  PostOp p;
  p.kind = k;
  return p;
}
PostOp operand(PostOp::Kind k, std::vector<int64_t> shape, std::vector<int64_t> dims) {
  PostOp p = kind(k);
  p.operandShape = std::move(shape);
  p.operandDims = std::move(dims);
  return p;
}

Tensor random(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(DType::F32, std::move(dims));
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, u(rng));
  return t;
}

std::string describe(const OneOp& c, const std::vector<PostOp>& ops) {
  auto k = createOneDnnKernel(*c.node, ops, 1);
  return k.isOk() ? (*k)->describe() : k.status().str();
}

// bias, swish, then a residual (whole) and a per-channel scale: Kiln's kernel against the
// reference with the post-ops in double. Shapes: pixel counts that leave partial tiles and work
// items, 1 to 9 vectors of output channels (column blocks of 6 and 3), batch 2, K from 3 to 64.
TEST(PointwiseConv, ValuesAgainstTheInterpreter) {
  if (!avx512()) GTEST_SKIP() << "Kiln's 1x1 kernel needs AVX-512";
  struct Case {
    int64_t n, h, w, in, out;
  };
  const std::vector<Case> cases = {{1, 13, 11, 16, 96},
                                   {1, 7, 7, 24, 144},
                                   {2, 5, 3, 3, 16},
                                   {1, 9, 10, 64, 32},
                                   {1, 1, 50, 40, 80}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    OneOp op = conv(c.n, c.h, c.w, c.in, c.out);
    ASSERT_NE(op.node, nullptr);
    const std::vector<int64_t> y{c.n, c.h, c.w, c.out};
    const std::vector<PostOp> ops{
        operand(PostOp::Kind::Add, {c.out}, {3}), kind(PostOp::Kind::Swish),
        operand(PostOp::Kind::Add, y, {0, 1, 2, 3}), operand(PostOp::Kind::Mul, {c.out}, {3})};
    const std::vector<Tensor> in{random({c.n, c.h, c.w, c.in}, rng),
                                 random({1, 1, c.in, c.out}, rng)};
    const Tensor bias = random({c.out}, rng), res = random(y, rng), scale = random({c.out}, rng);
    auto ref = evaluateNode(*op.node, in);
    ASSERT_TRUE(ref.isOk()) << ref.status().str();
    Tensor want = (*ref)[0];
    double largest = 0;
    for (int64_t i = 0; i < want.numElements(); ++i) {
      const double v = want.getDouble(i) + bias.getDouble(i % c.out);
      want.setDouble(i, (v / (1 + std::exp(-v)) + res.getDouble(i)) * scale.getDouble(i % c.out));
      largest = std::max(largest, std::fabs(want.getDouble(i)));
    }
    for (int threads : {1, 2}) {
      auto k = createOneDnnKernel(*op.node, ops, threads);
      ASSERT_TRUE(k.isOk()) << k.status().str();
      EXPECT_NE((*k)->describe().find("Kiln 1x1 convolution"), std::string::npos)
          << (*k)->describe();
      const Tensor got = runKernel(**k, *op.node, in, {bias, res, scale});
      double worst = 0;
      for (int64_t i = 0; i < got.numElements(); ++i)
        worst = std::max(worst, std::fabs(got.getDouble(i) - want.getDouble(i)));
      EXPECT_LE(worst, 1e-5 * largest) << c.in << " -> " << c.out << ", " << threads << " threads";
    }
  }
}

// oneDNN's kernel takes the calls Kiln's declines: no swish, weights whose column block overflows
// L1, output channels not a multiple of 16, a stride, a padding.
TEST(PointwiseConv, DeclinedCalls) {
  if (!avx512()) GTEST_SKIP() << "Kiln's 1x1 kernel needs AVX-512";
  const PostOp bias = operand(PostOp::Kind::Add, {96}, {3}), swish = kind(PostOp::Kind::Swish);
  EXPECT_NE(describe(conv(1, 8, 8, 16, 96), {bias, swish}).find("Kiln 1x1"), std::string::npos);
  EXPECT_NE(describe(conv(1, 8, 8, 16, 96), {bias}).find("oneDNN"), std::string::npos);
  EXPECT_NE(describe(conv(1, 8, 8, 96, 96), {bias, swish}).find("oneDNN"), std::string::npos);
  EXPECT_NE(describe(conv(1, 8, 8, 16, 40), {operand(PostOp::Kind::Add, {40}, {3}), swish})
                .find("oneDNN"),
            std::string::npos);
  EXPECT_NE(describe(conv(1, 8, 8, 16, 96, 2), {bias, swish}).find("oneDNN"), std::string::npos);
  EXPECT_NE(describe(conv(1, 8, 8, 16, 96, 1, 1), {bias, swish}).find("oneDNN"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen::cpu
