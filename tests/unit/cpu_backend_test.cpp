// The CPU backend against the reference interpreter: every op family and every fusion kind, on
// random inputs of several shapes (odd sizes included), with 1 and 2 threads; and one Executable
// run from two threads at once.
//
// Tolerance: floats agree within 1e-5 * max(1, max |reference|) (the backend computes f32 math
// in f32 or double where the interpreter uses double, and fused chains skip intermediate
// roundings only where the graph has none); NaN must match NaN; integers and bools exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>

#include "codegen/cpu/inverted_residual.h"
#include "codegen/cpu/onednn.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "passes/convolution_to_matmul.h"
#include "runtime/executable.h"
#include "special_values.h"
#include "two_host_threads.h"

namespace kiln::runtime {
namespace {

std::string instantiate(std::string text, int64_t n, int64_t m) {
  text = std::regex_replace(text, std::regex("\\bN\\b"), std::to_string(n));
  text = std::regex_replace(text, std::regex("\\bM\\b"), std::to_string(m));
  return text;
}

// `text` parsed and compiled with the default options; null after a failure, which it reports.
std::unique_ptr<Executable> compileText(const std::string& text, const std::string& file) {
  auto parsed = parseModule(text, file);
  if (!parsed.isOk()) {
    ADD_FAILURE() << parsed.status().str();
    return nullptr;
  }
  auto exe = Executable::compile(std::move(*parsed), CompileOptions{});
  if (!exe.isOk()) {
    ADD_FAILURE() << exe.status().str();
    return nullptr;
  }
  return std::move(*exe);
}

// Every kernel of `exe` as printed kernel IR.
std::string kernelIr(const Executable& exe) {
  std::string ir;
  for (const kernel::Kernel& k : exe.kernels()) ir += kernel::printKernel(k);
  return ir;
}

Tensor randomTensor(const TensorType& t, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (const Dim& d : t.dims()) dims.push_back(d.value());
  Tensor x(t.dtype(), dims);
  std::uniform_real_distribution<double> uf(-2.0, 2.0);
  std::uniform_int_distribution<int> ui(-20, 20), ub(0, 1);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    if (isFloat(t.dtype())) x.setDouble(i, uf(rng));
    else if (isBool(t.dtype())) x.setDouble(i, ub(rng));
    else if (isSignedInteger(t.dtype())) x.setDouble(i, ui(rng));
    else x.setDouble(i, std::abs(ui(rng)));
  }
  return x;
}

// Whether libraryCallDetails() has a call described by `pattern`, where IMPL stands for
// oneDNN's implementation name and BLOCKED for the blocked layout's name: both depend on the
// CPU's instruction set (gemm:jit and nChw8c on AVX2, brg:avx512_core and nChw16c on AVX-512).
bool hasCall(const std::string& calls, const std::string& pattern) {
  std::string re;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern.compare(i, 4, "IMPL") == 0) {
      re += "[a-z0-9_]+:[a-z0-9_]+";
      i += 4;
    } else if (pattern.compare(i, 7, "BLOCKED") == 0) {
      re += "nChw(8|16)c";
      i += 7;
    } else {
      if (std::string("\\^$.|?*+()[]{}").find(pattern[i]) != std::string::npos) re += '\\';
      re += pattern[i++];
    }
  }
  return std::regex_search(calls, std::regex(re));
}

void expectClose(const Tensor& got, const Tensor& want, const std::string& what,
                 double tolerance = 1e-5) {
  ASSERT_EQ(got.type(), want.type()) << what;
  double scale = 1;
  for (int64_t i = 0; i < want.numElements(); ++i)
    if (std::isfinite(want.getDouble(i))) scale = std::max(scale, std::abs(want.getDouble(i)));
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    if (!isFloat(want.dtype())) {
      ASSERT_EQ(g, w) << what << " element " << i;
    } else if (std::isnan(w) || std::isinf(w)) {
      ASSERT_TRUE((std::isnan(w) && std::isnan(g)) || g == w)
          << what << " element " << i << ": " << g << " vs " << w;
    } else {
      ASSERT_LE(std::abs(g - w), tolerance * scale)
          << what << " element " << i << ": " << g << " vs " << w;
    }
  }
}

// Bit-for-bit agreement (NaN matches any NaN; -0 does not match +0), for lowerings that follow
// the reference kernel's arithmetic exactly.
void expectIdentical(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    if (!isFloat(want.dtype())) {
      ASSERT_EQ(got.getUInt(i), want.getUInt(i)) << what << " element " << i;
      continue;
    }
    double g = got.getDouble(i), w = want.getDouble(i);
    ASSERT_TRUE((std::isnan(g) && std::isnan(w)) || (g == w && std::signbit(g) == std::signbit(w)))
        << what << " element " << i << ": " << g << " vs " << w;
  }
}

// Compiles `text` (with N and M replaced) for each shape and thread count and compares every
// output with the interpreter on random inputs (bit for bit when `exact`).
void checkAgainstInterpreter(const std::string& name, const std::string& text,
                             std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},
                                                                                {3, 5},
                                                                                {17, 33}},
                             bool exact = false, double tolerance = 1e-5) {
  for (auto [n, m] : shapes) {
    for (int threads : {1, 2}) {
      std::string what = name + " N=" + std::to_string(n) + " M=" + std::to_string(m) + " " +
                         std::to_string(threads) + " threads";
      auto parsed = parseModule(instantiate(text, n, m), name + ".kir");
      ASSERT_TRUE(parsed.isOk()) << what << ": " << parsed.status().str();
      const Function& f = *(*parsed)->entry();
      std::mt19937 rng(static_cast<unsigned>(n * 1000 + m));
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < f.numParameters(); ++i)
        inputs.push_back(randomTensor(f.parameter(i)->type(), rng));
      auto want = interpret(f, inputs);
      ASSERT_TRUE(want.isOk()) << what << ": " << want.status().str();
      CompileOptions o;
      o.threads = threads;
      auto exe = Executable::compile(std::move(*parsed), o);
      ASSERT_TRUE(exe.isOk()) << what << ": " << exe.status().str();
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.isOk()) << what << ": " << got.status().str();
      ASSERT_EQ(got->size(), want->size()) << what;
      for (size_t i = 0; i < got->size(); ++i) {
        std::string output = what + " output " + std::to_string(i);
        if (exact) expectIdentical((*got)[i], (*want)[i], output);
        else expectClose((*got)[i], (*want)[i], output, tolerance);
      }
    }
  }
}

TEST(CpuBackend, ElementwiseMath) {
  checkAgainstInterpreter("elementwise", R"(
func @main(%x: f32[N,M], %y: f32[N,M]) -> (f32[N,M], f32[N,M], f32[N,M], i32[N,M]) {
  %a = f32[N,M] add(%x, %y)
  %b = f32[N,M] mul(%a, %x)
  %c = f32[N,M] sub(%b, %y)
  %d = f32[N,M] tanh(%c)
  %e = f32[N,M] sigmoid(%a)
  %f = f32[N,M] erf(%b)
  %g = f32[N,M] exp(%d)
  %h = f32[N,M] abs(%y)
  %s = f32[N,M] sqrt(%h)
  %one = f32[] constant() {value = [1.0]}
  %oneb = f32[N,M] broadcast_in_dim(%one) {dims = []}
  %hp = f32[N,M] add(%h, %oneb)
  %l = f32[N,M] log(%hp)
  %p = f32[N,M] pow(%hp, %x)
  %q = f32[N,M] div(%p, %hp)
  %mx = f32[N,M] max(%q, %e)
  %mn = f32[N,M] min(%mx, %f)
  %lt = bool[N,M] compare(%x, %y) {direction = lt}
  %sel = f32[N,M] select(%lt, %mn, %l)
  %lo = f32[] constant() {value = [-0.5]}
  %hi = f32[] constant() {value = [0.75]}
  %cl = f32[N,M] clamp(%lo, %sel, %hi)
  %fl = f32[N,M] floor(%x)
  %ce = f32[N,M] ceil(%y)
  %rn = f32[N,M] round_nearest_even(%b)
  %sg = f32[N,M] sign(%c)
  %ng = f32[N,M] neg(%s)
  %sum1 = f32[N,M] add(%fl, %ce)
  %sum2 = f32[N,M] add(%rn, %sg)
  %sum3 = f32[N,M] add(%sum1, %sum2)
  %big = f32[N,M] mul(%b, %oneb)
  %i = i32[N,M] convert(%big)
  %g2 = f32[N,M] add(%g, %ng)
  return %cl, %sum3, %g2, %i
})");
}

TEST(CpuBackend, IntegerAndBoolOps) {
  checkAgainstInterpreter("integers", R"(
func @main(%a: i32[N,M], %b: i32[N,M], %c: bool[N,M]) -> (i32[N,M], i32[N,M], i32[N,M], bool[N,M], i64[N,M]) {
  %div = i32[N,M] div(%a, %b)
  %rem = i32[N,M] rem(%a, %b)
  %sh = i32[N,M] shift_left(%a, %b)
  %sr = i32[N,M] shift_right_arithmetic(%a, %b)
  %su = i32[N,M] shift_right_logical(%sh, %b)
  %x = i32[N,M] xor(%sr, %su)
  %o = i32[N,M] or(%x, %rem)
  %an = i32[N,M] and(%o, %div)
  %nt = i32[N,M] not(%an)
  %mx = i32[N,M] max(%a, %b)
  %ab = i32[N,M] abs(%mx)
  %ge = bool[N,M] compare(%a, %b) {direction = ge}
  %both = bool[N,M] and(%ge, %c)
  %flip = bool[N,M] xor(%both, %c)
  %w = i64[N,M] convert(%a)
  %wm = i64[N,M] mul(%w, %w)
  return %nt, %ab, %div, %flip, %wm
})");
}

TEST(CpuBackend, HalfPrecisionRoundsOnStore) {
  checkAgainstInterpreter("half", R"(
func @main(%x: f32[N,M]) -> (bf16[N,M], f16[N,M], f32[N,M]) {
  %b = bf16[N,M] convert(%x)
  %h = f16[N,M] convert(%x)
  %e = bf16[N,M] exp(%b)
  %t = f16[N,M] tanh(%h)
  %back = f32[N,M] convert(%e)
  %th = f32[N,M] convert(%t)
  %s = f32[N,M] add(%back, %th)
  return %e, %t, %s
})");
}

TEST(CpuBackend, DataMovement) {
  checkAgainstInterpreter("movement", R"(
func @main(%x: f32[N,M], %v: f32[M]) -> (f32[M,N], f32[N,M], f32[N,M], f32[N,M]) {
  %vb = f32[N,M] broadcast_in_dim(%v) {dims = [1]}
  %a = f32[N,M] add(%x, %vb)
  %t = f32[M,N] transpose(%a) {permutation = [1, 0]}
  %r = f32[N,M] reverse(%x) {dims = [0, 1]}
  %i = f32[N,M] iota() {dimension = 1}
  %ri = f32[N,M] add(%r, %i)
  %zero = f32[] constant() {value = [0.5]}
  %p = f32[N,M] pad(%x, %zero) {low = [0, 1], high = [0, -1], interior = [0, 0]}
  %c = f32[N,M] add(%p, %ri)
  %sl = f32[M,N] slice(%t) {start = [0, 0], limit = [M, N], stride = [1, 1]}
  %rs = f32[N,M] reshape(%sl)
  return %t, %c, %rs, %ri
})");
}

TEST(CpuBackend, ConcatenateStridedSliceAndInteriorPad) {
  checkAgainstInterpreter("concat", R"(
func @main(%x: f32[N,4], %y: f32[N,3]) -> (f32[N,4], f32[N,5]) {
  %cat = f32[N,7] concatenate(%x, %y) {dimension = 1}
  %s = f32[N,4] slice(%cat) {start = [0, 0], limit = [N, 7], stride = [1, 2]}
  %e = f32[N,4] exp(%s)
  %zero = f32[] constant() {value = [0.0]}
  %p = f32[N,5] pad(%y, %zero) {low = [0, 0], high = [0, 0], interior = [0, 1]}
  return %e, %p
})",
                          {{1, 0}, {3, 0}, {17, 0}});
}

// Stored concatenations computed in their kernel store each operand in a nest of its own: a 1-D
// im2col (slices of a pad, along the inner dim) and a concatenation of a computed value and an
// input along a middle dim.
TEST(CpuBackend, StoredConcatenatesStoreEachOperandInItsOwnNest) {
  checkAgainstInterpreter("concat-parts", R"(
func @main(%x: f32[N,5,3], %y: f32[N,2,3]) -> (f32[N,5,9], f32[N,7,3]) {
  %z = f32[] constant() {value = [0.5]}
  %xp = f32[N,7,3] pad(%x, %z) {low = [0, 1, 0], high = [0, 1, 0], interior = [0, 0, 0]}
  %s0 = f32[N,5,3] slice(%xp) {start = [0, 0, 0], limit = [N, 5, 3]}
  %s1 = f32[N,5,3] slice(%xp) {start = [0, 1, 0], limit = [N, 6, 3]}
  %s2 = f32[N,5,3] slice(%xp) {start = [0, 2, 0], limit = [N, 7, 3]}
  %cols = f32[N,5,9] concatenate(%s0, %s1, %s2) {dimension = 2}
  %ex = f32[N,5,3] exp(%x)
  %cat = f32[N,7,3] concatenate(%ex, %y) {dimension = 1}
  return %cols, %cat
})",
                          {{1, 0}, {4, 0}, {33, 0}});
}

// convolution-to-matmul (passes/convolution_to_matmul.h; run by the compile too) on
// convolutions with few output pixels: stride 1 with a residual and relu that become the
// matmul's post-ops, constant weights, and stride 2 with dilation 2 and asymmetric padding, batches
// of 1 and 2. The rewritten program, compiled, agrees with the interpreter on the original.
// Compiles `text` after convolution-to-matmul (which must change it) and compares each output
// with the interpreter of `text` as written, on random inputs from `seed`, within `tolerance`.
// Returns the program's library calls ("" after a failure).
std::string rewrittenAgainstInterpreter(const std::string& text, const std::string& file,
                                        unsigned seed, double tolerance) {
  auto original = parseModule(text, file);
  auto rewritten = parseModule(text, file);
  if (!original.isOk() || !rewritten.isOk()) {
    ADD_FAILURE() << file << ": " << original.status().str();
    return "";
  }
  auto changed = convolutionToMatmul(**rewritten);
  if (!changed.isOk() || !*changed) {
    ADD_FAILURE() << file << ": convolution-to-matmul changed nothing";
    return "";
  }
  const Function& f = *(*original)->entry();
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.push_back(randomTensor(f.parameter(i)->type(), rng));
  auto want = interpret(f, inputs);
  auto exe = Executable::compile(std::move(*rewritten), CompileOptions{});
  if (!want.isOk() || !exe.isOk()) {
    ADD_FAILURE() << file << ": " << (want.isOk() ? exe.status().str() : want.status().str());
    return "";
  }
  auto got = (*exe)->run(inputs);
  if (!got.isOk()) {
    ADD_FAILURE() << file << ": " << got.status().str();
    return "";
  }
  for (size_t o = 0; o < got->size(); ++o)
    expectClose((*got)[o], (*want)[o], file + " output " + std::to_string(o), tolerance);
  return (*exe)->libraryCallDetails();
}

// Transposed convolutions whose window is their stride (2x2 stride 2; 3x2 stride 3x2) with
// constant weights become a product and a depth-to-space (convolution-to-matmul): against the
// interpreter of the original convolutions, at odd sizes, with a bias added after each.
TEST(CpuBackend, TransposedConvolutionsAsProducts) {
  auto constant = [](const char* name, const std::string& type, int count) {
    std::string s = "  %" + std::string(name) + " = " + type + " constant() {value = [";
    for (int i = 0; i < count; ++i) s += (i ? ", " : "") + std::to_string(std::sin(0.37 * i));
    return s + "]}\n";
  };
  const std::string text = R"(
func @main(%x: f32[N,5,M,8], %bias: f32[4]) -> (f32[N,10,Q,4], f32[N,15,Q,4]) {
)" + constant("w", "f32[2,2,8,4]", 128) +
                           constant("v", "f32[3,2,8,4]", 192) + R"(
  %c = f32[N,10,Q,4] convolution(%x, %w) {lhs_dilation = [2, 2], padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %bb = f32[N,10,Q,4] broadcast_in_dim(%bias) {dims = [3]}
  %y = f32[N,10,Q,4] add(%c, %bb)
  %d = f32[N,15,Q,4] convolution(%x, %v) {lhs_dilation = [3, 2], padding_low = [2, 1], padding_high = [2, 1], dimension_numbers = "b01f_01io->b01f"}
  return %y, %d
})";
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2, 7}}) {
    // Q: the output width, 2M.
    std::string t =
        std::regex_replace(instantiate(text, n, m), std::regex("\\bQ\\b"), std::to_string(2 * m));
    std::string calls =
        rewrittenAgainstInterpreter(t, "transposed.kir", static_cast<unsigned>(n * 10 + m), 1e-5);
    EXPECT_EQ(calls.find("convolution"), std::string::npos) << calls;
    EXPECT_TRUE(hasCall(calls, "matmul (" + std::to_string(5 * m * n) + "x8x16, IMPL")) << calls;
  }
}

TEST(CpuBackend, ConvolutionsWithFewPixelsAsMatmuls) {
  std::string weights;
  for (int i = 0; i < 3 * 3 * 64 * 16; ++i)
    weights += (i ? ", " : "") + std::to_string(0.002 * ((i * 7) % 29) - 0.028);
  const std::string text = R"(
func @main(%x: f32[N,7,7,64], %r: f32[N,7,7,16], %u: f32[N,9,9,64], %k: f32[3,3,64,8]) -> (f32[N,7,7,16], f32[N,4,4,8]) {
  %w = f32[3,3,64,16] constant() {value = [)" +
                           weights + R"(]}
  %c = f32[N,7,7,16] convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %a = f32[N,7,7,16] add(%c, %r)
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[N,7,7,16] broadcast_in_dim(%z) {dims = []}
  %y = f32[N,7,7,16] max(%a, %zb)
  %d = f32[N,4,4,8] convolution(%u, %k) {window_strides = [2, 2], rhs_dilation = [2, 2], padding_low = [2, 1], padding_high = [1, 2], dimension_numbers = "b01f_01io->b01f"}
  return %y, %d
})";
  for (int64_t n : {1, 2}) {
    std::string calls = rewrittenAgainstInterpreter(instantiate(text, n, 0), "conv-as-matmul.kir",
                                                    static_cast<unsigned>(n), 1e-4);
    EXPECT_EQ(calls.find("convolution"), std::string::npos) << calls;
    // Without AVX-512, rows of 16 floats are a whole cache line: the constant is used as it is.
    // With it, oneDNN packs the weights in a layout of its own.
    EXPECT_TRUE(hasCall(
        calls, "matmul (" + std::to_string(49 * n) + "x576x16, IMPL, constant weights" +
                   (codegen::cpu::oneDnnAvx512() ? " reordered" : "") + ", post-ops add+clamp)"))
        << calls;
  }
}

// A 1x1 convolution over 25 pixels against 256 KiB of constant weights, with a residual add and
// relu, becomes a product that Kiln's panel product runs at 1 thread (the CPU target's
// fasterAsProduct for convolution-to-matmul) where the CPU has AVX-512, and stays oneDNN's
// convolution elsewhere.
// Against the interpreter within 1e-5 (f32 sums of 128 products in another order).
TEST(CpuBackend, OneByOneConvolutionsOfFewPixelsOnThePanelProduct) {
  std::string weights;
  for (int i = 0; i < 128 * 512; ++i)
    weights += (i ? ", " : "") + std::to_string(0.001 * ((i * 7) % 61) - 0.03);
  const std::string text = R"(
func @main(%x: f32[1,5,5,128], %r: f32[1,5,5,512]) -> (f32[1,5,5,512]) {
  %w = f32[1,1,128,512] constant() {value = [)" +
                           weights + R"(]}
  %c = f32[1,5,5,512] convolution(%x, %w) {dimension_numbers = "b01f_01io->b01f"}
  %a = f32[1,5,5,512] add(%c, %r)
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[1,5,5,512] broadcast_in_dim(%z) {dims = []}
  %y = f32[1,5,5,512] max(%a, %zb)
  return %y
})";
  checkAgainstInterpreter("1x1 over 25 pixels", text, {{1, 1}}, false, 1e-5);
  // On 1 thread (on 2, 256 KiB of weights are too few for the panel product to split).
  auto parsed = parseModule(text, "one_by_one.kir");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  CompileOptions o;
  o.threads = 1;
  auto exe = Executable::compile(std::move(*parsed), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const std::string calls = (*exe)->libraryCallDetails();
  if (codegen::cpu::oneDnnAvx512()) {
    EXPECT_NE(calls.find("Kiln panel product (25x128x512"), std::string::npos) << calls;
    EXPECT_EQ(calls.find("convolution"), std::string::npos) << calls;
  } else {
    EXPECT_NE(calls.find("convolution"), std::string::npos) << calls;
  }
}

// A 1x1 convolution over 16 channels whose relu is a concatenation's operand becomes a product
// that stores its slice of the concatenation itself (convolution-to-matmul): against the
// interpreter, at odd sizes, beside a 3x3 convolution's slice.
TEST(CpuBackend, OneByOneConvolutionsIntoAConcatenationAsMatmuls) {
  std::string weights;
  for (int i = 0; i < 16 * 32; ++i)
    weights += (i ? ", " : "") + std::to_string(0.003 * ((i * 5) % 23) - 0.03);
  const std::string text = R"(
func @main(%x: f32[N,9,11,16], %k: f32[3,3,16,16]) -> (f32[N,9,11,48]) {
  %w = f32[1,1,16,32] constant() {value = [)" +
                           weights + R"(]}
  %c = f32[N,9,11,32] convolution(%x, %w) {dimension_numbers = "b01f_01io->b01f"}
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[N,9,11,32] broadcast_in_dim(%z) {dims = []}
  %y = f32[N,9,11,32] max(%c, %zb)
  %d = f32[N,9,11,16] convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %cat = f32[N,9,11,48] concatenate(%y, %d) {dimension = 3}
  return %cat
})";
  for (int64_t n : {1, 2}) {
    std::string calls = rewrittenAgainstInterpreter(instantiate(text, n, 0), "conv-into-slice.kir",
                                                    static_cast<unsigned>(n), 1e-5);
    EXPECT_EQ(calls.find("copied into its slice"), std::string::npos) << calls;
    EXPECT_TRUE(hasCall(calls, "matmul (" + std::to_string(99 * n) + "x16x32, IMPL")) << calls;
  }
}

TEST(CpuBackend, Reductions) {
  checkAgainstInterpreter("reductions", R"(
func @main(%x: f32[N,M], %y: f32[N,M]) -> (f32[N], f32[M], i64[N], i64[M], f32[], f32[N]) {
  %a = f32[N,M] mul(%x, %y)
  %s = f32[N] reduce(%a) {dims = [1], kind = sum}
  %m = f32[M] reduce(%x) {dims = [0], kind = max}
  %am = i64[N] argmax(%x) {axis = 1}
  %an = i64[M] argmin(%y) {axis = 0, select_last_index = true}
  %all = f32[] reduce(%x) {dims = [0, 1], kind = min}
  %h = f32[N,M] tanh(%y)
  %p = f32[N] reduce(%h) {dims = [1], kind = prod}
  %e = f32[N] exp(%p)
  return %s, %m, %am, %an, %all, %e
})");
}

// Rows long enough to split into partial accumulators (kernel::kReductionLanes): whole groups
// and a tail, float and integer kinds, a fused input, and rows reduced over an outer dim too.
TEST(CpuBackend, ReductionLanes) {
  checkAgainstInterpreter("lanes", R"(
func @main(%x: f32[N,M], %y: f32[N,M], %i: i32[N,M], %g: f32[M], %b: f32[M]) -> (f32[N], f32[N], f32[N], i32[N], i32[N], f32[N,M], f32[N,M], f32[M]) {
  %a = f32[N,M] mul(%x, %y)
  %s = f32[N] reduce(%a) {dims = [1], kind = sum}
  %mx = f32[N] reduce(%x) {dims = [1], kind = max}
  %mn = f32[N] reduce(%y) {dims = [1], kind = min}
  %is = i32[N] reduce(%i) {dims = [1], kind = sum}
  %im = i32[N] reduce(%i) {dims = [1], kind = max}
  %sm = f32[N,M] softmax(%a) {axis = 1}
  %ln = f32[N,M] layer_norm(%x, %g, %b) {axis = 1, epsilon = 1.0e-05}
  %c = f32[M] reduce(%x) {dims = [0], kind = sum}
  return %s, %mx, %mn, %is, %im, %sm, %ln, %c
})",
                          {{2, 32}, {3, 47}, {5, 300}, {40, 1000}});
}

// Reductions that keep the innermost dim (NHWC pooling, a global pool, a column reduction): the
// accumulators of the innermost dim update together in a vectorized loop, each in the
// interpreter's order. max, min and integer sums are therefore bit for bit the interpreter's;
// float sums agree within the file's tolerance (the interpreter sums in double).
TEST(CpuBackend, ReductionsKeepingTheInnermostDim) {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 8}, {3, 9}, {5, 33}};
  checkAgainstInterpreter("keep-innermost-exact", R"(
func @main(%x: f32[2,N,M,16], %y: f32[N,M], %i: i32[N,M]) -> (f32[2,N,M,16], f32[M], i32[M], f32[2,16]) {
  %a = f32[2,N,M,16] add(%x, %x)
  %mx = f32[2,N,M,16] reduce_window(%a) {kind = max, window_dimensions = [1, 3, 3, 1], window_strides = [1, 1, 1, 1], padding_low = [0, 1, 1, 0], padding_high = [0, 1, 1, 0]}
  %cs = f32[M] reduce(%y) {dims = [0], kind = min}
  %ci = i32[M] reduce(%i) {dims = [0], kind = sum}
  %gm = f32[2,16] reduce(%a) {dims = [1, 2], kind = max}
  return %mx, %cs, %ci, %gm
})",
                          shapes, true);
  checkAgainstInterpreter("keep-innermost-sums", R"(
func @main(%x: f32[2,N,M,16]) -> (f32[2,N,M,16], f32[2,16]) {
  %sm = f32[2,N,M,16] reduce_window(%x) {kind = sum, window_dimensions = [1, 2, 2, 1], window_strides = [1, 1, 1, 1], padding_low = [0, 0, 0, 0], padding_high = [0, 1, 1, 0]}
  %g = f32[2,16] reduce(%x) {dims = [1, 2], kind = sum}
  %half = f32[] constant() {value = [0.5]}
  %hb = f32[2,16] broadcast_in_dim(%half) {dims = []}
  %gh = f32[2,16] mul(%g, %hb)
  return %sm, %gh
})",
                          shapes);
}

// Reductions over H and W that keep a short row of channels (a squeeze-and-excitation pool):
// N x M x 32 of 128 x 128 and 64 x 64 split over 8 and 2 partial rows (splitRowReductions at
// kRowSplitWork), 7 x 9 does not; max and min exactly, the sum (its order changes) within the
// default tolerance.
TEST(CpuBackend, RowReductionsSplitOverThreads) {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{128, 128}, {64, 64}, {7, 9}};
  checkAgainstInterpreter("row-reductions-exact", R"(
func @main(%x: f32[1,N,M,32]) -> (f32[1,N,M,32], f32[1,32], f32[1,32]) {
  %a = f32[1,N,M,32] add(%x, %x)
  %mx = f32[1,32] reduce(%a) {dims = [1, 2], kind = max}
  %mn = f32[1,32] reduce(%x) {dims = [1, 2], kind = min}
  return %a, %mx, %mn
})",
                          shapes, true);
  checkAgainstInterpreter("row-reductions-sum", R"(
func @main(%x: f32[1,N,M,32]) -> (f32[1,N,M,32], f32[1,32]) {
  %s = f32[1,N,M,32] sigmoid(%x)
  %w = f32[1,N,M,32] mul(%x, %s)
  %g = f32[1,32] reduce(%w) {dims = [1, 2], kind = sum}
  return %w, %g
})",
                          shapes);
}

TEST(CpuBackend, RowNormalizationsWithFusedInputsAndEpilogues) {
  checkAgainstInterpreter("rows", R"(
func @main(%x: f32[N,M], %y: f32[N,M], %g: f32[M], %b: f32[M]) -> (f32[N,M], f32[N,M], f32[N,M]) {
  %a = f32[N,M] add(%x, %y)
  %sm = f32[N,M] softmax(%a) {axis = 1}
  %z = f32[N,M] mul(%sm, %y)
  %ls = f32[N,M] log_softmax(%x) {axis = 0}
  %ln = f32[N,M] layer_norm(%a, %g, %b) {axis = 1, epsilon = 1.0e-05}
  %r = f32[N,M] tanh(%ln)
  return %z, %ls, %r
})");
}

TEST(CpuBackend, Pooling) {
  checkAgainstInterpreter("pooling", R"(
func @main(%x: f32[1,N,M,M]) -> (f32[1,N,3,3], f32[1,N,3,3]) {
  %e = f32[1,N,M,M] exp(%x)
  %mx = f32[1,N,3,3] reduce_window(%e) {kind = max, window_dimensions = [1, 1, 3, 3], window_strides = [1, 1, 2, 2], padding_low = [0, 0, 1, 1], padding_high = [0, 0, 1, 1]}
  %sm = f32[1,N,3,3] reduce_window(%x) {kind = sum, window_dimensions = [1, 1, 2, 2], window_strides = [1, 1, 2, 2], padding_low = [0, 0, 0, 0], padding_high = [0, 0, 0, 0]}
  return %mx, %sm
})",
                          {{1, 6}, {3, 6}});
}

// YOLO's SPP after a convolution with SiLU: layout-assignment runs the activation, the stride-1
// poolings and the concatenate on NHWC data; and DenseNet's concatenate with a batch norm and relu
// after it before a convolution, whose channel loop partition-loops splits into one loop per
// input.
TEST(CpuBackend, PoolingPyramidAndConcatenatesOnChannelsLast) {
  checkAgainstInterpreter("spp-dense", R"(
func @main(%x: f32[1,3,M,M], %w: f32[8,3,1,1], %w2: f32[4,3,3,3], %w3: f32[4,24,1,1], %w4: f32[4,12,1,1], %g: f32[12], %b: f32[12]) -> (f32[1,4,M,M], f32[1,4,M,M]) {
  %c = f32[1,8,M,M] convolution(%x, %w)
  %s = f32[1,8,M,M] sigmoid(%c)
  %m = f32[1,8,M,M] mul(%c, %s)
  %p5 = f32[1,8,M,M] reduce_window(%m) {kind = max, window_dimensions = [1, 1, 5, 5], padding_low = [0, 0, 2, 2], padding_high = [0, 0, 2, 2]}
  %p9 = f32[1,8,M,M] reduce_window(%m) {kind = max, window_dimensions = [1, 1, 9, 9], padding_low = [0, 0, 4, 4], padding_high = [0, 0, 4, 4]}
  %k = f32[1,24,M,M] concatenate(%m, %p5, %p9) {dimension = 1}
  %d2 = f32[1,4,M,M] convolution(%x, %w2) {padding_low = [1, 1], padding_high = [1, 1]}
  %dk = f32[1,12,M,M] concatenate(%m, %d2) {dimension = 1}
  %mu = f32[12] constant() {value = [0.1, -0.2, 0.3, 0.0, 0.5, -0.1, 0.2, 0.1, -0.3, 0.4, 0.0, 0.2]}
  %var = f32[12] constant() {value = [1.0, 0.5, 2.0, 1.5, 0.8, 1.2, 0.9, 1.1, 0.7, 1.3, 1.0, 0.6]}
  %n = f32[1,12,M,M] batch_norm_inference(%dk, %g, %b, %mu, %var)
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[1,12,M,M] broadcast_in_dim(%z) {dims = []}
  %r = f32[1,12,M,M] max(%n, %zb)
  %o1 = f32[1,4,M,M] convolution(%k, %w3)
  %o2 = f32[1,4,M,M] convolution(%r, %w4)
  return %o1, %o2
})",
                          {{1, 5}, {1, 11}});
}

TEST(CpuBackend, ContractionsWithEpilogues) {
  checkAgainstInterpreter("contractions", R"(
func @main(%x: f32[N,M], %w: f32[M,7], %bias: f32[7], %img: f32[1,2,M,M], %k: f32[3,2,3,3], %kb: f32[3]) -> (f32[N,7], f32[1,3,M,M]) {
  %mm = f32[N,7] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[N,7] broadcast_in_dim(%bias) {dims = [1]}
  %s = f32[N,7] add(%mm, %bb)
  %g = f32[N,7] gelu(%s)
  %c = f32[1,3,M,M] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1]}
  %kbb = f32[1,3,M,M] broadcast_in_dim(%kb) {dims = [1]}
  %cb = f32[1,3,M,M] add(%c, %kbb)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[1,3,M,M] broadcast_in_dim(%zero) {dims = []}
  %relu = f32[1,3,M,M] max(%cb, %zb)
  return %g, %relu
})",
                          {{1, 4}, {3, 5}, {17, 9}});
}

// Every post-op kind, the chains that stop early (a stored intermediate, an op that is not a
// post-op, a second use), operands broadcast along several dims, a call that oneDNN cannot
// take with its post-ops, and one it cannot take at all (lhs_dilation with a kernel that is not
// a constant: Kiln's loops, post-ops included).
TEST(CpuBackend, ContractionPostOps) {
  const char* text = R"(
func @main(%x: f32[N,M], %w: f32[M,6], %w2: f32[M,6], %w3: f32[M,6], %b: f32[6], %r: f32[N,6], %s: f32[N], %img: f32[2,5,3,M], %k: f32[3,3,M,4], %kb: f32[4], %ir: f32[2,5,3,4]) -> (f32[N,6], f32[N,6], f32[N,6], f32[N,6], f32[2,5,3,4], f32[2,9,5,4], f32[N,6]) {
  %mm = f32[N,6] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[N,6] broadcast_in_dim(%b) {dims = [1]}
  %a1 = f32[N,6] add(%bb, %mm)
  %a2 = f32[N,6] add(%a1, %r)
  %lo = f32[] constant() {value = [-0.25]}
  %lob = f32[N,6] broadcast_in_dim(%lo) {dims = []}
  %hi = f32[] constant() {value = [0.5]}
  %hib = f32[N,6] broadcast_in_dim(%hi) {dims = []}
  %c1 = f32[N,6] max(%a2, %lob)
  %c2 = f32[N,6] min(%c1, %hib)
  %sb = f32[N,6] broadcast_in_dim(%s) {dims = [0]}
  %m1 = f32[N,6] mul(%c2, %sb)
  %sg = f32[N,6] sigmoid(%m1)
  %mm2 = f32[N,6] dot_general(%x, %w2) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[N,6] tanh(%mm2)
  %e = f32[N,6] exp(%t)
  %mm3 = f32[N,6] dot_general(%x, %w3) {lhs_contracting = [1], rhs_contracting = [0]}
  %g = f32[N,6] gelu(%mm3) {approximate = tanh}
  %gg = f32[N,6] add(%g, %g)
  %cv = f32[2,5,3,4] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %kbb = f32[2,5,3,4] broadcast_in_dim(%kb) {dims = [3]}
  %cb = f32[2,5,3,4] add(%cv, %kbb)
  %cr = f32[2,5,3,4] add(%ir, %cb)
  %cg = f32[2,5,3,4] gelu(%cr)
  %dl = f32[2,9,5,4] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], lhs_dilation = [2, 2], dimension_numbers = "b01f_01io->b01f"}
  %dlb = f32[2,9,5,4] broadcast_in_dim(%kb) {dims = [3]}
  %da = f32[2,9,5,4] add(%dl, %dlb)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[2,9,5,4] broadcast_in_dim(%zero) {dims = []}
  %dr = f32[2,9,5,4] max(%da, %zb)
  return %sg, %e, %gg, %a1, %cg, %dr, %t
})";
  checkAgainstInterpreter("post-ops", text, {{1, 2}, {3, 5}, {17, 9}});

  std::unique_ptr<Executable> exe = compileText(instantiate(text, 3, 5), "post-ops.kir");
  ASSERT_NE(exe, nullptr);
  std::string ir = kernelIr(*exe);
  // %a1 is a function output, so the first chain stops there and the rest is a loop.
  EXPECT_NE(ir.find("then add(%b, dims [1])\n"), std::string::npos) << ir;
  // %t is stored: the call writes it, exp reads it back.
  EXPECT_NE(ir.find("then tanh\n"), std::string::npos) << ir;
  // gelu's result has two uses in one add: the chain ends after gelu.
  EXPECT_NE(ir.find("then gelu_tanh\n"), std::string::npos) << ir;
  // The convolution whose library kernel does not take its post-ops: the call stores its bare
  // result, and a loop nest over it applies the post-ops in the kernel's code.
  EXPECT_NE(ir.find("call convolution(%img, %k, %cg) {"), std::string::npos) << ir;
  EXPECT_NE(ir.find("erf((%cg["), std::string::npos) << ir;
  // The one oneDNN cannot take: no call, Kiln's loops (choose_library_calls.h).
  EXPECT_EQ(ir.find("call convolution(%img, %k, %dr)"), std::string::npos) << ir;
  std::string calls = exe->libraryCallDetails(), notes;
  for (const kernel::Kernel& k : exe->kernels())
    for (const std::string& n : k.notes) notes += n + "\n";
  EXPECT_NE(calls.find("convolution mis-addresses post-op operands that are not per-channel"),
            std::string::npos)
      << calls;
  EXPECT_NE(notes.find("convolution mis-addresses post-op operands that are not per-channel"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("convolution: Kiln's loops (a convolution with lhs_dilation needs a "
                       "constant kernel"),
            std::string::npos)
      << notes;
  EXPECT_EQ(calls.find("reference kernel"), std::string::npos) << calls;
}

// SiLU after a product or a convolution, x * sigmoid(x) in either operand order, is one swish
// post-op (oneDNN's eltwise_swish) after the bias; with the sigmoid also an output the chain
// stops before it. Against the interpreter within 1e-5 (oneDNN's exp against the reference's).
TEST(CpuBackend, SwishPostOps) {
  const char* text = R"(
func @main(%x: f32[N,M], %w: f32[M,16], %w2: f32[M,16], %b: f32[16], %img: f32[1,5,3,M], %k: f32[3,3,M,16]) -> (f32[N,16], f32[1,5,3,16], f32[N,16], f32[N,16]) {
  %mm = f32[N,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[N,16] broadcast_in_dim(%b) {dims = [1]}
  %a = f32[N,16] add(%mm, %bb)
  %sa = f32[N,16] sigmoid(%a)
  %y = f32[N,16] mul(%a, %sa)
  %cv = f32[1,5,3,16] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %cb = f32[1,5,3,16] broadcast_in_dim(%b) {dims = [3]}
  %ca = f32[1,5,3,16] add(%cv, %cb)
  %cs = f32[1,5,3,16] sigmoid(%ca)
  %cy = f32[1,5,3,16] mul(%cs, %ca)
  %m2 = f32[N,16] dot_general(%x, %w2) {lhs_contracting = [1], rhs_contracting = [0]}
  %s2 = f32[N,16] sigmoid(%m2)
  %y2 = f32[N,16] mul(%m2, %s2)
  return %y, %cy, %y2, %s2
})";
  checkAgainstInterpreter("swish", text, {{1, 2}, {3, 5}, {17, 9}});
  std::unique_ptr<Executable> exe = compileText(instantiate(text, 3, 5), "swish.kir");
  ASSERT_NE(exe, nullptr);
  const std::string ir = kernelIr(*exe);
  EXPECT_NE(ir.find("then add(%b, dims [1]), swish\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("then add(%b, dims [3]), swish\n"), std::string::npos) << ir;
  // %s2 is an output: the call stores the bare product, a loop applies the rest.
  EXPECT_NE(ir.find("call dot_general(%x, %w2, %m2_tmp) {lhs_contracting = [1], "
                    "rhs_contracting = [0]}\n"),
            std::string::npos)
      << ir;
  const std::string calls = exe->libraryCallDetails();
  EXPECT_NE(calls.find("bias, post-ops swish)"), std::string::npos) << calls;

  // After a convolution oneDNN would run as Winograd (3x3, stride 1, 32 channels, constant
  // weights, where it has Winograd kernels) the swish stays a loop: those kernels take no swish.
  if (!codegen::cpu::oneDnnWinograd()) return;
  std::string weights;
  for (int i = 0; i < 3 * 3 * 32 * 32; ++i)
    weights += (i ? ", " : "") + std::to_string(0.001 * ((i * 7) % 61) - 0.03);
  const std::string wino = R"(
func @main(%x: f32[1,8,8,32]) -> (f32[1,8,8,32]) {
  %k = f32[3,3,32,32] constant() {value = [)" +
                           weights + R"(]}
  %c = f32[1,8,8,32] convolution(%x, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %s = f32[1,8,8,32] sigmoid(%c)
  %y = f32[1,8,8,32] mul(%c, %s)
  return %y
})";
  checkAgainstInterpreter("swish after winograd", wino, {{1, 1}});
  std::unique_ptr<Executable> w = compileText(wino, "swish_winograd.kir");
  ASSERT_NE(w, nullptr);
  // (Whether Winograd then runs is timed when the kernel is created: docs/codegen.md.)
  EXPECT_EQ(kernelIr(*w).find("swish"), std::string::npos) << kernelIr(*w);
}

// A constant f32[3,3,16,16] %name, f(i) at element i (sin or cos: terms that cancel), as a line
// of .kir: constant weights, what blocked convolutions need.
std::string constant3x3(const char* name, double (*f)(double)) {
  std::string s = "  %" + std::string(name) + " = f32[3,3,16,16] constant() {value = [";
  for (int i = 0; i < 2304; ++i) s += (i ? ", " : "") + std::to_string(f(double(i)));
  return s + "]}\n";
}

// libraryCallDetails() of `text` at N=6, M=5 compiled for one thread ("" after a failure).
std::string libraryCallsAt6x5(const std::string& text, const std::string& file) {
  auto parsed = parseModule(instantiate(text, 6, 5), file);
  if (!parsed.isOk()) {
    ADD_FAILURE() << parsed.status().str();
    return "";
  }
  CompileOptions o;
  o.threads = 1;
  auto exe = Executable::compile(std::move(*parsed), o);
  if (!exe.isOk()) {
    ADD_FAILURE() << exe.status().str();
    return "";
  }
  return (*exe)->libraryCallDetails();
}

// A chain of 3x3 convolutions with channels in blocks of 8 (nChw8c): the values between them,
// read and written only by them, stay blocked (no reorders); the block's input is reordered in, a
// residual read in the blocked layout, the result reordered out. Depthwise convolutions, and 1x1
// ones whose source is not blocked, compute on the IR layout (oneDNN's nhwc kernels are faster
// there), so the values they read or write are not blocked; nor is a value a loop also reads (%a,
// read by the tanh).
TEST(CpuBackend, BlockedConvolutionChain) {
  const std::string text = R"(
func @main(%img: f32[1,N,M,16], %b: f32[16]) -> (f32[1,N,M,16], f32[1,N,M,16]) {
)" + constant3x3("k", std::sin) +
                           constant3x3("k2", std::cos) +
                           R"(  %bb = f32[1,N,M,16] broadcast_in_dim(%b) {dims = [3]}
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[1,N,M,16] broadcast_in_dim(%zero) {dims = []}
  %c1 = f32[1,N,M,16] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %a1 = f32[1,N,M,16] add(%c1, %bb)
  %r1 = f32[1,N,M,16] max(%a1, %zb)
  %c2 = f32[1,N,M,16] convolution(%r1, %k2) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %a2 = f32[1,N,M,16] add(%c2, %r1)
  %r2 = f32[1,N,M,16] max(%a2, %zb)
  %c2b = f32[1,N,M,16] convolution(%r2, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %a2b = f32[1,N,M,16] add(%c2b, %r2)
  %r3 = f32[1,N,M,16] max(%a2b, %zb)
  %d0 = f32[3,3,1,16] iota() {dimension = 3}
  %dk = f32[3,3,1,16] cos(%d0)
  %dc = f32[1,N,M,16] convolution(%r3, %dk) {padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 16, dimension_numbers = "b01f_01io->b01f"}
  %p0 = f32[1,1,16,16] iota() {dimension = 2}
  %pk = f32[1,1,16,16] sin(%p0)
  %pc = f32[1,N,M,16] convolution(%dc, %pk) {dimension_numbers = "b01f_01io->b01f"}
  %a = f32[1,N,M,16] add(%pc, %r3)
  %c3 = f32[1,N,M,16] convolution(%a, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %t = f32[1,N,M,16] tanh(%a)
  return %c3, %t
})";
  // Six chained convolutions of 144-term f32 sums (weights sin and cos of the index, so terms
  // cancel), which oneDNN adds in another order than the interpreter (in double); each result
  // feeds the next, so the differences compound: measured 1.1e-4 of max |reference| at 14x13
  // (2.1e-5 with five). A wrong layout or a missed reorder is off by the order of the values.
  checkAgainstInterpreter("blocked-chain", text, {{1, 1}, {5, 3}, {14, 13}}, false, 3e-4);
  std::string calls = libraryCallsAt6x5(text, "blocked-chain.kir");
  for (const char* want : {"BLOCKED; reordered: source; stored blocked: result)",
                           "BLOCKED; stored blocked: source, result, post-op operand 0)",
                           "BLOCKED; reordered: result; stored blocked: source, post-op operand 0)",
                           "groups 16, IMPL, constant weights reordered)",
                           "1x1, IMPL, constant weights reordered, post-ops add)",
                           "BLOCKED; reordered: source, result)"})
    EXPECT_TRUE(hasCall(calls, want)) << want << "\n" << calls;
}

// 1x1 convolutions compute blocked when their source comes from a blocked convolution, through
// elementwise ops (a bottleneck: 3x3, then 1x1 layers with a residual): the data stays blocked
// from one to the next. A 1x1 convolution of a parameter stays on nhwc.
TEST(CpuBackend, BlockedOneByOneConvolutions) {
  const std::string text = R"(
func @main(%img: f32[1,N,M,16], %b: f32[16]) -> (f32[1,N,M,16], f32[1,N,M,32]) {
)" + constant3x3("k", std::sin) +
                           R"(  %w0 = f32[1,1,16,32] iota() {dimension = 2}
  %w = f32[1,1,16,32] cos(%w0)
  %v0 = f32[1,1,32,16] iota() {dimension = 3}
  %v = f32[1,1,32,16] sin(%v0)
  %bb = f32[1,N,M,16] broadcast_in_dim(%b) {dims = [3]}
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[1,N,M,16] broadcast_in_dim(%zero) {dims = []}
  %c1 = f32[1,N,M,16] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %a1 = f32[1,N,M,16] add(%c1, %bb)
  %r1 = f32[1,N,M,16] max(%a1, %zb)
  %p1 = f32[1,N,M,32] convolution(%r1, %w) {dimension_numbers = "b01f_01io->b01f"}
  %p2 = f32[1,N,M,16] convolution(%p1, %v) {dimension_numbers = "b01f_01io->b01f"}
  %a2 = f32[1,N,M,16] add(%p2, %r1)
  %r2 = f32[1,N,M,16] max(%a2, %zb)
  %q = f32[1,N,M,32] convolution(%img, %w) {dimension_numbers = "b01f_01io->b01f"}
  return %r2, %q
})";
  // Sums of at most 144 f32 terms through three chained layers: measured 2e-6 of max
  // |reference|; a wrong layout or a missed reorder is off by the order of the values.
  checkAgainstInterpreter("blocked-1x1", text, {{1, 1}, {5, 3}, {9, 7}}, false, 1e-4);
  std::string calls = libraryCallsAt6x5(text, "blocked-1x1.kir");
  for (const char* want : {"3x3, IMPL, constant weights reordered, bias, post-ops clamp, BLOCKED; "
                           "reordered: source; stored blocked: result)",
                           "1x1, IMPL, constant weights reordered, BLOCKED; stored blocked: "
                           "source, result)",
                           "1x1, IMPL, constant weights reordered, post-ops add+clamp, BLOCKED; "
                           "reordered: result; stored blocked: source, post-op operand 0)",
                           "1x1, IMPL, constant weights reordered)"})
    EXPECT_TRUE(hasCall(calls, want)) << want << "\n" << calls;
}

// Inverted-residual blocks (mobilenet_v2's): a 1x1 convolution expanding 8 channels to 40 (not
// a whole number of 16-float vectors) with a bias and relu6, a 3x3 depthwise one with a bias and
// relu6, and a 1x1 one projecting to 8 channels with a bias and the block's input as residual
// (stride 1), or to 12 channels without one (stride 2). Each runs as one Kiln kernel, row by row
// (codegen/cpu/inverted_residual.h), where AVX-512 is there; a chain whose depthwise result is
// also a function output stays three library calls. Values against the interpreter at 1 and 2
// threads (the rows split between the threads), batches of 1 and 3, rows of 13 pixels (the
// depthwise rows' groups of four inner pixels at both strides, and their edges): sums of at most 40
// f32 products per layer through three layers, measured within 2e-6 of max |reference|.
TEST(CpuBackend, InvertedResidualBlocks) {
  auto layer = [](const std::string& name, const std::string& shape, int64_t dimension,
                  double scale) {
    return "  %" + name + "0 = f32" + shape + " iota() {dimension = " + std::to_string(dimension) +
           "}\n  %" + name + "1 = f32" + shape + " sin(%" + name + "0)\n  %" + name +
           "s = f32[] constant() {value = [" + std::to_string(scale) + "]}\n  %" + name +
           "b = f32" + shape + " broadcast_in_dim(%" + name + "s) {dims = []}\n  %" + name +
           " = f32" + shape + " mul(%" + name + "1, %" + name + "b)\n";
  };
  // relu6 of %v (of `shape`), named %<out>.
  auto relu6 = [](const std::string& out, const std::string& v, const std::string& shape) {
    return "  %" + out + "z = f32" + shape + " broadcast_in_dim(%zero) {dims = []}\n  %" + out +
           "m = f32" + shape + " max(%" + v + ", %" + out + "z)\n  %" + out + "s = f32" + shape +
           " broadcast_in_dim(%six) {dims = []}\n  %" + out + " = f32" + shape + " min(%" + out +
           "m, %" + out + "s)\n";
  };
  auto conv = [](const std::string& out, const std::string& shape, const std::string& x,
                 const std::string& w, const std::string& bias, const std::string& extra) {
    return "  %" + out + "c = f32" + shape + " convolution(%" + x + ", %" + w + ") {" + extra +
           "dimension_numbers = \"b01f_01io->b01f\"}\n  %" + out + "bb = f32" + shape +
           " broadcast_in_dim(%" + bias + ") {dims = [3]}\n  %" + out + " = f32" + shape +
           " add(%" + out + "c, %" + out + "bb)\n";
  };
  const std::string dw = "padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 40, ";
  // sin(0.7 * (((3 dy + dx) * 40 + c)) * 0.4: the taps differ, so a mirrored or shifted window
  // gives other values.
  const std::string depthwiseWeights =
      "  %wdy = f32[3,3,1,40] iota() {dimension = 0}\n  %wdx = f32[3,3,1,40] iota() {dimension = "
      "1}\n  %wdc = f32[3,3,1,40] iota() {dimension = 3}\n  %three = f32[] constant() {value = "
      "[3.0]}\n  %forty = f32[] constant() {value = [40.0]}\n  %step = f32[] constant() {value = "
      "[0.7]}\n  %scale = f32[] constant() {value = [0.4]}\n  %t3 = f32[3,3,1,40] "
      "broadcast_in_dim(%three) {dims = []}\n  %t40 = f32[3,3,1,40] broadcast_in_dim(%forty) {dims "
      "= []}\n  %tst = f32[3,3,1,40] broadcast_in_dim(%step) {dims = []}\n  %tsc = f32[3,3,1,40] "
      "broadcast_in_dim(%scale) {dims = []}\n  %i0 = f32[3,3,1,40] mul(%wdy, %t3)\n  %i1 = "
      "f32[3,3,1,40] add(%i0, %wdx)\n  %i2 = f32[3,3,1,40] mul(%i1, %t40)\n  %i3 = f32[3,3,1,40] "
      "add(%i2, %wdc)\n  %i4 = f32[3,3,1,40] mul(%i3, %tst)\n  %i5 = f32[3,3,1,40] sin(%i4)\n  "
      "%wd = f32[3,3,1,40] mul(%i5, %tsc)\n";
  // Three chains one after another (the planner forms a custom kernel of each that qualifies).
  std::string text =
      "func @main(%x: f32[N,9,13,8], %b40: f32[40], %c40: f32[40], %b8: f32[8], %b12: f32[12]) "
      "-> (f32[N,9,13,8], f32[N,5,7,12], f32[N,5,7,12], f32[N,5,7,40]) {\n"
      "  %zero = f32[] constant() {value = [0.0]}\n  %six = f32[] constant() {value = [6.0]}\n" +
      layer("we", "[1,1,8,40]", 3, 0.5) + depthwiseWeights + layer("wp", "[1,1,40,8]", 2, 0.2) +
      layer("wq", "[1,1,40,12]", 3, 0.2) + layer("wf", "[1,1,12,40]", 3, 0.3) +
      // Stride 1 with the residual %x.
      conv("ea", "[N,9,13,40]", "x", "we", "b40", "") + relu6("ra", "ea", "[N,9,13,40]") +
      conv("da", "[N,9,13,40]", "ra", "wd", "c40", dw) + relu6("sa", "da", "[N,9,13,40]") +
      conv("pa", "[N,9,13,8]", "sa", "wp", "b8", "") + "  %outa = f32[N,9,13,8] add(%pa, %x)\n" +
      // Stride 2, no residual, on a value that dies at the block's first layer: the block's
      // result must not take its memory (the block writes it while it still reads the input).
      "  %twice = f32[N,9,13,8] add(%outa, %outa)\n" +
      conv("eb", "[N,9,13,40]", "twice", "we", "b40", "") + relu6("rb", "eb", "[N,9,13,40]") +
      conv("db", "[N,5,7,40]", "rb", "wd", "c40", "window_strides = [2, 2], " + dw) +
      relu6("sb", "db", "[N,5,7,40]") + conv("outb", "[N,5,7,12]", "sb", "wq", "b12", "") +
      // The depthwise result is also an output: not a block.
      conv("ec", "[N,5,7,40]", "outb", "wf", "b40", "") + relu6("rc", "ec", "[N,5,7,40]") +
      conv("dc", "[N,5,7,40]", "rc", "wd", "c40", dw) + relu6("sc", "dc", "[N,5,7,40]") +
      conv("outc", "[N,5,7,12]", "sc", "wq", "b12", "") + "  return %outa, %outb, %outc, %sc\n}";
  checkAgainstInterpreter("inverted-residual", text, {{1, 1}, {3, 1}}, false, 1e-4);
  std::string calls = libraryCallsAt6x5(text, "inverted-residual.kir");
  if (!codegen::cpu::invertedResidualAvailable()) GTEST_SKIP() << "no AVX-512 here: " << calls;
  EXPECT_TRUE(hasCall(calls, "Kiln inverted-residual block (8 -> 40 -> 8 channels, 9x13, "
                             "depthwise stride 1, residual, rows fused)"))
      << calls;
  EXPECT_TRUE(hasCall(calls, "Kiln inverted-residual block (8 -> 40 -> 12 channels, 9x13, "
                             "depthwise stride 2, rows fused)"))
      << calls;
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 9) << calls;
  // The third chain's calls: oneDNN's.
  EXPECT_TRUE(hasCall(calls, "oneDNN convolution (nhwc, hwio -> nhwc, 3x3, groups 40, ")) << calls;
  EXPECT_EQ(std::count(calls.begin(), calls.end(), 'K'), 2) << calls;  // "Kiln ..." twice
}

// Convolutions with constant weights (oneDNN's jit implementations, weights reordered) and a
// residual and per-channel bias as post-ops; a depthwise one too.
TEST(CpuBackend, ConstantWeightConvolutionPostOps) {
  checkAgainstInterpreter("conv-post-ops", R"(
func @main(%img: f32[1,N,M,32], %res: f32[1,N,M,32], %b: f32[32]) -> (f32[1,N,M,32], f32[1,N,M,32]) {
  %i0 = f32[3,3,32,32] iota() {dimension = 2}
  %i1 = f32[3,3,32,32] iota() {dimension = 3}
  %i2 = f32[3,3,32,32] iota() {dimension = 0}
  %s0 = f32[3,3,32,32] mul(%i0, %i1)
  %s1 = f32[3,3,32,32] add(%s0, %i2)
  %k = f32[3,3,32,32] sin(%s1)
  %c = f32[1,N,M,32] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %bb = f32[1,N,M,32] broadcast_in_dim(%b) {dims = [3]}
  %cb = f32[1,N,M,32] add(%c, %bb)
  %cr = f32[1,N,M,32] add(%cb, %res)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[1,N,M,32] broadcast_in_dim(%zero) {dims = []}
  %o1 = f32[1,N,M,32] max(%cr, %zb)
  %d0 = f32[3,3,1,32] iota() {dimension = 3}
  %d1 = f32[3,3,1,32] iota() {dimension = 1}
  %d2 = f32[3,3,1,32] add(%d0, %d1)
  %dk = f32[3,3,1,32] cos(%d2)
  %dc = f32[1,N,M,32] convolution(%o1, %dk) {padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 32, dimension_numbers = "b01f_01io->b01f"}
  %db = f32[1,N,M,32] add(%dc, %res)
  %six = f32[] constant() {value = [6.0]}
  %sb = f32[1,N,M,32] broadcast_in_dim(%six) {dims = []}
  %o2 = f32[1,N,M,32] clamp(%zb, %db, %sb)
  return %o1, %o2
})",
                          {{1, 1}, {5, 3}, {14, 13}});
}

TEST(CpuBackend, AttentionGatherAndOpaqueOps) {
  checkAgainstInterpreter("opaque", R"(
func @main(%q: f32[2,N,8], %k: f32[2,M,8], %v: f32[2,M,8], %t: f32[M,4], %i: i64[N,1]) -> (f32[2,N,8], f32[N,4], f32[2,M,8]) {
  %o = f32[2,N,8] attention(%q, %k, %v) {causal = false}
  %r = f32[2,N,8] tanh(%o)
  %zero = i64[] constant() {value = [0]}
  %zb = i64[N,1] broadcast_in_dim(%zero) {dims = []}
  %ai = i64[N,1] max(%i, %zb)
  %g = f32[N,4] gather(%t, %ai) {offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1, slice_sizes = [1, 4]}
  %eg = f32[N,4] exp(%g)
  %cs = f32[2,M,8] cumsum(%v) {axis = 1}
  return %r, %eg, %cs
})",
                          {{1, 1}, {3, 5}, {17, 33}});
}

// The opaque anchors' loop lowerings (src/kernel/lower_opaque.h) follow the reference kernels
// bit for bit: these compare exactly. 130x129 makes the outer loops parallel.
TEST(CpuBackend, CumsumLoops) {
  checkAgainstInterpreter("cumsum", R"(
func @main(%x: f32[N,M], %h: f16[N,M], %b: bf16[M,N], %i: i32[N,M], %u: u8[N,M], %d: f64[N,M], %t: f32[2,N,M], %l: i64[N,M]) -> (f32[N,M], f32[N,M], f32[N,M], f16[N,M], bf16[M,N], i32[N,M], u8[N,M], f64[N,M], f32[2,N,M], i64[N,M]) {
  %c0 = f32[N,M] cumsum(%x) {axis = 1}
  %c1 = f32[N,M] cumsum(%x) {axis = 0, exclusive = true}
  %c2 = f32[N,M] cumsum(%x) {axis = 1, reverse = true}
  %c3 = f16[N,M] cumsum(%h) {axis = 1, exclusive = true, reverse = true}
  %c4 = bf16[M,N] cumsum(%b) {axis = 0}
  %c5 = i32[N,M] cumsum(%i) {axis = 1, reverse = true}
  %c6 = u8[N,M] cumsum(%u) {axis = 1}
  %c7 = f64[N,M] cumsum(%d) {axis = 0, reverse = true}
  %c8 = f32[2,N,M] cumsum(%t) {axis = 1, exclusive = true}
  %c9 = i64[N,M] cumsum(%l) {axis = 0}
  return %c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7, %c8, %c9
})",
                          {{1, 1}, {3, 5}, {17, 33}, {130, 129}}, true);
}

// sqrt(ceil(x)) holds NaN, -0, +0 and repeated values: NaN ordering, ties (stable by index) and
// -0 == +0 all show.
TEST(CpuBackend, SortAndTopKLoops) {
  checkAgainstInterpreter("sort", R"(
func @main(%x: f32[N,M], %y: f32[N,7], %i: i32[N,M], %h: f16[M,N], %b: bool[N,M], %u: u32[N,7], %z: f32[2,N,M]) -> (f32[N,M], i64[N,M], f32[N,M], i64[N,M], f32[N,3], i64[N,3], f32[N,3], i64[N,3], i32[N,M], i64[N,M], f16[M,N], i64[M,N], bool[N,M], i64[N,M], u32[N,2], i64[N,2], f32[2,N,M], i64[2,N,M]) {
  %c = f32[N,M] ceil(%x)
  %q = f32[N,M] sqrt(%c)
  %sa, %ia = (f32[N,M], i64[N,M]) sort(%q) {dimension = 1}
  %sd, %id = (f32[N,M], i64[N,M]) sort(%q) {dimension = 0, descending = true}
  %cy = f32[N,7] ceil(%y)
  %qy = f32[N,7] sqrt(%cy)
  %tl, %til = (f32[N,3], i64[N,3]) top_k(%qy) {k = 3, axis = 1}
  %ts, %tis = (f32[N,3], i64[N,3]) top_k(%qy) {k = 3, axis = 1, largest = false}
  %si, %sii = (i32[N,M], i64[N,M]) sort(%i) {dimension = 1, descending = true}
  %hc = f16[M,N] ceil(%h)
  %hq = f16[M,N] sqrt(%hc)
  %sh, %ish = (f16[M,N], i64[M,N]) sort(%hq) {dimension = 0}
  %sb, %isb = (bool[N,M], i64[N,M]) sort(%b) {dimension = 1}
  %tu, %itu = (u32[N,2], i64[N,2]) top_k(%u) {k = 2, axis = 1, largest = false}
  %cz = f32[2,N,M] ceil(%z)
  %sz, %isz = (f32[2,N,M], i64[2,N,M]) sort(%cz) {dimension = 1, descending = true}
  return %sa, %ia, %sd, %id, %tl, %til, %ts, %tis, %si, %sii, %sh, %ish, %sb, %isb, %tu, %itu, %sz, %isz
})",
                          {{1, 1}, {3, 5}, {17, 33}, {40, 130}}, true);
}

// Sort and top_k rows up to the cpu target's limits (cpu_target.cpp: top_k 32, sort 256) rank
// each element in loops; longer rows stay a call of the host's sort (tests/lit/kernel/
// sort-rows.kir checks which runs where). Both agree with the interpreter bit for bit: the NaN
// order, ties by index and -0 == +0, along either axis, for k = 1 and several dtypes.
TEST(CpuBackend, SortAndTopKRows) {
  const char* text = R"(
func @main(%x: f32[N,200], %y: f32[160,N], %i: i32[N,24], %h: f16[N,200], %z: f32[N,300]) -> (f32[N,5], i64[N,5], f32[N,12], i64[N,12], f32[1,N], i64[1,N], i32[N,3], i64[N,3], f16[N,4], i64[N,4], f32[N,1], i64[N,1], f32[N,200], i64[N,200], f32[N,300], i64[N,300]) {
  %c = f32[N,200] ceil(%x)
  %q = f32[N,200] sqrt(%c)
  %t0, %i0 = (f32[N,5], i64[N,5]) top_k(%q) {k = 5, axis = 1}
  %t1, %i1 = (f32[N,12], i64[N,12]) top_k(%q) {k = 12, axis = 1, largest = false}
  %cy = f32[160,N] ceil(%y)
  %t2, %i2 = (f32[1,N], i64[1,N]) top_k(%cy) {k = 1, axis = 0}
  %t3, %i3 = (i32[N,3], i64[N,3]) top_k(%i) {k = 3, axis = 1, largest = false}
  %hc = f16[N,200] ceil(%h)
  %t4, %i4 = (f16[N,4], i64[N,4]) top_k(%hc) {k = 4, axis = 1}
  %t5, %i5 = (f32[N,1], i64[N,1]) top_k(%c) {k = 1, axis = 1, largest = false}
  %s0, %o0 = (f32[N,200], i64[N,200]) sort(%q) {dimension = 1, descending = true}
  %cz = f32[N,300] ceil(%z)
  %s1, %o1 = (f32[N,300], i64[N,300]) sort(%cz) {dimension = 1}
  return %t0, %i0, %t1, %i1, %t2, %i2, %t3, %i3, %t4, %i4, %t5, %i5, %s0, %o0, %s1, %o1
})";
  checkAgainstInterpreter("sort and top_k", text, {{1, 1}, {3, 1}, {17, 1}, {130, 1}}, true);

  std::unique_ptr<Executable> exe = compileText(instantiate(text, 3, 1), "sort-rows.kir");
  ASSERT_NE(exe, nullptr);
  std::string ir = kernelIr(*exe);
  for (const char* call : {"call top_k(%q, %t0, %i0)", "call top_k(%cy, %t2, %i2)",
                           "call top_k(%hc, %t4, %i4)", "call sort(%cz, %s1, %o1)"})
    EXPECT_NE(ir.find(call), std::string::npos) << call << "\n" << ir;
  for (const char* loops : {"call top_k(%i,", "call sort(%q,"})
    EXPECT_EQ(ir.find(loops), std::string::npos) << loops << "\n" << ir;
  // The calls name the host's sort, not a reference kernel.
  const std::string calls = exe->libraryCallDetails();
  EXPECT_NE(calls.find("sort: Kiln's host sort (rows longer than"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("reference kernel"), std::string::npos) << calls;
}

// Indices reduced into range (duplicates galore) and raw (in [-20, 20]: windows out of bounds
// are skipped); every combiner, NaN updates and -0/+0 ties for max/min (ceil gives -0, floor
// +0; the current value stays on a tie), several dtypes, 2-D windows,
// the index vector along dim 0 and implicit, and a window along the operand's first dim.
TEST(CpuBackend, ScatterLoops) {
  const std::string window =
      "update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
      "index_vector_dim = 1";
  std::string text = R"(
func @main(%x: f32[N,M], %i: i64[7,1], %u: f32[7,M], %v: i64[7], %xi: i32[N,M], %ui: i32[7,M], %xb: bool[N,M], %ub: bool[7,M], %xh: f16[N,M], %uh: f16[7,M], %x8: u8[N,M], %u8: u8[7,M], %w: f32[9,6], %wi: i64[5,2], %wu: f32[5,2,3], %uc: f32[N,7]) -> (f32[N,M], f32[N,M], f32[N,M], f32[N,M], f32[N,M], f32[N,M], f32[N,M], i32[N,M], bool[N,M], bool[N,M], bool[N,M], f16[N,M], u8[N,M], f32[9,6], f32[N,M], f32[N,M]) {
  %n = i64[] constant() {value = [N]}
  %nb = i64[7,1] broadcast_in_dim(%n) {dims = []}
  %ai = i64[7,1] abs(%i)
  %ri = i64[7,1] rem(%ai, %nb)
  %cx = f32[N,M] ceil(%x)
  %fx = f32[N,M] floor(%x)
  %cu = f32[7,M] ceil(%u)
  %fu = f32[7,M] floor(%u)
  %nu = f32[7,M] sqrt(%cu)
  %pu = f32[7,M] sqrt(%fu)
  %s0 = f32[N,M] scatter(%cx, %ri, %nu) {WINDOW}
  %s1 = f32[N,M] scatter(%x, %ri, %u) {WINDOW, reduction = add}
  %s2 = f32[N,M] scatter(%x, %ri, %u) {WINDOW, reduction = mul}
  %s3 = f32[N,M] scatter(%cx, %ri, %pu) {WINDOW, reduction = max}
  %s4 = f32[N,M] scatter(%fx, %ri, %nu) {WINDOW, reduction = min}
  %s5 = f32[N,M] scatter(%x, %i, %u) {WINDOW, reduction = add}
  %nv = i64[7] broadcast_in_dim(%n) {dims = []}
  %av = i64[7] abs(%v)
  %rv = i64[7] rem(%av, %nv)
  %s6 = f32[N,M] scatter(%x, %rv, %u) {WINDOW}
  %s7 = i32[N,M] scatter(%xi, %ri, %ui) {WINDOW, reduction = add}
  %s8 = bool[N,M] scatter(%xb, %ri, %ub) {WINDOW, reduction = max}
  %s9 = bool[N,M] scatter(%xb, %ri, %ub) {WINDOW, reduction = min}
  %s10 = bool[N,M] scatter(%xb, %ri, %ub) {WINDOW}
  %s11 = f16[N,M] scatter(%xh, %ri, %uh) {WINDOW, reduction = add}
  %s12 = u8[N,M] scatter(%x8, %ri, %u8) {WINDOW, reduction = mul}
  %mods = i64[2] constant() {value = [9, 5]}
  %mb = i64[5,2] broadcast_in_dim(%mods) {dims = [1]}
  %aw = i64[5,2] abs(%wi)
  %rw = i64[5,2] rem(%aw, %mb)
  %s13 = f32[9,6] scatter(%w, %rw, %wu) {update_window_dims = [1, 2], inserted_window_dims = [], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1, reduction = add}
  %rt = i64[1,7] transpose(%ri) {permutation = [1, 0]}
  %s14 = f32[N,M] scatter(%x, %rt, %u) {update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 0, reduction = max}
  %m = i64[] constant() {value = [M]}
  %mc = i64[7,1] broadcast_in_dim(%m) {dims = []}
  %rc = i64[7,1] rem(%ai, %mc)
  %s15 = f32[N,M] scatter(%x, %rc, %uc) {update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], index_vector_dim = 1}
  return %s0, %s1, %s2, %s3, %s4, %s5, %s6, %s7, %s8, %s9, %s10, %s11, %s12, %s13, %s14, %s15
})";
  text = std::regex_replace(text, std::regex("WINDOW"), window);
  checkAgainstInterpreter("scatter", text, {{1, 1}, {3, 5}, {17, 33}, {130, 129}}, true);
}

// Every mode, coordinate transform and nearest mode; scales; exclude_outside; up and down
// sampling, outputs of extent 1, all four dims resized; several dtypes; %s halved and doubled
// puts nearest's source coordinates exactly halfway (the round_prefer_* ties).
TEST(CpuBackend, ResizeLoops) {
  checkAgainstInterpreter("resize", R"(
func @main(%x: f32[1,2,N,M], %h: f16[1,2,N,M], %b: bf16[1,2,N,M], %d: f64[1,2,N,M], %i: i32[1,2,N,M], %z: bool[1,2,N,M], %s: f32[1,1,6,8]) -> (f32[1,2,5,7], f32[1,2,9,4], f32[1,2,2,11], f32[1,2,5,3], i32[1,2,6,6], bool[2,1,4,5], f32[1,2,5,7], f32[1,2,9,4], f32[1,2,1,6], f32[1,2,4,8], f16[1,2,7,5], f64[2,3,5,4], f32[1,2,5,7], f32[1,2,8,3], bf16[1,2,6,9], f32[2,3,4,5], f32[1,2,N,M], f32[1,2,3,3], f32[1,1,3,4], f32[1,1,3,4], f32[1,1,12,16], f32[1,1,12,16]) {
  %n0 = f32[1,2,5,7] resize(%x) {mode = nearest}
  %n1 = f32[1,2,9,4] resize(%x) {mode = nearest, coordinate_transformation_mode = asymmetric, nearest_mode = floor}
  %n2 = f32[1,2,2,11] resize(%x) {mode = nearest, coordinate_transformation_mode = align_corners, nearest_mode = ceil}
  %n3 = f32[1,2,5,3] resize(%x) {mode = nearest, coordinate_transformation_mode = tf_half_pixel_for_nn, nearest_mode = round_prefer_ceil}
  %n4 = i32[1,2,6,6] resize(%i) {mode = nearest, coordinate_transformation_mode = half_pixel_symmetric}
  %n5 = bool[2,1,4,5] resize(%z) {mode = nearest, coordinate_transformation_mode = pytorch_half_pixel}
  %l0 = f32[1,2,5,7] resize(%x) {mode = linear}
  %l1 = f32[1,2,9,4] resize(%x) {mode = linear, coordinate_transformation_mode = align_corners}
  %l2 = f32[1,2,1,6] resize(%x) {mode = linear, coordinate_transformation_mode = pytorch_half_pixel}
  %l3 = f32[1,2,4,8] resize(%x) {mode = linear, coordinate_transformation_mode = asymmetric, scales = [1.0, 1.0, 1.5, 2.5]}
  %l4 = f16[1,2,7,5] resize(%h) {mode = linear, coordinate_transformation_mode = half_pixel_symmetric}
  %l5 = f64[2,3,5,4] resize(%d) {mode = linear}
  %c0 = f32[1,2,5,7] resize(%x) {mode = cubic}
  %c1 = f32[1,2,8,3] resize(%x) {mode = cubic, cubic_coeff_a = -0.5, exclude_outside = true}
  %c2 = bf16[1,2,6,9] resize(%b) {mode = cubic, coordinate_transformation_mode = align_corners, exclude_outside = true}
  %c3 = f32[2,3,4,5] resize(%x) {mode = cubic, coordinate_transformation_mode = tf_half_pixel_for_nn}
  %c4 = f32[1,2,N,M] resize(%x) {mode = linear, scales = [1.0, 1.0, 2.0, 0.5]}
  %c5 = f32[1,2,3,3] resize(%x) {mode = cubic, coordinate_transformation_mode = half_pixel_symmetric, scales = [1.0, 1.0, 0.6, 1.7]}
  %r0 = f32[1,1,3,4] resize(%s) {mode = nearest}
  %r1 = f32[1,1,3,4] resize(%s) {mode = nearest, nearest_mode = round_prefer_ceil}
  %r2 = f32[1,1,12,16] resize(%s) {mode = nearest, coordinate_transformation_mode = asymmetric}
  %r3 = f32[1,1,12,16] resize(%s) {mode = nearest, coordinate_transformation_mode = asymmetric, nearest_mode = round_prefer_ceil}
  return %n0, %n1, %n2, %n3, %n4, %n5, %l0, %l1, %l2, %l3, %l4, %l5, %c0, %c1, %c2, %c3, %c4, %c5, %r0, %r1, %r2, %r3
})",
                          {{1, 1}, {3, 5}, {17, 33}}, true);
}

// A nearest resize by whole factors (each element repeated k times, or every k-th kept, along
// each dim) is data movement, fused into its consumer as an index map: the feature pyramid's
// upsample and add in NHWC is one loop kernel. One whose source index is no such map (ceil
// rounding, a factor of 1.5) stays a kernel of its own. Values bit for bit.
TEST(CpuBackend, NearestResizeByWholeFactorsFuses) {
  const std::string text = R"(
func @main(%x: f32[1,N,M,8], %y: f32[1,N2,M3,8], %u: f32[1,6,4,8]) -> (f32[1,N2,M3,8], f32[1,3,2,8], f32[1,6,6,8]) {
  %r = f32[1,N2,M3,8] resize(%x) {mode = nearest, coordinate_transformation_mode = asymmetric, nearest_mode = floor, scales = [1.0, 2.0, 3.0, 1.0]}
  %a = f32[1,N2,M3,8] add(%r, %y)
  %d = f32[1,3,2,8] resize(%u) {mode = nearest}
  %e = f32[1,3,2,8] add(%d, %d)
  %c = f32[1,6,6,8] resize(%u) {mode = nearest, coordinate_transformation_mode = asymmetric}
  return %a, %e, %c
})";
  auto sized = [&](int64_t n, int64_t m) {
    std::string t = std::regex_replace(text, std::regex("\\bN2\\b"), std::to_string(2 * n));
    t = std::regex_replace(t, std::regex("\\bM3\\b"), std::to_string(3 * m));
    return t;
  };
  checkAgainstInterpreter("nearest resize", sized(5, 7), {{5, 7}}, true);
  auto exe = compileText(instantiate(sized(5, 7), 5, 7), "nearest_resize.kir");
  ASSERT_NE(exe, nullptr);
  const std::string ir = kernelIr(*exe);
  // The upsample reads x at (h / 2, w / 3) inside the add's kernel; the downsample at
  // (h * 2, w * 2) inside the add of the second; 4 -> 6 along w (1.5) stays opaque.
  EXPECT_NE(ir.find("_loop(in %x: f32[1,5,7,8], in %y: f32[1,10,21,8], out %a"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("_loop(in %u: f32[1,6,4,8], out %e"), std::string::npos) << ir;
  EXPECT_NE(ir.find("_opaque(in %u: f32[1,6,4,8], out %c"), std::string::npos) << ir;
}

// Every mode x padding mode x align_corners; a grid with NaN, infinite and far-out coordinates;
// f16 and f64; an empty input with zeros padding; a grid large enough for a parallel loop.
TEST(CpuBackend, GridSampleLoops) {
  std::string text = R"(
func @main(%x: f32[2,3,N,M], %g: f32[2,5,4,2], %xh: f16[1,2,N,M], %gh: f16[1,3,3,2], %xd: f64[1,2,N,M], %gd: f64[1,3,3,2], %e: f32[1,2,0,3], %ge: f32[1,3,2,2], %gb: f32[2,N,M,2]) -> (OUTS) {
BODY  %lo = f32[] constant() {value = [-1.5]}
  %hi = f32[] constant() {value = [1.5]}
  %five = f32[] constant() {value = [5.0]}
  %zero = f32[] constant() {value = [0.0]}
  %lob = f32[2,5,4,2] broadcast_in_dim(%lo) {dims = []}
  %hib = f32[2,5,4,2] broadcast_in_dim(%hi) {dims = []}
  %fiveb = f32[2,5,4,2] broadcast_in_dim(%five) {dims = []}
  %zerob = f32[2,5,4,2] broadcast_in_dim(%zero) {dims = []}
  %far = f32[2,5,4,2] mul(%g, %fiveb)
  %inf = f32[2,5,4,2] div(%g, %zerob)
  %nan = f32[2,5,4,2] sqrt(%g)
  %below = bool[2,5,4,2] compare(%g, %lob) {direction = lt}
  %above = bool[2,5,4,2] compare(%g, %hib) {direction = gt}
  %m1 = f32[2,5,4,2] select(%above, %inf, %far)
  %mix = f32[2,5,4,2] select(%below, %nan, %m1)
  %x0 = f32[2,3,5,4] grid_sample(%x, %mix) {padding_mode = reflection}
  %x1 = f32[2,3,5,4] grid_sample(%x, %mix) {mode = nearest, padding_mode = reflection, align_corners = true}
  %x2 = f32[2,3,5,4] grid_sample(%x, %mix) {mode = bicubic, padding_mode = border}
  %x3 = f32[2,3,5,4] grid_sample(%x, %mix) {mode = bicubic, padding_mode = reflection}
  %x4 = f32[2,3,5,4] grid_sample(%x, %mix)
  %h0 = f16[1,2,3,3] grid_sample(%xh, %gh) {mode = bicubic, padding_mode = reflection, align_corners = true}
  %h1 = f16[1,2,3,3] grid_sample(%xh, %gh) {padding_mode = border}
  %d0 = f64[1,2,3,3] grid_sample(%xd, %gd) {mode = bicubic}
  %d1 = f64[1,2,3,3] grid_sample(%xd, %gd) {mode = nearest, padding_mode = reflection}
  %e0 = f32[1,2,3,2] grid_sample(%e, %ge) {mode = bicubic}
  %b0 = f32[2,3,N,M] grid_sample(%x, %gb) {mode = bicubic, padding_mode = reflection}
  return RESULTS
})";
  std::string outs, body, results;
  int count = 0;
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (const char* align : {"false", "true"}) {
        std::string r = "%s" + std::to_string(count++);
        body += "  " + r + " = f32[2,3,5,4] grid_sample(%x, %g) {mode = " + mode +
                ", padding_mode = " + padding + ", align_corners = " + align + "}\n";
        outs += "f32[2,3,5,4], ";
        results += r + ", ";
      }
  outs += "f32[2,3,5,4], f32[2,3,5,4], f32[2,3,5,4], f32[2,3,5,4], f32[2,3,5,4], f16[1,2,3,3], "
          "f16[1,2,3,3], f64[1,2,3,3], f64[1,2,3,3], f32[1,2,3,2], f32[2,3,N,M]";
  results += "%x0, %x1, %x2, %x3, %x4, %h0, %h1, %d0, %d1, %e0, %b0";
  text = std::regex_replace(text, std::regex("OUTS"), outs);
  text = std::regex_replace(text, std::regex("BODY"), body);
  text = std::regex_replace(text, std::regex("RESULTS"), results);
  checkAgainstInterpreter("grid_sample", text, {{1, 1}, {3, 5}, {17, 33}}, true);
}

// The opaque anchors lower to loops, not library calls; a sort row past 4096 elements (O(n^2)
// ranking) keeps its call.
TEST(CpuBackend, OpaqueOpsLowerToLoops) {
  auto kernelsOf = [](const char* text) {
    std::unique_ptr<Executable> exe = compileText(text, "opaque.kir");
    return exe ? kernelIr(*exe) : std::string();
  };
  std::string ir = kernelsOf(R"(
func @main(%x: f32[4,6], %i: i64[3,1], %u: f32[3,6], %img: f32[1,2,4,6], %g: f32[1,3,3,2]) -> (f32[4,6], f32[4,6], i64[4,6], f32[4,2], i64[4,2], f32[4,6], f32[1,2,8,9], f32[1,2,3,3]) {
  %cs = f32[4,6] cumsum(%x) {axis = 1}
  %sv, %si = (f32[4,6], i64[4,6]) sort(%x) {dimension = 1}
  %tv, %ti = (f32[4,2], i64[4,2]) top_k(%x) {k = 2, axis = 1}
  %sc = f32[4,6] scatter(%x, %i, %u) {update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1, reduction = add}
  %rs = f32[1,2,8,9] resize(%img) {mode = cubic}
  %gs = f32[1,2,3,3] grid_sample(%img, %g) {mode = bicubic, padding_mode = reflection}
  return %cs, %sv, %si, %tv, %ti, %sc, %rs, %gs
})");
  EXPECT_EQ(ir.find("call "), std::string::npos) << ir;
  // cumsum's running sum, the sorts' ranks, scatter's window start, the resampling taps.
  for (const char* scratch :
       {"local %sum", "local %rank", "local %start", "local %weight", "local %wx"})
    EXPECT_NE(ir.find(scratch), std::string::npos) << scratch << " in\n" << ir;
  std::string longRow = kernelsOf(R"(
func @main(%x: f32[2,5000]) -> (f32[2,5000], i64[2,5000]) {
  %sv, %si = (f32[2,5000], i64[2,5000]) sort(%x) {dimension = 1}
  return %sv, %si
})");
  EXPECT_NE(longRow.find("call sort("), std::string::npos) << longRow;
}

TEST(CpuBackend, MultiOutputAndSiblingKernels) {
  checkAgainstInterpreter("siblings", R"(
func @main(%x: f32[N,M], %w: f32[M,M]) -> (f32[N,M], f32[N,M], f32[N,M]) {
  %e = f32[N,M] exp(%x)
  %mm = f32[N,M] dot_general(%e, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %n = f32[N,M] neg(%e)
  %t = f32[N,M] tanh(%x)
  return %mm, %n, %t
})",
                          {{1, 1}, {3, 5}, {32, 32}});
}

// Softmax rows with special values, long enough to split into lanes (40) and short (3): the
// row's max is select(a > b, a, b), not the NaN-propagating, signed-zero-ordering max, which must
// not change any result. A NaN anywhere makes its row NaN; +inf makes it NaN (inf - inf) as in the
// interpreter; a row of -inf is NaN; signed zeros and -inf entries among finite ones are exact.
TEST(CpuBackend, SoftmaxRowsWithSpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const char* text = R"(
func @main(%x: f32[7,M]) -> (f32[7,M], f32[7,M]) {
  %s = f32[7,M] softmax(%x) {axis = 1}
  %l = f32[7,M] log_softmax(%x) {axis = 1}
  return %s, %l
})";
  for (int64_t m : {3, 40}) {
    auto parsed = parseModule(instantiate(text, 7, m), "softmax-special.kir");
    ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
    Tensor x(DType::F32, {7, m});
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(-3, 3);
    for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, u(rng));
    auto at = [&](int64_t row, int64_t col, double v) { x.setDouble(row * m + col, v); };
    at(0, 0, nan);      // NaN first
    at(1, m - 1, nan);  // NaN last (in the tail for m = 40)
    at(2, 1, inf);      // +inf
    for (int64_t j = 0; j < m; ++j) {
      at(3, j, -inf);                // all -inf
      at(4, j, j % 2 ? -0.0 : 0.0);  // signed zeros only
    }
    at(5, 0, -inf);      // -inf among finite values
    at(6, m / 2, 80.0);  // one dominant value
    const Function& f = *(*parsed)->entry();
    std::vector<Tensor> inputs{x};
    auto want = interpret(f, inputs);
    ASSERT_TRUE(want.isOk()) << want.status().str();
    for (int threads : {1, 2}) {
      CompileOptions o;
      o.threads = threads;
      auto module = parseModule(instantiate(text, 7, m), "softmax-special.kir");
      ASSERT_TRUE(module.isOk()) << module.status().str();
      auto exe = Executable::compile(std::move(*module), o);
      ASSERT_TRUE(exe.isOk()) << exe.status().str();
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.isOk()) << got.status().str();
      for (size_t k = 0; k < 2; ++k)
        for (int64_t i = 0; i < x.numElements(); ++i) {
          double g = (*got)[k].getDouble(i), w = (*want)[k].getDouble(i);
          std::string where = "output " + std::to_string(k) + " row " + std::to_string(i / m) +
                              " col " + std::to_string(i % m) + " M=" + std::to_string(m);
          if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << where << ": " << g;
          else if (std::isinf(w)) EXPECT_EQ(g, w) << where;
          else EXPECT_NEAR(g, w, 1e-6 * std::max(1.0, std::abs(w))) << where;
        }
    }
  }
}

// max and min keep a NaN (the first operand's where both are) and order -0 below +0, as the
// interpreter does: elementwise over every pair of special values in f32 and f16, in a row
// reduction and in a max pool (the accumulating form), at 1 and 2 threads. (The pool's windows
// hold no +0 beside a -0: the interpreter's reduce_window keeps the first of equal values.)
TEST(CpuBackend, MaxAndMinKeepNanAndTheSignOfZero) {
  const char* text =
      R"(func @main(%x: f32[8,64], %y: f32[8,64], %z: f32[8,64]) -> (f32[8,64], f32[8,64], f32[8], f32[8], f32[8,64], f16[8,64], f16[8,64]) {
  %mx = f32[8,64] max(%x, %y)
  %mn = f32[8,64] min(%x, %y)
  %rx = f32[8] reduce(%x) {dims = [1], kind = max}
  %rn = f32[8] reduce(%x) {dims = [1], kind = min}
  %z4 = f32[1,8,64,1] reshape(%z)
  %p4 = f32[1,8,64,1] reduce_window(%z4) {kind = max, window_dimensions = [1, 3, 3, 1], window_strides = [1, 1, 1, 1], padding_low = [0, 1, 1, 0], padding_high = [0, 1, 1, 0]}
  %p = f32[8,64] reshape(%p4)
  %hx = f16[8,64] convert(%x)
  %hy = f16[8,64] convert(%y)
  %hmx = f16[8,64] max(%hx, %hy)
  %hmn = f16[8,64] min(%hx, %hy)
  return %mx, %mn, %rx, %rn, %p, %hmx, %hmn
})";
  const double nan = std::nan(""), inf = INFINITY;
  const double special[] = {0.0, -0.0, nan, inf, -inf, 1.5, -1.5, 0.0};
  const double pooled[] = {-0.0, -2.0, nan, -1.5, inf, -0.0, -inf, 1.5, -0.0, -3.0, -0.5};
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) in.emplace_back(DType::F32, std::vector<int64_t>{8, 64});
  for (int64_t i = 0; i < 8 * 64; ++i) {
    in[0].setDouble(i, special[i % 8]);
    in[1].setDouble(i, special[(i / 8) % 8]);  // every pair of the special values
    in[2].setDouble(i, i < 4 * 64 ? pooled[i % 11] : -0.0 - double(i % 3));
  }
  // Rows whose max or min is a zero: -0 over -1.5, all -0, all +0; a NaN in row 3 only.
  for (int64_t c = 0; c < 64; ++c) {
    in[0].setDouble(0 * 64 + c, c % 2 ? -0.0 : -1.5);
    in[0].setDouble(1 * 64 + c, -0.0);
    in[0].setDouble(2 * 64 + c, 0.0);
    in[0].setDouble(3 * 64 + c, c == 37 ? nan : double(c % 4 == 0));
  }
  auto parsed = parseModule(text, "maxmin.kir");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  auto want = interpret(*(*parsed)->entry(), in);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  for (int threads : {1, 2}) {
    CompileOptions o;
    o.threads = threads;
    auto module = parseModule(text, "maxmin.kir");
    ASSERT_TRUE(module.isOk()) << module.status().str();
    auto exe = Executable::compile(std::move(*module), o);
    ASSERT_TRUE(exe.isOk()) << exe.status().str();
    auto got = (*exe)->run(in);
    ASSERT_TRUE(got.isOk()) << got.status().str();
    expectSpecialValuesEqual(*got, *want, "threads " + std::to_string(threads));
  }
}

TEST(CpuBackend, OneExecutableRunsOnTwoThreadsAtOnce) {
  auto parsed = parseModule(R"(
func @main(%x: f32[64,129], %g: f32[129], %b: f32[129]) -> (f32[64,129]) {
  %e = f32[64,129] tanh(%x)
  %ln = f32[64,129] layer_norm(%e, %g, %b) {axis = 1}
  %s = f32[64,129] softmax(%ln) {axis = 1}
  return %s
})",
                            "threads.kir");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  const Function& f = *(*parsed)->entry();
  std::vector<std::vector<Tensor>> inputs(2);
  std::vector<Tensor> want;
  for (int t = 0; t < 2; ++t) {
    std::mt19937 rng(100 + t);
    for (size_t i = 0; i < f.numParameters(); ++i)
      inputs[t].push_back(randomTensor(f.parameter(i)->type(), rng));
    auto w = interpret(f, inputs[t]);
    ASSERT_TRUE(w.isOk());
    want.push_back((*w)[0]);
  }
  CompileOptions o;
  o.threads = 2;
  auto exe = Executable::compile(std::move(*parsed), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::vector<std::string> errors;
  std::vector<Tensor> got = runOnTwoHostThreads(**exe, inputs, errors);
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(errors[t], "");
    expectClose(got[t], want[t], "thread " + std::to_string(t));
  }
}

TEST(CpuBackend, ReportsWhatItBuilt) {
  auto parsed = parseModule(R"(
func @main(%x: f32[8,16], %w: f32[16,16]) -> (f32[8,16]) {
  %e = f32[8,16] exp(%x)
  %mm = f32[8,16] dot_general(%e, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[8,16] tanh(%mm)
  %n = f32[8,16] neg(%t)
  return %n
})",
                            "report.kir");
  ASSERT_TRUE(parsed.isOk());
  auto exe = Executable::compile(std::move(*parsed), CompileOptions{});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  // exp; matmul with tanh and neg as its epilogue: tanh a post-op of the call, neg a loop.
  ASSERT_EQ((*exe)->kernels().size(), 2u);
  EXPECT_EQ((*exe)->plan().kernels[1].kind, fusion::KernelKind::Contraction);
  std::string ir = kernel::printKernel((*exe)->kernels()[1]);
  EXPECT_NE(ir.find("call dot_general(%e, %w, %t_tmp) {lhs_contracting = [1], rhs_contracting = "
                    "[0]} then tanh\n"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("neg(%t_tmp["), std::string::npos) << ir;
  EXPECT_TRUE(hasCall((*exe)->libraryCallDetails(), "oneDNN matmul (8x16x16, IMPL, post-ops tanh)"))
      << (*exe)->libraryCallDetails();
  // exp's result (512 B) lives in the arena; the matmul's temp result too.
  EXPECT_GE((*exe)->buffers().arenaBytes, 1024);
  EXPECT_LE((*exe)->buffers().arenaBytes, 2 * 1024);
}

}  // namespace
}  // namespace kiln::runtime
