// Custom fusions over a fusion plan. See custom_fusion.h.
#include "fusion/custom_fusion.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "fusion/fusion.h"

namespace kiln::fusion {
namespace {

int64_t bytesOf(const Value* v) {
  return v->type().numElements().value_or(1) * static_cast<int64_t>(dtypeSize(v->type().dtype()));
}

// The first kernel after `k` (in plan order) that reads `v`, or -1.
int firstReader(const FusionPlan& plan, size_t k, const Value* v) {
  for (size_t j = k + 1; j < plan.kernels.size(); ++j) {
    const auto& in = plan.kernels[j].inputs;
    if (std::find(in.begin(), in.end(), v) != in.end()) return static_cast<int>(j);
  }
  return -1;
}

// The chain of `length` kernels from kernel `first`: each stores one value, read first by the
// next. Empty when there is none.
std::vector<size_t> chainFrom(const FusionPlan& plan, size_t first, size_t length) {
  std::vector<size_t> chain{first};
  while (chain.size() < length) {
    const Kernel& k = plan.kernels[chain.back()];
    if (k.outputs.size() != 1) return {};
    int next = firstReader(plan, chain.back(), k.outputs[0]);
    if (next < 0) return {};
    chain.push_back(static_cast<size_t>(next));
  }
  return chain;
}

// Why the values between the chain's steps must be stored ("" when they need not be): a
// function output, or a reader outside the chain.
std::string storedBetween(const FusionPlan& plan, const std::vector<size_t>& chain,
                          const ValueNamer& name) {
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    const Value* v = plan.kernels[chain[i]].outputs[0];
    if (v->isFunctionOutput()) return name(v) + " is a function output: it must be stored";
    for (size_t j = 0; j < plan.kernels.size(); ++j) {
      const auto& in = plan.kernels[j].inputs;
      if (j != chain[i + 1] && std::find(in.begin(), in.end(), v) != in.end())
        return name(v) + " is also read by kernel k" + std::to_string(plan.kernels[j].id) +
               ": it must be stored";
    }
  }
  return "";
}

// The edges that the chain's values take from one kernel to the next, as (producer, consumer)
// nodes.
std::vector<std::pair<const Node*, const Node*>> chainEdges(const FusionPlan& plan,
                                                            const std::vector<size_t>& chain) {
  std::vector<std::pair<const Node*, const Node*>> edges;
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    const Value* v = plan.kernels[chain[i]].outputs[0];
    for (const Node* n : plan.kernels[chain[i + 1]].nodes)
      if (std::find(n->operands().begin(), n->operands().end(), v) != n->operands().end()) {
        edges.push_back({v->def(), n});
        break;
      }
  }
  return edges;
}

// Records the verdict on each edge of the chain: fused with `how`, or left unfused with the
// decline (after the reason the edge had).
void decide(FusionPlan& plan, const std::vector<std::pair<const Node*, const Node*>>& edges,
            bool fused, const std::string& how, const std::string& reason) {
  for (const auto& [p, c] : edges) {
    auto it = std::find_if(plan.decisions.begin(), plan.decisions.end(),
                           [&](const Decision& d) { return d.producer == p && d.consumer == c; });
    if (it == plan.decisions.end())
      it = plan.decisions.insert(plan.decisions.end(), Decision{p, c, false, "", ""});
    it->fused = fused;
    it->how = fused ? how : "";
    it->reason = fused ? reason : it->reason + "; " + how + " declined: " + reason;
  }
}

// The chain's kernels as one custom kernel.
Kernel merge(const FusionPlan& plan, const std::vector<size_t>& chain, const CustomFusion& fusion,
             const std::string& reason) {
  Kernel m;
  m.kind = KernelKind::Custom;
  m.custom = fusion.name;
  m.customReason = reason;
  m.anchor = plan.kernels[chain.front()].anchor;
  for (size_t i = 0; i < chain.size(); ++i) {
    const Kernel& k = plan.kernels[chain[i]];
    m.steps.push_back({k.anchor, k.postOps});
    m.nodes.insert(m.nodes.end(), k.nodes.begin(), k.nodes.end());
    m.flops += k.flops;
    if (i + 1 < chain.size()) m.internal.push_back(k.outputs[0]);
  }
  for (size_t i : chain)
    for (const Value* v : plan.kernels[i].inputs)
      if (std::find(m.internal.begin(), m.internal.end(), v) == m.internal.end() &&
          std::find(m.inputs.begin(), m.inputs.end(), v) == m.inputs.end())
        m.inputs.push_back(v);
  m.outputs = plan.kernels[chain.back()].outputs;
  for (const Value* v : m.inputs) m.bytesRead += bytesOf(v);
  for (const Value* v : m.outputs) m.bytesWritten += bytesOf(v);
  return m;
}

// Replaces the chain's kernels with `merged` at the place of the last; renumbers the kernels.
void replaceChain(FusionPlan& plan, const std::vector<size_t>& chain, Kernel merged) {
  std::vector<Kernel> kernels;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    if (i == chain.back()) kernels.push_back(std::move(merged));
    else if (std::find(chain.begin(), chain.end(), i) == chain.end())
      kernels.push_back(std::move(plan.kernels[i]));
  }
  plan.kernels = std::move(kernels);
  plan.kernelsOf.clear();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    plan.kernels[i].id = static_cast<int>(i);
    for (const Node* n : plan.kernels[i].nodes) plan.kernelsOf[n].push_back(static_cast<int>(i));
  }
}

std::string numberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void planCustomFusions(const std::vector<CustomFusion>& fusions, const ValueNamer& name,
                       FusionPlan& plan) {
  for (const CustomFusion& fusion : fusions) {
    const std::string how = "custom: " + fusion.name;
    for (size_t first = 0; first < plan.kernels.size(); ++first) {
      if (plan.kernels[first].kind == KernelKind::Custom) continue;
      std::vector<size_t> chain = chainFrom(plan, first, fusion.length);
      if (chain.empty()) continue;
      std::vector<const Kernel*> kernels;
      for (size_t i : chain) kernels.push_back(&plan.kernels[i]);
      if (std::any_of(kernels.begin(), kernels.end(),
                      [](const Kernel* k) { return k->kind == KernelKind::Custom; }))
        continue;
      CustomVerdict v = fusion.match(kernels, name);
      if (v.kind == CustomVerdict::Kind::Pass) continue;
      const auto edges = chainEdges(plan, chain);
      if (v.kind == CustomVerdict::Kind::Claim) {
        std::string stored = storedBetween(plan, chain, name);
        if (!stored.empty()) v = {CustomVerdict::Kind::Decline, stored};
      }
      if (v.kind == CustomVerdict::Kind::Decline) {
        decide(plan, edges, false, how, v.reason);
        continue;
      }
      std::string internal;
      for (size_t i = 0; i + 1 < chain.size(); ++i)
        internal += (i ? " and " : "") + name(plan.kernels[chain[i]].outputs[0]);
      const std::string reason =
          v.reason + "; " + internal + " have no other reader: they stay inside the kernel";
      decide(plan, edges, true, how, reason);
      replaceChain(plan, chain, merge(plan, chain, fusion, reason));
    }
  }
}

std::string explainCustomKernel(const Kernel& k, const ValueNamer& name) {
  std::string out;
  for (const CustomStep& s : k.steps) {
    out +=
        "    step " + std::string(opName(s.anchor->op())) + " (" + name(s.anchor->result()) + ")";
    const char* sep = ": post-ops ";
    for (const PostOpStep& p : s.postOps.steps) {
      out += sep + std::string(postOpKindName(p.kind));
      sep = ", ";
      if (p.operand) out += "(" + name(p.operand) + ")";
      if (p.kind == PostOpKind::Clamp)
        out += "(" + numberText(p.lo) + ", " + numberText(p.hi) + ")";
    }
    const Value* result = s.postOps.result ? s.postOps.result : s.anchor->result();
    bool internal = std::find(k.internal.begin(), k.internal.end(), result) != k.internal.end();
    out += std::string(" -> ") + name(result) + (internal ? " (internal)" : " (stored)") + "\n";
  }
  out += "    custom " + k.custom + ": " + k.customReason + "\n";
  return out;
}

}  // namespace kiln::fusion
