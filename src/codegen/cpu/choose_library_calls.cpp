// Choosing how each library call runs on the CPU. See choose_library_calls.h.
#include "codegen/cpu/choose_library_calls.h"

#include <set>
#include <string>
#include <vector>

#include "codegen/cpu/onednn.h"
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

}  // namespace

Status chooseLibraryCalls(kernel::Kernel& k, const runtime::CompileOptions& options) {
  std::set<const kernel::Stmt*> loops;
  for (const kernel::Stmt* s : kernel::callsOf(k)) {
    if (s->node && (s->op == OpCode::Lstm || s->op == OpCode::Gru)) {
      // Kept whole by graphPasses only where a library kernel takes it (Kiln's lstm kernel or
      // oneDNN's); there are no loops to fall back on.
      StatusOr<std::string> rnn = probeOneDnnKernel(*s->node, {}, options.threads);
      k.notes.push_back(s->callee + ": " +
                        (rnn ? *rnn : "the reference kernel (" + reason(rnn.status()) + ")"));
      continue;
    }
    if (!s->node || (s->op != OpCode::DotGeneral && s->op != OpCode::Convolution)) continue;
    if (kernel::isSymbolicCall(k, *s)) {
      k.notes.push_back(s->callee + ": oneDNN, made for each run's sizes (symbolic dims)");
      continue;
    }
    const std::vector<int64_t> strides = resultStrides(k, *s);
    StatusOr<std::string> full = probeOneDnnKernel(*s->node, s->postOps, options.threads, strides);
    if (full) {
      k.notes.push_back(s->callee + ": " + *full);
      continue;
    }
    // A strided result (a slice of a concatenation in place) that oneDNN's fast kernels do not
    // store: the call writes a dense temp, and a copy loop moves it into the slice.
    if (!strides.empty()) {
      StatusOr<std::string> dense = probeOneDnnKernel(*s->node, s->postOps, options.threads);
      if (dense) {
        const std::string note = s->callee + ": " + *dense +
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
      StatusOr<std::string> bare = probeOneDnnKernel(*s->node, {}, options.threads, strides);
      if (bare) {
        k.notes.push_back(s->callee + ": " + *bare + "; post-ops as loops after it (" +
                          reason(why) + ")");
        continue;
      }
      why = bare.status();
    }
    k.notes.push_back(s->callee + ": Kiln's loops (" + reason(why) + ")");
    loops.insert(s);
  }
  if (loops.empty()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(
      k, kernel::expandCalls(k, [&](const kernel::Stmt& s) { return loops.count(&s) > 0; }));
  return Status::ok();
}

}  // namespace kiln::codegen::cpu
