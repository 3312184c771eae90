// Graph IR core: types, tensors, the builder's type inference and errors, use lists, verifier.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

TensorType T(DType d, Shape s) { return TensorType(d, std::move(s)); }

TEST(Types, PrintsAndParsesDTypes) {
  EXPECT_EQ(T(DType::F32, {Dim::symbol("N"), 3, 224}).str(), "f32[N,3,224]");
  EXPECT_EQ(T(DType::I64, {}).str(), "i64[]");
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_EQ(parseDType(dtypeName(t)), t);
  }
  EXPECT_FALSE(parseDType("f33").has_value());
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
}

TEST(Types, NumElementsOverflowIsAnError) {
  EXPECT_EQ(*checkedNumElements({2, 3, 4}), 24);
  EXPECT_FALSE(checkedNumElements({1000000, 1000000, 1000000}).isOk());
  EXPECT_FALSE(checkedNumElements({-1}).isOk());
  EXPECT_FALSE(T(DType::F32, {Dim::symbol("N"), 2}).numElements().has_value());
}

TEST(Types, DimsAreProductsOfSymbols) {
  Dim n = Dim::symbol("N"), s = Dim::symbol("S");
  Dim heads = *(Dim(4) * n), tokens = *(s * n);
  EXPECT_EQ(heads.str(), "4*N");
  EXPECT_EQ(tokens.str(), "N*S");  // factors sorted: S*N and N*S are one dim
  EXPECT_EQ(tokens, *(n * s));
  EXPECT_TRUE(n.isSymbol());
  EXPECT_FALSE(heads.isSymbol());
  EXPECT_TRUE(heads.isSymbolic());
  EXPECT_EQ(*(heads * Dim(0)), Dim(0));
  EXPECT_EQ(*(Dim(3) * Dim(5)), Dim(15));
  EXPECT_FALSE((Dim(int64_t(1) << 30) * Dim(int64_t(1) << 20)).has_value());  // past 2^40
  EXPECT_EQ(Dim::quotient(*(heads * s), tokens), Dim(4));
  EXPECT_EQ(*Dim::quotient(*(Dim(256) * n), heads), Dim(64));
  EXPECT_EQ(*Dim::quotient(heads, Dim(2)), *(Dim(2) * n));
  EXPECT_FALSE(Dim::quotient(heads, Dim(3)).has_value());  // inexact
  EXPECT_FALSE(Dim::quotient(heads, s).has_value());       // S does not divide 4*N
  auto at = [](const std::string& sym) -> std::optional<int64_t> {
    if (sym == "N") return 3;
    return std::nullopt;
  };
  EXPECT_EQ(heads.evaluate(at), 12);
  EXPECT_FALSE(tokens.evaluate(at).has_value());  // S has no size
  EXPECT_EQ(T(DType::F32, {heads, tokens, 64}).str(), "f32[4*N,N*S,64]");
}

TEST(Tensor, HalfAndBFloat16RoundToNearestEven) {
  // 1 + 2^-11 is halfway between the f16 values 1 and 1 + 2^-10: ties to even gives 1.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up to even.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // rounds to +inf
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(floatToBf16(3.140625f)), 3.140625f);  // exactly representable
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every finite half round-trips through float
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Tensor, ElementAccessConvertsValues) {
  Tensor t(DType::I8, {3});
  t.setDouble(0, -3.7);  // truncates toward zero
  t.setInt(1, 300);      // wraps like a C cast
  t.setDouble(2, NAN);   // NaN gives 0
  EXPECT_EQ(t.getInt(0), -3);
  EXPECT_EQ(t.getInt(1), 44);
  EXPECT_EQ(t.getInt(2), 0);
  Tensor c = t.clone();
  c.setInt(0, 1);
  EXPECT_EQ(t.getInt(0), -3);
  EXPECT_EQ(t.reshaped({1, 3}).dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_FALSE(Tensor::create(DType::F32, {int64_t(1) << 30, int64_t(1) << 30}).isOk());
}

// A borrowed tensor uses its owner's bytes in place, keeps the owner alive, and is read-only;
// its clone is a writable copy.
TEST(Tensor, BorrowedBytesAreUsedInPlaceAndReadOnly) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  const auto* bytes = reinterpret_cast<const std::byte*>(owner->data());
  Tensor t = Tensor::borrowed(DType::F32, {2, 2}, owner, bytes);
  std::weak_ptr<std::vector<float>> watch = owner;
  owner.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(t.isBorrowed());
  EXPECT_EQ(t.bytes(), bytes);
  EXPECT_EQ(t.getDouble(3), 4.0);
  Tensor c = t.clone();
  EXPECT_FALSE(c.isBorrowed());
  c.setDouble(0, 9);
  EXPECT_EQ(t.getDouble(0), 1.0);
  EXPECT_DEATH(t.setDouble(0, 5), "is read-only");
  t = Tensor();
  c = Tensor();
  EXPECT_TRUE(watch.expired());
  // Tensors of zero elements still have bytes (defined() holds).
  EXPECT_TRUE(Tensor(DType::F32, {0, 3}).defined());
}

// fromBytes takes over a string's storage (the ONNX importer's weights): the same bytes, no copy,
// writable.
TEST(Tensor, FromBytesTakesOverTheStorage) {
  std::vector<float> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  std::string raw(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  const char* storage = raw.data();
  Tensor t = Tensor::fromBytes(DType::F32, {4, 4}, std::move(raw));
  EXPECT_EQ(reinterpret_cast<const char*>(t.bytes()), storage);
  EXPECT_EQ(t.getDouble(15), 7.5);
  t.setDouble(0, 3);
  EXPECT_EQ(t.getDouble(0), 3.0);
  EXPECT_FALSE(t.isBorrowed());
  EXPECT_TRUE(Tensor::fromBytes(DType::F32, {0}, std::string()).defined());
}

class BuilderTest : public ::testing::Test {
 protected:
  Module m;
  Function* f = m.addFunction("main");
  Builder b{f};
};

TEST_F(BuilderTest, InfersElementwiseAndDotTypes) {
  Value* x = b.parameter(T(DType::F32, {Dim::symbol("N"), 4}), "x");
  Value* w = b.parameter(T(DType::F32, {4, 8}), "w");
  Value* y = b.dotGeneral(x, w, DotDims{{}, {}, {1}, {0}});
  Value* z = b.unary(OpCode::Tanh, y);
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(z->type().str(), "f32[N,8]");
  f->setOutputs({z});
  EXPECT_TRUE(verify(m).isOk());
}

TEST_F(BuilderTest, DeferredErrorNamesOriginAndStopsTheChain) {
  Value* a = b.parameter(T(DType::F32, {2}), "a");
  Value* c = b.parameter(T(DType::F32, {3}), "c");
  b.setOrigin("Add_7");
  Value* s = b.add(a, c);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(b.unary(OpCode::Exp, s), nullptr);  // no second error
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "node 'Add_7': add: operands must have one type, got f32[2] and f32[3]");
}

TEST_F(BuilderTest, RejectsBadAttributes) {
  Value* a = b.parameter(T(DType::F32, {2, 3}), "a");
  auto r1 = b.tryBuild(OpCode::Transpose, {a}, {{"permutation", intsAttr({0, 0})}});
  EXPECT_EQ(r1.status().message(), "transpose: permutation [0, 0] repeats 0");
  auto r2 = b.tryBuild(OpCode::Transpose, {a}, {{"permutation", intAttr(1)}});
  EXPECT_EQ(r2.status().message(),
            "transpose attribute 'permutation' must be integer list, got integer");
  auto r3 = b.tryBuild(OpCode::Compare, {a, a}, {{"direction", enumAttr("lte")}});
  EXPECT_EQ(r3.status().message(),
            "compare attribute 'direction' is 'lte', expected one of eq, ne, lt, le, gt, ge");
  auto r4 = b.tryBuild(OpCode::Transpose, {a});
  EXPECT_EQ(r4.status().message(), "transpose requires attribute 'permutation'");
  auto r5 = b.tryBuild(OpCode::Exp, {a, a});
  EXPECT_EQ(r5.status().message(), "exp takes 1 operands, got 2");
  auto r6 = b.tryBuild(OpCode::Exp, {a}, {{"axis", intAttr(1)}});
  EXPECT_EQ(r6.status().message(), "exp has no attribute 'axis'");
}

TEST_F(BuilderTest, BroadcastAndReshapeRules) {
  Value* a = b.parameter(T(DType::F32, {1, 3}), "a");
  EXPECT_EQ(b.broadcastTo(a, {4, 2, 3})->type().str(), "f32[4,2,3]");
  EXPECT_EQ(b.reshape(a, {3})->type().str(), "f32[3]");
  EXPECT_EQ(b.reshape(a, {4}), nullptr);
  EXPECT_EQ(b.status().message(),
            "reshape: cannot reshape f32[1,3] (3 elements) to f32[4] (4 elements)");
}

TEST_F(BuilderTest, ConvolutionOutputShape) {
  // ResNet stem: 224x224, 7x7 kernel, stride 2, padding 3 -> 112x112.
  Value* x = b.parameter(T(DType::F32, {Dim::symbol("N"), 3, 224, 224}), "x");
  Value* w = b.parameter(T(DType::F32, {64, 3, 7, 7}), "w");
  AttrMap a{{"window_strides", intsAttr({2, 2})},
            {"padding_low", intsAttr({3, 3})},
            {"padding_high", intsAttr({3, 3})}};
  Value* y = b.op(OpCode::Convolution, {x, w}, a);
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(y->type().str(), "f32[N,64,112,112]");
  // NHWC input, HWIO kernel, depthwise (groups = channels).
  Value* xh = b.parameter(T(DType::F32, {1, 10, 10, 8}), "xh");
  Value* wh = b.parameter(T(DType::F32, {3, 3, 1, 8}), "wh");
  AttrMap d{{"dimension_numbers", stringAttr("b01f_01io->b01f")},
            {"feature_group_count", intAttr(8)},
            {"rhs_dilation", intsAttr({2, 2})}};
  Value* yh = b.op(OpCode::Convolution, {xh, wh}, d);
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(yh->type().str(), "f32[1,6,6,8]");  // dilated kernel 5: 10 - 5 + 1
}

TEST_F(BuilderTest, GatherLikeEmbeddingLookup) {
  // table[ids]: operand f32[1000,64], ids i64[B,S] -> f32[B,S,64].
  Value* table = b.parameter(T(DType::F32, {1000, 64}), "table");
  Value* ids = b.parameter(T(DType::I64, {Dim::symbol("B"), 7}), "ids");
  AttrMap a{{"offset_dims", intsAttr({2})},
            {"collapsed_slice_dims", intsAttr({0})},
            {"start_index_map", intsAttr({0})},
            {"index_vector_dim", intAttr(2)},
            {"slice_sizes", intsAttr({1, 64})}};
  Value* y = b.op(OpCode::Gather, {table, ids}, a);
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(y->type().str(), "f32[B,7,64]");
}

TEST_F(BuilderTest, ReductionsAndWindows) {
  Value* x = b.parameter(T(DType::F32, {2, 3, 5}), "x");
  EXPECT_EQ(b.reduce(x, {0, 2}, "sum")->type().str(), "f32[3]");
  EXPECT_EQ(b.reduce(x, {1}, "and"), nullptr);
  Value* pool = b.op(OpCode::ReduceWindow, {x},
                     {{"kind", enumAttr("max")},
                      {"window_dimensions", intsAttr({1, 3, 3})},
                      {"window_strides", intsAttr({1, 2, 2})},
                      {"padding_low", intsAttr({0, 1, 1})},
                      {"padding_high", intsAttr({0, 1, 1})}});
  Status s = b.status();
  EXPECT_EQ(s.message(), "reduce: kind 'and' does not apply to f32[2,3,5]");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->type().str(), "f32[2,2,3]");  // (3+2-3)/2+1 = 2, (5+2-3)/2+1 = 3
  auto tk = b.opN(OpCode::TopK, {x}, {{"k", intAttr(2)}, {"axis", intAttr(2)}});
  ASSERT_EQ(tk.size(), 2u);
  EXPECT_EQ(tk[1]->type().str(), "i64[2,3,2]");
}

TEST_F(BuilderTest, AttentionAndLayerNormRules) {
  Value* q = b.parameter(T(DType::F32, {2, 4, 5, 16}), "q");
  Value* k = b.parameter(T(DType::F32, {2, 4, 7, 16}), "k");
  Value* v = b.parameter(T(DType::F32, {2, 4, 7, 8}), "v");
  Value* o = b.op(OpCode::Attention, {q, k, v}, {{"causal", boolAttr(true)}});
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(o->type().str(), "f32[2,4,5,8]");
  Value* scale = b.parameter(T(DType::F32, {5, 8}), "scale");
  EXPECT_NE(b.op(OpCode::LayerNorm, {o, scale}, {{"axis", intAttr(2)}}), nullptr);
  EXPECT_EQ(b.op(OpCode::LayerNorm, {o, scale}, {{"axis", intAttr(3)}}), nullptr);
  EXPECT_EQ(b.status().message(), "layer_norm: scale f32[5,8] must be f32[8]");
}

TEST_F(BuilderTest, ReplaceAllUsesWithAndErase) {
  Value* x = b.parameter(T(DType::F32, {3}), "x");
  Value* e = b.unary(OpCode::Exp, x);
  Value* n = b.unary(OpCode::Neg, e);
  f->setOutputs({n, e});
  Value* l = b.unary(OpCode::Log, x);
  f->replaceAllUsesWith(e, l);
  EXPECT_EQ(n->def()->operand(0), l);
  EXPECT_EQ(f->outputs()[1], l);
  EXPECT_FALSE(e->hasUses());
  f->erase(e->def());
  // l was appended after n, so the order is now wrong: the verifier says so.
  Status s = verify(*f);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("before it is defined"), std::string::npos) << s.message();
}

TEST_F(BuilderTest, VerifierCatchesWrongDeclaredType) {
  Value* x = b.parameter(T(DType::F32, {3}), "x");
  Node* n = f->createNode(OpCode::Exp, {x}, {T(DType::F32, {4})});
  n->setLoc(Location{"t.kir", 4, 7});
  f->setOutputs({n->result()});
  EXPECT_EQ(verify(m).str(),
            "t.kir:4:7: error: exp has type f32[4] but its operands and attributes give f32[3]");
}

}  // namespace
}  // namespace kiln
