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
  int first = 0, last = 0;  // kernels that define and last read it (Arena)
  const Value* sharesWith = nullptr;  // in place: the input whose memory it takes
  // A slice of a concatenation its producers write in place (kernel::Buffer::view): the
  // concatenation whose memory it is, and the byte offset in it.
  const Value* sliceOf = nullptr;
  int64_t sliceBytes = 0;
};

struct BufferPlan {
  std::map<const Value*, Slot> values;
  // Arena offsets of each kernel's Temp buffers, in the order of its buffer list.
  std::vector<std::vector<int64_t>> temps;
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
