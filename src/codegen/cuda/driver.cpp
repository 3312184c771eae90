// The CUDA driver API through dlopen. See driver.h. The one translation unit that includes
// cuda.h (for the entry points' types; nothing links against libcuda).
#include "codegen/cuda/driver.h"

#include <cuda.h>
#include <dlfcn.h>
#include <mutex>

namespace kiln::codegen::cuda {

#define KILN_STR(x) #x
#define KILN_XSTR(x) KILN_STR(x)  // expands cuda.h's aliases (cuMemAlloc -> cuMemAlloc_v2)
// clang-format off
#define KILN_CUDA_API(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuCtxSetCurrent) \
  X(cuGetErrorString) \
  X(cuModuleLoadData) \
  X(cuModuleUnload) \
  X(cuModuleGetFunction) \
  X(cuFuncGetAttribute) \
  X(cuLaunchKernel) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemGetInfo) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) \
  X(cuStreamCreate) \
  X(cuStreamDestroy) \
  X(cuStreamSynchronize) \
  X(cuEventCreate) \
  X(cuEventDestroy) \
  X(cuEventRecord) \
  X(cuEventRecordWithFlags) \
  X(cuStreamWaitEvent) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy)
// clang-format on

struct Driver::Api {
#define KILN_FIELD(fn) decltype(&::fn) fn##_ = nullptr;
  KILN_CUDA_API(KILN_FIELD)
#undef KILN_FIELD
};

struct DriverLoader {
  static StatusOr<Driver*> load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return Status::error("no CUDA driver: cannot load libcuda.so.1 (" + std::string(dlerror()) +
                           "); --backend cuda needs an NVIDIA GPU and its driver");
    auto* api = new Driver::Api();
#define KILN_LOAD(fn)                                                             \
  api->fn##_ = reinterpret_cast<decltype(api->fn##_)>(dlsym(lib, KILN_XSTR(fn))); \
  if (!api->fn##_)                                                                \
    return Status::error(                                                         \
        "the CUDA driver (libcuda.so.1) has no " KILN_XSTR(fn) ": it is "         \
                                                               "older than CUDA 12");
    KILN_CUDA_API(KILN_LOAD)
#undef KILN_LOAD
    auto* d = new Driver();  // lives for the process: modules and memory outlive callers' order
    d->api_ = api;
    KILN_RETURN_IF_ERROR(d->check(api->cuInit_(0), "initializing the CUDA driver"));
    int count = 0;
    KILN_RETURN_IF_ERROR(d->check(api->cuDeviceGetCount_(&count), "counting CUDA devices"));
    if (count == 0) return Status::error("the CUDA driver found no GPU");
    CUdevice dev;
    KILN_RETURN_IF_ERROR(d->check(api->cuDeviceGet_(&dev, 0), "opening CUDA device 0"));
    char name[256] = {};
    KILN_RETURN_IF_ERROR(d->check(api->cuDeviceGetName_(name, sizeof name, dev), "naming it"));
    int major = 0, minor = 0, sms = 0;
    api->cuDeviceGetAttribute_(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    api->cuDeviceGetAttribute_(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    api->cuDeviceGetAttribute_(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    size_t memory = 0;
    api->cuDeviceTotalMem_(&memory, dev);
    api->cuDriverGetVersion_(&d->device_.driverVersion);
    d->device_.name = name;
    d->device_.arch = "sm_" + std::to_string(major) + std::to_string(minor);
    d->device_.sms = sms;
    d->device_.memory = static_cast<int64_t>(memory);
    CUcontext ctx = nullptr;
    KILN_RETURN_IF_ERROR(
        d->check(api->cuDevicePrimaryCtxRetain_(&ctx, dev), "creating the CUDA context"));
    d->context_ = ctx;
    return d;
  }
};

StatusOr<const Driver*> Driver::get() {
  static std::once_flag once;
  static StatusOr<Driver*> driver = Status::error("unset");
  std::call_once(once, [] { driver = DriverLoader::load(); });
  if (!driver.isOk()) return driver.status();
  const Driver* d = *driver;
  KILN_RETURN_IF_ERROR(d->makeCurrent());
  return d;
}

Status Driver::check(int result, const std::string& what) const {
  if (result == CUDA_SUCCESS) return Status::ok();
  const char* msg = nullptr;
  if (api_ && api_->cuGetErrorString_) api_->cuGetErrorString_(static_cast<CUresult>(result), &msg);
  return Status::error(what + ": " + (msg ? msg : "CUDA error " + std::to_string(result)));
}

Status Driver::makeCurrent() const {
  return check(api_->cuCtxSetCurrent_(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
}

StatusOr<GpuModule> Driver::loadModule(const std::string& image) const {
  CUmodule m = nullptr;
  KILN_RETURN_IF_ERROR(check(api_->cuModuleLoadData_(&m, image.data()), "loading the module"));
  return static_cast<GpuModule>(m);
}

void Driver::unloadModule(GpuModule m) const {
  if (m) api_->cuModuleUnload_(static_cast<CUmodule>(m));
}

StatusOr<GpuFunction> Driver::function(GpuModule m, const std::string& name) const {
  CUfunction f = nullptr;
  KILN_RETURN_IF_ERROR(check(api_->cuModuleGetFunction_(&f, static_cast<CUmodule>(m), name.c_str()),
                             "finding kernel " + name));
  return static_cast<GpuFunction>(f);
}

namespace {
StatusOr<int> attribute(const Driver& d, const Driver::Api& api, GpuFunction f,
                        CUfunction_attribute a) {
  int v = 0;
  KILN_RETURN_IF_ERROR(
      d.check(api.cuFuncGetAttribute_(&v, a, static_cast<CUfunction>(f)), "cuFuncGetAttribute"));
  return v;
}
}  // namespace

StatusOr<int> Driver::registers(GpuFunction f) const {
  return attribute(*this, *api_, f, CU_FUNC_ATTRIBUTE_NUM_REGS);
}
StatusOr<int> Driver::sharedBytes(GpuFunction f) const {
  return attribute(*this, *api_, f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
}
StatusOr<int> Driver::localBytes(GpuFunction f) const {
  return attribute(*this, *api_, f, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
}

Status Driver::beginCapture(Stream s) const {
  return check(
      api_->cuStreamBeginCapture_(static_cast<CUstream>(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "starting a CUDA graph capture");
}

StatusOr<GraphExec> Driver::endCapture(Stream s) const {
  CUgraph graph = nullptr;
  KILN_RETURN_IF_ERROR(check(api_->cuStreamEndCapture_(static_cast<CUstream>(s), &graph),
                             "ending a CUDA graph capture"));
  CUgraphExec exec = nullptr;
  Status made =
      check(api_->cuGraphInstantiateWithFlags_(&exec, graph, 0), "instantiating a CUDA graph");
  api_->cuGraphDestroy_(graph);
  KILN_RETURN_IF_ERROR(made);
  return static_cast<GraphExec>(exec);
}

StatusOr<GraphExec> Driver::endCapture(Stream s, const Status& issued) const {
  StatusOr<GraphExec> graph = endCapture(s);
  if (issued) return graph;
  if (graph) destroyGraph(*graph);
  return issued;
}

Status Driver::launchGraph(GraphExec g, Stream s) const {
  return check(api_->cuGraphLaunch_(static_cast<CUgraphExec>(g), static_cast<CUstream>(s)),
               "launching a CUDA graph");
}

void Driver::destroyGraph(GraphExec g) const {
  if (g) api_->cuGraphExecDestroy_(static_cast<CUgraphExec>(g));
}

std::string Driver::describeFunction(GpuFunction f) const {
  StatusOr<int> regs = registers(f), shared = sharedBytes(f), local = localBytes(f);
  if (!regs || !shared || !local) return "attributes unknown";
  std::string s = std::to_string(*regs) + " registers";
  if (*shared) s += ", " + std::to_string(*shared) + " B shared";
  if (*local) s += ", " + std::to_string(*local) + " B local (spills)";
  return s;
}

Status Driver::launch(GpuFunction f, int64_t grid, int64_t block, Stream s, void** args) const {
  if (grid < 1 || grid > INT32_MAX || block < 1 || block > 1024)
    return Status::error("a launch of " + std::to_string(grid) + " blocks of " +
                         std::to_string(block) + " threads is out of the device's range");
  return check(api_->cuLaunchKernel_(static_cast<CUfunction>(f), static_cast<unsigned>(grid), 1, 1,
                                     static_cast<unsigned>(block), 1, 1, 0,
                                     static_cast<CUstream>(s), args, nullptr),
               "launching a kernel");
}

StatusOr<DevicePtr> Driver::allocate(int64_t bytes) const {
  CUdeviceptr p = 0;
  CUresult r = api_->cuMemAlloc_(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (r == CUDA_SUCCESS) return static_cast<DevicePtr>(p);
  size_t free = 0, total = 0;
  api_->cuMemGetInfo_(&free, &total);
  return check(r, "allocating " + std::to_string(bytes) + " bytes of device memory (" +
                      std::to_string(free) + " of " + std::to_string(total) + " bytes free)");
}

void Driver::free(DevicePtr p) const {
  if (p) api_->cuMemFree_(static_cast<CUdeviceptr>(p));
}

Status Driver::copyToDevice(DevicePtr dst, const void* src, int64_t bytes, Stream s) const {
  if (bytes == 0) return Status::ok();
  return check(api_->cuMemcpyHtoDAsync_(static_cast<CUdeviceptr>(dst), src,
                                        static_cast<size_t>(bytes), static_cast<CUstream>(s)),
               "copying to the device");
}

Status Driver::copyToHost(void* dst, DevicePtr src, int64_t bytes, Stream s) const {
  if (bytes == 0) return Status::ok();
  return check(api_->cuMemcpyDtoHAsync_(dst, static_cast<CUdeviceptr>(src),
                                        static_cast<size_t>(bytes), static_cast<CUstream>(s)),
               "copying to the host");
}

Status Driver::copyOnDevice(DevicePtr dst, DevicePtr src, int64_t bytes, Stream s) const {
  if (bytes == 0) return Status::ok();
  return check(api_->cuMemcpyDtoDAsync_(static_cast<CUdeviceptr>(dst),
                                        static_cast<CUdeviceptr>(src), static_cast<size_t>(bytes),
                                        static_cast<CUstream>(s)),
               "copying on the device");
}

StatusOr<Stream> Driver::createStream() const {
  CUstream s = nullptr;
  KILN_RETURN_IF_ERROR(check(api_->cuStreamCreate_(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return static_cast<Stream>(s);
}

void Driver::destroyStream(Stream s) const {
  if (s) api_->cuStreamDestroy_(static_cast<CUstream>(s));
}

Status Driver::synchronize(Stream s) const {
  return check(api_->cuStreamSynchronize_(static_cast<CUstream>(s)), "running on the device");
}

StatusOr<Event> Driver::createEvent() const {
  CUevent e = nullptr;
  KILN_RETURN_IF_ERROR(check(api_->cuEventCreate_(&e, CU_EVENT_DEFAULT), "cuEventCreate"));
  return static_cast<Event>(e);
}

void Driver::destroyEvent(Event e) const {
  if (e) api_->cuEventDestroy_(static_cast<CUevent>(e));
}

Status Driver::record(Event e, Stream s) const {
  return check(api_->cuEventRecord_(static_cast<CUevent>(e), static_cast<CUstream>(s)),
               "cuEventRecord");
}

Status Driver::recordInGraph(Event e, Stream s) const {
  return check(api_->cuEventRecordWithFlags_(static_cast<CUevent>(e), static_cast<CUstream>(s),
                                             CU_EVENT_RECORD_EXTERNAL),
               "cuEventRecordWithFlags");
}

Status Driver::wait(Stream s, Event e) const {
  return check(api_->cuStreamWaitEvent_(static_cast<CUstream>(s), static_cast<CUevent>(e), 0),
               "cuStreamWaitEvent");
}

StatusOr<float> Driver::elapsed(Event start, Event end) const {
  KILN_RETURN_IF_ERROR(
      check(api_->cuEventSynchronize_(static_cast<CUevent>(end)), "running on the device"));
  float ms = 0;
  KILN_RETURN_IF_ERROR(
      check(api_->cuEventElapsedTime_(&ms, static_cast<CUevent>(start), static_cast<CUevent>(end)),
            "cuEventElapsedTime"));
  return ms;
}

}  // namespace kiln::codegen::cuda
