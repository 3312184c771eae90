// Choosing how each library call runs on the CPU. See choose_library_calls.h.
#include "codegen/cpu/choose_library_calls.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpu/call_node.h"
#include "kernel/buffer_views.h"
#include "kernel/expand_calls.h"
#include "kernel/kernel_ir.h"

namespace kiln::codegen::cpu {
namespace {

// Why oneDNN did not take a call: its error without the node's name, which the note's kernel
// and callee already give.
std::string reason(const Status& s) {
  const std::string& m = s.message();
  const std::string marker = "no oneDNN kernel: ";
  size_t at = m.find(marker);
  return at == std::string::npos ? m : m.substr(at + marker.size());
}

// The largest value of each of the kernel's symbols: a call of symbolic sizes is decided at
// the top of its ranges (its layout follows from channels and window, not from the sizes).
SymbolBindings topsOf(const kernel::Kernel& k) {
  SymbolBindings tops;
  for (const kernel::Symbol& s : k.symbols) tops[s.name] = s.hi;
  return tops;
}

// Each convolution call with the blocked layout it computes in (blockedConvolutionLayout), a
// decision printed with the call: from the kernel alone a library kernel cannot tell whether a
// 1x1 layer's source comes from a blocked one.
Status chooseLayouts(kernel::Kernel& k, const SymbolBindings& tops) {
  for (const kernel::Stmt* s : kernel::callsOf(k)) {
    if (s->op != OpCode::Convolution || s->args.empty()) continue;
    KILN_ASSIGN_OR_RETURN(CallNode node, callNode(k, *s, &tops));
    const kernel::Buffer* source = k.find(s->args[0]);
    std::string layout = blockedConvolutionLayout(*node.node, source ? source->value : nullptr);
    if (layout == s->layout) continue;
    auto with = std::make_shared<kernel::Stmt>(*s);
    with->layout = std::move(layout);
    k = kernel::replaceStmt(k, s, with);  // the other calls stay where they are
  }
  return Status::ok();
}

// The call of a kernel that is nothing but one library call, else null.
const kernel::Stmt* onlyCall(const kernel::Kernel& k) {
  const kernel::Stmt* s = k.body.get();
  while (s && s->kind == kernel::Stmt::Kind::Block && s->body.size() == 1) s = s->body[0].get();
  return s && s->kind == kernel::Stmt::Kind::Call ? s : nullptr;
}

}  // namespace

Status chooseLibraryCalls(kernel::Kernel& k, const runtime::CompileOptions& options,
                          CallBlocking& blocking) {
  const SymbolBindings tops = topsOf(k);
  KILN_RETURN_IF_ERROR(chooseLayouts(k, tops));
  std::set<const kernel::Stmt*> loops;
  std::map<const kernel::Stmt*, ProbedKernel> probed;  // calls oneDNN takes with their post-ops
  for (const kernel::Stmt* s : kernel::callsOf(k)) {
    const bool contraction = s->op == OpCode::DotGeneral || s->op == OpCode::Convolution;
    const bool recurrence = s->op == OpCode::Lstm || s->op == OpCode::Gru;
    if (!contraction && !recurrence) continue;
    if (kernel::isSymbolicCall(k, *s)) {
      // Made for each run's sizes; how it stores its buffers is found at the ranges' top.
      KILN_ASSIGN_OR_RETURN(CallNode top, callNode(k, *s, &tops));
      StatusOr<ProbedKernel> p =
          probeOneDnnKernel(*top.node, top.postOps, options.threads, {nullptr, {}, s->layout});
      if (p) probed.emplace(s, *p);
      k.notes.push_back(s->callee() + ": oneDNN, made for each run's sizes (symbolic dims)");
      continue;
    }
    KILN_ASSIGN_OR_RETURN(CallNode node, callNode(k, *s));
    const Node& n = *node.node;
    if (recurrence) {
      // Kept whole by graphPasses only where a library kernel takes it (Kiln's lstm kernel or
      // oneDNN's); there are no loops to fall back on.
      StatusOr<ProbedKernel> rnn = probeOneDnnKernel(n, {}, options.threads);
      k.notes.push_back(
          s->callee() + ": " +
          (rnn ? rnn->description : "the reference kernel (" + reason(rnn.status()) + ")"));
      continue;
    }
    CallForm form{nullptr, resultStrides(k, *s), s->layout};
    StatusOr<ProbedKernel> full = probeOneDnnKernel(n, node.postOps, options.threads, form);
    if (full) {
      k.notes.push_back(s->callee() + ": " + full->description);
      probed.emplace(s, *full);
      continue;
    }
    // A strided result (a slice of a concatenation in place) that oneDNN's fast kernels do not
    // store: the call writes a dense temp, and a copy loop moves it into the slice.
    if (!form.dstStrides.empty()) {
      CallForm dense{nullptr, {}, s->layout};
      StatusOr<ProbedKernel> d = probeOneDnnKernel(n, node.postOps, options.threads, dense);
      if (d) {
        const std::string note = s->callee() + ": " + d->description +
                                 "; result copied into its slice of the concatenation (" +
                                 reason(full.status()) + ")";
        KILN_ASSIGN_OR_RETURN(k, kernel::resultThroughTemp(k, *s));
        k.notes.push_back(note);
        continue;
      }
    }
    // Why there is no kernel at all: without post-ops, where they were the first refusal.
    Status why = full.status();
    if (!s->postOps.empty()) {
      StatusOr<ProbedKernel> bare = probeOneDnnKernel(n, {}, options.threads, form);
      if (bare) {
        k.notes.push_back(s->callee() + ": " + bare->description +
                          "; post-ops as loops after it (" + reason(why) + ")");
        continue;
      }
      why = bare.status();
    }
    k.notes.push_back(s->callee() + ": Kiln's loops (" + reason(why) + ")");
    loops.insert(s);
  }
  if (!loops.empty()) {
    KILN_ASSIGN_OR_RETURN(
        k, kernel::expandCalls(k, [&](const kernel::Stmt& s) { return loops.count(&s) > 0; }));
  }
  // The calls that stay keep their statements (expandCalls and replaceStmt share the others).
  blocking.clear();
  for (const kernel::Stmt* s : kernel::callsOf(k)) {
    auto it = probed.find(s);
    if (it != probed.end() && !it->second.blockable.empty()) blocking.push_back(it->second);
    else blocking.push_back(std::nullopt);
  }
  return Status::ok();
}

void storeBlockedValues(std::vector<kernel::Kernel>& kernels,
                        const std::vector<CallBlocking>& blocking) {
  struct Use {
    bool writes;
    std::string layout;
  };
  std::map<const Value*, std::vector<Use>> uses;  // every read and write of a value
  std::set<const Value*> excluded;                // read or written some other way
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kernel::Stmt* s = onlyCall(kernels[i]);
    const ProbedKernel* plan = s && i < blocking.size() && blocking[i].size() == 1 && blocking[i][0]
                                   ? &*blocking[i][0]
                                   : nullptr;
    for (const kernel::Buffer& b : kernels[i].buffers) {
      if (!b.value) continue;
      std::vector<size_t> positions;
      for (size_t j = 0; s && j < s->args.size(); ++j)
        if (s->args[j] == b.name) positions.push_back(j);
      bool ok = plan && !positions.empty() && !b.view;  // a slice of a concatenation is plain
      for (size_t p : positions)
        ok = ok &&
             std::find(plan->blockable.begin(), plan->blockable.end(), p) != plan->blockable.end();
      if (!ok) {
        excluded.insert(b.value);
        continue;
      }
      for (size_t p : positions)
        uses[b.value].push_back({p == kernel::callOperands(*s), plan->layout});
    }
  }
  std::map<const Value*, std::string> stored;
  for (const auto& [v, list] : uses) {
    const std::vector<Value*>& outputs = v->def()->parent()->outputs();
    if (excluded.count(v) || std::find(outputs.begin(), outputs.end(), v) != outputs.end())
      continue;
    bool written = false, sameLayout = true;
    for (const Use& u : list) {
      written = written || u.writes;
      sameLayout = sameLayout && u.layout == list[0].layout;
    }
    if (written && sameLayout) stored.emplace(v, list[0].layout);
  }
  for (kernel::Kernel& k : kernels)
    for (kernel::Buffer& b : k.buffers)
      if (auto it = stored.find(b.value); b.value && it != stored.end()) b.layout = it->second;
}

}  // namespace kiln::codegen::cpu
