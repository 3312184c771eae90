// Tests of the .kir printer and parser: round trips (every op, every float bit pattern), names,
// out-of-line data, exact error locations, and robustness on broken input.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "ir/text/text.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Module> parseOk(const std::string& text) {
  auto m = parseModule(text, "t.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str() << "\n" << text;
  return m.isOk() ? std::move(m).value() : nullptr;
}

std::string parseError(const std::string& text) {
  auto m = parseModule(text, "t.kir");
  EXPECT_FALSE(m.isOk()) << "parsed:\n" << text;
  return m.isOk() ? std::string() : m.status().str();
}

// A module with one function returning one constant per tensor.
std::unique_ptr<Module> constantsModule(const std::vector<Tensor>& tensors) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  std::vector<Value*> outs;
  for (const Tensor& t : tensors) {
    AttrMap a;
    a["value"] = tensorAttr(t);
    outs.push_back(f->createNode(OpCode::Constant, {}, {t.type()}, std::move(a))->result());
  }
  f->setOutputs(outs);
  return m;
}

const Tensor& constantOf(const Module& m, size_t output) {
  return m.functions()[0]->outputs()[output]->def()->constantData().tensor;
}

TEST(TextTest, AllOpsFileUsesEveryOpAndRoundTrips) {
  std::string text = readFile(KILN_SOURCE_DIR "/tests/lit/Inputs/all-ops.kir");
  ASSERT_FALSE(text.empty());
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  std::set<OpCode> seen;
  for (const auto& f : m->functions())
    for (const auto& n : f->nodes()) seen.insert(n->op());
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_TRUE(seen.count(static_cast<OpCode>(i)))
        << "missing op " << opName(static_cast<OpCode>(i));
  EXPECT_EQ(printModule(*m), text);
}

TEST(TextTest, PrintsTheDocumentedForm) {
  std::string text =
      "func @main(%x: f32[N,4], %w: f32[4,8]) -> (f32[N,8], f32[N,2]) {\n"
      "  %0 = f32[N,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}\n"
      "  %y = f32[N,8] tanh(%0) loc(\"Tanh_3\")\n"
      "  %v, %i = (f32[N,2], i64[N,2]) top_k(%y) {k = 2, axis = 1}\n"
      "  %c = f32[3] constant() {value = [1.0, 2.5, -0.0]}\n"
      "  return %y, %v\n"
      "}\n";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), text);
  const Function& f = *m->functions()[0];
  EXPECT_EQ(f.numParameters(), 2u);
  EXPECT_EQ(f.parameter(0)->type().str(), "f32[N,4]");
  const Node* tanh = f.outputs()[0]->def();
  EXPECT_EQ(tanh->op(), OpCode::Tanh);
  EXPECT_EQ(tanh->origin(), "Tanh_3");
  // The location is the op name: line 3, column 17.
  EXPECT_EQ(tanh->loc().str(), "t.kir:3:17");
}

TEST(TextTest, ProductDimsRoundTrip) {
  std::string text = "func @main(%x: f32[S,N,256]) -> (f32[4*N*S,64]) {\n"
                     "  %y = f32[4*N*S,64] reshape(%x)\n"
                     "  return %y\n"
                     "}\n";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), text);
  // Factors print sorted, and constants multiply into the coefficient.
  auto n = parseOk("func @main(%x: f32[S*N*2*2]) -> (f32[S*N*2*2]) {\n  return %x\n}\n");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->entry()->parameter(0)->type().str(), "f32[4*N*S]");
  EXPECT_NE(parseError("func @main(%x: f32[N*]) -> (f32[N]) {\n  return %x\n}\n")
                .find("expected a dimension"),
            std::string::npos);
}

TEST(TextTest, AttributesPrintInSchemaOrderWithFloatSpellings) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("f");
  Value* x = f->addParameter(TensorType::of(DType::F32, {1, 1, 2, 2}), "x");
  AttrMap a;
  a["scales"] = floatsAttr({1.0, 1e22, 1e-5, 100.0});
  a["cubic_coeff_a"] = floatAttr(-0.5);
  a["mode"] = enumAttr("cubic");
  a["exclude_outside"] = boolAttr(true);
  Node* n = f->createNode(OpCode::Resize, {x}, {TensorType::of(DType::F32, {1, 1, 2, 2})}, a);
  f->setOutputs({n->result()});
  std::string expected =
      "func @f(%x: f32[1,1,2,2]) -> (f32[1,1,2,2]) {\n"
      "  %0 = f32[1,1,2,2] resize(%x) {mode = cubic, cubic_coeff_a = -0.5, exclude_outside = "
      "true, scales = [1.0, 1.0e+22, 1.0e-05, 100.0]}\n"
      "  return %0\n"
      "}\n";
  EXPECT_EQ(printModule(*m), expected);
  EXPECT_EQ(printModule(*parseOk(expected)), expected);
}

TEST(TextTest, SpecialFloatAttributes) {
  std::string text = "func @f(%x: f32[2,3]) -> (f32[2,3]) {\n"
                     "  %0 = f32[2,3] layer_norm(%x, %s) {axis = 1, epsilon = nan}\n"
                     "  return %0\n"
                     "}\n";
  // %s is unknown: the error names it at its column.
  EXPECT_EQ(parseError(text), "t.kir:2:32: error: unknown value %s");
  std::string ok = "func @f(%x: f32[3], %q: f32[2,3]) -> (f32[2,3], f32[2,3]) {\n"
                   "  %0 = f32[2,3] layer_norm(%q, %x) {axis = 1, epsilon = inf}\n"
                   "  %1 = f32[2,3] layer_norm(%q, %x) {axis = 1, epsilon = -inf}\n"
                   "  return %0, %1\n"
                   "}\n";
  auto m = parseOk(ok);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), ok);
  EXPECT_EQ(m->functions()[0]->outputs()[1]->def()->attrFloat("epsilon"),
            -std::numeric_limits<double>::infinity());
}

TEST(TextTest, ElementSpellings) {
  // Expected spellings from numpy: repr(np.float32(np.float16 bits 0x3555)) = 0.33325195,
  // 0x0001 -> 5.9604645e-08; bf16 0x3e4c = float bits 0x3e4c0000 -> 0.19921875.
  Tensor h(DType::F16, {2});
  h.mutableData<uint16_t>()[0] = 0x3555;
  h.mutableData<uint16_t>()[1] = 0x0001;
  Tensor b(DType::BF16, {1});
  b.mutableData<uint16_t>()[0] = 0x3e4c;
  Tensor f(DType::F32, {2});
  f.mutableData<float>()[0] = 0.1f;
  f.mutableData<float>()[1] = 100.0f;
  Tensor d(DType::F64, {1});
  d.mutableData<double>()[0] = 1.0 / 3.0;
  std::string s = printModule(*constantsModule({h, b, f, d}));
  EXPECT_NE(s.find("{value = [0.33325195, 5.9604645e-08]}"), std::string::npos) << s;
  EXPECT_NE(s.find("{value = [0.19921875]}"), std::string::npos) << s;
  EXPECT_NE(s.find("{value = [0.1, 100.0]}"), std::string::npos) << s;
  EXPECT_NE(s.find("{value = [0.3333333333333333]}"), std::string::npos) << s;
}

// Random bit patterns of `dtype`, plus the special values, as raw bytes.
Tensor randomFloats(DType dtype, int64_t n, uint32_t seed, bool allowPayloadNaN) {
  Tensor t(dtype, {n});
  std::mt19937_64 rng(seed);
  size_t es = dtypeSize(dtype);
  for (int64_t i = 0; i < n; ++i) {
    while (true) {
      uint64_t bits = rng();
      std::memcpy(t.mutableBytes() + i * es, &bits, es);
      if (allowPayloadNaN || !std::isnan(t.getDouble(i))) break;
    }
  }
  // nan, inf, -inf, -0.0, the smallest subnormal, the largest finite.
  std::vector<double> specials = {std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), -0.0};
  for (size_t i = 0; i < specials.size(); ++i) t.setDouble(static_cast<int64_t>(i), specials[i]);
  uint64_t tiny = 1, maxFinite = 0;
  switch (dtype) {
    case DType::F16: maxFinite = 0x7bff; break;
    case DType::BF16: maxFinite = 0x7f7f; break;
    case DType::F32: maxFinite = 0x7f7fffff; break;
    default: maxFinite = 0x7fefffffffffffff; break;
  }
  std::memcpy(t.mutableBytes() + 4 * es, &tiny, es);
  std::memcpy(t.mutableBytes() + 5 * es, &maxFinite, es);
  return t;
}

TEST(TextTest, FloatBitPatternsRoundTripInline) {
  PrintOptions inlineAll;
  inlineAll.inlineConstantLimit = 1 << 20;
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    Tensor t = randomFloats(dt, 2000, 7 + static_cast<uint32_t>(dt), false);
    std::string s = printModule(*constantsModule({t}), inlineAll);
    EXPECT_EQ(s.find("data @"), std::string::npos) << "not printed inline: " << dtypeName(dt);
    auto m = parseOk(s);
    ASSERT_TRUE(m);
    EXPECT_TRUE(constantOf(*m, 0).identical(t)) << dtypeName(dt);
    EXPECT_EQ(printModule(*m, inlineAll), s);
  }
}

TEST(TextTest, NaNPayloadsAndOddBoolsGoOutOfLineAndKeepTheirBits) {
  PrintOptions inlineAll;
  inlineAll.inlineConstantLimit = 1 << 20;
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    Tensor t = randomFloats(dt, 4000, 99 + static_cast<uint32_t>(dt), true);
    Tensor payload(dt, {1});
    uint64_t bits = dt == DType::F64 ? 0x7ff0000000000001 : dt == DType::F32 ? 0x7f800001 : 0x7c01;
    if (dt == DType::BF16) bits = 0x7f81;
    std::memcpy(payload.mutableBytes(), &bits, dtypeSize(dt));
    std::string s = printModule(*constantsModule({t, payload}), inlineAll);
    EXPECT_NE(s.find("data @cst0"), std::string::npos) << s.substr(0, 200);
    auto m = parseOk(s);
    ASSERT_TRUE(m);
    EXPECT_TRUE(constantOf(*m, 0).identical(t)) << dtypeName(dt);
    EXPECT_TRUE(constantOf(*m, 1).identical(payload)) << dtypeName(dt);
  }
  Tensor b(DType::Bool, {2});
  b.mutableData<uint8_t>()[0] = 1;
  b.mutableData<uint8_t>()[1] = 2;
  std::string s = printModule(*constantsModule({b}));
  EXPECT_NE(s.find("data @cst0 = bool[2] 0x0102"), std::string::npos) << s;
  EXPECT_TRUE(constantOf(*parseOk(s), 0).identical(b));
}

TEST(TextTest, LargeConstantsUseDataEntriesAndSplats) {
  Tensor big = randomFloats(DType::F32, 17, 3, false);
  Tensor splat(DType::F32, {4, 5});
  for (int64_t i = 0; i < 20; ++i) splat.setDouble(i, -2.5);
  Tensor small(DType::I32, {16});
  for (int64_t i = 0; i < 16; ++i) small.setInt(i, i - 8);
  std::string s = printModule(*constantsModule({big, splat, small}));
  EXPECT_NE(s.find("%0 = f32[17] constant() {value = @cst0}"), std::string::npos) << s;
  EXPECT_NE(s.find("%1 = f32[4,5] constant() {value = splat(-2.5)}"), std::string::npos) << s;
  EXPECT_NE(s.find("[-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7]"), std::string::npos);
  EXPECT_NE(s.find("\n\ndata @cst0 = f32[17] 0x"), std::string::npos) << s;
  auto m = parseOk(s);
  ASSERT_TRUE(m);
  EXPECT_TRUE(constantOf(*m, 0).identical(big));
  EXPECT_TRUE(constantOf(*m, 1).identical(splat));
  EXPECT_TRUE(constantOf(*m, 2).identical(small));
  EXPECT_EQ(constantOf(*m, 0).numElements(), 17);
  EXPECT_EQ(m->functions()[0]->outputs()[0]->def()->constantData().poolName, "cst0");
  EXPECT_EQ(printModule(*m), s);
  // printFunction leaves the data section out but still names the data.
  std::string fn = printFunction(*m->functions()[0]);
  EXPECT_EQ(fn.find("data @"), std::string::npos);
  EXPECT_NE(fn.find("{value = @cst0}"), std::string::npos);
}

TEST(TextTest, DataNamesAreSharedKeptAndFresh) {
  Tensor shared = randomFloats(DType::F32, 20, 1, false);
  Tensor named = randomFloats(DType::F32, 20, 2, false);
  Tensor fresh = randomFloats(DType::F32, 20, 3, false);
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  auto add = [&](const Tensor& t, const std::string& pool) {
    AttrMap a;
    a["value"] = tensorAttr(t, pool);
    return f->createNode(OpCode::Constant, {}, {t.type()}, std::move(a))->result();
  };
  // Two constants on one Tensor (the second reshaped) share an entry; "cst0" is taken by a pool
  // name, so the fresh names skip it.
  Value* a = add(shared, "");
  Value* b = add(shared.reshaped({4, 5}), "");
  Value* c = add(named, "cst0");
  Value* d = add(fresh, "");
  f->setOutputs({a, b, c, d});
  std::string s = printModule(*m);
  EXPECT_NE(s.find("%0 = f32[20] constant() {value = @cst1}\n"
                   "  %1 = f32[4,5] constant() {value = @cst1}\n"
                   "  %2 = f32[20] constant() {value = @cst0}\n"
                   "  %3 = f32[20] constant() {value = @cst2}\n"),
            std::string::npos)
      << s;
  size_t e1 = s.find("data @cst1 = f32[20]"), e0 = s.find("data @cst0 = f32[20]"),
         e2 = s.find("data @cst2 = f32[20]");
  ASSERT_NE(e1, std::string::npos);
  ASSERT_NE(e0, std::string::npos);
  ASSERT_NE(e2, std::string::npos);
  EXPECT_LT(e1, e0);
  EXPECT_LT(e0, e2);
  auto p = parseOk(s);
  ASSERT_TRUE(p);
  EXPECT_EQ(constantOf(*p, 0).bytes(), constantOf(*p, 1).bytes());  // still shared
  EXPECT_EQ(constantOf(*p, 1).dims(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(printModule(*p), s);
}

// Held constants (ConstantData::held: the data lives only in library kernels' layouts, as in an
// artifact) print as `data @w = TYPE held`, named in PrintOptions::held or flagged; such entries
// parse back only in an artifact's module (the blob overload of parseModule).
TEST(TextTest, HeldConstantsPrintWithoutDataAndParseOnlyInArtifacts) {
  Tensor w = randomFloats(DType::F32, 24, 4, false);
  auto m = constantsModule({w});
  const Node* node = m->functions()[0]->outputs()[0]->def();
  std::set<const Node*> held{node};
  PrintOptions po;
  po.held = &held;
  std::string s = printModule(*m, po);
  EXPECT_NE(s.find("%0 = f32[24] constant() {value = @cst0}"), std::string::npos) << s;
  EXPECT_NE(s.find("data @cst0 = f32[24] held\n"), std::string::npos) << s;
  EXPECT_EQ(s.find(" 0x"), std::string::npos) << s;
  EXPECT_NE(parseError(s).find("data @cst0 is held (its bytes are only in an artifact's packed "
                               "weights): such data exists only in .kiln artifacts"),
            std::string::npos)
      << parseError(s);
  auto parsed = parseModule(s, "a.kiln", std::string_view());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  const ConstantData& c = (*parsed)->functions()[0]->outputs()[0]->def()->constantData();
  EXPECT_TRUE(c.held);
  EXPECT_FALSE(c.tensor.defined());
  EXPECT_EQ((*parsed)->functions()[0]->outputs()[0]->type().str(), "f32[24]");
  EXPECT_EQ(printModule(**parsed), s);  // flagged held: the same text
  // A held entry whose type is not the constant's is an error.
  std::string wrong = s;
  wrong.replace(wrong.find("data @cst0 = f32[24]"), 20, "data @cst0 = f32[25]");
  auto bad = parseModule(wrong, "a.kiln", std::string_view());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("refers to held data @cst0 of type f32[25]"),
            std::string::npos)
      << bad.status().message();
}

TEST(TextTest, ValueNames) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("f");
  TensorType t = TensorType::of(DType::F32, {2});
  Value* x = f->addParameter(t, "x");
  auto node = [&](OpCode op, Value* in, const std::string& name) {
    Value* v = f->createNode(op, {in}, {t})->result();
    v->setName(name);
    return v;
  };
  Value* v0 = node(OpCode::Abs, x, "");
  Value* v1 = node(OpCode::Neg, v0, "t");
  Value* v2 = node(OpCode::Neg, v1, "t");    // repeated: t.1 is a source name, so t.2
  Value* v3 = node(OpCode::Abs, v2, "1");    // a numeric source name
  Value* v4 = node(OpCode::Abs, v3, "");     // 1 is taken: 2
  Value* v5 = node(OpCode::Abs, v4, "a b");  // needs quotes
  Value* v6 = node(OpCode::Abs, v5, "t.1");
  Value* v7 = node(OpCode::Abs, v6, "q\"\n");  // escapes
  f->setOutputs({v7});
  std::string expected = "func @f(%x: f32[2]) -> (f32[2]) {\n"
                         "  %0 = f32[2] abs(%x)\n"
                         "  %t = f32[2] neg(%0)\n"
                         "  %t.2 = f32[2] neg(%t)\n"
                         "  %1 = f32[2] abs(%t.2)\n"
                         "  %2 = f32[2] abs(%1)\n"
                         "  %\"a b\" = f32[2] abs(%2)\n"
                         "  %t.1 = f32[2] abs(%\"a b\")\n"
                         "  %\"q\\\"\\n\" = f32[2] abs(%t.1)\n"
                         "  return %\"q\\\"\\n\"\n"
                         "}\n";
  EXPECT_EQ(printModule(*m), expected);
  auto p = parseOk(expected);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->functions()[0]->outputs()[0]->name(), "q\"\n");
  EXPECT_EQ(printModule(*p), expected);
}

TEST(TextTest, QuotedFunctionNamesAndComments) {
  std::string text = "// leading comment\n"
                     "func @\"my model/main\"(%x: bool[]) -> (bool[]) {  // trailing comment\n"
                     "  %0 = bool[] not(%x)\n"
                     "  return %0\n"
                     "}\n";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->functions()[0]->name(), "my model/main");
  EXPECT_EQ(printModule(*m), "func @\"my model/main\"(%x: bool[]) -> (bool[]) {\n"
                             "  %0 = bool[] not(%x)\n"
                             "  return %0\n"
                             "}\n");
}

const char* kHead = "func @f(%x: f32[2]) -> (f32[2]) {\n";

TEST(TextTest, ErrorsPointAtTheCause) {
  auto body = [](const std::string& line) { return kHead + line + "\n  return %x\n}\n"; };
  // Columns counted by hand on the line after the header (line 2).
  EXPECT_EQ(parseError(body("  %y = f32[2] foo(%x)")), "t.kir:2:15: error: unknown op 'foo'");
  EXPECT_EQ(parseError(body("  %y = f32[2] abs(%z)")), "t.kir:2:19: error: unknown value %z");
  EXPECT_EQ(parseError(body("  %x = f32[2] abs(%x)")),
            "t.kir:2:3: error: redefinition of value %x (first defined at t.kir:1:9)");
  EXPECT_EQ(parseError(body("  %y = f32[3] abs(%x)")),
            "t.kir:2:15: error: abs has type f32[3] but its operands and attributes give f32[2]");
  EXPECT_EQ(parseError(body("  %y = f32[2] abs(%x) {foo = 1}")),
            "t.kir:2:24: error: abs has no attribute 'foo'");
  EXPECT_EQ(parseError(body("  %v, %i = (f32[1], i64[1]) top_k(%x) {k = [1], axis = 0}")),
            "t.kir:2:44: error: top_k attribute 'k' expects an integer, got '['");
  EXPECT_EQ(parseError(body("  %y = bool[2] compare(%x, %x)")),
            "t.kir:2:16: error: compare requires attribute 'direction'");
  EXPECT_EQ(parseError(body("  %y = bool[2] compare(%x, %x) {direction = up}")),
            "t.kir:2:45: error: compare attribute 'direction' is 'up', expected one of eq, ne, "
            "lt, le, gt, ge");
  EXPECT_EQ(parseError(body("  %y = f32[2] abs(%x, %x)")),
            "t.kir:2:15: error: abs takes 1 operands, got 2");
  EXPECT_EQ(parseError(body("  %y = f32[2 abs(%x)")), "t.kir:2:14: error: expected ',', got 'abs'");
  EXPECT_EQ(parseError(body("  %y = f31[2] abs(%x)")), "t.kir:2:8: error: unknown dtype 'f31'");
  EXPECT_EQ(parseError(body("  %v, %i = (f32[1], i64[1]) top_k(%x) {k = 99999999999999999999}")),
            "t.kir:2:44: error: integer 99999999999999999999 is out of range for i64");
  EXPECT_EQ(parseError(body("  %c = f32[2] constant() {value = @nope}")),
            "t.kir:2:35: error: unknown data @nope");
  EXPECT_EQ(parseError(body("  %c = f32[3] constant() {value = [1.0, 2.0]}")),
            "t.kir:2:35: error: constant of type f32[3] needs 3 elements, got 2");
  EXPECT_EQ(parseError(body("  %c = f16[1] constant() {value = [70000.0]}")),
            "t.kir:2:36: error: number 70000.0 is out of range for f16");
  EXPECT_EQ(parseError(body("  %c = i8[1] constant() {value = [128]}")),
            "t.kir:2:35: error: value 128 is out of range for i8");
  EXPECT_EQ(parseError(body("  %y = f32[2] parameter()")),
            "t.kir:2:15: error: parameters are declared in the function signature");
}

TEST(TextTest, UnsignedConstantsRoundTripAndCheckTheirRange) {
  // u64 elements above INT64_MAX are written and read as unsigned decimals.
  const std::string text =
      "func @main() -> (u16[2], u32[2], u64[3]) {\n"
      "  %a = u16[2] constant() {value = [0, 65535]}\n"
      "  %b = u32[2] constant() {value = [2147483648, 4294967295]}\n"
      "  %c = u64[3] constant() {value = [18446744073709551615, 9223372036854775808, 0]}\n"
      "  return %a, %b, %c\n"
      "}\n";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), text);
  EXPECT_EQ(constantOf(*m, 0).getInt(1), 65535);
  EXPECT_EQ(constantOf(*m, 1).getInt(0), 2147483648);
  const Tensor& c = constantOf(*m, 2);
  ASSERT_EQ(c.dtype(), DType::U64);
  EXPECT_EQ(c.getUInt(0), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(c.getUInt(1), uint64_t(1) << 63);
  // A tensor built in memory prints the same way.
  Tensor t(DType::U64, {1});
  t.setUInt(0, 18446744073709551615u);
  EXPECT_NE(printModule(*constantsModule({t})).find("{value = [18446744073709551615]}"),
            std::string::npos);

  auto body = [](const std::string& line) { return kHead + line + "\n  return %x\n}\n"; };
  EXPECT_EQ(parseError(body("  %c = u16[1] constant() {value = [65536]}")),
            "t.kir:2:36: error: value 65536 is out of range for u16");
  EXPECT_EQ(parseError(body("  %c = u32[1] constant() {value = [4294967296]}")),
            "t.kir:2:36: error: value 4294967296 is out of range for u32");
  EXPECT_EQ(parseError(body("  %c = u64[1] constant() {value = [18446744073709551616]}")),
            "t.kir:2:36: error: integer 18446744073709551616 is out of range for u64");
  EXPECT_EQ(parseError(body("  %c = u64[1] constant() {value = [-1]}")),
            "t.kir:2:36: error: value -1 is out of range for u64");
  EXPECT_EQ(parseError(body("  %c = u8[1] constant() {value = [256]}")),
            "t.kir:2:35: error: value 256 is out of range for u8");
}

TEST(TextTest, StructuralErrors) {
  EXPECT_EQ(parseError(std::string(kHead) + "}\n"), "t.kir:2:1: error: function @f has no return");
  EXPECT_EQ(parseError(std::string(kHead) + "  %y = f32[2] abs("),
            "t.kir:2:19: error: expected an operand (%name) or ')', got end of file");
  EXPECT_EQ(parseError(""), "t.kir:1:1: error: module has no functions");
  EXPECT_EQ(parseError("fun @f"), "t.kir:1:1: error: expected 'func' or 'data', got 'fun'");
  EXPECT_EQ(parseError(std::string(kHead) + "  return %x\n}\ndata @d = f32[2] 0x0000\n"),
            "t.kir:4:18: error: data @d has 4 hex digits, its type f32[2] needs 16");
  EXPECT_EQ(parseError(std::string(kHead) + "  return %x\n}\ndata @d = f32[0] 0x\n"
                                            "data @d = f32[0] 0x\n"),
            "t.kir:5:6: error: data @d is defined twice (first at t.kir:4:6)");
  EXPECT_EQ(parseError(std::string(kHead) + "  return %x\n}\n" + kHead + "  return %x\n}\n"),
            "t.kir:4:6: error: function @f is defined twice (first at t.kir:1:6)");
  EXPECT_EQ(parseError(std::string(kHead) + "  %y = f32[2] abs(%x)\n  return %y, %x\n}\n"),
            "t.kir:3:3: error: return has 2 values but @f declares 1 results");
  EXPECT_EQ(parseError("func @f(%x: f32[3]) -> (f32[2]) {\n  return %x\n}\n"),
            "t.kir:2:10: error: returned value %x has type f32[3] but @f declares result 0 as "
            "f32[2]");
  EXPECT_EQ(parseError("func @f(%x: f32[2]) -> (f32[2]) {\n  %s = f32[2] abs(%x) loc(\"a\n"),
            "t.kir:2:27: error: unterminated string");
  EXPECT_EQ(parseError("func @f(%x: f32[2]) # \n"), "t.kir:1:21: error: unexpected character '#'");
}

TEST(TextTest, HugeSizesAreErrorsNotAllocations) {
  EXPECT_EQ(parseError("func @f(%x: f32[1099511627777]) -> (f32[2]) {\n"),
            "t.kir:1:17: error: dimension 1099511627777 is too large");
  std::string e = parseError("func @f(%x: f32[1099511627776,2]) -> (f32[2]) {\n  return %x\n}\n");
  EXPECT_EQ(e.substr(0, 15), "t.kir:1:9: erro") << e;
  EXPECT_NE(e.find("more than 2^40 elements"), std::string::npos) << e;
  EXPECT_EQ(parseError(std::string(kHead) +
                       "  %c = f32[1099511627776] constant() {value = splat(0.0)}\n"),
            "t.kir:2:47: error: splat constant of type f32[1099511627776] would take "
            "4398046511104 bytes; the splats of a module may take 2^30 bytes in all");
  EXPECT_EQ(
      parseError(std::string(kHead) + "  %c = f32[1099511627776] constant() {value = [0.0]}\n"),
      "t.kir:2:47: error: constant of type f32[1099511627776] needs 1099511627776 "
      "elements, got 1");
  EXPECT_EQ(parseError(std::string(kHead) + "  return %x\n}\ndata @d = f32[1099511627776] 0x00\n"),
            "t.kir:4:30: error: data @d has 2 hex digits, its type f32[1099511627776] needs "
            "8796093022208");
}

TEST(TextTest, BrokenInputNeverCrashes) {
  std::string text = readFile(KILN_SOURCE_DIR "/tests/lit/Inputs/all-ops.kir");
  ASSERT_FALSE(text.empty());
  // A truncated file is an error unless it ends just after a function that needs no data.
  size_t dataStart = text.find("\ndata @");
  for (size_t len = 0; len < dataStart; len += 7) {
    std::string prefix = text.substr(0, len);
    bool ok = parseModule(prefix, "t.kir").isOk();
    size_t end = prefix.find_last_not_of('\n');
    EXPECT_TRUE(!ok || (end != std::string::npos && prefix[end] == '}')) << len;
  }
  // Random byte changes: any outcome but a crash.
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string s = text;
    for (int k = 0; k < 4; ++k) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    (void)parseModule(s, "t.kir");
  }
  // Deep nesting and long runs of punctuation.
  EXPECT_FALSE(parseModule(std::string(100000, '['), "t.kir").isOk());
  EXPECT_FALSE(parseModule(std::string(kHead) + "  %c = f32[2] constant() {value = " +
                               std::string(100000, '[') + "\n",
                           "t.kir")
                   .isOk());
}

}  // namespace
}  // namespace kiln
