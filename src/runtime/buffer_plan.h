// Buffer assignment: where each value a kernel reads or writes lives during a run.
//
// Parameters are the caller's buffers, constants the executable's, function outputs are
// allocated per run and handed to the caller. Every other value (and each kernel's temp buffers)
// gets an offset in one arena per run, reused once the value is dead (liveness over the kernel
// order, greedy by size); an elementwise kernel writes its result over an input that dies there
// (in place) when it reads that input only at the index it stores.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::runtime {

constexpr int64_t kBufferAlignment = 64;

// Unstored: a value that kernels running as one compute and consume among themselves without
// memory (RunTogether::unstored); it has no address.
enum class Storage : uint8_t { Parameter, Constant, Output, Arena, Unstored };

struct Slot {
  Storage storage = Storage::Arena;
  int64_t bytes = 0;
  int64_t offset = 0;       // Arena: byte offset; Parameter: parameter index; Output: output index
  int first = 0, last = 0;  // kernels that define and last read it (Arena)
  const Value* sharesWith = nullptr;  // in place: the input whose memory it takes
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

// Kernels [first, last] that run as one, at the first's place (an inverted-residual block,
// runtime/executable.cpp): every value one of them reads or writes is live over the whole range,
// so none of them takes another's memory; `unstored` are the values they pass among themselves
// without memory (they get none).
struct RunTogether {
  int first = 0, last = 0;
  std::vector<const Value*> unstored;
};
// Arena offsets are multiples of `alignment` (a power of two).
StatusOr<BufferPlan> planBuffers(const Function& f, const std::vector<kernel::Kernel>& kernels,
                                 const std::vector<RunTogether>& together = {},
                                 int64_t alignment = kBufferAlignment);

// "arena 1.2 MiB (liveness lower bound 1.1 MiB, 3 values in place)".
std::string describeBufferPlan(const BufferPlan& p);

}  // namespace kiln::runtime
