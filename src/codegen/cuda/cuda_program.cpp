// The cuda target's program. See cuda_program.h.
#include "codegen/cuda/cuda_program.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "compiler/compile.h"
#include "support/hash.h"

namespace kiln::codegen::cuda {

using runtime::Slot;
using runtime::Storage;

namespace {

int64_t alignUp(int64_t n) { return (n + kCudaAlignment - 1) / kCudaAlignment * kCudaAlignment; }

int64_t bytesOf(const Value* v) {
  return v->type().numElements().value_or(0) * static_cast<int64_t>(dtypeSize(v->type().dtype()));
}

}  // namespace

// The device's copy of the program: its module, functions and weights, and the memory and
// streams of finished runs, which the next runs reuse.
struct CudaProgram::Device {
  const Driver* driver = nullptr;
  GpuModule module = nullptr;
  std::vector<std::vector<GpuFunction>> functions;  // per kernel, per launch (null: a call)
  // Per kernel, per launch: a library call's product and its arguments' buffer indices.
  std::vector<std::vector<std::unique_ptr<Gemm>>> gemms;
  std::vector<std::vector<std::vector<size_t>>> callArgs;
  DevicePtr weights = 0;
  std::map<const Value*, int64_t> weightOffsets;
  std::mutex mu;
  std::vector<std::pair<DevicePtr, Stream>> free;  // run memory and its stream

  ~Device() {
    if (!driver) return;
    if (!driver->makeCurrent()) return;
    for (auto& [memory, stream] : free) {
      driver->free(memory);
      driver->destroyStream(stream);
    }
    driver->free(weights);
    driver->unloadModule(module);
  }
};

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
    at += alignUp(bytesOf(m.f->parameter(i)));
  }
  for (const Value* o : m.f->outputs()) {
    m.outputOffsets.push_back(at);
    at += alignUp(bytesOf(o));
  }
  m.workspaceOffset = -1;
  for (const std::vector<Launch>& ls : m.source.launches)
    for (const Launch& l : ls)
      if (l.call) m.workspaceOffset = at;
  if (m.workspaceOffset >= 0) at += kGemmWorkspace;
  m.runBytes = at;
}

namespace {

// The product of a library call of `k` and its arguments' buffer indices.
StatusOr<std::pair<std::unique_ptr<Gemm>, std::vector<size_t>>>
prepareCall(const kernel::Kernel& k, const kernel::Stmt& call, bool tf32) {
  std::string why;
  std::optional<GemmShape> shape = gemmShape(k, call, &why);
  if (shape) shape->tf32 = tf32 && shape->type == DType::F32;
  if (!shape || call.args.size() != 3 || !call.postOps.empty())
    return Status::error("kernel " + k.name + ": library call " + call.callee +
                         " has no GPU kernel (" + (why.empty() ? "post-ops" : why) + ")");
  std::vector<size_t> args;
  for (const std::string& a : call.args)
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (k.buffers[b].name == a) args.push_back(b);
  if (args.size() != 3) return Status::error("kernel " + k.name + ": a call's buffers are missing");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Gemm> gemm, Gemm::create(*shape));
  return std::make_pair(std::move(gemm), std::move(args));
}

}  // namespace

// Loads the module and uploads the weights, once.
StatusOr<std::shared_ptr<CudaProgram::Device>> CudaProgram::device() const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(const Driver* driver, Driver::get());
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.device) return m.device;
  if (driver->device().arch != m.code.arch)
    return Status::error("the program was compiled for " + m.code.arch + ", this GPU (" +
                         driver->device().name + ") is " + driver->device().arch +
                         ": compile it again with --cuda-arch " + driver->device().arch);
  auto d = std::make_shared<Device>();
  d->driver = driver;
  KILN_ASSIGN_OR_RETURN(d->module, driver->loadModule(m.code.cubin));
  for (size_t i = 0; i < m.source.launches.size(); ++i) {
    d->functions.emplace_back();
    d->gemms.emplace_back();
    d->callArgs.emplace_back();
    for (const Launch& l : m.source.launches[i]) {
      GpuFunction fn = nullptr;
      std::unique_ptr<Gemm> gemm;
      std::vector<size_t> args;
      if (!l.call) {
        KILN_ASSIGN_OR_RETURN(fn, driver->function(d->module, l.function));
      } else {
        KILN_ASSIGN_OR_RETURN(std::tie(gemm, args),
                              prepareCall(m.kernels[i], *l.call, m.options.precision == "tf32"));
      }
      d->functions.back().push_back(fn);
      d->gemms.back().push_back(std::move(gemm));
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

namespace {

// One run's device memory and stream: a finished run's, or new ones; back to the device's free
// list when the run ends well, freed when it did not (work may still be in flight).
class RunMemory {
 public:
  explicit RunMemory(CudaProgram::Device& d) : d_(d) {}
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;
  ~RunMemory() {
    if (!base_ && !stream_) return;
    if (ok_) {
      std::lock_guard<std::mutex> lock(d_.mu);
      d_.free.emplace_back(base_, stream_);
      return;
    }
    d_.driver->synchronize(stream_);
    d_.driver->free(base_);
    d_.driver->destroyStream(stream_);
  }

  Status open(int64_t bytes) {
    {
      std::lock_guard<std::mutex> lock(d_.mu);
      if (!d_.free.empty()) {
        std::tie(base_, stream_) = d_.free.back();
        d_.free.pop_back();
        return Status::ok();
      }
    }
    KILN_ASSIGN_OR_RETURN(stream_, d_.driver->createStream());
    KILN_ASSIGN_OR_RETURN(base_, d_.driver->allocate(bytes));
    return Status::ok();
  }
  DevicePtr base() const { return base_; }
  Stream stream() const { return stream_; }
  void succeeded() { ok_ = true; }

 private:
  CudaProgram::Device& d_;
  DevicePtr base_ = 0;
  Stream stream_ = nullptr;
  bool ok_ = false;
};

// Where each value of one run lies on the device.
struct Addresses {
  const CudaProgram::Impl& m;
  const CudaProgram::Device& d;
  DevicePtr base;

  // 0 when the value has no device copy (a constant or parameter no kernel reads).
  DevicePtr of(const Value* v) const {
    auto it = m.buffers.values.find(v);
    if (it == m.buffers.values.end()) return 0;
    const Slot& s = it->second;
    const auto at = [&](int64_t offset) { return base + static_cast<DevicePtr>(offset); };
    switch (s.storage) {
      case Storage::Parameter: return at(m.inputOffsets[static_cast<size_t>(s.offset)]);
      case Storage::Constant: return d.weights + static_cast<DevicePtr>(d.weightOffsets.at(v));
      case Storage::Output: return at(m.outputOffsets[static_cast<size_t>(s.offset)]);
      case Storage::Arena: return at(s.offset);
      case Storage::Unstored: return 0;
    }
    return 0;
  }

  void kernel(size_t i, std::vector<DevicePtr>& ptrs) const {
    ptrs.clear();
    size_t temp = 0;
    for (const kernel::Buffer& b : m.kernels[i].buffers) {
      if (b.role == kernel::BufferRole::Temp)
        ptrs.push_back(base + static_cast<DevicePtr>(m.buffers.temps[i][temp++]));
      else ptrs.push_back(of(b.value));
    }
  }
};

}  // namespace

Status CudaProgram::runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* kernelMs) const {
  const Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Device> d, device());
  const Driver& drv = *d->driver;
  runtime::prepareOutputs(*m.f, outputs);
  RunMemory run(*d);
  KILN_RETURN_IF_ERROR(run.open(m.runBytes));
  const Addresses at{m, *d, run.base()};
  for (size_t i = 0; i < inputs.size() && i < m.inputOffsets.size(); ++i)
    KILN_RETURN_IF_ERROR(
        drv.copyToDevice(run.base() + static_cast<DevicePtr>(m.inputOffsets[i]), inputs[i].bytes(),
                         static_cast<int64_t>(inputs[i].byteSize()), run.stream()));
  std::vector<Event> events;
  struct EventsFree {
    const Driver& drv;
    std::vector<Event>& events;
    ~EventsFree() {
      for (Event e : events) drv.destroyEvent(e);
    }
  } eventsFree{drv, events};
  auto mark = [&]() -> Status {
    if (!kernelMs) return Status::ok();
    KILN_ASSIGN_OR_RETURN(Event e, drv.createEvent());
    events.push_back(e);
    return drv.record(e, run.stream());
  };
  KILN_RETURN_IF_ERROR(mark());
  std::vector<DevicePtr> ptrs;
  std::vector<void*> args;
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    at.kernel(i, ptrs);
    args.clear();
    for (DevicePtr& p : ptrs) args.push_back(&p);
    const std::vector<Launch>& launches = m.source.launches[i];
    for (size_t j = 0; j < launches.size(); ++j) {
      Status launched = Status::ok();
      if (const Gemm* gemm = d->gemms[i][j].get()) {
        const std::vector<size_t>& a = d->callArgs[i][j];
        launched = gemm->run(ptrs[a[0]], ptrs[a[1]], ptrs[a[2]],
                             run.base() + static_cast<DevicePtr>(m.workspaceOffset), run.stream());
      } else {
        launched = drv.launch(d->functions[i][j], launches[j].grid, launches[j].block, run.stream(),
                              args.data());
      }
      if (!launched) return launched.prefix("kernel " + m.kernels[i].name);
    }
    KILN_RETURN_IF_ERROR(mark());
  }
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
  KILN_RETURN_IF_ERROR(drv.synchronize(run.stream()));
  if (kernelMs) {
    kernelMs->assign(m.kernels.size(), 0.0);
    for (size_t i = 0; i < m.kernels.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(float ms, drv.elapsed(events[i], events[i + 1]));
      (*kernelMs)[i] = ms;
    }
  }
  run.succeeded();
  return Status::ok();
}

// Kernels with generated code (each one or more launches; identical kernels are not shared yet).
int CudaProgram::uniqueKernels() const {
  int n = 0;
  for (const auto& ls : impl_->source.launches)
    n += std::any_of(ls.begin(), ls.end(), [](const Launch& l) { return !l.call; }) ? 1 : 0;
  return n;
}

std::string CudaProgram::libraryCalls() const {
  int n = 0;
  for (const auto& ls : impl_->source.launches)
    for (const Launch& l : ls) n += l.call ? 1 : 0;
  if (n == 0) return "none (Kiln's own CUDA kernels)";
  return "cuBLASLt: " + std::to_string(n) + " dot_general";
}

// A line per launch: its function with grid and block, or its library call's product.
std::string CudaProgram::libraryCallDetails() const {
  const Impl& m = *impl_;
  std::string text;
  for (size_t i = 0; i < m.kernels.size(); ++i)
    for (const Launch& l : m.source.launches[i]) {
      text += m.kernels[i].name + ": ";
      if (l.call) {
        std::optional<GemmShape> g = gemmShape(m.kernels[i], *l.call, nullptr);
        text += "cuBLASLt " + (g ? g->str() : std::string("?")) + "\n";
      } else {
        text += l.function + " grid " + std::to_string(l.grid) + " block " +
                std::to_string(l.block) + "\n";
      }
    }
  return text;
}

std::string CudaProgram::sourceHash() const { return hex64(hash64(impl_->source.source)); }

void CudaProgram::artifactParts(runtime::ArtifactParts& parts) const {
  const Impl& m = *impl_;
  PrintOptions po;
  po.blob = &parts.blob;
  parts.add("module", printModule(*m.module, po));
  parts.sections["blob"] = parts.blob.pieces;
  parts.add("cuda.arch", m.code.arch);
  parts.add("cuda.source", sourceHash());
  parts.sections["cuda.cubin"].push_back(m.code.cubin);
}

}  // namespace kiln::codegen::cuda
