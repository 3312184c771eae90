// The cuda program's device state (cuda_program.cpp runs it; cuda_program_explain.cpp
// describes it): what runs at one size need and what the device holds.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_program.h"
#include "codegen/cuda/library_call.h"

namespace kiln::codegen::cuda {

// What runs at one size of a program's symbols need; a static program has one, of no sizes.
struct CudaProgram::RunSizes {
  SymbolBindings sizes;
  std::vector<int64_t> key;                   // the sizes, in the symbols' order
  std::vector<int64_t> items;                 // the arena's item offsets (BufferPlan::offsetsAt)
  std::vector<std::vector<int64_t>> symbols;  // per kernel, its symbols' values in its order
  std::vector<std::vector<int64_t>> grids;    // per kernel, per launch: its grid (0: none)
};

// The device's copy of the program: its module, functions and weights, and the memory and
// streams of finished runs, which the next runs reuse.
struct CudaProgram::Device {
  const Driver* driver = nullptr;
  GpuModule module = nullptr;
  std::vector<std::vector<GpuFunction>> functions;  // per kernel, per launch (null: a call)
  // Per kernel, per launch: a library call and its arguments' buffer indices.
  std::vector<std::vector<std::unique_ptr<LibraryCall>>> calls;
  std::vector<std::vector<std::vector<size_t>>> callArgs;
  // Calls of symbolic sizes (null in `calls`) made per size (RunSizes::key) on its first run.
  using CallTable = std::vector<std::vector<std::unique_ptr<LibraryCall>>>;
  bool symbolicCalls = false;
  std::mutex callsMu;
  std::map<std::vector<int64_t>, std::shared_ptr<const CallTable>> sizedCalls;
  std::vector<int64_t> lastKey;  // the last run's sizes (measureDevice times their calls)
  DevicePtr weights = 0;
  std::map<const Value*, int64_t> weightOffsets;
  std::mutex mu;
  // Per size: the runs a run memory has made and the CUDA graph of their launches once captured.
  struct SizeGraph {
    GraphExec graph = nullptr;
    int runs = 0;
  };
  // Finished runs' memory and stream, with their graphs.
  struct Slot {
    DevicePtr memory = 0;
    Stream stream = nullptr;
    std::map<std::vector<int64_t>, SizeGraph> graphs;
    // Runs on the caller's tensors (runOnDevice): the graph of the addresses deviceKey, and
    // the addresses of the last such run.
    GraphExec deviceGraph = nullptr;
    std::vector<DevicePtr> deviceKey, lastKey;
  };
  std::vector<Slot> free;
  std::atomic<bool> graphs{true};  // false once a capture failed: every run issues its launches
  std::string graphsOff;           // why (under mu)

  ~Device() {
    if (!driver) return;
    if (!driver->makeCurrent()) return;
    for (Slot& s : free) {
      for (auto& [key, g] : s.graphs) driver->destroyGraph(g.graph);
      driver->destroyGraph(s.deviceGraph);
      driver->free(s.memory);
      driver->destroyStream(s.stream);
    }
    driver->free(weights);
    driver->unloadModule(module);
  }
};

}  // namespace kiln::codegen::cuda
