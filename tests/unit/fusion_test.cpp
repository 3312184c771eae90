// The fusion planner: which ops share a kernel, of which kind, and the reason kept for each edge.
#include <gtest/gtest.h>

#include <set>

#include "fusion/fusion.h"
#include "ir/text/text.h"

namespace kiln::fusion {
namespace {

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "test.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  return m ? std::move(*m) : nullptr;
}

const Node* nodeNamed(const Function& f, const std::string& name) {
  for (const auto& n : f.nodes())
    if (n->numResults() && n->result()->name() == name) return n.get();
  ADD_FAILURE() << "no value %" << name;
  return nullptr;
}

// The names of the ops of each kernel, e.g. {{"a", "b"}, {"c"}}.
std::vector<std::set<std::string>> kernelNames(const FusionPlan& p) {
  std::vector<std::set<std::string>> out;
  for (const Kernel& k : p.kernels) {
    std::set<std::string> s;
    for (const Node* n : k.nodes) s.insert(n->result()->name());
    out.push_back(s);
  }
  return out;
}

const Decision* decision(const FusionPlan& p, const Function& f, const std::string& producer,
                         const std::string& consumer) {
  const Node* a = nodeNamed(f, producer);
  const Node* b = nodeNamed(f, consumer);
  for (const Decision& d : p.decisions)
    if (d.producer == a && d.consumer == b) return &d;
  ADD_FAILURE() << "no decision for %" << producer << " -> %" << consumer;
  return nullptr;
}

TEST(Fusion, ElementwiseChainIsOneLoopKernel) {
  auto m = parse(R"(func @main(%x: f32[4,8], %y: f32[4,8]) -> (f32[4,8]) {
  %a = f32[4,8] add(%x, %y)
  %b = f32[4,8] exp(%a)
  %c = f32[4,8] mul(%b, %x)
  return %c
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].kind, KernelKind::Loop);
  EXPECT_EQ(kernelNames(p)[0], (std::set<std::string>{"a", "b", "c"}));
  // Reads x and y once (2 * 128 B), writes c (128 B); unfused each op reads and writes its own.
  EXPECT_EQ(p.kernels[0].bytesRead, 256);
  EXPECT_EQ(p.kernels[0].bytesWritten, 128);
  EXPECT_EQ(p.bytesUnfused, 3 * 128 + 2 * 128 + 3 * 128);
  EXPECT_DOUBLE_EQ(p.kernels[0].flops, 32 + 8 * 32 + 32);
  ASSERT_EQ(p.kernels[0].outputs.size(), 1u);
  EXPECT_EQ(p.kernels[0].outputs[0]->name(), "c");
  const Decision* d = decision(p, f, "a", "b");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->fused);
  EXPECT_EQ(d->how, "loop");
}

TEST(Fusion, NoFusionGivesOneKernelPerOp) {
  auto m = parse(R"(func @main(%x: f32[4,8]) -> (f32[4,8]) {
  %a = f32[4,8] exp(%x)
  %b = f32[4,8] neg(%a)
  return %b
})");
  FusionOptions o;
  o.fuse = false;
  FusionPlan p = planFusion(*m->entry(), o);
  ASSERT_EQ(p.kernels.size(), 2u);
  const Decision* d = decision(p, *m->entry(), "a", "b");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->fused);
  EXPECT_EQ(d->reason, "fusion is off");
}

TEST(Fusion, MatmulTakesBiasAndActivationAsEpilogue) {
  auto m = parse(R"(func @main(%x: f32[4,8], %w: f32[8,16], %bias: f32[16]) -> (f32[4,16]) {
  %mm = f32[4,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[4,16] broadcast_in_dim(%bias) {dims = [1]}
  %s = f32[4,16] add(%mm, %bb)
  %g = f32[4,16] gelu(%s)
  return %g
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 1u);
  const Kernel& k = p.kernels[0];
  EXPECT_EQ(k.kind, KernelKind::Contraction);
  EXPECT_EQ(k.anchor->result()->name(), "mm");
  EXPECT_EQ(kernelNames(p)[0], (std::set<std::string>{"mm", "bb", "s", "g"}));
  // Reads x, w and the 16-element bias (not its broadcast); 2*M*N*K flops for the product.
  EXPECT_EQ(k.bytesRead, (32 + 128 + 16) * 4);
  EXPECT_DOUBLE_EQ(k.flops, 2.0 * 4 * 16 * 8 + 64 + 8 * 64);
  const Decision* d = decision(p, f, "mm", "s");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->fused);
  EXPECT_EQ(d->how, "epilogue");
  std::string text = explainPlan(f, p);
  EXPECT_NE(text.find("contraction  dot_general + epilogue add, gelu"), std::string::npos) << text;
}

TEST(Fusion, MatmulKeepsItsResidualAddFromALaterLayerNorm) {
  // dot -> +bias -> +residual -> layer_norm: the adds go to the matmul's epilogue (free in the
  // library) rather than into the layer norm's input, and the reason says so.
  auto m = parse(
      R"(func @main(%x: f32[4,8], %w: f32[8,8], %bias: f32[8], %r: f32[4,8], %ls: f32[8]) -> (f32[4,8]) {
  %mm = f32[4,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[4,8] broadcast_in_dim(%bias) {dims = [1]}
  %s = f32[4,8] add(%mm, %bb)
  %res = f32[4,8] add(%s, %r)
  %ln = f32[4,8] layer_norm(%res, %ls) {axis = 1}
  return %ln
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].kind, KernelKind::Contraction);
  EXPECT_EQ(kernelNames(p)[0], (std::set<std::string>{"mm", "bb", "s", "res"}));
  EXPECT_EQ(p.kernels[1].kind, KernelKind::Reduction);
  const Decision* d = decision(p, f, "res", "ln");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->fused);
  EXPECT_NE(d->reason.find("kept for the epilogue of %mm"), std::string::npos) << d->reason;
}

TEST(Fusion, ReductionTakesElementwiseInputsAndEpilogue) {
  auto m = parse(R"(func @main(%x: f32[4,8], %y: f32[4,8]) -> (f32[4,8]) {
  %a = f32[4,8] add(%x, %y)
  %sm = f32[4,8] softmax(%a) {axis = 1}
  %z = f32[4,8] mul(%sm, %y)
  return %z
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].kind, KernelKind::Reduction);
  EXPECT_EQ(p.kernels[0].anchor->result()->name(), "sm");
  EXPECT_EQ(decision(p, f, "a", "sm")->how, "input");
  EXPECT_EQ(decision(p, f, "sm", "z")->how, "epilogue");
}

TEST(Fusion, ReductionFeedingTwoKernelsIsStored) {
  auto m = parse(R"(func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8], f32[4,8]) {
  %sm = f32[4,8] softmax(%x) {axis = 1}
  %mm = f32[4,8] dot_general(%sm, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %e = f32[4,8] exp(%sm)
  return %mm, %e
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  EXPECT_EQ(p.kernels.size(), 3u);
  const Decision* d = decision(p, f, "sm", "mm");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->fused);
  EXPECT_NE(d->reason.find("used by 2 kernels"), std::string::npos) << d->reason;
}

TEST(Fusion, BroadcastIsRecomputedInEachConsumer) {
  // The broadcast of %b feeds two kernels that cannot be one (a matmul sits between them): it is
  // recomputed in both rather than stored.
  auto m = parse(R"(func @main(%x: f32[4,8], %b: f32[8], %w: f32[8,8]) -> (f32[4,8]) {
  %bb = f32[4,8] broadcast_in_dim(%b) {dims = [1]}
  %a = f32[4,8] add(%x, %bb)
  %mm = f32[4,8] dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[4,8] tanh(%mm)
  %c = f32[4,8] sub(%t, %bb)
  %z = f32[4,8] transpose(%c) {permutation = [0, 1]}
  return %z
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  const Node* bb = nodeNamed(f, "bb");
  ASSERT_EQ(p.kernelsOf.at(bb).size(), 2u);
  EXPECT_EQ(decision(p, f, "bb", "a")->how, "recompute");
  EXPECT_EQ(decision(p, f, "bb", "c")->how, "recompute");
  // %a is the matmul's operand: stored by its loop kernel, with the reason on the edge.
  const Decision* d = decision(p, f, "a", "mm");
  EXPECT_FALSE(d->fused);
  EXPECT_NE(d->reason.find("reads its operands from memory"), std::string::npos) << d->reason;
  for (const Kernel& k : p.kernels)
    for (const Value* v : k.outputs) EXPECT_NE(v->name(), "bb");
}

TEST(Fusion, SharedProducerIsMultiOutput) {
  auto m = parse(R"(func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8], f32[4,8]) {
  %e = f32[4,8] exp(%x)
  %mm = f32[4,8] dot_general(%e, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %n = f32[4,8] neg(%e)
  return %mm, %n
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  // exp joins the neg kernel (the matmul cannot take it) and is stored there for the matmul.
  EXPECT_EQ(decision(p, f, "e", "n")->how, "multi-output");
  EXPECT_FALSE(decision(p, f, "e", "mm")->fused);
  const Node* e = nodeNamed(f, "e");
  ASSERT_EQ(p.kernelsOf.at(e).size(), 1u);
  const Kernel& k = p.kernels[p.kernelsOf.at(e)[0]];
  EXPECT_EQ(k.outputs.size(), 2u);
  // The kernel that stores %e runs before the matmul that reads it.
  const Kernel& mmKernel = p.kernels[p.kernelsOf.at(nodeNamed(f, "mm"))[0]];
  EXPECT_LT(k.id, mmKernel.id);
}

TEST(Fusion, NoKernelDependsOnItselfThroughAnother) {
  // %a feeds %b directly and through a matmul; fusing %a into %b's kernel would make that kernel
  // both produce the matmul's input and consume its output.
  auto m = parse(R"(func @main(%x: f32[4,4], %w: f32[4,4]) -> (f32[4,4], f32[4,4]) {
  %a = f32[4,4] exp(%x)
  %mm = f32[4,4] dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[4,4] transpose(%mm) {permutation = [1, 0]}
  %b = f32[4,4] add(%a, %t)
  return %b, %a
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  const Decision* d = decision(p, f, "a", "b");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->fused);
  EXPECT_NE(d->reason.find("depend on itself"), std::string::npos) << d->reason;
  // Kernels come in dependency order: each input is stored by an earlier kernel.
  std::set<const Value*> available;
  for (const Kernel& k : p.kernels) {
    for (const Value* v : k.inputs) {
      if (v->def()->op() != OpCode::Parameter && v->def()->op() != OpCode::Constant) {
        EXPECT_TRUE(available.count(v)) << "kernel k" << k.id << " reads " << v->name();
      }
    }
    available.insert(k.outputs.begin(), k.outputs.end());
  }
}

TEST(Fusion, SiblingKernelsReadingOneInputMerge) {
  auto m = parse(R"(func @main(%x: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %e = f32[64,64] exp(%x)
  %l = f32[64,64] log(%x)
  return %e, %l
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].outputs.size(), 2u);
  EXPECT_EQ(p.kernels[0].bytesRead, 64 * 64 * 4);
  bool sibling = false;
  for (const Decision& d : p.decisions) sibling |= d.how == "sibling";
  EXPECT_TRUE(sibling);
}

TEST(Fusion, EpilogueThatMovesDataIsRefusedWithItsReason) {
  auto m = parse(R"(func @main(%x: f32[4,8], %w: f32[8,16]) -> (f32[16,4]) {
  %mm = f32[4,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[16,4] transpose(%mm) {permutation = [1, 0]}
  return %t
})");
  const Function& f = *m->entry();
  FusionPlan p = planFusion(f);
  ASSERT_EQ(p.kernels.size(), 2u);
  const Decision* d = decision(p, f, "mm", "t");
  EXPECT_FALSE(d->fused);
  EXPECT_NE(d->reason.find("moves data"), std::string::npos) << d->reason;
}

TEST(Fusion, ConvolutionFlopsCountKernelWindowAndChannels) {
  auto m = parse(R"(func @main(%x: f32[1,3,8,8], %k: f32[16,3,3,3]) -> (f32[1,16,6,6]) {
  %c = f32[1,16,6,6] convolution(%x, %k)
  return %c
})");
  FusionPlan p = planFusion(*m->entry());
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(p.kernels[0].flops, 2.0 * (16 * 6 * 6) * (3 * 3 * 3));
}

// A recurrence unrolled over `steps` (h = tanh(h * W^T + x_t)), every step reading one shared
// transpose of W and one shared slice of x: the planner's reachability map and its walk of the
// graph decide the same plan.
std::string recurrence(int steps) {
  std::string t = "func @main(%x: f32[" + std::to_string(steps) +
                  ",8], %w: f32[8,8], %h0: f32[1,8]) -> (f32[1,8]) {\n"
                  "  %wt = f32[8,8] transpose(%w) {permutation = [1, 0]}\n";
  std::string h = "%h0";
  for (int i = 0; i < steps; ++i) {
    const std::string s = std::to_string(i);
    t += "  %x" + s + " = f32[1,8] slice(%x) {start = [" + s + ", 0], limit = [" +
         std::to_string(i + 1) + ", 8], stride = [1, 1]}\n";
    t += "  %m" + s + " = f32[1,8] dot_general(" + h +
         ", %wt) {lhs_contracting = [1], rhs_contracting = [0]}\n";
    t += "  %a" + s + " = f32[1,8] add(%m" + s + ", %x" + s + ")\n";
    t += "  %h" + std::to_string(i + 1) + " = f32[1,8] tanh(%a" + s + ")\n";
    h = "%h" + std::to_string(i + 1);
  }
  return t + "  return " + h + "\n}\n";
}

TEST(Fusion, ReachabilityMapAndGraphWalkPlanTheSame) {
  auto m = parse(recurrence(40));
  ASSERT_TRUE(m);
  const Function& f = *m->entry();
  FusionOptions withMap, withWalk;
  withWalk.reachabilityMaxNodes = 0;
  const FusionPlan a = planFusion(f, withMap), b = planFusion(f, withWalk);
  EXPECT_EQ(explainPlan(f, a), explainPlan(f, b));
  EXPECT_EQ(kernelNames(a), kernelNames(b));
  // The transpose; the 40 slices of %x as one sibling kernel (x's 1280 bytes pass the sibling
  // threshold, and the merge is convex); each step's product with its add and tanh.
  EXPECT_EQ(a.kernels.size(), 42u);
}

// A concatenate that its consumer would compute at an index selects among its operands per
// element: with a few operands it fuses into the consumer, past 64 (a recurrence stacking its
// steps) it is stored by a kernel of its own, with the reason.
std::string stackThenTranspose(int operands) {
  std::string t = "func @main(%x: f32[1,8]) -> (f32[8," + std::to_string(operands) + "]) {\n";
  std::string list;
  for (int i = 0; i < operands; ++i) {
    t += "  %e" + std::to_string(i) + " = f32[1,8] exp(%x)\n";
    list += (i ? ", %e" : "%e") + std::to_string(i);
  }
  const std::string n = std::to_string(operands);
  t += "  %c = f32[" + n + ",8] concatenate(" + list + ") {dimension = 0}\n";
  t += "  %t = f32[8," + n + "] transpose(%c) {permutation = [1, 0]}\n  return %t\n}\n";
  return t;
}

TEST(Fusion, ConcatenatesOfManyOperandsAreStored) {
  for (int operands : {3, 70}) {
    auto m = parse(stackThenTranspose(operands));
    ASSERT_TRUE(m);
    const Function& f = *m->entry();
    FusionPlan p = planFusion(f);
    const Decision* d = decision(p, f, "c", "t");
    ASSERT_TRUE(d);
    if (operands == 3) {
      EXPECT_TRUE(d->fused) << d->reason;  // one kernel computes it all
      EXPECT_EQ(p.kernels.size(), 1u);
    } else {
      EXPECT_FALSE(d->fused);
      EXPECT_NE(d->reason.find("concatenate of 70 operands, computed inside this kernel, would "
                               "select among them at every element"),
                std::string::npos)
          << d->reason;
      EXPECT_EQ(p.kernels.size(), 2u);  // the concatenate with its operands, then the transpose
    }
  }
}

}  // namespace
}  // namespace kiln::fusion
