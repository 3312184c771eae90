// kernel::expandCalls (kernel/expand_calls.h): a parsed convolution call becomes loops of the
// expected structure (output loops, a local accumulator, a Reduce over input features and taps,
// guarded and clamped loads), errors name the kernel and the call, other calls stay; and, where
// the build has the CPU target, programs compiled with CompileOptions::libraryCalls = false agree
// bit for bit with the interpreter on dot_general and convolution of every attribute and dtype.
#include <gtest/gtest.h>

#include <random>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/expand_calls.h"
#include "kernel/parse.h"
#include "kernel/verify.h"
#include "runtime/executable.h"

namespace kiln::kernel {
namespace {

// NHWC input with 4 features in 2 groups, HWIO kernel, stride 2, padding 1 on each side.
const char* kConvolution =
    "kernel k0_contraction(in %x: f32[1,5,5,4], in %w: f32[3,3,2,6], in %b: f32[6], "
    "out %y: f32[1,3,3,6]) {\n"
    "  call convolution(%x, %w, %y, %b) {window_strides = [2, 2], padding_low = [1, 1], "
    "padding_high = [1, 1], feature_group_count = 2, dimension_numbers = \"b01f_01io->b01f\"} "
    "then add(%b, dims [3]), clamp(0.0, inf)\n"
    "}\n";

Kernel parseOne(const std::string& text) {
  auto parsed = parseKernels(text, "t.txt");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().str();
  EXPECT_EQ(parsed->size(), 1u);
  return (*parsed)[0];
}

TEST(ExpandCalls, ConvolutionBecomesLoopsWithAReduceOverFeaturesAndTaps) {
  auto expanded = expandCalls(parseOne(kConvolution));
  ASSERT_TRUE(expanded.isOk()) << expanded.status().str();
  const Kernel& k = *expanded;
  ASSERT_TRUE(verifyKernel(k).isOk()) << verifyKernel(k).str();
  EXPECT_TRUE(callsOf(k).empty());
  // One loop per result dim but the batch (extent 1): [0, 3), [0, 3), [0, 6).
  const Stmt* s = k.body.get();
  std::vector<int64_t> extents;
  while (s->kind == Stmt::Kind::For) {
    EXPECT_EQ(s->loop, LoopKind::Serial);
    extents.push_back(s->extent->i);
    s = s->body[0].get();
  }
  EXPECT_EQ(extents, (std::vector<int64_t>{3, 3, 6}));
  // Per output element: a local f64 accumulator (the interpreter sums f32 in double).
  ASSERT_EQ(s->kind, Stmt::Kind::Alloc);
  EXPECT_EQ(s->type, DType::F64);
  EXPECT_EQ(s->size, 1);
  EXPECT_EQ(s->scope, MemoryScope::Local);
  const Stmt& body = *s->body[0];
  ASSERT_EQ(body.kind, Stmt::Kind::Block);
  ASSERT_EQ(body.body.size(), 3u);
  EXPECT_EQ(body.body[0]->kind, Stmt::Kind::Store);  // acc = 0
  EXPECT_EQ(printExpr(body.body[0]->value), "0.0");
  // The Reduce: input features of the group (2), then the taps (3 x 3), in that order.
  const Stmt& r = *body.body[1];
  ASSERT_EQ(r.kind, Stmt::Kind::Reduce);
  EXPECT_EQ(r.reduce, ReduceKind::Sum);
  EXPECT_EQ(r.buffer, s->buffer);
  ASSERT_EQ(r.extents.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r.extents[i]->i, (std::vector<int64_t>{2, 3, 3})[i]);
  // Padding: the product is selected away, and the input index is clamped (both arms run).
  ASSERT_EQ(r.value->kind, Expr::Kind::Select);
  EXPECT_EQ(r.value->type, DType::F64);
  std::string value = printExpr(r.value);
  EXPECT_NE(value.find("min(max("), std::string::npos) << value;
  EXPECT_NE(value.find("%x["), std::string::npos) << value;
  EXPECT_NE(value.find("%w["), std::string::npos) << value;
  // The group's first feature: output feature / 3 * 2.
  EXPECT_NE(value.find("/ 3 * 2"), std::string::npos) << value;
  // The store: rounded to f32, then the bias and the relu.
  const Stmt& st = *body.body[2];
  ASSERT_EQ(st.kind, Stmt::Kind::Store);
  EXPECT_EQ(st.buffer, "y");
  EXPECT_EQ(st.value->type, DType::F32);
  std::string stored = printExpr(st.value);
  EXPECT_NE(stored.find("max(f32(%" + s->buffer + "[0]) + %b["), std::string::npos) << stored;
  // The text reads back as the same kernel.
  auto again = parseKernels(printKernel(k), "again.txt");
  ASSERT_TRUE(again.isOk()) << again.status().str();
  EXPECT_EQ(printKernel((*again)[0]), printKernel(k));
}

TEST(ExpandCalls, ErrorsNameTheKernelTheCallAndTheReason) {
  std::string text = kConvolution;
  text.replace(text.find("out %y: f32[1,3,3,6]"), 20, "out %y: f32[1,3,3,5]");
  text.replace(text.find("in %b: f32[6]"), 13, "in %b: f32[5]");
  auto expanded = expandCalls(parseOne(text));
  ASSERT_FALSE(expanded.isOk());
  EXPECT_EQ(expanded.status().message(),
            "kernel k0_contraction: call convolution: the result %y has shape [1, 3, 3, 5], the "
            "attributes give [1, 3, 3, 6]");
  auto dot = expandCalls(
      parseOne("kernel k1_contraction(in %a: f32[2,3], in %b: f32[4,5], out %c: f32[2,5]) {\n"
               "  call dot_general(%a, %b, %c) {lhs_contracting = [1], rhs_contracting = [0]}\n"
               "}\n"));
  ASSERT_FALSE(dot.isOk());
  EXPECT_EQ(dot.status().message(),
            "kernel k1_contraction: call dot_general: contracting dim 1 of %a and 0 of %b differ "
            "in extent");
}

TEST(ExpandCalls, DotGeneralSumsTheContractingDimsInTheirOrderAndOtherCallsStay) {
  // Batch dim 1 of the rhs, contracting dims listed (2, 0) on the lhs and (2, 0) on the rhs.
  auto expanded = expandCalls(
      parseOne("kernel k0_contraction(in %b: f32[2,4], in %l: i32[5,3,4,2], in %r: i32[4,3,5,6], "
               "out %c: i32[3,2,6], out %s: f32[2,4], out %i: i64[2,4]) {\n"
               "  call dot_general(%l, %r, %c) {lhs_batch = [1], rhs_batch = [1], "
               "lhs_contracting = [2, 0], rhs_contracting = [0, 2]}\n"
               "  call sort(%b, %s, %i) {dimension = 1}\n"
               "}\n"));
  ASSERT_TRUE(expanded.isOk()) << expanded.status().str();
  ASSERT_TRUE(verifyKernel(*expanded).isOk()) << verifyKernel(*expanded).str();
  std::vector<const Stmt*> calls = callsOf(*expanded);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]->op, OpCode::Sort);
  std::string text = printKernel(*expanded);
  // Integers accumulate in their own type; lhs dim 2 (extent 4) is the outer loop.
  EXPECT_NE(text.find("local %acc0: i32[1]"), std::string::npos) << text;
  EXPECT_NE(
      text.find("%acc0[0] = reduce<sum>(r0 in [0, 4), r1 in [0, 5)) "
                "%l[((r1 * 3 + o0) * 4 + r0) * 2 + o1] * %r[((r0 * 3 + o0) * 5 + r1) * 6 + o2]"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("%c[(o0 * 2 + o1) * 6 + o2] = %acc0[0]"), std::string::npos) << text;
}

// ---- numerics, on the CPU target ----------------------------------------------------------------

Tensor randomTensor(const TensorType& t, std::mt19937& rng) {
  Tensor x(t.dtype(), t.staticDims());
  std::uniform_real_distribution<double> uf(-2.0, 2.0);
  std::uniform_int_distribution<int> ui(-20, 20);
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.setDouble(i, isFloat(t.dtype())           ? uf(rng)
                   : isSignedInteger(t.dtype()) ? ui(rng)
                                                : std::abs(ui(rng)));
  return x;
}

// `text` compiled for the CPU without library calls (nor graph passes, nor reassociated sums)
// computes what the interpreter computes, to the bit.
void expectInterpreterBits(const std::string& name, const std::string& text) {
  if (!runtime::findTarget("cpu").isOk()) GTEST_SKIP() << "this build has no cpu target";
  auto parsed = parseModule(text, name + ".kir");
  ASSERT_TRUE(parsed.isOk()) << name << ": " << parsed.status().str();
  const Function& f = *(*parsed)->entry();
  std::mt19937 rng(7);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.push_back(randomTensor(f.parameter(i)->type(), rng));
  auto want = interpret(f, inputs);
  ASSERT_TRUE(want.isOk()) << name << ": " << want.status().str();
  runtime::CompileOptions o;
  o.optLevel = 0;
  o.reassociate = false;
  o.libraryCalls = false;
  o.threads = 2;
  auto exe = runtime::Executable::compile(std::move(*parsed), o);
  ASSERT_TRUE(exe.isOk()) << name << ": " << exe.status().str();
  EXPECT_EQ((*exe)->libraryCalls(), "none") << name;
  auto got = (*exe)->run(inputs);
  ASSERT_TRUE(got.isOk()) << name << ": " << got.status().str();
  ASSERT_EQ(got->size(), want->size());
  for (size_t r = 0; r < got->size(); ++r) {
    const Tensor &g = (*got)[r], &w = (*want)[r];
    ASSERT_EQ(g.type(), w.type()) << name << " output " << r;
    for (int64_t i = 0; i < w.numElements(); ++i)
      ASSERT_EQ(g.getUInt(i), w.getUInt(i)) << name << " output " << r << " element " << i << ": "
                                            << g.getDouble(i) << " vs " << w.getDouble(i);
  }
}

TEST(ExpandCalls, DotGeneralOfEveryDTypeAsTheInterpreter) {
  expectInterpreterBits("dots", R"(
func @main(%a: f32[7,33], %b: f32[33,5], %bias: f32[5], %r: f32[7,5], %h: f16[3,9,4], %hb: f16[3,4,6], %g: bf16[4,9], %gb: bf16[9,2], %d: f64[2,3,4], %db: f64[4,3], %i: i32[5,2,3], %ib: i32[3,4,2], %u: u8[3,4], %ub: u8[4,2]) -> (f32[7,5], f16[3,9,6], bf16[4,2], f64[2,3,3], i32[2,5,4], u8[3,2]) {
  %m = f32[7,5] dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[7,5] broadcast_in_dim(%bias) {dims = [1]}
  %s = f32[7,5] add(%m, %bb)
  %t = f32[7,5] tanh(%s)
  %y = f32[7,5] mul(%t, %r)
  %hh = f16[3,9,6] dot_general(%h, %hb) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [1]}
  %gg = bf16[4,2] dot_general(%g, %gb) {lhs_contracting = [1], rhs_contracting = [0]}
  %dd = f64[2,3,3] dot_general(%d, %db) {lhs_contracting = [2], rhs_contracting = [0]}
  %ii = i32[2,5,4] dot_general(%i, %ib) {lhs_batch = [1], rhs_batch = [2], lhs_contracting = [2], rhs_contracting = [0]}
  %uu = u8[3,2] dot_general(%u, %ub) {lhs_contracting = [1], rhs_contracting = [0]}
  return %y, %hh, %gg, %dd, %ii, %uu
})");
}

TEST(ExpandCalls, ConvolutionOfEveryAttributeAsTheInterpreter) {
  expectInterpreterBits("convolutions", R"(
func @main(%x: f32[2,4,7,6], %w: f32[6,2,3,3], %b: f32[6], %n: f32[1,6,6,4], %k: f32[3,2,4,3], %v: f32[4,3,5], %q: f32[4,3,2], %h: f16[1,2,5,5], %hk: f16[3,2,2,2], %i: i32[1,3,6], %ik: i32[2,3,3]) -> (f32[2,6,4,2], f32[1,3,12,3], f32[2,4,7], f16[1,3,3,3], i32[1,2,5]) {
  %c = f32[2,6,4,2] convolution(%x, %w) {window_strides = [2, 2], padding_low = [1, 0], padding_high = [2, 1], rhs_dilation = [1, 2], feature_group_count = 2}
  %cb = f32[2,6,4,2] broadcast_in_dim(%b) {dims = [1]}
  %ca = f32[2,6,4,2] add(%c, %cb)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[2,6,4,2] broadcast_in_dim(%zero) {dims = []}
  %y = f32[2,6,4,2] max(%ca, %zb)
  %t = f32[1,3,12,3] convolution(%n, %k) {window_strides = [1, 2], padding_low = [2, -1], padding_high = [1, 1], lhs_dilation = [2, 1], dimension_numbers = "b01f_01io->bf01"}
  %bg = f32[2,4,7] convolution(%v, %q) {padding_low = [1], padding_high = [2], batch_group_count = 2, dimension_numbers = "bf0_oi0->bf0"}
  %hc = f16[1,3,3,3] convolution(%h, %hk) {window_strides = [2, 2], padding_low = [1, 1], padding_high = [0, 0], dimension_numbers = "bf01_o01i->b01f"}
  %ic = i32[1,2,5] convolution(%i, %ik) {padding_low = [1], padding_high = [0], rhs_dilation = [1], dimension_numbers = "bf0_oi0->bf0"}
  return %y, %t, %bg, %hc, %ic
})");
}

}  // namespace
}  // namespace kiln::kernel
