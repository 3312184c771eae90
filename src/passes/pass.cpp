// The pass registry and runner. Each pass is one function (its header says what it does); the
// table below gives it a flag name and a one-line description, and makePass adapts it to Pass.
#include "passes/pass.h"

#include "ir/verifier.h"
#include "passes/algebraic_simplify.h"
#include "passes/constant_fold.h"
#include "passes/convolution_to_matmul.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose_composites.h"
#include "passes/fold_batch_norm.h"
#include "passes/layout_assignment.h"
#include "passes/lower_precision.h"
#include "passes/propagate_shapes.h"
#include "passes/recognize_patterns.h"
#include "passes/specialize_shapes.h"

namespace kiln {
namespace {

struct PassEntry {
  const char* name;
  const char* description;
  StatusOr<bool> (*run)(Module&);
};

// Every pass, by flag name. Add a pass here and it is known to kiln-opt and runPasses.
const PassEntry kPasses[] = {
    {"decompose-composites",
     "rewrite softmax, log_softmax, layer_norm, batch_norm_inference, gelu, attention, lstm and "
     "gru into core ops",
     decomposeComposites},
    {"decompose-recurrences", "unroll lstm and gru over their steps into core ops",
     [](Module& m) { return decomposeRecurrences(m); }},
    {"split-attention",
     "rewrite attention into dot_general, softmax, dot_general (no fused attention kernel)",
     [](Module& m) { return splitAttention(m); }},
    {"split-attention-stored-low",
     "split-attention with f16/bf16 scores and probabilities stored in that type (the products "
     "accumulate and the softmax computes in f32)",
     [](Module& m) { return splitAttention(m, /*storeLow=*/true); }},
    {"dce", "remove nodes whose results are unused and not returned", eliminateDeadCode},
    {"algebraic-simplify", "apply local identities (x+0, x*1, transpose pairs, ...)",
     algebraicSimplify},
    {"constant-fold", "evaluate nodes whose operands are constants (size-capped)", constantFold},
    {"cse", "merge nodes computing the same thing, and equal constants",
     eliminateCommonSubexpressions},
    {"propagate-shapes", "unify symbolic dims the graph determines", propagateShapes},
    {"specialize-shapes", "bind symbols to extents: --specialize-shapes=N=1,S=128",
     specializeShapesWithoutBindings},
    {"recognize-patterns", "turn GELU, layer norm, softmax and attention chains into composites",
     recognizePatterns},
    {"fold-batch-norm", "fold batch norms into the weights of the contraction before them",
     foldBatchNorm},
    {"convolution-to-matmul",
     "convolutions with few output pixels (NHWC, window > 1x1) to an im2col and one matmul (CPU)",
     [](Module& m) { return convolutionToMatmul(m); }},
    {"layout-assignment", "convolutions to the target layout (CPU: NHWC), transposes to the edges",
     assignLayoutForCpu},
    {"lower-precision-f16", "compute and store f32 values in f16, the signature staying f32",
     [](Module& m) { return lowerPrecision(m, DType::F16); }},
    {"lower-precision-bf16", "compute and store f32 values in bf16, the signature staying f32",
     [](Module& m) { return lowerPrecision(m, DType::BF16); }},
};

class FunctionPass : public Pass {
 public:
  FunctionPass(std::string name, std::string description,
               std::function<StatusOr<bool>(Module&)> run)
      : name_(std::move(name)), description_(std::move(description)), run_(std::move(run)) {}
  std::string name() const override { return name_; }
  std::string description() const override { return description_; }
  StatusOr<bool> run(Module& m) override { return run_(m); }

 private:
  std::string name_, description_;
  std::function<StatusOr<bool>(Module&)> run_;
};

std::string knownPassList() {
  std::string s;
  for (const PassEntry& e : kPasses) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace

std::unique_ptr<Pass> makePass(std::string name, std::string description,
                               std::function<StatusOr<bool>(Module&)> run) {
  return std::make_unique<FunctionPass>(std::move(name), std::move(description), std::move(run));
}

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const PassEntry& e : kPasses) names.emplace_back(e.name);
  return names;
}

std::unique_ptr<Pass> createPass(const std::string& name) {
  for (const PassEntry& e : kPasses)
    if (name == e.name) return makePass(e.name, e.description, e.run);
  return nullptr;
}

Status runPasses(Module& m, const std::vector<std::string>& names, bool verifyEach) {
  // Resolve every name before running anything, so a misspelt pipeline changes nothing.
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string& name : names) {
    std::unique_ptr<Pass> p = createPass(name);
    if (!p) return Status::error("unknown pass '" + name + "' (known: " + knownPassList() + ")");
    passes.push_back(std::move(p));
  }
  for (const auto& p : passes) {
    StatusOr<bool> changed = p->run(m);
    if (!changed) {
      Status s = changed.status();
      return s.prefix("pass '" + p->name() + "'");
    }
    if (!verifyEach) continue;
    Status v = verify(m);
    if (!v) return v.prefix("module does not verify after pass '" + p->name() + "'");
  }
  return Status::ok();
}

}  // namespace kiln
