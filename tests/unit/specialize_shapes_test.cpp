// specialize-shapes and propagate-shapes: bindings, derived extents, errors, and that the
// specialised program computes what the symbolic one does.
#include <gtest/gtest.h>

#include <random>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "ir/verifier.h"
#include "passes/propagate_shapes.h"
#include "passes/specialize_shapes.h"

namespace kiln {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "test.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  return m ? std::move(*m) : nullptr;
}

TEST(SymbolBindings, ParsesNameEqualsExtentLists) {
  auto b = parseSymbolBindings("N=1,S=128,batch_2=0");
  ASSERT_TRUE(b.isOk()) << b.status().str();
  EXPECT_EQ(*b, (SymbolBindings{{"N", 1}, {"S", 128}, {"batch_2", 0}}));
  for (const char* bad : {"", "N", "N=", "=3", "N=x", "N=1,", "2N=3", "N=1e3", "N=1099511627777"})
    EXPECT_FALSE(parseSymbolBindings(bad).isOk()) << bad;
}

const char* kConvNet =
    R"(func @main(%x: f32[B,3,H,W], %w: f32[4,3,3,3]) -> (f32[B,4,Ho,Wo], f32[B,3,H,W]) {
  %c = f32[B,4,Ho,Wo] convolution(%x, %w) {window_strides = [2, 2], padding_low = [1, 1], padding_high = [1, 1]}
  %s = f32[B,3,H,W] slice(%x) {start = [0, 0, 0, 0], limit = [1099511627776, 3, 1099511627776, 1099511627776]}
  return %c, %s
}
)";

TEST(SymbolRanges, ParsesRangesAndPow2Buckets) {
  auto r = parseSymbolRanges("N=1..32,S=1..512:pow2");
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_FALSE(r->at("N").pow2);
  EXPECT_TRUE(r->at("S").pow2);
  EXPECT_EQ(r->at("S").str(), "1..512:pow2");
  EXPECT_FALSE(parseSymbolRanges("S=1..512:pow3").isOk());
  // Buckets: 1, 2, 3..4, 5..8, ..., 257..512, clipped to the range.
  const SymbolRange& s = r->at("S");
  auto bucket = [&](const SymbolRange& range, int64_t size) { return range.bucketOf(size).str(); };
  EXPECT_EQ(bucket(s, 1), "1..1");
  EXPECT_EQ(bucket(s, 2), "2..2");
  EXPECT_EQ(bucket(s, 3), "3..4");
  EXPECT_EQ(bucket(s, 40), "33..64");
  EXPECT_EQ(bucket(s, 64), "33..64");
  EXPECT_EQ(bucket(s, 512), "257..512");
  SymbolRange odd{5, 100, true};
  EXPECT_EQ(bucket(odd, 6), "5..8");
  EXPECT_EQ(bucket(odd, 99), "65..100");
  EXPECT_EQ(bucket(odd, 5), "5..8");
}

TEST(SpecializeShapes, DerivedExtentsBecomeStatic) {
  auto m = parse(kConvNet);
  auto changed = specializeShapes(*m, {{"B", 2}, {"H", 8}, {"W", 6}});
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  const Function& f = *m->entry();
  EXPECT_EQ(f.parameter(0)->type(), TensorType::of(DType::F32, {2, 3, 8, 6}));
  // Stride 2, padding 1+1, kernel 3: floor((8 + 2 - 3) / 2) + 1 = 4 and floor((6 + 2 - 3) / 2) + 1
  // = 3.
  EXPECT_EQ(f.outputs()[0]->type(), TensorType::of(DType::F32, {2, 4, 4, 3}));
  // The whole-dimension slice now has the extents as limits.
  EXPECT_EQ(f.outputs()[1]->def()->attrInts("limit"), (std::vector<int64_t>{2, 3, 8, 6}));
  EXPECT_TRUE(verify(*m).isOk());
}

TEST(SpecializeShapes, MisspeltSymbolIsAnErrorListingTheSymbols) {
  auto m = parse(kConvNet);
  auto r = specializeShapes(*m, {{"N", 2}});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "symbol N does not appear")) << r.status().str();
  EXPECT_TRUE(contains(r.status().message(), "B, H, Ho, W, Wo")) << r.status().str();
}

TEST(SpecializeShapes, ContradictoryBindingsNameTheNode) {
  // M*2 = N*4 cannot hold for N = 3, M = 5.
  auto m = parse(R"(func @main(%x: f32[N,4]) -> (f32[M,2]) {
  %r = f32[M,2] reshape(%x)
  return %r
}
)");
  auto r = specializeShapes(*m, {{"N", 3}, {"M", 5}});
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "reshape")) << r.status().str();
  // Given N alone, M follows: 3 * 4 / 2 = 6.
  auto m2 = parse(R"(func @main(%x: f32[N,4]) -> (f32[M,2]) {
  %r = f32[M,2] reshape(%x)
  return %r
}
)");
  auto ok = specializeShapes(*m2, {{"N", 3}});
  ASSERT_TRUE(ok.isOk()) << ok.status().str();
  EXPECT_EQ(m2->entry()->outputs()[0]->type(), TensorType::of(DType::F32, {6, 2}));
}

TEST(SpecializeShapes, BindingsFromInputShapes) {
  auto m = parse(R"(func @main(%x: f32[N,4], %y: f32[S,N]) -> (f32[N,4]) {
  return %x
}
)");
  auto b = bindingsFromInputShapes(*m->entry(), {{2, 4}, {7, 2}});
  ASSERT_TRUE(b.isOk()) << b.status().str();
  EXPECT_EQ(*b, (SymbolBindings{{"N", 2}, {"S", 7}}));
  auto wrongStatic = bindingsFromInputShapes(*m->entry(), {{2, 5}, {7, 2}});
  ASSERT_FALSE(wrongStatic.isOk());
  EXPECT_TRUE(contains(wrongStatic.status().message(), "input 0 ('x')"))
      << wrongStatic.status().str();
  auto clash = bindingsFromInputShapes(*m->entry(), {{2, 4}, {7, 3}});
  ASSERT_FALSE(clash.isOk());
  EXPECT_TRUE(contains(clash.status().message(), "symbol N is 3 here but 2"))
      << clash.status().str();
  EXPECT_FALSE(bindingsFromInputShapes(*m->entry(), {{2, 4}}).isOk());
  EXPECT_FALSE(bindingsFromInputShapes(*m->entry(), {{2, 4, 1}, {7, 2}}).isOk());
}

Tensor randomTensor(const TensorType& t, std::mt19937& rng) {
  Tensor out(t.dtype(), t.staticDims());
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < out.numElements(); ++i) out.setDouble(i, u(rng));
  return out;
}

TEST(SpecializeShapes, SpecialisedProgramComputesTheSame) {
  const char* text = R"(func @main(%x: f32[N,4], %w: f32[4,3]) -> (f32[M,3]) {
  %d = f32[N,3] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[N,3] tanh(%d)
  %r = f32[M,3] reshape(%t)
  return %r
}
)";
  auto symbolic = parse(text);
  auto special = parse(text);
  ASSERT_TRUE(specializeShapes(*special, {{"N", 5}}).isOk());
  EXPECT_EQ(special->entry()->outputs()[0]->type(), TensorType::of(DType::F32, {5, 3}));
  std::mt19937 rng(7);
  std::vector<Tensor> in{randomTensor(TensorType::of(DType::F32, {5, 4}), rng),
                         randomTensor(TensorType::of(DType::F32, {4, 3}), rng)};
  // The symbolic reshape's M is not determined by N for the interpreter, so compare on the
  // propagated symbolic program (M unified with N), which it can run.
  ASSERT_TRUE(propagateShapes(*symbolic).isOk());
  auto a = interpret(*symbolic->entry(), in);
  auto b = interpret(*special->entry(), in);
  ASSERT_TRUE(a.isOk()) << a.status().str();
  ASSERT_TRUE(b.isOk()) << b.status().str();
  EXPECT_TRUE((*a)[0].identical((*b)[0]));
}

TEST(PropagateShapes, UnifiesAReshapeSymbolWithTheParameters) {
  auto m = parse(R"(func @main(%x: f32[N,4]) -> (f32[M,2,2]) {
  %r = f32[M,2,2] reshape(%x)
  return %r
}
)");
  auto changed = propagateShapes(*m);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(m->entry()->outputs()[0]->type().str(), "f32[N,2,2]");
  auto again = propagateShapes(*m);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again);
}

}  // namespace
}  // namespace kiln
