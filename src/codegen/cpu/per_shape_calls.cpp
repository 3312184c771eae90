// Library calls made for each run's sizes. See per_shape_calls.h.
#include "codegen/cpu/per_shape_calls.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "ir/builder.h"
#include "ir/text/text.h"

namespace kiln::codegen::cpu {

std::string callNodeKey(const kernel::Stmt& s) {
  const Node& n = *s.node;
  char buf[64];
  std::string key = std::string(opName(n.op())) + " " + printAttributes(n.op(), n.attrs());
  for (size_t i = 0; i < n.numOperands(); ++i) {
    const Node* def = n.operand(i)->def();
    key += " " + n.operand(i)->type().str();
    if (def && def->op() == OpCode::Constant) {
      std::snprintf(buf, sizeof buf, "@%p", static_cast<const void*>(def));
      key += buf;
    }
  }
  key += " -> " + n.result(0)->type().str();
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
  if (!call.node || call.node->op() == OpCode::Convolution) return "";
  std::string key = callNodeKey(call) + " threads " + std::to_string(threads) + " symbols";
  for (const kernel::Symbol& s : kernel.symbols) key += " " + s.name;
  for (const kernel::PostOp& p : call.postOps) {
    const kernel::Buffer* buf = p.operand.empty() ? nullptr : kernel.find(p.operand);
    key += " |";
    for (size_t d = 0; buf && d < buf->dims.size(); ++d)
      key += " " + kernel::printExpr(buf->dims[d]);
  }
  return key;
}

StatusOr<const Node*> PerShapeCall::nodeAt(const SymbolBindings& sizes, Made& m,
                                           std::vector<kernel::PostOp>& postOps) const {
  const Node& n = *call_.node;
  m.module = std::make_unique<Module>();
  Function* f = m.module->addFunction("call");
  Builder b(f);
  std::vector<Value*> operands;
  for (const Value* v : n.operands()) {
    const Node* def = v->def();
    operands.push_back(def && def->op() == OpCode::Constant
                           ? b.constant(def->constantData().tensor)  // shares the data
                           : b.parameter(atSizes(v->type(), sizes)));
  }
  Value* result = b.op(n.op(), operands, n.attrs(), {atSizes(n.result(0)->type(), sizes)});
  if (!b.ok()) return b.status();
  f->setOutputs({result});
  // Post-op operands of symbolic dims at these sizes.
  postOps = call_.postOps;
  for (kernel::PostOp& p : postOps) {
    const kernel::Buffer* buf = p.operand.empty() ? nullptr : kernel_.find(p.operand);
    if (!buf || !buf->isSymbolic()) continue;
    for (size_t d = 0; d < buf->dims.size(); ++d) {
      std::optional<int64_t> extent = kernel::evaluateExtent(buf->dims[d], sizes);
      if (!extent)
        return Status::error("post-op operand %" + p.operand + " dim " + std::to_string(d) + " (" +
                             kernel::printExpr(buf->dims[d]) + ") has no size");
      p.operandShape[d] = *extent;
    }
  }
  return result->def();
}

StatusOr<PerShapeCall::Made> PerShapeCall::make(const SymbolBindings& sizes,
                                                const PackedWeights* shared) const {
  Made m;
  std::vector<kernel::PostOp> postOps;
  KILN_ASSIGN_OR_RETURN(const Node* n, nodeAt(sizes, m, postOps));
  KILN_ASSIGN_OR_RETURN(m.kernel, createOneDnnKernel(*n, postOps, threads_, shared));
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
      return Status(agreed).prefix(call_.callee + " at " + at);
    }
    it = made_.emplace(key, std::move(*m)).first;
  }
  return it->second.kernel.get();
}

Status PerShapeCall::probe(const SymbolBindings& sizes) {
  if (!call_.node || call_.node->op() != OpCode::Convolution) return Status::ok();
  Made m;
  std::vector<kernel::PostOp> postOps;
  KILN_ASSIGN_OR_RETURN(const Node* n, nodeAt(sizes, m, postOps));
  KILN_ASSIGN_OR_RETURN(BlockedPlan plan, probeOneDnnBlocking(*n, postOps, threads_));
  std::lock_guard<std::mutex> lock(mu_);
  blockable_ = std::move(plan.blockable);
  layout_ = std::move(plan.layout);
  return Status::ok();
}

void PerShapeCall::storeBlocked(const std::vector<size_t>& positions) {
  std::lock_guard<std::mutex> lock(mu_);
  stored_ = positions;
  told_ = true;
  for (auto& [key, m] : made_) m.kernel->storeBlocked(stored_);
}

std::string PerShapeCall::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string stored;
  const size_t operands = call_.node ? call_.node->numOperands() : 0;
  for (size_t p : stored_)
    stored += std::string(stored.empty() ? "" : ", ") + (p == 0 ? "source"
                                                         : p == operands
                                                             ? "result"
                                                             : "operand " + std::to_string(p));
  return "oneDNN, made for each run's sizes (symbolic dims" +
         (stored.empty() ? std::string() : "; stored blocked in " + layout_ + ": " + stored) + ")";
}

Status PerShapeCall::agree(LibraryKernel& k) const {
  if (!told_) return Status::ok();
  const std::vector<size_t> b = k.blockableBuffers();
  for (size_t p : stored_) {
    if (k.blockedLayout() != layout_ || std::find(b.begin(), b.end(), p) == b.end())
      return Status::error("its kernel here computes in layout '" + k.blockedLayout() +
                           "', but the program stores its buffers in '" + layout_ +
                           "' for every size");
  }
  if (!b.empty()) k.storeBlocked(stored_);
  return Status::ok();
}

size_t PerShapeCall::sizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_.size();
}

}  // namespace kiln::codegen::cpu
