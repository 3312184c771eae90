// kiln explain's text of a fusion plan (explainPlan, fusion.h): the summary, each kernel with
// its ops, bytes, flops and the post-ops its library applies, every edge with its reason.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "fusion/concat_views.h"
#include "fusion/custom_fusion.h"
#include "fusion/fusion.h"
#include "ir/text/text.h"

namespace kiln::fusion {
namespace {

std::string flopsText(double f) {
  char buf[32];
  if (f < 1e3) std::snprintf(buf, sizeof buf, "%.0f FLOP", f);
  else if (f < 1e6) std::snprintf(buf, sizeof buf, "%.1f KFLOP", f / 1e3);
  else if (f < 1e9) std::snprintf(buf, sizeof buf, "%.1f MFLOP", f / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GFLOP", f / 1e9);
  return buf;
}

std::string numberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "    post-ops: clamp(0, inf), add(%b)" and, when epilogue ops of the kernel remain after them,
// "    then loops: REASON" (why the chain stops there).
std::string postOpsText(const Kernel& k, const std::function<std::string(const Value*)>& name) {
  const PostOpChain& chain = k.postOps;
  std::string out;
  if (!chain.steps.empty()) {
    out += "    post-ops: ";
    for (size_t i = 0; i < chain.steps.size(); ++i) {
      const PostOpStep& p = chain.steps[i];
      out += (i ? ", " : "") + std::string(postOpKindName(p.kind));
      if (p.operand) out += "(" + name(p.operand) + ")";
      if (p.kind == PostOpKind::Clamp)
        out += "(" + numberText(p.lo) + ", " + numberText(p.hi) + ")";
    }
    out += "\n";
  }
  bool remains = false;
  if (chain.result)
    for (const Use& u : chain.result->uses())
      remains = remains || std::find(k.nodes.begin(), k.nodes.end(), u.user) != k.nodes.end();
  if (remains && !chain.stop.empty()) out += "    then loops: " + chain.stop + "\n";
  return out;
}

// "    top_k: ..." for a sort or top_k kernel: loops that rank each element, or the library call
// for rows past the target's limit (FusionOptions::sortRows).
std::string sortText(const Kernel& k, int64_t limit) {
  const Node& n = *k.anchor;
  const bool isSort = n.op() == OpCode::Sort;
  const int64_t axis = n.attrInt(isSort ? "dimension" : "axis");
  const std::vector<Dim>& dims = n.operand(0)->type().dims();
  if (axis < 0 || axis >= static_cast<int64_t>(dims.size()) || !dims[size_t(axis)].isStatic())
    return "";
  const int64_t len = dims[size_t(axis)].value();
  std::string out = "    " + std::string(opName(n.op())) + ": ";
  if (!isSort) out += std::to_string(n.attrInt("k")) + " of ";
  out += "each row of " + std::to_string(len);
  if (len > limit)
    return out + " by the library call (rows longer than " + std::to_string(limit) +
           "; ranking each element is O(n^2) per row)\n";
  return out + " by ranking each element in loops (O(n^2) per row; rows longer than " +
         std::to_string(limit) + " stay a library call)\n";
}

}  // namespace

std::string explainPlan(const Function& f, const FusionPlan& plan) {
  std::map<const Value*, std::string> names = printedValueNames(f);
  auto name = [&](const Value* v) {
    auto it = names.find(v);
    return it == names.end() ? std::string("%?") : it->second;
  };
  std::map<KernelKind, int> byKind;
  int64_t moved = 0;
  double flops = 0;
  size_t ops = 0;
  for (const Kernel& k : plan.kernels) {
    ++byKind[k.kind];
    moved += k.bytesRead + k.bytesWritten;
    flops += k.flops;
  }
  for (const auto& [n, ks] : plan.kernelsOf) ops += !ks.empty();
  std::string out = "fusion plan for @" + f.name() + ": " + std::to_string(plan.kernels.size()) +
                    " kernels from " + std::to_string(ops) + " ops (";
  bool first = true;
  for (const auto& [kind, count] : byKind) {
    out += (first ? "" : ", ") + std::to_string(count) + " " + std::string(kernelKindName(kind));
    first = false;
  }
  out += ")\nmemory traffic " + bytesText(moved) +
         " (one kernel per op: " + bytesText(plan.bytesUnfused) + "), " + flopsText(flops) + "\n";
  if (plan.symbolic) out += "note: some dimensions are symbolic and counted as 1\n";
  for (const Kernel& k : plan.kernels) {
    out += "\nk" + std::to_string(k.id) + "  " + std::string(kernelKindName(k.kind)) + "  " +
           (k.kind == KernelKind::Custom ? k.custom : std::string(opName(k.anchor->op())));
    std::vector<std::string> epilogue;
    bool after = false;
    for (const Node* n : k.nodes) {
      if (n == k.anchor) after = true;
      else if (after && k.kind != KernelKind::Loop && k.kind != KernelKind::Custom &&
               patternOf(*n) == OpPattern::Elementwise)
        epilogue.push_back(std::string(opName(n->op())));
    }
    if (!epilogue.empty()) {
      out += " + epilogue ";
      for (size_t i = 0; i < epilogue.size(); ++i) out += (i ? ", " : "") + epilogue[i];
    }
    out += "  (" + std::to_string(k.nodes.size()) + (k.nodes.size() == 1 ? " op" : " ops") +
           ")  reads " + bytesText(k.bytesRead) + ", writes " + bytesText(k.bytesWritten) + ", " +
           flopsText(k.flops) + "\n";
    for (const Node* n : k.nodes) {
      out += "    " + name(n->result()) + " = " + n->result()->type().str() + " " +
             std::string(opName(n->op())) + "(";
      for (size_t i = 0; i < n->numOperands(); ++i) out += (i ? ", " : "") + name(n->operand(i));
      out += ")";
      if (std::find(k.outputs.begin(), k.outputs.end(), n->result()) != k.outputs.end())
        out += "  -> stored";
      out += "\n";
    }
    out += k.kind == KernelKind::Custom ? explainCustomKernel(k, name) : postOpsText(k, name);
    if (k.kind == KernelKind::Opaque &&
        (k.anchor->op() == OpCode::TopK || k.anchor->op() == OpCode::Sort))
      out += sortText(k, plan.sortRows.of(k.anchor->op()));
  }
  std::string fusedLines, unfusedLines;
  for (const Decision& d : plan.decisions) {
    std::string edge = name(d.producer->result()) + " -> " + name(d.consumer->result());
    if (d.fused) fusedLines += "  " + edge + ": " + d.how + ": " + d.reason + "\n";
    else unfusedLines += "  " + edge + ": " + d.reason + "\n";
  }
  out += explainConcatViews(plan.concats, name);
  out += "\nfused edges:\n" + (fusedLines.empty() ? "  (none)\n" : fusedLines);
  out += "\nedges left unfused:\n" + (unfusedLines.empty() ? "  (none)\n" : unfusedLines);
  return out;
}

}  // namespace kiln::fusion
