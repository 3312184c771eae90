// The pass registry and runner (passNames, createPass, runPasses), and the dce pass.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/dce.h"
#include "passes/pass.h"

namespace kiln {
namespace {

TensorType f32(std::vector<int64_t> dims) { return TensorType::of(DType::F32, dims); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

size_t countOp(const Function& f, OpCode op) {
  return static_cast<size_t>(std::count_if(f.nodes().begin(), f.nodes().end(),
                                           [&](const auto& n) { return n->op() == op; }));
}

// --- registry ----------------------------------------------------------------------------------

TEST(PassRegistry, KnowsEveryPassByItsFlagName) {
  std::vector<std::string> names = passNames();
  for (const char* want : {"decompose-composites", "dce"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const std::string& name : names) {
    std::unique_ptr<Pass> p = createPass(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->name(), name);
    EXPECT_FALSE(p->description().empty()) << name;
  }
  EXPECT_EQ(createPass("no-such-pass"), nullptr);
}

// x -> exp (unused); returns neg(x).
std::unique_ptr<Module> moduleWithDeadExp() {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  Value* x = b.parameter(f32({3}), "x");
  b.unary(OpCode::Exp, x);
  f->setOutputs({b.unary(OpCode::Neg, x)});
  EXPECT_TRUE(b.ok()) << b.status().str();
  return m;
}

TEST(PassRegistry, UnknownPassIsAnErrorAndNothingRuns) {
  auto m = moduleWithDeadExp();
  Status s = runPasses(*m, {"dce", "no-such-pass"}, /*verifyEach=*/true);
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(contains(s.message(), "unknown pass 'no-such-pass'")) << s.str();
  EXPECT_TRUE(contains(s.message(), "dce")) << "the message lists the known passes: " << s.str();
  // dce came first in the list but must not have run.
  EXPECT_EQ(countOp(*m->entry(), OpCode::Exp), 1u);
}

TEST(PassRegistry, RunsPassesInOrder) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  Value* x = b.parameter(f32({2, 3}), "x");
  b.op(OpCode::Softmax, {x}, {{"axis", intAttr(1)}});  // unused
  f->setOutputs({b.op(OpCode::Gelu, {x})});
  ASSERT_TRUE(b.ok()) << b.status().str();
  Status s = runPasses(*m, {"decompose-composites", "dce"}, /*verifyEach=*/true);
  ASSERT_TRUE(s.isOk()) << s.str();
  // The softmax was decomposed, then its whole (unused) decomposition removed; gelu's stays.
  EXPECT_EQ(countOp(*f, OpCode::Reduce), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Erf), 1u);
  EXPECT_EQ(countOp(*f, OpCode::Softmax), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Gelu), 0u);
}

// A module whose `neg` claims a result type its operand does not give.
std::unique_ptr<Module> brokenModule() {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Value* x = f->addParameter(f32({3}), "x");
  Node* n = f->createNode(OpCode::Neg, {x}, {f32({4})});
  f->setOutputs({n->result()});
  return m;
}

TEST(PassRegistry, VerifyEachCatchesABrokenModuleAndNamesThePass) {
  auto m = brokenModule();
  Status s = runPasses(*m, {"dce"}, /*verifyEach=*/true);
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(contains(s.message(), "after pass 'dce'")) << s.str();
  EXPECT_TRUE(contains(s.message(), "neg")) << s.str();
  // Without verification the same run succeeds: dce itself has nothing to object to.
  auto m2 = brokenModule();
  EXPECT_TRUE(runPasses(*m2, {"dce"}, /*verifyEach=*/false).isOk());
}

TEST(PassRegistry, PassErrorsNameThePass) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Value* x = f->addParameter(f32({2, 3}), "x");
  Node* n = f->createNode(OpCode::Softmax, {x}, {f32({2, 3})}, {{"axis", intAttr(9)}});
  f->setOutputs({n->result()});
  Status s = runPasses(*m, {"decompose-composites"}, /*verifyEach=*/false);
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(contains(s.message(), "pass 'decompose-composites'")) << s.str();
  EXPECT_TRUE(contains(s.message(), "softmax")) << s.str();
}

TEST(PassRegistry, EmptyPipelineIsFine) {
  auto m = moduleWithDeadExp();
  EXPECT_TRUE(runPasses(*m, {}, true).isOk());
  EXPECT_EQ(countOp(*m->entry(), OpCode::Exp), 1u);
}

// --- dce ---------------------------------------------------------------------------------------

TEST(Dce, RemovesDeadChainsKeepsLiveNodesAndParameters) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(f32({3}), "x");
  b.parameter(f32({5}), "unused");
  Value* e = b.unary(OpCode::Exp, x);  // dead: only the dead tanh uses it
  b.unary(OpCode::Tanh, b.add(e, e));  // dead chain end
  b.scalar(DType::F32, 2.0);           // dead constant
  Value* live = b.mul(x, b.unary(OpCode::Abs, x));
  f->setOutputs({live});
  ASSERT_TRUE(b.ok()) << b.status().str();
  ASSERT_EQ(f->numNodes(), 8u);

  auto changed = eliminateDeadCode(m);
  ASSERT_TRUE(changed.isOk());
  EXPECT_TRUE(*changed);
  // Left: two parameters, abs, mul.
  EXPECT_EQ(f->numNodes(), 4u);
  EXPECT_EQ(f->numParameters(), 2u);
  EXPECT_EQ(countOp(*f, OpCode::Exp), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Add), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Tanh), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Constant), 0u);
  EXPECT_EQ(countOp(*f, OpCode::Abs), 1u);
  EXPECT_EQ(f->outputs()[0], live);
  EXPECT_TRUE(verify(m).isOk()) << verify(m).str();

  auto again = eliminateDeadCode(m);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again);
}

TEST(Dce, KeepsAMultiResultNodeWhileAnyResultIsUsed) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(f32({4}), "x");
  std::vector<Value*> kept = b.opN(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});
  b.opN(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});  // both results unused
  ASSERT_TRUE(b.ok()) << b.status().str();
  ASSERT_EQ(kept.size(), 2u);
  f->setOutputs({kept[1]});  // only the indices of the first sort are used
  auto changed = eliminateDeadCode(m);
  ASSERT_TRUE(changed.isOk());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(countOp(*f, OpCode::Sort), 1u);
  EXPECT_EQ(f->outputs()[0]->def(), kept[0]->def());
}

TEST(Dce, ValuesReturnedTwiceOrAcrossFunctionsStay) {
  Module m;
  for (const char* name : {"a", "b"}) {
    Function* f = m.addFunction(name);
    Builder b(f);
    Value* x = b.parameter(f32({2}), "x");
    Value* y = b.unary(OpCode::Sqrt, x);
    b.unary(OpCode::Sqrt, y);  // dead in each function
    f->setOutputs({y, y});
    ASSERT_TRUE(b.ok()) << b.status().str();
  }
  auto changed = eliminateDeadCode(m);
  ASSERT_TRUE(changed.isOk());
  EXPECT_TRUE(*changed);
  for (const auto& f : m.functions()) EXPECT_EQ(countOp(*f, OpCode::Sqrt), 1u) << f->name();
}

TEST(Dce, NothingDeadMeansNoChange) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(f32({2}), "x");
  f->setOutputs({b.unary(OpCode::Neg, x)});
  ASSERT_TRUE(b.ok());
  auto changed = eliminateDeadCode(m);
  ASSERT_TRUE(changed.isOk());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(f->numNodes(), 2u);
}

}  // namespace
}  // namespace kiln
