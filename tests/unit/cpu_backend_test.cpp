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
#include <thread>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

std::string instantiate(std::string text, int64_t n, int64_t m) {
  text = std::regex_replace(text, std::regex("\\bN\\b"), std::to_string(n));
  text = std::regex_replace(text, std::regex("\\bM\\b"), std::to_string(m));
  return text;
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

void expectClose(const Tensor& got, const Tensor& want, const std::string& what) {
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
      ASSERT_LE(std::abs(g - w), 1e-5 * scale)
          << what << " element " << i << ": " << g << " vs " << w;
    }
  }
}

// Compiles `text` (with N and M replaced) for each shape and thread count and compares every
// output with the interpreter on random inputs.
void checkAgainstInterpreter(const std::string& name, const std::string& text,
                             std::vector<std::pair<int64_t, int64_t>> shapes = {
                                 {1, 1}, {3, 5}, {17, 33}}) {
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
      for (size_t i = 0; i < got->size(); ++i)
        expectClose((*got)[i], (*want)[i], what + " output " + std::to_string(i));
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
// post-op, a second use), operands broadcast along several dims, and calls that oneDNN cannot
// take with their post-ops (lhs_dilation: the reference kernel, then the post-ops).
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

  auto parsed = parseModule(instantiate(text, 3, 5), "post-ops.kir");
  ASSERT_TRUE(parsed.isOk());
  auto exe = Executable::compile(std::move(*parsed), CompileOptions{});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::string ir;
  for (const kernel::Kernel& k : (*exe)->kernels()) ir += kernel::printKernel(k);
  // %a1 is a function output, so the first chain stops there and the rest is a loop.
  EXPECT_NE(ir.find("then add(%b, dims [1])\n"), std::string::npos) << ir;
  // %t is stored: the call writes it, exp reads it back.
  EXPECT_NE(ir.find("then tanh\n"), std::string::npos) << ir;
  // gelu's result has two uses in one add: the chain ends after gelu.
  EXPECT_NE(ir.find("then gelu_tanh\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("then add(%kb, dims [3]), add(%ir, dims [0, 1, 2, 3]), gelu\n"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("then add(%kb, dims [3]), clamp(0.0, inf)\n"), std::string::npos) << ir;
  std::string calls = (*exe)->libraryCallDetails();
  EXPECT_NE(calls.find("convolution mis-addresses post-op operands that are not per-channel"),
            std::string::npos)
      << calls;
  EXPECT_NE(calls.find("no oneDNN kernel: lhs_dilation is not supported); post-ops applied "
                       "after the call"),
            std::string::npos)
      << calls;
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
  std::vector<Tensor> got(2);
  std::vector<std::string> errors(2);
  auto work = [&](int t) {
    for (int rep = 0; rep < 20; ++rep) {
      auto r = (*exe)->run(inputs[t]);
      if (!r) {
        errors[t] = r.status().str();
        return;
      }
      got[t] = (*r)[0];
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
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
  EXPECT_NE(ir.find("call dot_general(%e, %w, %t_tmp) then tanh\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("neg(%t_tmp["), std::string::npos) << ir;
  EXPECT_NE((*exe)->libraryCallDetails().find("oneDNN matmul (8x16x16, gemm:jit, post-ops tanh)"),
            std::string::npos)
      << (*exe)->libraryCallDetails();
  // exp's result (512 B) lives in the arena; the matmul's temp result too.
  EXPECT_GE((*exe)->buffers().arenaBytes, 1024);
  EXPECT_LE((*exe)->buffers().arenaBytes, 2 * 1024);
}

}  // namespace
}  // namespace kiln::runtime
