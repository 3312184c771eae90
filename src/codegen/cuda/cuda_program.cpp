// The cuda target's program. See cuda_program.h.
#include "codegen/cuda/cuda_program.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/cuda/ceilings.h"
#include "codegen/cuda/cuda_program_device.h"
#include "compiler/compile.h"

namespace kiln::codegen::cuda {

using runtime::Slot;
using runtime::Storage;

namespace {

int64_t alignUp(int64_t n) { return (n + kCudaAlignment - 1) / kCudaAlignment * kCudaAlignment; }

int64_t tensorBytes(const TensorType& t) {
  return t.numElements().value_or(0) * static_cast<int64_t>(dtypeSize(t.dtype()));
}

int64_t bytesOf(const Value* v) { return tensorBytes(v->type()); }

// A value's bytes at `sizes` of the symbols (its largest, at the ranges' top).
int64_t bytesAt(const Value* v, const SymbolBindings& sizes) {
  return tensorBytes(atSizes(v->type(), sizes));
}

// Sizes a program keeps what it made for (offsets, grids, library calls); runs that cycle through
// more sizes make them again.
constexpr size_t kSizesKept = 256;
// CUDA graphs a run memory keeps, one per size.
constexpr size_t kGraphsKept = 16;
// The most blocks a launch's grid (x) takes.
constexpr int64_t kMaxGrid = 2147483647;

}  // namespace

CudaProgram::Impl::~Impl() = default;

StatusOr<std::unique_ptr<CudaProgram>>
CudaProgram::build(std::unique_ptr<Module> module, fusion::FusionPlan plan,
                   std::vector<kernel::Kernel> kernels, const CompileOptions& options,
                   const std::string& arch, const CompiledModule* cubin) {
  auto impl = std::make_unique<Impl>();
  impl->module = std::move(module);
  impl->f = impl->module->entry();
  impl->options = options;
  impl->plan = std::move(plan);
  impl->kernels = std::move(kernels);
  impl->maxSizes = topsOf(options.ranges);
  KILN_ASSIGN_OR_RETURN(impl->source, emitCuda(impl->kernels));
  KILN_RETURN_IF_ERROR(compiler::writeDump(options, "kernels.cu", impl->source.source));
  if (cubin) {
    impl->code = *cubin;
  } else {
    const std::string target = options.cudaArch.empty() ? arch : options.cudaArch;
    KILN_ASSIGN_OR_RETURN(impl->code, compileCuda(impl->source.source, "kernels.cu", target));
  }
  return std::make_unique<CudaProgram>(std::move(impl));
}

void CudaProgram::setBuffers(BufferPlan buffers) {
  Impl& m = *impl_;
  m.buffers = std::move(buffers);
  int64_t at = alignUp(m.buffers.arenaBytes);
  m.inputOffsets.clear();
  m.outputOffsets.clear();
  for (size_t i = 0; i < m.f->numParameters(); ++i) {
    m.inputOffsets.push_back(at);
    at += alignUp(bytesAt(m.f->parameter(i), m.maxSizes));
  }
  for (const Value* o : m.f->outputs()) {
    m.outputOffsets.push_back(at);
    at += alignUp(bytesAt(o, m.maxSizes));
  }
  m.workspaceOffset = -1;
  for (const std::vector<Launch>& ls : m.source.launches)
    for (const Launch& l : ls)
      if (l.call) m.workspaceOffset = at;
  if (m.workspaceOffset >= 0) at += kCallWorkspace;
  m.runBytes = at;
}

namespace {

// The library call `call` of `k` made for the device (none for a call of symbolic sizes, made per
// size), and its arguments' buffer indices.
StatusOr<std::pair<std::unique_ptr<LibraryCall>, std::vector<size_t>>>
prepareCall(const kernel::Kernel& k, const kernel::Stmt& call, bool tf32) {
  std::vector<size_t> args;
  for (const std::string& a : call.args)
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (k.buffers[b].name == a) args.push_back(b);
  if (args.size() != call.args.size())
    return Status::error("kernel " + k.name + ": a call's buffers are missing");
  if (kernel::isSymbolicCall(k, call)) return std::make_pair(std::unique_ptr<LibraryCall>(), args);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LibraryCall> lib, makeLibraryCall(k, call, tf32));
  return std::make_pair(std::move(lib), std::move(args));
}

}  // namespace

// Loads the module and uploads the weights, once.
StatusOr<std::shared_ptr<CudaProgram::Device>> CudaProgram::device() const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(const Driver* driver, Driver::get());
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.device) return m.device;
  KILN_RETURN_IF_ERROR(checkDriverFor(m.code, driver->device().driverVersion));
  if (driver->device().arch != m.code.arch)
    return Status::error("the program was compiled for " + m.code.arch + ", this GPU (" +
                         driver->device().name + ") is " + driver->device().arch +
                         ": compile it again with --cuda-arch " + driver->device().arch);
  auto d = std::make_shared<Device>();
  d->driver = driver;
  KILN_ASSIGN_OR_RETURN(d->module, driver->loadModule(m.code.cubin));
  for (size_t i = 0; i < m.source.launches.size(); ++i) {
    d->functions.emplace_back();
    d->calls.emplace_back();
    d->callArgs.emplace_back();
    for (const Launch& l : m.source.launches[i]) {
      GpuFunction fn = nullptr;
      std::unique_ptr<LibraryCall> lib;
      std::vector<size_t> args;
      if (!l.call) {
        KILN_ASSIGN_OR_RETURN(fn, driver->function(d->module, l.function));
      } else {
        KILN_ASSIGN_OR_RETURN(std::tie(lib, args),
                              prepareCall(m.kernels[i], *l.call, m.options.precision == "tf32"));
        d->symbolicCalls = d->symbolicCalls || !lib;
      }
      d->functions.back().push_back(fn);
      d->calls.back().push_back(std::move(lib));
      d->callArgs.back().push_back(std::move(args));
    }
  }
  int64_t total = 0;
  for (const auto& [v, slot] : m.buffers.values)
    if (slot.storage == Storage::Constant) {
      d->weightOffsets[v] = total;
      total += alignUp(bytesOf(v));
    }
  KILN_ASSIGN_OR_RETURN(d->weights, driver->allocate(total));
  for (const auto& [v, offset] : d->weightOffsets)
    KILN_RETURN_IF_ERROR(driver->copyToDevice(d->weights + static_cast<DevicePtr>(offset),
                                              v->def()->constantData().tensor.bytes(), bytesOf(v),
                                              nullptr));
  KILN_RETURN_IF_ERROR(driver->synchronize(nullptr));
  m.device = d;
  return d;
}

// The sizes of a run on inputs of `shapes`, checked against the ranges, and what runs at them
// need, made on the first run at them.
StatusOr<std::shared_ptr<const CudaProgram::RunSizes>>
CudaProgram::sizesOf(const std::vector<std::vector<int64_t>>& shapes) const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(SymbolBindings sizes, runtime::runSizes(*m.f, shapes, m.options.ranges));
  std::vector<int64_t> key;
  for (const auto& [name, size] : sizes) key.push_back(size);
  std::lock_guard<std::mutex> lock(m.mu);
  if (auto it = m.bySize.find(key); it != m.bySize.end()) return it->second;
  auto rs = std::make_shared<RunSizes>();
  rs->sizes = sizes;
  rs->key = key;
  if (!sizes.empty()) rs->items = m.buffers.offsetsAt(sizes);
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const kernel::Kernel& k = m.kernels[i];
    rs->symbols.emplace_back();
    for (const kernel::Symbol& sym : k.symbols) {
      auto it = sizes.find(sym.name);
      if (it == sizes.end())
        return Status::error("kernel " + k.name + " reads size " + sym.name +
                             ", which no input of the program gives");
      rs->symbols.back().push_back(it->second);
    }
    rs->grids.emplace_back();
    for (const Launch& l : m.source.launches[i]) {
      std::optional<int64_t> grid = l.grid;
      if (l.gridExtent) grid = kernel::evaluateExtent(l.gridExtent, sizes);
      if (!grid || *grid > kMaxGrid)
        return Status::error("kernel " + k.name + ": its grid " + kernel::printExpr(l.gridExtent) +
                             " is not a grid size at these sizes");
      rs->grids.back().push_back(*grid);
    }
  }
  if (m.bySize.size() >= kSizesKept) m.bySize.clear();
  m.bySize.emplace(key, rs);
  return std::shared_ptr<const RunSizes>(rs);
}

namespace {

using CallTable = CudaProgram::Device::CallTable;

// Launch j of kernel i's library call: the program's, or for a call of symbolic sizes the one
// made for the run's sizes (`sized`); null where there is none.
const LibraryCall* callOf(const CudaProgram::Device& d, const CallTable* sized, size_t i,
                          size_t j) {
  if (d.calls[i][j]) return d.calls[i][j].get();
  return sized ? (*sized)[i][j].get() : nullptr;
}

// The calls of symbolic sizes made for `rs`'s sizes (null for a program without them).
StatusOr<std::shared_ptr<const CallTable>>
callsAt(CudaProgram::Device& d, const CudaProgram::Impl& m, const CudaProgram::RunSizes& rs) {
  if (!d.symbolicCalls) return std::shared_ptr<const CallTable>();
  std::lock_guard<std::mutex> lock(d.callsMu);
  d.lastKey = rs.key;
  if (auto it = d.sizedCalls.find(rs.key); it != d.sizedCalls.end()) return it->second;
  KILN_RETURN_IF_ERROR(d.driver->makeCurrent());
  auto table = std::make_shared<CallTable>();
  for (size_t i = 0; i < m.source.launches.size(); ++i) {
    table->emplace_back();
    for (size_t j = 0; j < m.source.launches[i].size(); ++j) {
      const Launch& l = m.source.launches[i][j];
      std::unique_ptr<LibraryCall> lib;
      if (l.call && !d.calls[i][j]) {
        KILN_ASSIGN_OR_RETURN(
            lib, makeLibraryCallAt(m.kernels[i], *l.call, m.options.precision == "tf32", rs.sizes));
      }
      table->back().push_back(std::move(lib));
    }
  }
  if (d.sizedCalls.size() >= kSizesKept) d.sizedCalls.clear();
  d.sizedCalls.emplace(rs.key, table);
  return std::shared_ptr<const CallTable>(table);
}

// One run's device memory and stream (with its CUDA graph): a finished run's, or new ones; back
// to the device's free list when the run ends well, freed when it did not (work may still be in
// flight).
class RunMemory {
 public:
  using Slot = CudaProgram::Device::Slot;
  RunMemory(CudaProgram::Device& d, std::vector<int64_t> key) : d_(d), key_(std::move(key)) {}
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;
  ~RunMemory() {
    if (!s_.memory && !s_.stream) return;
    if (ok_) {
      ++s_.graphs[key_].runs;
      std::lock_guard<std::mutex> lock(d_.mu);
      d_.free.push_back(std::move(s_));
      return;
    }
    d_.driver->synchronize(s_.stream);
    for (auto& [key, g] : s_.graphs) d_.driver->destroyGraph(g.graph);
    d_.driver->destroyGraph(s_.deviceGraph);
    d_.driver->free(s_.memory);
    d_.driver->destroyStream(s_.stream);
  }

  Status open(int64_t bytes) {
    {
      std::lock_guard<std::mutex> lock(d_.mu);
      if (!d_.free.empty()) {
        s_ = std::move(d_.free.back());
        d_.free.pop_back();
        return Status::ok();
      }
    }
    KILN_ASSIGN_OR_RETURN(s_.stream, d_.driver->createStream());
    KILN_ASSIGN_OR_RETURN(s_.memory, d_.driver->allocate(bytes));
    return Status::ok();
  }
  DevicePtr base() const { return s_.memory; }
  Stream stream() const { return s_.stream; }
  Slot& slot() { return s_; }
  // The graph of this run's size, a slot keeping kGraphsKept of them.
  CudaProgram::Device::SizeGraph& graph() {
    if (!s_.graphs.count(key_) && s_.graphs.size() >= kGraphsKept) {
      for (auto& [key, g] : s_.graphs) d_.driver->destroyGraph(g.graph);  // freed once run
      s_.graphs.clear();
    }
    return s_.graphs[key_];
  }
  void succeeded() { ok_ = true; }

 private:
  CudaProgram::Device& d_;
  std::vector<int64_t> key_;  // the run's sizes
  Slot s_;
  bool ok_ = false;
};

// Where each value of one run lies on the device.
struct Addresses {
  const CudaProgram::Impl& m;
  const CudaProgram::Device& d;
  DevicePtr base;
  const CudaProgram::RunSizes& rs;
  const CallTable* sized;  // the calls of symbolic sizes made for rs (null: none)
  // The caller's tensors (runOnDevice) instead of the run memory's input and output slots
  // (0: the slot, for a tensor that is not aligned as the kernels assume).
  const DevicePtr* inputs = nullptr;
  const DevicePtr* outputs = nullptr;

  // 0 when the value has no device copy (a constant or parameter no kernel reads).
  DevicePtr of(const Value* v) const {
    auto it = m.buffers.values.find(v);
    if (it == m.buffers.values.end()) return 0;
    const Slot& s = it->second;
    const auto at = [&](int64_t offset) { return base + static_cast<DevicePtr>(offset); };
    switch (s.storage) {
      case Storage::Parameter:
        return inputs && inputs[s.offset] ? inputs[s.offset]
                                          : at(m.inputOffsets[static_cast<size_t>(s.offset)]);
      case Storage::Constant: return d.weights + static_cast<DevicePtr>(d.weightOffsets.at(v));
      case Storage::Output:
        return outputs && outputs[s.offset] ? outputs[s.offset]
                                            : at(m.outputOffsets[static_cast<size_t>(s.offset)]);
      case Storage::Arena: return at(m.buffers.offsetOf(s, rs.items));
    }
    return 0;
  }

  void kernel(size_t i, std::vector<DevicePtr>& ptrs) const {
    ptrs.clear();
    size_t temp = 0;
    for (const kernel::Buffer& b : m.kernels[i].buffers) {
      if (b.role == kernel::BufferRole::Temp)
        ptrs.push_back(base + static_cast<DevicePtr>(m.buffers.tempOffsetOf(i, temp++, rs.items)));
      else if (b.role == kernel::BufferRole::Internal) ptrs.push_back(0);  // no memory
      else ptrs.push_back(of(b.value));
    }
  }
};

}  // namespace

namespace {

// The events of one run, destroyed with it.
struct RunEvents {
  const Driver& drv;
  std::vector<Event> list;
  ~RunEvents() {
    for (Event e : list) drv.destroyEvent(e);
  }
  StatusOr<Event> add() {
    KILN_ASSIGN_OR_RETURN(Event e, drv.createEvent());
    list.push_back(e);
    return e;
  }
};

// Issues kernel i's launches and library calls on `stream`; with `callsOnly` its library calls
// alone.
Status issueKernel(const CudaProgram::Impl& m, const CudaProgram::Device& d, const Addresses& at,
                   Stream stream, size_t i, bool callsOnly = false) {
  std::vector<DevicePtr> ptrs, callPtrs;
  std::vector<void*> args;
  at.kernel(i, ptrs);
  for (DevicePtr& p : ptrs) args.push_back(&p);
  // The symbols' values after the buffers (the driver only reads them).
  for (const int64_t& v : at.rs.symbols[i]) args.push_back(const_cast<int64_t*>(&v));
  const std::vector<Launch>& launches = m.source.launches[i];
  for (size_t j = 0; j < launches.size(); ++j) {
    Status launched = Status::ok();
    if (launches[j].call) {
      const LibraryCall* lib = callOf(d, at.sized, i, j);
      if (!lib) return Status::error("kernel " + m.kernels[i].name + ": a call was not made");
      for (size_t a : d.callArgs[i][j]) callPtrs.push_back(ptrs[a]);
      launched =
          lib->run(callPtrs.data(), at.base + static_cast<DevicePtr>(m.workspaceOffset), stream);
      callPtrs.clear();
    } else if (const int64_t grid = at.rs.grids[i][j]; grid > 0 && !callsOnly) {
      launched = d.driver->launch(d.functions[i][j], grid, launches[j].block, stream, args.data());
    }
    if (!launched) return launched.prefix("kernel " + m.kernels[i].name);
  }
  return Status::ok();
}

// Issues every kernel in plan order on `stream`, calling `after(i)` after kernel i.
Status issueKernels(const CudaProgram::Impl& m, const CudaProgram::Device& d, const Addresses& at,
                    Stream stream, const std::function<Status(size_t)>& after) {
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    KILN_RETURN_IF_ERROR(issueKernel(m, d, at, stream, i));
    KILN_RETURN_IF_ERROR(after(i));
  }
  return Status::ok();
}

// The graph of a profiled run, destroyed once the run has synchronized.
struct ProfileGraph {
  const Driver& drv;
  GraphExec graph;
  ~ProfileGraph() { drv.destroyGraph(graph); }
};

// A kernel's profiled time is that of kTimedRepeats more launches of it, back to back between
// two events, over kTimedRepeats: an event node costs a few microseconds, as much as a small
// kernel, and so counts a tenth of that.
constexpr int kTimedRepeats = 10;

// The kernels in plan order, each followed by kTimedRepeats more of it (with `callsOnly`, of its
// library calls alone) between two events. Where
// graphs work they are captured and launched as one graph (back to back, as a run replays them,
// so that a short kernel's time is the device's and not the host's launch rate); else issued in
// turn. Issued after a run's outputs are copied: a kernel that works in place changes its output
// with every repeat, while the inputs it reads are those of a run (each kernel ran before it).
Status issueTimed(const CudaProgram::Impl& m, CudaProgram::Device& d, const Addresses& at,
                  Stream stream, RunEvents& events, ProfileGraph& profile, bool callsOnly = false) {
  const Driver& drv = *d.driver;
  auto repeatWith = [&](bool inGraph) {
    return [&, inGraph](size_t i) -> Status {
      for (int e = 0; e < 2; ++e) {
        KILN_ASSIGN_OR_RETURN(Event ev, events.add());
        KILN_RETURN_IF_ERROR(inGraph ? drv.recordInGraph(ev, stream) : drv.record(ev, stream));
        for (int r = 0; e == 0 && r < kTimedRepeats; ++r)
          KILN_RETURN_IF_ERROR(issueKernel(m, d, at, stream, i, callsOnly));
      }
      return Status::ok();
    };
  };
  if (d.graphs) {
    KILN_RETURN_IF_ERROR(drv.beginCapture(stream));
    if (StatusOr<GraphExec> graph =
            drv.endCapture(stream, issueKernels(m, d, at, stream, repeatWith(true)))) {
      profile.graph = *graph;
      return drv.launchGraph(profile.graph, stream);
    }
    for (Event e : events.list) drv.destroyEvent(e);
    events.list.clear();
  }
  return issueKernels(m, d, at, stream, repeatWith(false));
}

// Each of the first `n` kernels' times from the event pairs issueTimed recorded.
StatusOr<std::vector<double>> timedKernels(const Driver& drv, const RunEvents& events, size_t n) {
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(float ms, drv.elapsed(events.list[2 * i], events.list[2 * i + 1]));
    out.push_back(ms / kTimedRepeats);
  }
  return out;
}

// The run's kernels as a CUDA graph: a run memory's second run at a size captures them (its
// first has loaded every library's kernels; the launches' grids and sizes are the size's), later
// runs at that size replay the graph, so a run costs one launch. A capture that fails turns
// graphs off for the program, and the run issues its launches.
Status replayOrIssue(CudaProgram::Device& d, const CudaProgram::Impl& m, const Addresses& at,
                     RunMemory& run) {
  const Driver& drv = *d.driver;
  const auto none = [](size_t) { return Status::ok(); };
  CudaProgram::Device::SizeGraph& slot = run.graph();
  if (!slot.graph && slot.runs >= 1 && d.graphs) {
    KILN_RETURN_IF_ERROR(drv.beginCapture(run.stream()));
    StatusOr<GraphExec> graph =
        drv.endCapture(run.stream(), issueKernels(m, d, at, run.stream(), none));
    if (graph) {
      slot.graph = *graph;
    } else {
      std::lock_guard<std::mutex> lock(d.mu);
      d.graphs = false;
      d.graphsOff = graph.status().message();
    }
  }
  if (slot.graph) return drv.launchGraph(slot.graph, run.stream());
  return issueKernels(m, d, at, run.stream(), none);
}

// The launches of a run on the caller's tensors, whose addresses are `key`: replayed from the
// slot's graph of those addresses; the second run in a row on the same addresses captures them
// (a caching allocator such as torch's hands out the same blocks call after call); other runs
// issue the launches.
Status replayOrIssueAt(CudaProgram::Device& d, const CudaProgram::Impl& m, const Addresses& at,
                       RunMemory& run, const std::vector<DevicePtr>& key) {
  const Driver& drv = *d.driver;
  const auto none = [](size_t) { return Status::ok(); };
  RunMemory::Slot& slot = run.slot();
  if (slot.deviceGraph && slot.deviceKey == key)
    return drv.launchGraph(slot.deviceGraph, run.stream());
  const bool again = slot.lastKey == key;
  slot.lastKey = key;
  if (!again || !d.graphs) return issueKernels(m, d, at, run.stream(), none);
  drv.destroyGraph(slot.deviceGraph);  // freed once any replay in flight ends
  slot.deviceGraph = nullptr;
  KILN_RETURN_IF_ERROR(drv.beginCapture(run.stream()));
  StatusOr<GraphExec> graph =
      drv.endCapture(run.stream(), issueKernels(m, d, at, run.stream(), none));
  if (graph) {
    slot.deviceGraph = *graph;
    slot.deviceKey = key;
    return drv.launchGraph(slot.deviceGraph, run.stream());
  }
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.graphs = false;
    d.graphsOff = graph.status().message();
  }
  return issueKernels(m, d, at, run.stream(), none);
}

}  // namespace

Status CudaProgram::runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* kernelMs) const {
  return run(inputs, outputs, kernelMs, nullptr);
}

namespace {

// Each kernel's library calls timed on the last run's memory (its sizes, addresses and values):
// the run's kernels again, each followed by kTimedRepeats more of its calls alone between two
// events, `repeat` times; the medians (-1 for a kernel without calls; none before a first run).
StatusOr<std::vector<double>> timeCallsInPlace(const CudaProgram::Impl& m, CudaProgram::Device& d,
                                               const CallTable* sized, int repeat) {
  std::shared_ptr<const CudaProgram::RunSizes> rs;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (auto it = m.bySize.find(d.lastKey); it != m.bySize.end()) rs = it->second;
  }
  if (!rs) return std::vector<double>();
  const Driver& drv = *d.driver;
  RunMemory run(d, rs->key);
  KILN_RETURN_IF_ERROR(run.open(m.runBytes));
  const Addresses at{m, d, run.base(), *rs, sized};
  std::vector<std::vector<double>> per(m.kernels.size());
  for (int r = 0; r < repeat; ++r) {
    RunEvents timed{drv, {}};
    ProfileGraph profile{drv, nullptr};
    KILN_RETURN_IF_ERROR(issueTimed(m, d, at, run.stream(), timed, profile, /*callsOnly=*/true));
    KILN_RETURN_IF_ERROR(drv.synchronize(run.stream()));
    KILN_ASSIGN_OR_RETURN(std::vector<double> ms, timedKernels(drv, timed, m.kernels.size()));
    for (size_t i = 0; i < m.kernels.size(); ++i) per[i].push_back(ms[i]);
  }
  run.succeeded();
  std::vector<double> out(m.kernels.size(), -1.0);
  for (size_t i = 0; i < per.size(); ++i) {
    const std::vector<Launch>& launches = m.source.launches[i];
    if (std::none_of(launches.begin(), launches.end(), [](const Launch& l) { return l.call; }))
      continue;
    std::sort(per[i].begin(), per[i].end());
    out[i] = per[i][per[i].size() / 2];
  }
  return out;
}

}  // namespace

StatusOr<std::optional<runtime::DeviceCeilings>>
CudaProgram::measureDevice(int repeat, const std::vector<int64_t>& copyBytes) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Device> d, device());
  std::vector<std::vector<const LibraryCall*>> calls;  // those of symbolic sizes: the last run's
  std::shared_ptr<const CallTable> sized;
  {
    std::lock_guard<std::mutex> lock(d->callsMu);
    if (auto it = d->sizedCalls.find(d->lastKey); it != d->sizedCalls.end()) sized = it->second;
  }
  for (size_t i = 0; i < d->calls.size(); ++i) {
    calls.emplace_back();
    for (size_t j = 0; j < d->calls[i].size(); ++j)
      calls.back().push_back(callOf(*d, sized.get(), i, j));
  }
  KILN_ASSIGN_OR_RETURN(runtime::DeviceCeilings c,
                        measureCeilings(*d->driver, calls, copyBytes, repeat));
  KILN_ASSIGN_OR_RETURN(c.callsMs, timeCallsInPlace(*impl_, *d, sized.get(), repeat));
  return std::optional<runtime::DeviceCeilings>(std::move(c));
}

StatusOr<double> CudaProgram::runTimed(std::span<const Tensor> inputs,
                                       std::vector<Tensor>& outputs) const {
  double ms = 0;
  KILN_RETURN_IF_ERROR(run(inputs, outputs, nullptr, &ms));
  return ms;
}

// A run; kernelMs: each kernel's time (issueTimed, after the run); deviceMs: events around the
// launches.
Status CudaProgram::run(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                        std::vector<double>* kernelMs, double* deviceMs) const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Device> d, device());
  const Driver& drv = *d->driver;
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.dims());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const RunSizes> rs, sizesOf(shapes));
  runtime::prepareOutputs(*m.f, outputs, rs->sizes);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CallTable> sized, callsAt(*d, m, *rs));
  RunMemory run(*d, rs->key);
  KILN_RETURN_IF_ERROR(run.open(m.runBytes));
  const Addresses at{m, *d, run.base(), *rs, sized.get()};
  for (size_t i = 0; i < inputs.size() && i < m.inputOffsets.size(); ++i)
    KILN_RETURN_IF_ERROR(
        drv.copyToDevice(run.base() + static_cast<DevicePtr>(m.inputOffsets[i]), inputs[i].bytes(),
                         static_cast<int64_t>(inputs[i].byteSize()), run.stream()));
  RunEvents events{drv, {}};
  auto mark = [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(Event e, events.add());
    return drv.record(e, run.stream());
  };
  if (deviceMs) KILN_RETURN_IF_ERROR(mark());
  KILN_RETURN_IF_ERROR(replayOrIssue(*d, m, at, run));
  if (deviceMs) KILN_RETURN_IF_ERROR(mark());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Value* v = m.f->outputs()[o];
    const DevicePtr src = at.of(v);
    if (src) {
      KILN_RETURN_IF_ERROR(drv.copyToHost(outputs[o].mutableBytes(), src,
                                          static_cast<int64_t>(outputs[o].byteSize()),
                                          run.stream()));
    } else if (v->def()->op() == OpCode::Parameter) {
      const Tensor& in = inputs[static_cast<size_t>(v->def()->attrInt("index"))];
      std::memcpy(outputs[o].mutableBytes(), in.bytes(), outputs[o].byteSize());
    } else if (v->def()->op() == OpCode::Constant) {
      std::memcpy(outputs[o].mutableBytes(), v->def()->constantData().tensor.bytes(),
                  outputs[o].byteSize());
    }
  }
  RunEvents timed{drv, {}};
  ProfileGraph profile{drv, nullptr};
  if (kernelMs) KILN_RETURN_IF_ERROR(issueTimed(m, *d, at, run.stream(), timed, profile));
  KILN_RETURN_IF_ERROR(drv.synchronize(run.stream()));
  if (deviceMs) {
    KILN_ASSIGN_OR_RETURN(float ms, drv.elapsed(events.list[0], events.list[1]));
    *deviceMs = ms;
  }
  if (kernelMs) {
    KILN_ASSIGN_OR_RETURN(*kernelMs, timedKernels(drv, timed, m.kernels.size()));
  }
  run.succeeded();
  return Status::ok();
}

// The caller's stream waits for nothing of ours before this and for the run after it; the run
// memory's stream waits for the caller's work first. The launches replay a graph of the same
// addresses where the slot has one (replayOrIssueAt). An output that is not a kernel's result
// (an input, a constant, or a value that another output holds) is copied into place.
Status CudaProgram::runOnDevice(std::span<const runtime::DeviceTensor> inputs,
                                std::span<const runtime::DeviceTensor> outputs,
                                uintptr_t stream) const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Device> d, device());
  const Driver& drv = *d->driver;
  const Stream caller = reinterpret_cast<Stream>(stream);
  // Kernels and libraries assume kCudaAlignment (16-byte vector accesses, cuBLASLt's
  // heuristic): a caller's tensor off it goes through the run memory's slot for it.
  auto aligned = [](const runtime::DeviceTensor& t) {
    return static_cast<DevicePtr>(t.data) % kCudaAlignment == 0 ? static_cast<DevicePtr>(t.data)
                                                                : DevicePtr{0};
  };
  std::vector<DevicePtr> in, out, direct;
  std::vector<std::vector<int64_t>> shapes;
  for (const runtime::DeviceTensor& t : inputs) in.push_back(aligned(t));
  for (const runtime::DeviceTensor& t : inputs) shapes.push_back(t.type.staticDims());
  for (const runtime::DeviceTensor& t : outputs) out.push_back(static_cast<DevicePtr>(t.data));
  for (const runtime::DeviceTensor& t : outputs) direct.push_back(aligned(t));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const RunSizes> rs, sizesOf(shapes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CallTable> sized, callsAt(*d, m, *rs));
  RunMemory run(*d, rs->key);
  KILN_RETURN_IF_ERROR(run.open(m.runBytes));
  Addresses at{m, *d, run.base(), *rs, sized.get(), in.data(), direct.data()};
  RunEvents events{drv, {}};
  auto handOver = [&](Stream from, Stream to) -> Status {
    KILN_ASSIGN_OR_RETURN(Event e, events.add());
    KILN_RETURN_IF_ERROR(drv.record(e, from));
    return drv.wait(to, e);
  };
  KILN_RETURN_IF_ERROR(handOver(caller, run.stream()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!in[i])
      KILN_RETURN_IF_ERROR(drv.copyOnDevice(run.base() + static_cast<DevicePtr>(m.inputOffsets[i]),
                                            static_cast<DevicePtr>(inputs[i].data),
                                            tensorBytes(inputs[i].type), run.stream()));
  std::vector<DevicePtr> key = in;  // the graph's addresses and sizes
  key.insert(key.end(), direct.begin(), direct.end());
  for (int64_t size : rs->key) key.push_back(static_cast<DevicePtr>(size));
  KILN_RETURN_IF_ERROR(replayOrIssueAt(*d, m, at, run, key));
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Value* v = m.f->outputs()[o];
    const int64_t bytes = tensorBytes(outputs[o].type);
    const DevicePtr src = at.of(v);
    if (src && src != out[o]) {
      KILN_RETURN_IF_ERROR(drv.copyOnDevice(out[o], src, bytes, run.stream()));
    } else if (!src && v->def()->op() == OpCode::Constant) {
      KILN_RETURN_IF_ERROR(
          drv.copyToDevice(out[o], v->def()->constantData().tensor.bytes(), bytes, run.stream()));
    }
  }
  KILN_RETURN_IF_ERROR(handOver(run.stream(), caller));
  run.succeeded();
  return Status::ok();
}

}  // namespace kiln::codegen::cuda
