// Buffer assignment: where each value a kernel reads or writes lives during a run.
//
// Parameters are the caller's buffers, constants the executable's, function outputs are
// allocated per run and handed to the caller. Every other value (and each kernel's temp buffers)
// gets an offset in one arena per run, reused once the value is dead (liveness over the kernel
// order, greedy by size); an elementwise kernel writes its result over an input that dies there
// (in place) when it reads that input only at the index it stores. Internal buffers (values a
// custom kernel passes between its calls, kernel_ir.h) get nothing: the kernel keeps them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::runtime {

constexpr int64_t kBufferAlignment = 64;

enum class Storage : uint8_t { Parameter, Constant, Output, Arena };

struct Slot {
  Storage storage = Storage::Arena;
  int64_t bytes = 0;
  int64_t offset = 0;       // Arena: byte offset; Parameter: parameter index; Output: output index
  int item = -1;            // Arena: the BufferPlan::items entry whose memory it is
  int first = 0, last = 0;  // kernels that define and last read it (Arena)
  const Value* sharesWith = nullptr;  // in place: the input whose memory it takes
  // A slice of a concatenation its producers write in place (kernel::Buffer::view): the
  // concatenation whose memory it is, and the byte offset in it.
  const Value* sliceOf = nullptr;
  int64_t sliceBytes = 0;
};

// One block of the arena: a value (with those written over it in place) or a temp.
struct ArenaItem {
  int64_t offset = 0;  // in the plan, which holds every symbol at the top of its range
  int first = 0, last = 0;
  // Symbolic: bytes = elementBytes * elements at a run's sizes (elements an expression of the
  // kernels' symbols); null when the item's size is static.
  kernel::ExprRef elements;
  int64_t bytes = 0, elementBytes = 0;
  std::vector<int> below;  // items live at once with it that the plan puts below it
};

struct BufferPlan {
  std::map<const Value*, Slot> values;
  // Arena offsets of each kernel's Temp buffers, in the order of its buffer list, and their items.
  std::vector<std::vector<int64_t>> temps;
  std::vector<std::vector<int>> tempItems;
  std::vector<ArenaItem> items;
  int64_t alignment = kBufferAlignment;
  // A program over ranges: offsets as functions of the symbols. At a run's sizes each item sits
  // right above the items the plan puts below it (sizes as they are, not at the range's top), so
  // a small run's buffers lie together rather than a largest-size apart. Never above the plan's
  // offsets. Empty when every item's size is static (the plan's offsets hold).
  std::vector<int64_t> offsetsAt(const std::map<std::string, int64_t>& sizes) const;
  // Whether some item's size depends on the symbols.
  bool symbolic() const;
  // The address offset of an arena slot in a run whose item offsets are `at` (offsetsAt; empty:
  // the plan's).
  int64_t offsetOf(const Slot& s, const std::vector<int64_t>& at) const {
    return at.empty() || s.item < 0 ? s.offset
                                    : at[size_t(s.item)] + s.offset - items[size_t(s.item)].offset;
  }
  // The same for temp `t` of kernel `k`.
  int64_t tempOffsetOf(size_t k, size_t t, const std::vector<int64_t>& at) const {
    return at.empty() ? temps[k][t] : at[size_t(tempItems[k][t])];
  }
  int64_t arenaBytes = 0;
  // The most bytes live at once over the kernel order (arena values and temps): no assignment can
  // use less.
  int64_t lowerBoundBytes = 0;
  int inPlace = 0;  // values written over a dying input
};

// Kernels [first, last] of the kernel order that may run at once (runtime/concurrency.h).
struct KernelRange {
  int first = 0, last = 0;
};

// Arena offsets are multiples of `alignment` (a power of two). Every buffer a kernel of a
// `concurrent` range touches is live over the whole range (its kernels may run in any order and
// at once), and no value there is written in place.
StatusOr<BufferPlan> planBuffers(const Function& f, const std::vector<kernel::Kernel>& kernels,
                                 int64_t alignment = kBufferAlignment,
                                 const std::vector<KernelRange>& concurrent = {});

// "arena 1.2 MiB (liveness lower bound 1.1 MiB, 3 values in place)".
std::string describeBufferPlan(const BufferPlan& p);

}  // namespace kiln::runtime
