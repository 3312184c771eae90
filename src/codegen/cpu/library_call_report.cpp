// The CPU program's library calls as text: what runs each (the run report's summary and
// `library-calls.txt`). See cpu_program.h.
#include <map>
#include <string>

#include "codegen/cpu/call_node.h"
#include "codegen/cpu/cpu_program.h"

namespace kiln::codegen::cpu {
namespace {

// Whether a call reads a constant (weights its kernel may pack).
bool holdsConstant(const kernel::Kernel& k, const kernel::Stmt& call) {
  for (size_t i = 0; i < kernel::callOperands(call); ++i)
    if (callConstant(k, call, i)) return true;
  return false;
}

// What runs a sort or top_k call: the rows the plan leaves to the call (fusion::SortRowLimits)
// sort in the interpreter's kernel, chosen for its O(n log k), not as a fallback.
constexpr const char* kHostSort =
    "Kiln's host sort (rows longer than the cpu target's ranking loops take "
    "(fusion::SortRowLimits): std::sort, top_k std::partial_sort, O(n log k) per row)";

}  // namespace

std::string describeLibraryCalls(const CpuProgram::Impl& impl) {
  std::string text;
  std::map<const void*, std::string> firstKernel;  // a library kernel's first caller
  for (size_t i = 0; i < impl.kernels.size(); ++i)
    for (const LibraryCall& c : impl.calls[i]) {
      text += impl.kernels[i].name + ": " + c.stmt->callee() + ": ";
      const void* made = c.fast ? static_cast<const void*>(c.fast.get()) : c.perShape.get();
      auto [first, added] = firstKernel.emplace(made, impl.kernels[i].name);
      const bool sorts = c.stmt->op == OpCode::Sort || c.stmt->op == OpCode::TopK;
      text += !c.block.empty() ? c.block
              : c.fast         ? c.fast->describe()
              : c.perShape     ? c.perShape->describe()
              : sorts          ? kHostSort
                               : "reference kernel (" + c.why + ")";
      if (c.separatePostOps) text += "; post-ops as loops after the call";
      if (c.fast && c.separatePostOps) text += " (" + c.why + ")";
      if (c.fast && c.oneThread) text += "; one thread (a small product)";
      if (c.fast && !c.oneThread && impl.concurrency.stageOf[i] >= 0)
        text += "; one thread (a lane of a concurrent stage)";
      if (made && !added)
        text += "; shares " + first->second + "'s kernel" +
                (holdsConstant(impl.kernels[i], *c.stmt) ? " and weights" : "");
      text += "\n";
    }
  return text;
}

std::string CpuProgram::libraryCallDetails() const { return describeLibraryCalls(*impl_); }

std::string CpuProgram::libraryCalls() const {
  std::map<std::string, int> fast, own, kiln, reference;
  for (const auto& calls : impl_->calls)
    for (const LibraryCall& c : calls)
      ++(c.fast && c.fast->kilnsOwn() ? own
         : c.fast || c.perShape       ? fast
         : !c.block.empty()           ? kiln
                                      : reference)[c.stmt->callee()];
  auto list = [](const std::map<std::string, int>& m) {
    std::string s;
    for (const auto& [name, n] : m) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + name;
    return s;
  };
  std::string out;
  if (!fast.empty()) out += "oneDNN: " + list(fast);
  if (!own.empty()) out += std::string(out.empty() ? "" : "; ") + "Kiln's kernels: " + list(own);
  if (!kiln.empty())  // the calls of inverted-residual blocks: Kiln's own kernel runs them
    out += std::string(out.empty() ? "" : "; ") + "Kiln's blocks: " + list(kiln);
  if (!reference.empty())
    out += std::string(out.empty() ? "" : "; ") + "reference: " + list(reference);
  return out.empty() ? "none" : out;
}

}  // namespace kiln::codegen::cpu
