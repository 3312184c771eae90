// oneDNN library kernels (src/codegen/cpu/onednn.h) against the reference kernels
// (kiln::evaluateNode) on random inputs: dot_general as matmul (2-D, batched, broadcast rhs,
// transposed operands, merged free dims), convolution (1-D and 2-D, NCHW, NHWC and an unusual
// dimension_numbers permutation, 1x1, strides with asymmetric padding, dilation, grouped,
// depthwise, constant weights; groups of 2 and 4 channels on Kiln's grouped kernel), the cases
// that must be refused, and one kernel run from two threads at once.
//
// Tolerance: |oneDNN - reference| <= 1e-4 * max(1, max |reference|). The reference sums in
// double and rounds once; oneDNN sums in f32, in an order of its own (blocked over K, split
// over threads) and with FMA, so each of up to ~600 terms of magnitude <= ~4 can carry a
// rounding error of about 2^-24 relative to the running sum.
//
// DISABLED_Timings is a measurement, not a test (run it with --gtest_also_run_disabled_tests;
// see docs/codegen.md, "Library kernels (oneDNN)").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "codegen/cpu/onednn_internal.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "library_kernel_util.h"

namespace kiln::codegen::cpu {
namespace {

Tensor randomTensor(const TensorType& t, std::mt19937& rng) {
  Tensor x(t.dtype(), t.staticDims());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, u(rng));
  return x;
}

// Operand values: random for parameters, the data of constants.
std::vector<Tensor> operandValues(const Node& n, std::mt19937& rng) {
  std::vector<Tensor> ops;
  for (const Value* v : n.operands()) {
    if (v->def()->op() == OpCode::Constant) ops.push_back(v->def()->constantData().tensor);
    else ops.push_back(randomTensor(v->type(), rng));
  }
  return ops;
}

// Largest |got - want| divided by max(1, max |want|).
double relativeError(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.type(), want.type());
  double scale = 1, err = 0;
  for (int64_t i = 0; i < want.numElements(); ++i)
    scale = std::max(scale, std::abs(want.getDouble(i)));
  for (int64_t i = 0; i < want.numElements(); ++i)
    err = std::max(err, std::abs(got.getDouble(i) - want.getDouble(i)));
  return err / scale;
}

// Creates the oneDNN kernel of the op and compares it with evaluateNode, with 1 and 2 threads.
// Returns the kernel's description (of the last thread count).
std::string checkOp(const std::string& params, const std::string& result, const std::string& body,
                    const std::string& prelude = "") {
  OneOp op = parseOp(params, result, body, prelude);
  if (!op.node) return "";
  std::string description;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(body + " with " + std::to_string(threads) + " threads");
    auto k = createOneDnnKernel(*op.node, {}, threads);
    EXPECT_TRUE(k.isOk()) << k.status().str();
    if (!k) return "";
    description = (*k)->describe();
    std::mt19937 rng(1234 + static_cast<unsigned>(threads));
    std::vector<Tensor> ops = operandValues(*op.node, rng);
    auto want = evaluateNode(*op.node, ops);
    EXPECT_TRUE(want.isOk()) << want.status().str();
    if (!want) return "";
    Tensor got = runKernel(**k, *op.node, ops);
    EXPECT_LE(relativeError(got, (*want)[0]), 1e-4) << description;
  }
  return description;
}

// The error createOneDnnKernel gives (and a test failure if it gives a kernel).
std::string refusal(const std::string& params, const std::string& result, const std::string& body) {
  OneOp op = parseOp(params, result, body);
  if (!op.node) return "";
  auto k = createOneDnnKernel(*op.node, {}, 1);
  EXPECT_FALSE(k.isOk()) << "expected no kernel for " << body << ", got " << (*k)->describe();
  return k.isOk() ? "" : k.status().message();
}

// An add or mul post-op of an operand of `shape` along the result's `dims`.
kernel::PostOp binaryPostOp(kernel::PostOp::Kind kind, std::vector<int64_t> shape,
                            std::vector<int64_t> dims) {
  kernel::PostOp p;
  p.kind = kind;
  p.operandShape = std::move(shape);
  p.operandDims = std::move(dims);
  return p;
}

kernel::PostOp reluPostOp() {
  kernel::PostOp p;
  p.kind = kernel::PostOp::Kind::Clamp;
  p.hi = std::numeric_limits<double>::infinity();
  return p;
}

// "[v0, v1, ...]" with values that are exact in f32 and in decimal (multiples of 1/16).
std::string literal(int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-16, 16);
  std::string s = "[";
  char buf[32];
  for (int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? ", " : "", u(rng) / 16.0);
    s += buf;
  }
  return s + "]";
}

const char* kMatmul = "dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}";

// A 3x3 convolution of stride 1, padding 1, 64 -> 64 channels over an h x w image (nhwc, hwio),
// with constant weights from `rng`.
OneOp conv3x3(int64_t h, int64_t w, std::mt19937& rng) {
  const std::string image = "f32[1," + std::to_string(h) + "," + std::to_string(w) + ",64]";
  return parseOp("%x: " + image, image,
                 "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
                 "dimension_numbers = \"b01f_01io->b01f\"}",
                 "  %w = f32[3,3,64,64] constant() {value = " + literal(3 * 3 * 64 * 64, rng) +
                     "}\n");
}

TEST(OneDnn, Matmul2D) {
  checkOp("%a: f32[1,1], %b: f32[1,1]", "f32[1,1]", kMatmul);
  checkOp("%a: f32[7,13], %b: f32[13,5]", "f32[7,5]", kMatmul);
  std::string d = checkOp("%a: f32[64,128], %b: f32[128,96]", "f32[64,96]", kMatmul);
  EXPECT_NE(d.find("oneDNN matmul (64x128x96"), std::string::npos) << d;
}

TEST(OneDnn, MatmulBatched) {
  std::string d =
      checkOp("%a: f32[4,7,13], %b: f32[4,13,5]", "f32[4,7,5]",
              "dot_general(%a, %b) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], "
              "rhs_contracting = [1]}");
  EXPECT_NE(d.find("batch 4, 7x13x5"), std::string::npos) << d;
  checkOp("%a: f32[2,3,7,13], %b: f32[2,3,13,5]", "f32[2,3,7,5]",
          "dot_general(%a, %b) {lhs_batch = [0, 1], rhs_batch = [0, 1], lhs_contracting = [3], "
          "rhs_contracting = [2]}");
  // Attention scores: q x k^T per (batch, head).
  d = checkOp("%a: f32[2,4,8,16], %b: f32[2,4,10,16]", "f32[2,4,8,10]",
              "dot_general(%a, %b) {lhs_batch = [0, 1], rhs_batch = [0, 1], "
              "lhs_contracting = [3], rhs_contracting = [3]}");
  EXPECT_NE(d.find("rhs transposed"), std::string::npos) << d;
}

TEST(OneDnn, MatmulBroadcastRhs) {
  // A projection: [batch, seq, K] x [K, N]; the lhs free dims merge into one M.
  std::string d = checkOp("%a: f32[2,3,7,13], %b: f32[13,5]", "f32[2,3,7,5]",
                          "dot_general(%a, %b) {lhs_contracting = [3], rhs_contracting = [0]}");
  EXPECT_NE(d.find("(42x13x5"), std::string::npos) << d;
  // lhs free dims that do not merge (the contracting dim sits between them): the outer one is
  // a batch dim the rhs is broadcast over.
  d = checkOp("%a: f32[3,13,7], %b: f32[13,5]", "f32[3,7,5]",
              "dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}");
  EXPECT_NE(d.find("batch 3, 7x13x5, lhs transposed"), std::string::npos) << d;
  // Two rhs free dims merge into one N.
  checkOp("%a: f32[7,13], %b: f32[13,2,3]", "f32[7,2,3]",
          "dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}");
}

TEST(OneDnn, MatmulTransposed) {
  std::string d = checkOp("%a: f32[7,13], %b: f32[5,13]", "f32[7,5]",
                          "dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [1]}");
  EXPECT_NE(d.find("rhs transposed"), std::string::npos) << d;
  d = checkOp("%a: f32[13,7], %b: f32[13,5]", "f32[7,5]",
              "dot_general(%a, %b) {lhs_contracting = [0], rhs_contracting = [0]}");
  EXPECT_NE(d.find("lhs transposed"), std::string::npos) << d;
  checkOp("%a: f32[13,7], %b: f32[5,13]", "f32[7,5]",
          "dot_general(%a, %b) {lhs_contracting = [0], rhs_contracting = [1]}");
}

TEST(OneDnn, MatmulConstantWeights) {
  std::mt19937 rng(7);
  std::string d = checkOp("%a: f32[9,24]", "f32[9,20]",
                          "dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}",
                          "  %w = f32[24,20] constant() {value = " + literal(24 * 20, rng) + "}\n");
  EXPECT_NE(d.find("constant weights"), std::string::npos) << d;
  // Without AVX-512, rows of 20 are padded to a cache line (32 floats); rows of 256 floats, a
  // multiple of 512 bytes, by one more line. With it, oneDNN packs them in a layout of its own.
  const bool padded = !oneDnnAvx512();
  EXPECT_EQ(d.find("weight rows padded to 32,") != std::string::npos, padded) << d;
  d = checkOp("%a: f32[5,16]", "f32[5,256]",
              "dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}",
              "  %w = f32[16,256] constant() {value = " + literal(16 * 256, rng) + "}\n");
  EXPECT_EQ(d.find("weight rows padded to 272,") != std::string::npos, padded) << d;
  EXPECT_EQ(d.find("weight rows padded"), d.find("weight rows padded to 272,")) << d;
  EXPECT_NE(d.find("constant weights reordered"), std::string::npos) << d;
}

TEST(OneDnn, ConvolutionLayouts) {
  std::string d = checkOp("%x: f32[2,3,8,8], %k: f32[4,3,3,3]", "f32[2,4,8,8]",
                          "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1]}");
  EXPECT_NE(d.find("oneDNN convolution (nchw, oihw -> nchw, 3x3"), std::string::npos) << d;
  d = checkOp("%x: f32[2,8,8,3], %k: f32[3,3,3,4]", "f32[2,8,8,4]",
              "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
              "dimension_numbers = \"b01f_01io->b01f\"}");
  EXPECT_NE(d.find("(nhwc, hwio -> nhwc, 3x3"), std::string::npos) << d;
  // Every operand in an unusual order: oneDNN has only its reference implementation there, so
  // there is no kernel (the CPU target runs Kiln's loops, choose_library_calls.h).
  OneOp odd = parseOp("%x: f32[3,2,6,7], %k: f32[4,3,2,3]", "f32[5,8,2,4]",
                      "convolution(%x, %k) {padding_low = [0, 1], padding_high = [1, 1], "
                      "dimension_numbers = \"fb01_o01i->01bf\"}");
  ASSERT_TRUE(odd.node);
  auto refused = createOneDnnKernel(*odd.node, {}, 1);
  ASSERT_FALSE(refused.isOk()) << (*refused)->describe();
  EXPECT_NE(refused.status().message().find("reference implementation (ref:any) for convolution "
                                            "(cnhw, ohwi -> hwnc, 3x2"),
            std::string::npos)
      << refused.status().str();
  // 1-D.
  checkOp("%x: f32[2,3,10], %k: f32[4,3,3]", "f32[2,4,8]", "convolution(%x, %k)");
}

TEST(OneDnn, ConvolutionWindows) {
  checkOp("%x: f32[1,16,5,5], %k: f32[8,16,1,1]", "f32[1,8,5,5]", "convolution(%x, %k)");
  // Output extents: H (9 + 0 + 1 - 3) / 2 + 1 = 4, W (10 + 1 + 2 - 3) / 2 + 1 = 6.
  std::string d = checkOp("%x: f32[1,4,9,10], %k: f32[6,4,3,3]", "f32[1,6,4,6]",
                          "convolution(%x, %k) {window_strides = [2, 2], padding_low = [0, 1], "
                          "padding_high = [1, 2]}");
  EXPECT_NE(d.find("stride 2x2"), std::string::npos) << d;
  // Dilated kernel extent 5: output 10 - 5 + 1 = 6.
  d = checkOp("%x: f32[1,3,10,10], %k: f32[5,3,3,3]", "f32[1,5,6,6]",
              "convolution(%x, %k) {rhs_dilation = [2, 2]}");
  EXPECT_NE(d.find("dilation 2x2"), std::string::npos) << d;
}

TEST(OneDnn, ConvolutionGroups) {
  std::string d = checkOp("%x: f32[1,8,6,6], %k: f32[6,4,3,3]", "f32[1,6,6,6]",
                          "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
                          "feature_group_count = 2}");
  EXPECT_NE(d.find("groups 2"), std::string::npos) << d;
  d = checkOp("%x: f32[2,7,7,8], %k: f32[3,3,1,8]", "f32[2,7,7,8]",
              "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
              "feature_group_count = 8, dimension_numbers = \"b01f_01io->b01f\"}");
  EXPECT_NE(d.find("groups 8"), std::string::npos) << d;
  // Depthwise on nhwc with constant weights: of stride 1, oneDNN's jit_dw kernel where it has an
  // AVX-512 one (measured faster than its first choice, brdgmm_dw); of stride 2, oneDNN's first
  // choice. Both checked against the interpreter.
  std::mt19937 rng(5);
  const std::string weights =
      "  %w = f32[3,3,1,32] constant() {value = " + literal(3 * 3 * 32, rng) + "}\n";
  d = checkOp("%x: f32[1,14,14,32]", "f32[1,14,14,32]",
              "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
              "feature_group_count = 32, dimension_numbers = \"b01f_01io->b01f\"}",
              weights);
  EXPECT_EQ(d.find("jit_dw:avx512") != std::string::npos, oneDnnAvx512()) << d;
  d = checkOp("%x: f32[1,14,14,32]", "f32[1,7,7,32]",
              "convolution(%x, %w) {window_strides = [2, 2], padding_low = [1, 1], "
              "padding_high = [1, 1], feature_group_count = 32, "
              "dimension_numbers = \"b01f_01io->b01f\"}",
              weights);
  EXPECT_NE(d.find("groups 32"), std::string::npos) << d;
  EXPECT_EQ(d.find("jit_dw:avx512"), std::string::npos) << d;
}

// Groups of 2 and 4 channels on nhwc run on Kiln's grouped kernel (grouped_conv_kernel.h) where
// the CPU has AVX-512: windows 3 wide at stride 1 (its shared-shuffle path, with rows of more and
// fewer than eight interior pixels), stride 2, dilation, asymmetric padding, 1x1 and 5x3
// windows, batch 2; checked against the interpreter at 1 and 2 threads (checkOp). Groups of 8
// and 16 stay on oneDNN.
TEST(OneDnn, GroupsOfTwoAndFourOnKilnsKernel) {
  struct Case {
    std::string x, k, y, attrs;
  };
  const std::string nhwc = "dimension_numbers = \"b01f_01io->b01f\"";
  const std::vector<Case> cases = {
      {"f32[1,19,19,32]", "f32[3,3,4,32]", "f32[1,19,19,32]",
       "padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 8"},
      {"f32[2,7,5,16]", "f32[3,3,2,16]", "f32[2,7,5,16]",
       "padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 8"},
      {"f32[1,13,13,32]", "f32[3,3,4,32]", "f32[1,7,7,32]",
       "window_strides = [2, 2], padding_low = [1, 1], padding_high = [1, 1], "
       "feature_group_count = 8"},
      {"f32[1,12,11,16]", "f32[3,3,4,16]", "f32[1,9,8,16]",
       "padding_low = [0, 1], padding_high = [1, 0], rhs_dilation = [2, 2], "
       "feature_group_count = 4"},
      {"f32[1,6,9,32]", "f32[1,1,2,32]", "f32[1,6,9,32]", "feature_group_count = 16"},
      {"f32[1,9,12,16]", "f32[5,3,4,16]", "f32[1,9,12,16]",
       "padding_low = [2, 1], padding_high = [2, 1], feature_group_count = 4"},
  };
  for (const Case& c : cases) {
    std::string d = checkOp("%x: " + c.x + ", %k: " + c.k, c.y,
                            "convolution(%x, %k) {" + c.attrs + ", " + nhwc + "}");
    EXPECT_EQ(d.find("Kiln grouped convolution") != std::string::npos, oneDnnAvx512()) << d;
  }
  for (const std::string width : {"8", "16"}) {
    const std::string groups = width == "8" ? "4" : "2";
    std::string d = checkOp("%x: f32[1,9,9,32], %k: f32[3,3," + width + ",32]", "f32[1,9,9,32]",
                            "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
                            "feature_group_count = " +
                                groups + ", " + nhwc + "}");
    EXPECT_NE(d.find("oneDNN"), std::string::npos) << d;
  }
}

// Kiln's grouped kernel applies a bias, a residual, a per-channel scale and a relu in order.
TEST(OneDnn, GroupedKernelPostOps) {
  if (!oneDnnAvx512()) GTEST_SKIP() << "Kiln's grouped kernel needs AVX-512";
  using kernel::PostOp;
  const PostOp relu = reluPostOp();
  OneOp conv = parseOp("%x: f32[1,10,11,32], %w: f32[3,3,4,32]", "f32[1,10,11,32]",
                       "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
                       "feature_group_count = 8, dimension_numbers = \"b01f_01io->b01f\"}");
  ASSERT_NE(conv.node, nullptr);
  std::vector<PostOp> ops{binaryPostOp(PostOp::Kind::Add, {32}, {3}),
                          binaryPostOp(PostOp::Kind::Add, {1, 10, 11, 32}, {0, 1, 2, 3}),
                          binaryPostOp(PostOp::Kind::Mul, {32}, {3}), relu};
  auto k = createOneDnnKernel(*conv.node, ops, 2);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  EXPECT_NE((*k)->describe().find("Kiln grouped convolution"), std::string::npos);
  std::mt19937 rng(17);
  std::vector<Tensor> in = operandValues(*conv.node, rng);
  Tensor bias = randomTensor(TensorType(DType::F32, {32}), rng);
  Tensor res = randomTensor(TensorType(DType::F32, {1, 10, 11, 32}), rng);
  Tensor scale = randomTensor(TensorType(DType::F32, {32}), rng);
  auto ref = evaluateNode(*conv.node, in);
  ASSERT_TRUE(ref.isOk());
  Tensor want = (*ref)[0];
  for (int64_t i = 0; i < want.numElements(); ++i)
    want.setDouble(i,
                   std::max(0.0, (want.getDouble(i) + bias.getDouble(i % 32) + res.getDouble(i)) *
                                     scale.getDouble(i % 32)));
  EXPECT_LE(relativeError(runKernel(**k, *conv.node, in, {bias, res, scale}), want), 1e-4);
  // A sigmoid is not among its post-ops: oneDNN's kernel takes the call.
  PostOp sigmoid;
  sigmoid.kind = PostOp::Kind::Sigmoid;
  auto other = createOneDnnKernel(*conv.node, {sigmoid}, 1);
  ASSERT_TRUE(other.isOk()) << other.status().str();
  EXPECT_NE((*other)->describe().find("oneDNN"), std::string::npos) << (*other)->describe();
}

TEST(OneDnn, ConvolutionConstantWeights) {
  std::mt19937 rng(11);
  std::string d =
      checkOp("%x: f32[1,10,10,8]", "f32[1,10,10,16]",
              "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
              "dimension_numbers = \"b01f_01io->b01f\"}",
              "  %w = f32[3,3,8,16] constant() {value = " + literal(3 * 3 * 8 * 16, rng) + "}\n");
  EXPECT_NE(d.find("constant weights"), std::string::npos) << d;
  // Grouped, with constant weights.
  d = checkOp("%x: f32[1,8,6,6]", "f32[1,16,6,6]",
              "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
              "feature_group_count = 2}",
              "  %w = f32[16,4,3,3] constant() {value = " + literal(16 * 4 * 3 * 3, rng) + "}\n");
  EXPECT_NE(d.find("constant weights"), std::string::npos) << d;
}

// Constant weights whose packed layout pads the channels (3 and 20 of blocks of 8 or 16): the
// padding must be zero, for a padded input channel multiplies a zero-padded input.
TEST(OneDnn, ConvolutionPaddedConstantWeights) {
  std::mt19937 rng(13);
  for (int64_t in : {3, 20}) {
    std::string c = std::to_string(in);
    std::string d = checkOp("%x: f32[2,9,9," + c + "]", "f32[2,9,9,20]",
                            "convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], "
                            "dimension_numbers = \"b01f_01io->b01f\"}",
                            "  %w = f32[3,3," + c + ",20] constant() {value = " +
                                literal(20 * in * 3 * 3, rng) + "}\n");
    EXPECT_NE(d.find("constant weights reordered"), std::string::npos) << d;
  }
}

// A reorder into a blocked layout with padding writes every byte: the elements, and zeros in
// the padding (so packWeights does not zero the buffer first). A layout with gaps is refused.
TEST(OneDnn, ReorderZeroPadsItsOutput) {
  using dnnl::memory;
  memory::dims dims = {20, 3, 3, 3};
  memory::desc plain(dims, memory::data_type::f32, memory::format_tag::oihw);
  memory::desc blocked(dims, memory::data_type::f32, memory::format_tag::OIhw16i16o);
  ASSERT_GT(blocked.get_size(), plain.get_size());
  EXPECT_TRUE(onednn::reorderWritesEveryByte(plain));
  EXPECT_TRUE(onednn::reorderWritesEveryByte(blocked));
  EXPECT_FALSE(onednn::reorderWritesEveryByte(
      memory::desc({20, 27}, memory::data_type::f32, memory::dims{32, 1})));
  std::vector<float> src(20 * 3 * 3 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
  std::vector<float> dst(blocked.get_size() / sizeof(float), std::nanf(""));
  const dnnl::engine& engine = onednn::cpuEngine();
  memory from(plain, engine, src.data()), to(blocked, engine, dst.data());
  dnnl::stream& stream = onednn::threadStream();
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  double sum = 0;
  size_t nonzero = 0;
  for (float v : dst) {
    ASSERT_FALSE(std::isnan(v));
    sum += v;
    nonzero += v != 0;
  }
  EXPECT_EQ(nonzero, src.size());
  EXPECT_EQ(sum, static_cast<double>(src.size()) * (src.size() + 1) / 2);
}

// What a timed Winograd convolution's description says: the kernel kept and both times.
struct TimedChoice {
  bool winograd = false;
  double winogradMs = 0, directMs = 0;
};

// The timed choice in description `d` ("..., direct: timed at 1 thread, Winograd 2.047 ms,
// direct 1.370 ms, ..."), checked against the rule that keeps Winograd unless it is 1.2x slower;
// nullopt where the description tells of no timing.
std::optional<TimedChoice> timedChoice(const std::string& d) {
  size_t at = d.find(": timed at ");
  if (at == std::string::npos) return std::nullopt;
  TimedChoice c;
  c.winograd = d.rfind(", Winograd", at) == d.rfind(", ", at);
  size_t times = d.find(", Winograd ", at);
  EXPECT_NE(times, std::string::npos) << d;
  if (times == std::string::npos) return std::nullopt;
  EXPECT_EQ(std::sscanf(d.c_str() + times, ", Winograd %lf ms, direct %lf ms", &c.winogradMs,
                        &c.directMs),
            2)
      << d;
  // Away from the rule's edge, where the printed times (4 digits) decide as the measured ones.
  const double ratio = c.winogradMs / c.directMs;
  if (std::abs(ratio - 1.2) > 0.01) {
    EXPECT_EQ(c.winograd, ratio <= 1.2) << d;
  }
  return c;
}

// Post-ops: the kernel applies them as it writes the result. Expected values are computed
// here from the reference result (same tolerance as above).
TEST(OneDnn, PostOps) {
  using kernel::PostOp;
  std::mt19937 rng(5);
  const PostOp relu = reluPostOp();
  // A 3x3 convolution with constant weights (a jit implementation), bias (the primitive's bias
  // argument), residual and relu.
  OneOp conv = conv3x3(9, 7, rng);
  ASSERT_NE(conv.node, nullptr);
  std::vector<PostOp> ops{binaryPostOp(PostOp::Kind::Add, {64}, {3}),
                          binaryPostOp(PostOp::Kind::Add, {1, 9, 7, 64}, {0, 1, 2, 3}), relu};
  auto k = createOneDnnKernel(*conv.node, ops, 2);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  std::string d = (*k)->describe();
  EXPECT_NE(d.find("jit"), std::string::npos) << d;
  EXPECT_EQ(d.find("gemm"), std::string::npos) << d;
  // 64 channels: it computes in nChw8c (nChw16c where oneDNN runs AVX-512 code, and there as a
  // Winograd convolution where that is not slower than the direct one, timed: timedChoice),
  // reordering its source, result and residual. It is never told what is stored blocked
  // (storeBlocked), so its run below creates those three reorders first.
  const std::string blocked = oneDnnWinograd() ? "nChw16c" : "nChw8c";
  EXPECT_NE(d.find("bias, post-ops add+clamp, "), std::string::npos) << d;
  EXPECT_NE(d.find(", " + blocked + "; reordered: source, result, post-op operand 1)"),
            std::string::npos)
      << d;
  std::optional<TimedChoice> timed = timedChoice(d);
  EXPECT_EQ(timed.has_value(), oneDnnWinograd()) << d;
  EXPECT_EQ(d.find("wino") != std::string::npos, timed && timed->winograd) << d;
  std::vector<Tensor> in = operandValues(*conv.node, rng);
  Tensor bias = randomTensor(TensorType(DType::F32, {64}), rng);
  Tensor res = randomTensor(TensorType(DType::F32, {1, 9, 7, 64}), rng);
  auto ref = evaluateNode(*conv.node, in);
  ASSERT_TRUE(ref.isOk());
  Tensor want = (*ref)[0];
  for (int64_t i = 0; i < want.numElements(); ++i)
    want.setDouble(i, std::max(0.0, want.getDouble(i) + bias.getDouble(i % 64) + res.getDouble(i)));
  Tensor got(DType::F32, {1, 9, 7, 64});
  std::vector<void*> buffers{const_cast<std::byte*>(in[0].bytes()),
                             const_cast<std::byte*>(in[1].bytes()), got.mutableBytes(),
                             const_cast<std::byte*>(bias.bytes()),
                             const_cast<std::byte*>(res.bytes())};
  ASSERT_TRUE((*k)->run(buffers.data()).isOk());
  EXPECT_LE(relativeError(got, want), 1e-4) << d;

  // A matrix product with a bias along N, an elementwise scale and the erf gelu. (A scale
  // along M alone would leave oneDNN with its reference implementation: refused.)
  OneOp mm = parseOp("%a: f32[7,13], %b: f32[13,5]", "f32[7,5]", kMatmul);
  ASSERT_NE(mm.node, nullptr);
  PostOp gelu;
  gelu.kind = PostOp::Kind::Gelu;
  ops = {binaryPostOp(PostOp::Kind::Add, {5}, {1}), binaryPostOp(PostOp::Kind::Mul, {7, 5}, {0, 1}),
         gelu};
  k = createOneDnnKernel(*mm.node, ops, 1);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  in = operandValues(*mm.node, rng);
  bias = randomTensor(TensorType(DType::F32, {5}), rng);
  Tensor scale = randomTensor(TensorType(DType::F32, {7, 5}), rng);
  ref = evaluateNode(*mm.node, in);
  ASSERT_TRUE(ref.isOk());
  want = (*ref)[0];
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double x = (want.getDouble(i) + bias.getDouble(i % 5)) * scale.getDouble(i);
    want.setDouble(i, 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
  }
  got = Tensor(DType::F32, {7, 5});
  buffers = {const_cast<std::byte*>(in[0].bytes()), const_cast<std::byte*>(in[1].bytes()),
             got.mutableBytes(), const_cast<std::byte*>(bias.bytes()),
             const_cast<std::byte*>(scale.bytes())};
  ASSERT_TRUE((*k)->run(buffers.data()).isOk());
  EXPECT_LE(relativeError(got, want), 1e-4) << (*k)->describe();
  // The add along N comes first: it is the primitive's bias, not a binary post-op.
  EXPECT_NE((*k)->describe().find(", bias, post-ops mul+gelu)"), std::string::npos)
      << (*k)->describe();
  // After a mul it stays a binary post-op (the bias is added before every post-op).
  k = createOneDnnKernel(
      *mm.node,
      {binaryPostOp(PostOp::Kind::Mul, {7, 5}, {0, 1}), binaryPostOp(PostOp::Kind::Add, {5}, {1})},
      1);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  EXPECT_NE((*k)->describe().find(", post-ops mul+add)"), std::string::npos) << (*k)->describe();
  ref = evaluateNode(*mm.node, in);  // a fresh tensor: `want` above shares the old one's data
  ASSERT_TRUE(ref.isOk());
  want = (*ref)[0];
  for (int64_t i = 0; i < want.numElements(); ++i)
    want.setDouble(i, want.getDouble(i) * scale.getDouble(i) + bias.getDouble(i % 5));
  buffers = {const_cast<std::byte*>(in[0].bytes()), const_cast<std::byte*>(in[1].bytes()),
             got.mutableBytes(), const_cast<std::byte*>(scale.bytes()),
             const_cast<std::byte*>(bias.bytes())};
  ASSERT_TRUE((*k)->run(buffers.data()).isOk());
  EXPECT_LE(relativeError(got, want), 1e-4) << (*k)->describe();
  k = createOneDnnKernel(*mm.node, {binaryPostOp(PostOp::Kind::Mul, {7, 1}, {0, 1})}, 1);
  ASSERT_FALSE(k.isOk());
  EXPECT_NE(k.status().message().find("only its reference implementation"), std::string::npos)
      << k.status().message();

  // An operand broadcast along one of two result dims that merge into one M is refused.
  OneOp merged = parseOp("%a: f32[2,3,13], %b: f32[13,5]", "f32[2,3,5]",
                         "dot_general(%a, %b) {lhs_contracting = [2], rhs_contracting = [0]}");
  ASSERT_NE(merged.node, nullptr);
  k = createOneDnnKernel(*merged.node, {binaryPostOp(PostOp::Kind::Add, {3}, {1})}, 1);
  ASSERT_FALSE(k.isOk());
  EXPECT_NE(k.status().message().find("broadcast along part of a merged dim"), std::string::npos)
      << k.status().message();
}

// Winograd convolutions (where oneDNN has them: oneDnnWinograd()) take a 3x3 window of stride 1
// with a bias, one residual and relu last, in either order of the adds; other post-ops and other
// windows keep the direct kernel. Without AVX-512 every case here is a direct kernel, which the
// test checks too. Values against the reference convolution with the post-ops applied here:
// oneDNN's F(4x4,3x3) kernel differs from it by about 2e-6 of the largest value (weights and
// inputs are multiples of 1/16, sums of 576 terms), so 1e-4 as elsewhere in this file.
TEST(OneDnn, WinogradConvolutions) {
  using kernel::PostOp;
  std::mt19937 rng(21);
  auto add = [](std::vector<int64_t> shape, std::vector<int64_t> dims) {
    PostOp p;
    p.kind = PostOp::Kind::Add;
    p.operandShape = std::move(shape);
    p.operandDims = std::move(dims);
    return p;
  };
  auto clamp = [](double lo, double hi) {
    PostOp p;
    p.kind = PostOp::Kind::Clamp;
    p.lo = lo;
    p.hi = hi;
    return p;
  };
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* what;
    int64_t stride;
    std::vector<PostOp> ops;
    bool winograd;                  // where oneDNN has Winograd kernels
    int64_t h = 10, w = 9, k = 64;  // input height and width, output channels
  };
  const int64_t c = 64;
  const int64_t h = 10, w = 9;
  std::vector<Case> cases = {
      {"residual, bias, relu", 1, {add({h, w, c}, {1, 2, 3}), add({c}, {3}), clamp(0, inf)}, true},
      {"bias only", 1, {add({c}, {3})}, true},
      {"no post-ops", 1, {}, true},
      {"relu6 (a clip)", 1, {add({c}, {3}), clamp(0, 6)}, false},
      {"two residuals", 1, {add({h, w, c}, {1, 2, 3}), add({h, w, c}, {1, 2, 3})}, false},
      {"stride 2", 2, {add({c}, {3}), clamp(0, inf)}, false},
      // 2x2 tiles over a 3x3 output do 0.79 of the direct multiplies; 4x4 has 4 tiles, 7x7 16
      // (winogradPays).
      {"a 3x3 output", 1, {add({c}, {3}), clamp(0, inf)}, false, 3, 3},
      {"a 4x4 output", 1, {add({c}, {3}), clamp(0, inf)}, false, 4, 4},
      {"a 7x7 output", 1, {add({c}, {3}), clamp(0, inf)}, true, 7, 7},
      {"16 output channels", 1, {add({16}, {3}), clamp(0, inf)}, false, 10, 9, 16},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.what);
    int64_t oh = (cs.h + 2 - 3) / cs.stride + 1, ow = (cs.w + 2 - 3) / cs.stride + 1;
    const std::string k = std::to_string(cs.k);
    std::string result = "f32[1," + std::to_string(oh) + "," + std::to_string(ow) + "," + k + "]";
    OneOp conv =
        parseOp("%x: f32[1," + std::to_string(cs.h) + "," + std::to_string(cs.w) + ",64]", result,
                "convolution(%x, %w) {window_strides = [" + std::to_string(cs.stride) + ", " +
                    std::to_string(cs.stride) +
                    "], padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "
                    "\"b01f_01io->b01f\"}",
                "  %w = f32[3,3,64," + k +
                    "] constant() {value = " + literal(3 * 3 * 64 * cs.k, rng) + "}\n");
    ASSERT_NE(conv.node, nullptr);
    std::vector<Tensor> in = operandValues(*conv.node, rng);
    auto ref = evaluateNode(*conv.node, in);
    ASSERT_TRUE(ref.isOk());
    Tensor want = (*ref)[0];
    std::vector<Tensor> operands;
    for (const PostOp& p : cs.ops) {
      if (p.kind == PostOp::Kind::Add) {
        operands.push_back(randomTensor(
            TensorType(DType::F32, Shape(p.operandShape.begin(), p.operandShape.end())), rng));
        const Tensor& t = operands.back();
        for (int64_t i = 0; i < want.numElements(); ++i)
          want.setDouble(i,
                         want.getDouble(i) + t.getDouble(t.numElements() == cs.k ? i % cs.k : i));
      } else {
        for (int64_t i = 0; i < want.numElements(); ++i)
          want.setDouble(i, std::clamp(want.getDouble(i), p.lo, p.hi));
      }
    }
    for (int threads : {1, 2}) {
      auto k = createOneDnnKernel(*conv.node, cs.ops, threads);
      ASSERT_TRUE(k.isOk()) << k.status().str();
      std::string d = (*k)->describe();
      // A Winograd kernel is timed against the direct one, and the faster stays (timedChoice).
      std::optional<TimedChoice> timed = timedChoice(d);
      EXPECT_EQ(timed.has_value(), cs.winograd && oneDnnWinograd()) << d;
      EXPECT_EQ(d.find("wino") != std::string::npos, timed && timed->winograd) << d;
      Tensor got(DType::F32, want.type().staticDims());
      std::vector<void*> buffers{const_cast<std::byte*>(in[0].bytes()),
                                 const_cast<std::byte*>(in[1].bytes()), got.mutableBytes()};
      for (const Tensor& t : operands) buffers.push_back(const_cast<std::byte*>(t.bytes()));
      ASSERT_TRUE((*k)->run(buffers.data()).isOk());
      EXPECT_LE(relativeError(got, want), 1e-4) << d;
    }
  }
}

// A Winograd-shaped convolution whose weights an artifact holds in the direct kernel's layout
// runs the direct kernel on them, untimed: the compile that wrote the artifact chose. Its own
// Winograd weights bring the Winograd kernel back, untimed too.
TEST(OneDnn, WinogradChoiceFollowsArtifactWeights) {
  if (!oneDnnWinograd()) GTEST_SKIP() << "oneDNN has no Winograd kernels here (AVX-512 needed)";
  using kernel::PostOp;
  std::mt19937 rng(5);
  OneOp conv = conv3x3(10, 9, rng);
  ASSERT_NE(conv.node, nullptr);
  PostOp relu, relu6;
  relu.kind = relu6.kind = PostOp::Kind::Clamp;
  relu.lo = relu6.lo = 0;
  relu.hi = std::numeric_limits<double>::infinity();
  relu6.hi = 6;
  std::vector<Tensor> in = operandValues(*conv.node, rng);
  auto ref = evaluateNode(*conv.node, in);
  ASSERT_TRUE(ref.isOk());
  Tensor want = (*ref)[0];
  for (int64_t i = 0; i < want.numElements(); ++i)
    want.setDouble(i, std::max(want.getDouble(i), 0.0));
  auto check = [&](const LibraryKernel& k) {
    Tensor got(DType::F32, want.type().staticDims());
    std::vector<void*> buffers{const_cast<std::byte*>(in[0].bytes()),
                               const_cast<std::byte*>(in[1].bytes()), got.mutableBytes()};
    ASSERT_TRUE(k.run(buffers.data()).isOk());
    EXPECT_LE(relativeError(got, want), 1e-4) << k.describe();
  };
  // With relu6 (which Winograd kernels do not take) the same weights get the direct layout.
  auto direct = createOneDnnKernel(*conv.node, {relu6}, 1);
  ASSERT_TRUE(direct.isOk()) << direct.status().str();
  std::optional<PackedWeights> directWeights = (*direct)->packedWeights();
  ASSERT_TRUE(directWeights.has_value()) << (*direct)->describe();
  CallForm form;
  form.prepacked = &*directWeights;
  auto k = createOneDnnKernel(*conv.node, {relu}, 1, form);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  std::string d = (*k)->describe();
  EXPECT_EQ(d.find("wino"), std::string::npos) << d;
  EXPECT_NE(d.find("prepacked"), std::string::npos) << d;
  EXPECT_NE(d.find("direct: the artifact's weights are in the direct kernel's layout"),
            std::string::npos)
      << d;
  check(**k);
  // Timed, then from its own weights.
  auto timed = createOneDnnKernel(*conv.node, {relu}, 1);
  ASSERT_TRUE(timed.isOk()) << timed.status().str();
  std::optional<TimedChoice> choice = timedChoice((*timed)->describe());
  ASSERT_TRUE(choice.has_value()) << (*timed)->describe();
  std::optional<PackedWeights> own = (*timed)->packedWeights();
  ASSERT_TRUE(own.has_value());
  form.prepacked = &*own;
  k = createOneDnnKernel(*conv.node, {relu}, 1, form);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  d = (*k)->describe();
  EXPECT_EQ(d.find("wino") != std::string::npos, choice->winograd) << d;
  EXPECT_EQ(d.find("timed at"), std::string::npos) << d;
  EXPECT_NE(d.find("prepacked"), std::string::npos) << d;
  check(**k);
}

TEST(OneDnn, Refusals) {
  EXPECT_NE(refusal("%a: i32[4,5], %b: i32[5,3]", "i32[4,3]", kMatmul).find("only f32"),
            std::string::npos);
  EXPECT_NE(refusal("%x: f32[1,2,4,4], %k: f32[3,2,3,3]", "f32[1,3,5,5]",
                    "convolution(%x, %k) {lhs_dilation = [2, 2]}")
                .find("lhs_dilation"),
            std::string::npos);
  EXPECT_NE(refusal("%x: f32[4,2,5,5], %k: f32[4,2,3,3]", "f32[2,4,3,3]",
                    "convolution(%x, %k) {batch_group_count = 2}")
                .find("batch_group_count"),
            std::string::npos);
  EXPECT_NE(refusal("%x: f32[1,2,5,5], %k: f32[3,2,3,3]", "f32[1,3,2,2]",
                    "convolution(%x, %k) {padding_low = [-1, -1]}")
                .find("negative padding"),
            std::string::npos);
  // Two contracting dims that are not one strided run on the lhs ([K1, M, K2]).
  EXPECT_NE(refusal("%a: f32[2,3,4], %b: f32[2,4,5]", "f32[3,5]",
                    "dot_general(%a, %b) {lhs_contracting = [0, 2], rhs_contracting = [0, 1]}")
                .find("contracting dims"),
            std::string::npos);
  EXPECT_NE(refusal("%a: f32[0,4], %b: f32[4,3]", "f32[0,3]", kMatmul).find("empty"),
            std::string::npos);
}

TEST(OneDnn, TwoThreadsRunOneKernel) {
  OneOp op = parseOp("%x: f32[2,12,12,16], %k: f32[3,3,16,32]", "f32[2,12,12,32]",
                     "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
                     "dimension_numbers = \"b01f_01io->b01f\"}");
  ASSERT_NE(op.node, nullptr);
  auto k = createOneDnnKernel(*op.node, {}, 2);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  std::vector<std::vector<Tensor>> ops;
  std::vector<Tensor> want;
  for (unsigned t = 0; t < 2; ++t) {
    std::mt19937 rng(100 + t);
    ops.push_back(operandValues(*op.node, rng));
    auto r = evaluateNode(*op.node, ops.back());
    ASSERT_TRUE(r.isOk()) << r.status().str();
    want.push_back((*r)[0]);
  }
  std::vector<double> worst(2, 0);
  auto work = [&](size_t t) {
    for (int i = 0; i < 20; ++i)
      worst[t] = std::max(worst[t], relativeError(runKernel(**k, *op.node, ops[t]), want[t]));
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  EXPECT_LE(worst[0], 1e-4);
  EXPECT_LE(worst[1], 1e-4);
}

double millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Median time of `reps` runs (after one warm-up run) of the oneDNN kernel, and the time of one
// evaluateNode; prints both and GFLOP/s for `flops`.
void timeOp(const char* name, const OneOp& op, double flops, int threads) {
  ASSERT_NE(op.node, nullptr);
  auto k = createOneDnnKernel(*op.node, {}, threads);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  std::mt19937 rng(5);
  std::vector<Tensor> ops = operandValues(*op.node, rng);
  auto t0 = std::chrono::steady_clock::now();
  auto want = evaluateNode(*op.node, ops);
  double refMs = millis(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  EXPECT_LE(relativeError(runKernel(**k, *op.node, ops), (*want)[0]), 1e-4);
  std::vector<double> times;
  for (int i = 0; i < 21; ++i) {
    auto s = std::chrono::steady_clock::now();
    runKernel(**k, *op.node, ops);
    times.push_back(millis(std::chrono::steady_clock::now() - s));
  }
  std::sort(times.begin(), times.end());
  double ms = times[times.size() / 2];
  std::printf("%-34s %d thr  oneDNN %8.3f ms %7.1f GFLOP/s | evaluateNode %8.1f ms %6.2f GFLOP/s"
              " | %s\n",
              name, threads, ms, flops / ms * 1e-6, refMs, flops / refMs * 1e-6,
              (*k)->describe().c_str());
}

TEST(OneDnn, DISABLED_Timings) {
  std::mt19937 rng(3);
  const char* conv = "convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], "
                     "dimension_numbers = \"b01f_01io->b01f\"}";
  OneOp convParam = parseOp("%x: f32[1,56,56,64], %k: f32[3,3,64,64]", "f32[1,56,56,64]", conv);
  OneOp convConst =
      parseOp("%x: f32[1,56,56,64]", "f32[1,56,56,64]", conv,
              "  %k = f32[3,3,64,64] constant() {value = " + literal(3 * 3 * 64 * 64, rng) + "}\n");
  OneOp mm = parseOp("%a: f32[512,512], %b: f32[512,512]", "f32[512,512]", kMatmul);
  double convFlops = 2.0 * 56 * 56 * 64 * 64 * 9, mmFlops = 2.0 * 512 * 512 * 512;
  for (int threads : {1, 2}) {
    timeOp("conv 3x3 1x56x56x64->64 (param w)", convParam, convFlops, threads);
    timeOp("conv 3x3 1x56x56x64->64 (const w)", convConst, convFlops, threads);
    timeOp("matmul 512x512x512", mm, mmFlops, threads);
  }
}

}  // namespace
}  // namespace kiln::codegen::cpu
