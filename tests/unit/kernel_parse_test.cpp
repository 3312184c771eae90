// kernel::parseKernels: kernel IR text reads back into kernels that print the same text and
// verify, for every kernel lowered from the op table's test module (Inputs/all-ops.kir), before
// and after each schedule pass; constants take their context's type; bad text is an error at its
// line and column.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "all_ops_module.h"
#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "kernel/parse.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"

namespace kiln::kernel {
namespace {

std::vector<Kernel> lowerAllOps() {
  std::unique_ptr<Module> module = allOpsModule({{"N", 3}, {"B", 2}, {"S", 40}});
  if (!module) return {};
  std::vector<Kernel> out;
  for (const auto& f : module->functions()) {
    if (firstStringNode(*f)) continue;  // text has no kernel IR (only the interpreter runs it)
    auto kernels = lowerPlan(*f, fusion::planFusion(*f));
    EXPECT_TRUE(kernels.isOk()) << kernels.status().str();
    if (kernels) out.insert(out.end(), kernels->begin(), kernels->end());
  }
  return out;
}

// parse(print(ks)) prints as ks does and verifies.
void expectRoundTrip(const std::vector<Kernel>& ks, const std::string& stage) {
  std::string text = printKernels(ks);
  auto parsed = parseKernels(text, stage);
  ASSERT_TRUE(parsed.isOk()) << stage << ": " << parsed.status().str();
  ASSERT_EQ(parsed->size(), ks.size());
  EXPECT_EQ(printKernels(*parsed), text) << stage;
  for (const Kernel& k : *parsed)
    EXPECT_TRUE(verifyKernel(k).isOk()) << stage << ": " << verifyKernel(k).str();
}

TEST(ParseKernels, EveryKernelOfTheOpTableModuleRoundTrips) {
  std::vector<Kernel> ks = lowerAllOps();
  ASSERT_GE(ks.size(), 20u);
  expectRoundTrip(ks, "lowered");
  for (Kernel& k : ks) k = cacheRows(k, 64);
  expectRoundTrip(ks, "cache-rows");
  for (Kernel& k : ks) k = vectorizeInner(parallelizeOuter(k, 8));
  expectRoundTrip(ks, "parallel and vectorized");
  for (Kernel& k : ks) k = splitReductions(k, 4, true);
  expectRoundTrip(ks, "split reductions");
  for (Kernel& k : ks) k = lowerReductions(k);
  expectRoundTrip(ks, "lowered reductions");
}

TEST(ParseKernels, ConstantsTakeTheTypeOfTheirContext) {
  const char* text =
      "kernel k0_loop(in %x: f64[4], in %n: i32[4], out %y: f64[4], out %b: bool[4]) {\n"
      "  serial for i0 in [0, 4) {\n"
      "    %y[i0] = %x[i0] * 0.1 + f64(%n[i0] + 3)\n"
      "    %b[i0] = 2 < %n[i0]\n"
      "  }\n"
      "}\n";
  auto parsed = parseKernels(text, "t.txt");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  const Stmt& body = *(*parsed)[0].body->body[0];
  const Expr& y = *body.body[0]->value;  // add(mul(x, 0.1), cast(add(n, 3)))
  EXPECT_EQ(y.args[0]->args[1]->type, DType::F64);
  EXPECT_EQ(y.args[0]->args[1]->f, 0.1);  // f64 constants print (and read) exactly
  EXPECT_EQ(y.args[1]->args[0]->args[1]->type, DType::I32);
  EXPECT_EQ(body.body[1]->value->args[0]->type, DType::I32);
  EXPECT_EQ(printKernels(*parsed), text);
  EXPECT_TRUE(verifyKernel((*parsed)[0]).isOk()) << verifyKernel((*parsed)[0]).str();
}

TEST(ParseKernels, CallsKeepTheirOpAndAttributes) {
  const char* text =
      "kernel k0_contraction(in %a: f32[2,3], in %w: f32[3,4], in %b: f32[4], out %o: f32[2,4]) "
      "{\n"
      "  call dot_general(%a, %w, %o, %b) {lhs_contracting = [1], rhs_contracting = [0]} then "
      "add(%b, dims [1]), clamp(0.0, inf)\n"
      "}\n";
  auto parsed = parseKernels(text, "t.txt");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  const Stmt& c = *(*parsed)[0].body;
  EXPECT_EQ(c.op, OpCode::DotGeneral);
  EXPECT_EQ(callOperands(c), 2u);
  EXPECT_EQ(callResults(c), 1u);
  ASSERT_EQ(c.postOps.size(), 2u);
  EXPECT_EQ(c.postOps[0].operandShape, std::vector<int64_t>{4});
  EXPECT_EQ(printKernels(*parsed), text);
}

TEST(ParseKernels, LayoutsOfBuffersAndCallsRoundTrip) {
  const char* text =
      "kernel k0_contraction(in %x: f32[1,8,8,16] layout nChw16c, in %w: f32[3,3,16,16], out %y: "
      "f32[1,8,8,16] layout nChw16c) {\n"
      "  call convolution(%x, %w, %y) {padding_low = [1, 1], padding_high = [1, 1], "
      "dimension_numbers = \"b01f_01io->b01f\"} layout nChw16c\n"
      "}\n";
  auto parsed = parseKernels(text, "t.txt");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  const Kernel& k = (*parsed)[0];
  EXPECT_EQ(k.buffers[0].layout, "nChw16c");
  EXPECT_EQ(k.buffers[1].layout, "");
  EXPECT_EQ(k.body->layout, "nChw16c");
  EXPECT_EQ(printKernels(*parsed), text);
}

TEST(ParseKernels, BadTextIsAnErrorAtItsPlace) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"kernel k0_loop(in %x: f32[4]) {\n  %y[0] = 1.0\n}\n", "t.txt:2:3: error: %y is no buffer"},
      {"kernel k0_loop(in %x: f32[4]) {\n  sideways for i in [0, 4) {\n  }\n}\n",
       "t.txt:2:3: error: unknown statement 'sideways'"},
      {"kernel k0_loop(in %x: q32[4]) {\n}\n", "t.txt:1:23: error: unknown element type 'q32'"},
      {"kernel k0_loop(out %x: f32[4]) {\n  %x[0] = frob(1.0)\n}\n",
       "t.txt:2:11: error: unknown function 'frob'"},
      {"kernel k0_loop(out %x: f32[4]) {\n  %x[0] = 1.0\n", "expected '}', got the end"},
      {"kernel k0_loop(out %x: f32[4]) {\n  %x[0] = reduce<avg>(r in [0, 4)) 1.0\n}\n",
       "t.txt:2:18: error: unknown reduction 'avg'"},
      {"kernel k0_c(out %x: f32[4]) {\n  call dot_general(%x) {lhs_contracting = 1}\n}\n",
       "t.txt:2:43: error: dot_general attribute 'lhs_contracting' expects an integer list"},
      {"kernel k0_c(out %x: f32[4]) {\n  call frobnicate(%x)\n}\n",
       "t.txt:2:8: error: a call of unknown op 'frobnicate'"},
  };
  for (const Case& c : cases) {
    auto parsed = parseKernels(c.text, "t.txt");
    ASSERT_FALSE(parsed.isOk()) << c.text;
    EXPECT_NE(parsed.status().str().find(c.error), std::string::npos)
        << "expected '" << c.error << "', got '" << parsed.status().str() << "'";
  }
}

// accumulatorsThroughMemory: a temp row of sums updated in a loop counts at its size; a scratch
// row of 16 f32 (64 bytes) stays in registers under a 256-byte limit and counts only under a
// 32-byte one; a row filled without reading itself (a copy) does not count.
TEST(ParseKernels, AccumulatorsThroughMemoryAreFound) {
  const char* temp =
      "kernel k0_reduction(in %x: f32[8,120], out %y: f32[120], temp %rows: f32[2,120]) {\n"
      "  serial for p in [0, 2) {\n"
      "    serial for r in [0, 4) {\n"
      "      vectorized for c in [0, 120) {\n"
      "        %rows[p * 120 + c] = %rows[p * 120 + c] + %x[(p * 4 + r) * 120 + c]\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  vectorized for c in [0, 120) {\n"
      "    %y[c] = %rows[c] + %rows[120 + c]\n"
      "  }\n"
      "}\n";
  auto t = parseKernels(temp, "temp.txt");
  ASSERT_TRUE(t.isOk()) << t.status().str();
  EXPECT_EQ(accumulatorsThroughMemory((*t)[0], 256), 240);
  const char* local = "kernel k0_reduction(in %x: f32[8,16], out %y: f32[16]) {\n"
                      "  local %acc: f32[16] {\n"
                      "    vectorized for c in [0, 16) {\n"
                      "      %acc[c] = 0.0\n"
                      "    }\n"
                      "    serial for r in [0, 8) {\n"
                      "      vectorized for c in [0, 16) {\n"
                      "        %acc[c] = %acc[c] + %x[r * 16 + c]\n"
                      "      }\n"
                      "    }\n"
                      "    vectorized for c in [0, 16) {\n"
                      "      %y[c] = %acc[c]\n"
                      "    }\n"
                      "  }\n"
                      "}\n";
  auto l = parseKernels(local, "local.txt");
  ASSERT_TRUE(l.isOk()) << l.status().str();
  EXPECT_EQ(accumulatorsThroughMemory((*l)[0], 256), 0);
  EXPECT_EQ(accumulatorsThroughMemory((*l)[0], 32), 16);
  const char* copy = "kernel k0_loop(in %x: f32[16], out %y: f32[16], temp %t: f32[16]) {\n"
                     "  vectorized for c in [0, 16) {\n"
                     "    %t[c] = %x[c]\n"
                     "  }\n"
                     "  vectorized for c in [0, 16) {\n"
                     "    %y[c] = %t[c]\n"
                     "  }\n"
                     "}\n";
  auto c = parseKernels(copy, "copy.txt");
  ASSERT_TRUE(c.isOk()) << c.status().str();
  EXPECT_EQ(accumulatorsThroughMemory((*c)[0], 256), 0);
}

}  // namespace
}  // namespace kiln::kernel
