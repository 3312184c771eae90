// Kernels that are one library call run without generated code (see cpu_codegen.h).
#include <algorithm>

#include "codegen/cpu/cpu_codegen.h"

namespace kiln::codegen::cpu {
namespace {

class CallKernel final : public CompiledKernel {
 public:
  explicit CallKernel(std::vector<size_t> args) : args_(std::move(args)) {}
  void run(void* const* buffers, ThreadPool&, CallHandler handler, void* context) const override {
    // The call's arguments in order, as the generated code would pass them (llvm_emit.cpp).
    void* stack[16];
    std::vector<void*> heap;
    void** ptrs = stack;
    if (args_.size() > std::size(stack)) {
      heap.resize(args_.size());
      ptrs = heap.data();
    }
    for (size_t j = 0; j < args_.size(); ++j) ptrs[j] = buffers[args_[j]];
    handler(context, 0, ptrs);
  }
  const std::string& symbol() const override { return symbol_; }

 private:
  std::vector<size_t> args_;  // kernel buffer index of each call argument
  std::string symbol_;        // none
};

}  // namespace

std::unique_ptr<CompiledKernel> callOnlyKernel(const kernel::Kernel& k) {
  const kernel::Stmt* s = k.body.get();
  while (s && s->kind == kernel::Stmt::Kind::Block && s->body.size() == 1) s = s->body[0].get();
  if (!s || s->kind != kernel::Stmt::Kind::Call) return nullptr;
  std::vector<size_t> args;
  for (const std::string& name : s->args) {
    auto it = std::find_if(k.buffers.begin(), k.buffers.end(),
                           [&](const kernel::Buffer& b) { return b.name == name; });
    if (it == k.buffers.end()) return nullptr;  // not a kernel parameter: leave it to codegen
    args.push_back(static_cast<size_t>(it - k.buffers.begin()));
  }
  return std::make_unique<CallKernel>(std::move(args));
}

}  // namespace kiln::codegen::cpu
