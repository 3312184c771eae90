// Held constants. See held_constants.h.
#include "codegen/cpu/held_constants.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace kiln::codegen::cpu {
namespace {

// Calls use(call, buffer, positions) for each constant buffer of each kernel: `call` is the
// kernel's library call when it has exactly one and no other statement reads the buffer (its
// loops may read other buffers: post-ops as loops, an epilogue), else null; `positions` are
// the buffer's positions among that call's arguments. Which constants only library kernels
// read (HeldConstants, checkHeldConstants).
template <typename Use>
void forEachConstantRead(const std::vector<kernel::Kernel>& kernels,
                         std::vector<std::vector<LibraryCall>>& calls, Use use) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<const kernel::Stmt*> stmts = kernel::callsOf(kernels[i]);
    LibraryCall* call = stmts.size() == 1 && calls[i].size() == 1 ? &calls[i][0] : nullptr;
    std::set<std::string> loaded = kernel::loadedBuffers(kernels[i]);
    for (const kernel::Buffer& b : kernels[i].buffers) {
      if (!b.value || b.value->def()->op() != OpCode::Constant) continue;
      std::vector<size_t> positions;
      LibraryCall* only = loaded.count(b.name) ? nullptr : call;
      for (size_t j = 0; only && j < only->stmt->args.size(); ++j)
        if (only->stmt->args[j] == b.name) positions.push_back(j);
      use(only, b, positions);
    }
  }
}

}  // namespace

CpuProgram::HeldConstants::HeldConstants(Impl& impl, const Function& f, bool drop)
    : drop_(drop), dropped_(impl.droppedBytes) {
  if (drop_) dropped_ = 0;
  forEachConstantRead(
      impl.kernels, impl.calls,
      [&](LibraryCall* call, const kernel::Buffer& b, const std::vector<size_t>& positions) {
        if (b.role != kernel::BufferRole::Input) return;
        Entry& e = values_[b.value];
        ++e.readers;
        if (call && positions == std::vector<size_t>{1}) weightsOf_[call] = b.value;
        else e.held = false;
      });
  for (const Value* v : f.outputs())
    if (auto it = values_.find(v); it != values_.end()) it->second.held = false;
}

CpuProgram::HeldConstants::~HeldConstants() {
  if (untrimmed_ > 0) trim();
}

void CpuProgram::HeldConstants::prepared(const LibraryCall& call) {
  auto w = weightsOf_.find(&call);
  if (w == weightsOf_.end()) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = values_.at(w->second);
  e.held = e.held && call.fast && call.fast->holdsWeights();
  if (--e.readers > 0 || !e.held) return;
  Node* n = const_cast<Node*>(w->second->def());
  found_.insert(n);
  if (!drop_ || n->constantData().held) return;
  int64_t bytes = static_cast<int64_t>(n->constantData().tensor.byteSize());
  dropped_ += bytes;
  ConstantData held;
  held.poolName = n->constantData().poolName;
  held.held = true;
  n->setAttr("value", AttrValue(std::in_place_index<8>, std::move(held)));
  // The constants' storage mostly comes from the heap (the importer's parsed strings), where
  // freed memory stays this process's until the heap is trimmed: without that a compile would
  // still hold every constant next to the held copies (measured on the ViT: a peak of 213 MiB
  // instead of 182).
  if ((untrimmed_ += bytes) >= (int64_t{16} << 20)) trim();
}

void CpuProgram::HeldConstants::trim() {
  untrimmed_ = 0;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

Status checkHeldConstants(CpuProgram::Impl& impl) {
  // A constant without data (an artifact stores it only in its readers' layouts) must be held by
  // every reader: this oneDNN chose the layouts the artifact has.
  Status missing = Status::ok();
  forEachConstantRead(
      impl.kernels, impl.calls,
      [&](LibraryCall* call, const kernel::Buffer& b, const std::vector<size_t>& positions) {
        const Node* def = b.value->def();
        if (!missing || def->op() != OpCode::Constant || !def->constantData().held) return;
        if (call && call->fast && call->fast->holdsWeights() && positions == std::vector<size_t>{1})
          return;
        missing = Status::error(
            "constant @" + def->constantData().poolName +
            " is stored only in the layout a library kernel chose when the artifact was written, "
            "and here " +
            (call && call->fast ? call->stmt->callee() + " does not take it in that layout"
             : call ? call->stmt->callee() + " has no library kernel (" + call->why + ")"
                    : "a loop kernel reads it") +
            ": compile the model again");
      });
  return missing;
}

}  // namespace kiln::codegen::cpu
