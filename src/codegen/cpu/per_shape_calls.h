// Library calls of symbolic sizes (a program compiled over ranges: kernel IR's symbols). A
// oneDNN primitive has fixed shapes, so such a call's kernel is made for each run's sizes on its
// first use, as a node of those sizes (call_node.h: its constant operands shared, not copied),
// and kept by them: a size seen before costs a lookup. The CPU schedule decides which of its
// buffers are stored blocked from its kernel at the ranges' top (choose_library_calls.h), as a
// static program's: which buffers a convolution computes blocked, and in which layout, follows
// from its channels, window and the machine, not from the sizes; every size's kernel is told
// the same (storeBlocked), and one that would differ is an error naming the call and the sizes.
// Internal to the CPU target.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cpu/call_node.h"
#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "passes/specialize_shapes.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// What a library kernel reads of call `s` of `k`: its op, attributes and layout, its operands'
// and results' types, which constant each constant operand is, and its post-ops. Calls of one
// key compute alike, so they can share one kernel and one copy of its packed weights.
std::string callNodeKey(const kernel::Kernel& k, const kernel::Stmt& s);

class PerShapeCall {
 public:
  // The key under which calls of kernels share one PerShapeCall: callNodeKey, `kernel`'s
  // symbols (its sizes' key), the post-op operands' dims and `threads`. Empty for a
  // convolution: the layout plan stores per call which of its buffers hold blocked data.
  static std::string sharingKey(const kernel::Kernel& kernel, const kernel::Stmt& call,
                                int threads);
  // `call` of `kernel` (both outlive this), its kernels made for `threads`.
  PerShapeCall(const kernel::Kernel& kernel, const kernel::Stmt& call, int threads)
      : kernel_(kernel), call_(call), threads_(threads) {}
  // The kernel for these sizes of the kernel's symbols, made on first use. Thread-safe.
  StatusOr<const LibraryKernel*> kernelFor(const SymbolBindings& sizes);
  // The buffers every size's kernel finds stored blocked (tellStoredBlocked).
  void storeBlocked(const StoredBlocked& stored);
  // "oneDNN, made for each run's sizes (symbolic dims; stored blocked in nChw16c: source, result)".
  std::string describe() const;
  // How many sizes it has kernels for.
  size_t sizes() const;

 private:
  struct Made {
    CallNode node;  // the call at those sizes
    std::unique_ptr<LibraryKernel> kernel;
  };
  // `shared`: weights an earlier size's kernel holds, used in place when the new kernel lays them
  // out alike.
  StatusOr<Made> make(const SymbolBindings& sizes, const PackedWeights* shared) const;
  // make() with the weights of the layout the kernel chooses, if an earlier size's kernel holds
  // them: one copy of the weights per layout, not per size (a batch rarely changes the layout).
  StatusOr<Made> makeSharing(const SymbolBindings& sizes);
  // A new kernel told the stored positions; an error where it computes blocked otherwise.
  Status agree(LibraryKernel& kernel) const;

  const kernel::Kernel& kernel_;
  const kernel::Stmt& call_;
  int threads_;
  mutable std::mutex mu_;
  std::map<std::vector<int64_t>, Made> made_;
  std::vector<PackedWeights> layouts_;  // the weights of each layout made (their kernels stay)
  StoredBlocked stored_;
  bool told_ = false;  // storeBlocked was called
};

}  // namespace kiln::codegen::cpu
