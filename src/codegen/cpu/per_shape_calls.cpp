// Library calls made for each run's sizes. See per_shape_calls.h.
#include "codegen/cpu/per_shape_calls.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "ir/text/text.h"

namespace kiln::codegen::cpu {

std::string callNodeKey(const kernel::Kernel& k, const kernel::Stmt& s) {
  char buf[64];
  std::string key = std::string(opName(s.op)) + " " + printAttributes(s.op, s.attrs);
  if (!s.layout.empty()) key += " layout " + s.layout;
  const size_t operands = kernel::callOperands(s);
  for (size_t i = 0; i < operands + kernel::callResults(s) && i < s.args.size(); ++i) {
    const kernel::Buffer* b = k.find(s.args[i]);
    key += i == operands ? " ->" : "";
    if (!b) continue;
    key += " " + std::string(dtypeName(b->type)) + "[";
    for (size_t d = 0; d < b->shape.size(); ++d)
      key += (d ? "," : "") +
             (b->isSymbolic() ? kernel::printExpr(b->dims[d]) : std::to_string(b->shape[d]));
    key += "]";
    if (const Node* def = callConstant(k, s, i)) {
      std::snprintf(buf, sizeof buf, "@%p", static_cast<const void*>(def));
      key += buf;
    }
  }
  for (const kernel::PostOp& o : s.postOps) {
    std::snprintf(buf, sizeof buf, " %s %a %a", kernel::postOpName(o.kind), o.lo, o.hi);
    key += buf;
    for (int64_t d : o.operandShape) key += "," + std::to_string(d);
    key += ":";
    for (int64_t d : o.operandDims) key += "," + std::to_string(d);
  }
  return key;
}

std::string PerShapeCall::sharingKey(const kernel::Kernel& kernel, const kernel::Stmt& call,
                                     int threads) {
  if (call.op == OpCode::Convolution) return "";
  std::string key = callNodeKey(kernel, call) + " threads " + std::to_string(threads) + " symbols";
  for (const kernel::Symbol& s : kernel.symbols) key += " " + s.name;
  for (const kernel::PostOp& p : call.postOps) {
    const kernel::Buffer* buf = p.operand.empty() ? nullptr : kernel.find(p.operand);
    key += " |";
    for (size_t d = 0; buf && d < buf->dims.size(); ++d)
      key += " " + kernel::printExpr(buf->dims[d]);
  }
  return key;
}

StatusOr<PerShapeCall::Made> PerShapeCall::make(const SymbolBindings& sizes,
                                                const PackedWeights* shared) const {
  Made m;
  KILN_ASSIGN_OR_RETURN(m.node, callNode(kernel_, call_, &sizes));
  CallForm form;
  form.prepacked = shared;
  form.layout = call_.layout;
  KILN_ASSIGN_OR_RETURN(m.kernel, createOneDnnKernel(*m.node.node, m.node.postOps, threads_, form));
  return m;
}

StatusOr<PerShapeCall::Made> PerShapeCall::makeSharing(const SymbolBindings& sizes) {
  // The latest layout first (neighbouring sizes tend to share one); a kernel that chose another
  // layout made its own copy, which a known layout's weights then replace.
  const PackedWeights* latest = layouts_.empty() ? nullptr : &layouts_.back();
  KILN_ASSIGN_OR_RETURN(Made m, make(sizes, latest));
  std::optional<PackedWeights> w = m.kernel->packedWeights();
  if (!w || (latest && w->bytes.data() == latest->bytes.data())) return m;
  for (const PackedWeights& known : layouts_)
    if (known.layout == w->layout) return make(sizes, &known);
  layouts_.push_back(*w);  // a new layout: its kernel holds the copy, and stays
  return m;
}

StatusOr<const LibraryKernel*> PerShapeCall::kernelFor(const SymbolBindings& sizes) {
  std::vector<int64_t> key;
  for (const kernel::Symbol& s : kernel_.symbols) key.push_back(sizes.at(s.name));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(key);
  if (it == made_.end()) {
    StatusOr<Made> m = makeSharing(sizes);
    Status agreed = m ? agree(*m->kernel) : m.status();
    if (!agreed) {
      std::string at;
      for (const kernel::Symbol& s : kernel_.symbols)
        at += (at.empty() ? "" : ", ") + s.name + "=" + std::to_string(sizes.at(s.name));
      return Status(agreed).prefix(call_.callee() + " at " + at);
    }
    it = made_.emplace(key, std::move(*m)).first;
  }
  return it->second.kernel.get();
}

void PerShapeCall::storeBlocked(const StoredBlocked& stored) {
  std::lock_guard<std::mutex> lock(mu_);
  stored_ = stored;
  told_ = true;
  for (auto& [key, m] : made_) m.kernel->storeBlocked(stored_.positions);
}

std::string PerShapeCall::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string stored;
  const size_t operands = kernel::callOperands(call_);
  for (size_t p : stored_.positions)
    stored += std::string(stored.empty() ? "" : ", ") + (p == 0 ? "source"
                                                         : p == operands
                                                             ? "result"
                                                             : "operand " + std::to_string(p));
  return "oneDNN, made for each run's sizes (symbolic dims" +
         (stored.empty() ? std::string()
                         : "; stored blocked in " + stored_.layout + ": " + stored) +
         ")";
}

Status PerShapeCall::agree(LibraryKernel& k) const {
  return told_ ? tellStoredBlocked(k, stored_) : Status::ok();
}

size_t PerShapeCall::sizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_.size();
}

}  // namespace kiln::codegen::cpu
