// NVRTC. See nvrtc.h.
#include "codegen/cuda/nvrtc.h"

#include <memory>
#include <nvrtc.h>
#include <vector>

#include "codegen/cuda/dynamic_library.h"

namespace kiln::codegen::cuda {
namespace {

// NVRTC through dlopen, loaded on its first use (dynamic_library.h says why).
// clang-format off
#define KILN_NVRTC_API(X) \
  X(nvrtcCompileProgram) \
  X(nvrtcCreateProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetErrorString) \
  X(nvrtcGetProgramLog) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcVersion)
// clang-format on

struct NvrtcApi {
#define KILN_FIELD(fn) decltype(&::fn) fn = nullptr;
  KILN_NVRTC_API(KILN_FIELD)
#undef KILN_FIELD
};

StatusOr<const NvrtcApi*> loadNvrtc() {
  KILN_ASSIGN_OR_RETURN(void* lib, openLibrary({KILN_NVRTC_LIBRARY}, "NVRTC"));
  auto* api = new NvrtcApi();  // lives for the process, as the library does
#define KILN_LOAD(fn) KILN_RETURN_IF_ERROR(loadFunction(lib, #fn, api->fn, "NVRTC"));
  KILN_NVRTC_API(KILN_LOAD)
#undef KILN_LOAD
  return api;
}

// The loaded API, or why not (loaded once).
const StatusOr<const NvrtcApi*>& nvrtcApi() {
  static const StatusOr<const NvrtcApi*> api = loadNvrtc();
  return api;
}

// The API; only after nvrtcApi() succeeded.
const NvrtcApi& nvrtc() { return **nvrtcApi(); }

Status check(nvrtcResult r, const std::string& what) {
  if (r == NVRTC_SUCCESS) return Status::ok();
  return Status::error(what + ": " + nvrtc().nvrtcGetErrorString(r));
}

std::string programLog(nvrtcProgram p) {
  size_t size = 0;
  if (nvrtc().nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  nvrtc().nvrtcGetProgramLog(p, log.data());
  log.resize(size - 1);
  return log;
}

// One line: the first errors of NVRTC's log (the whole log is in --dump-dir's kernels.cu
// compile when asked for).
std::string failure(const std::string& name, const std::string& arch, const std::string& log) {
  std::string errors;
  int n = 0;
  for (size_t at = 0; at < log.size() && n < 3;) {
    size_t nl = std::min(log.find('\n', at), log.size());
    std::string line = log.substr(at, nl - at);
    if (line.find("error") != std::string::npos) {
      errors += (n++ ? "; " : "") + line;
    }
    at = nl + 1;
  }
  return "NVRTC could not compile the generated CUDA C++ (" + name + ") for " + arch + ": " +
         (errors.empty() ? log : errors);
}

}  // namespace

StatusOr<CompiledModule> compileCuda(const std::string& source, const std::string& name,
                                     const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5)
    return Status::error("'" + arch + "' is not a GPU architecture (sm_90, ...)");
  KILN_RETURN_IF_ERROR(nvrtcApi().status());
  nvrtcProgram prog = nullptr;
  KILN_RETURN_IF_ERROR(
      check(nvrtc().nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr),
            "NVRTC"));
  std::unique_ptr<_nvrtcProgram, void (*)(_nvrtcProgram*)> owner(
      prog, [](_nvrtcProgram* p) { nvrtc().nvrtcDestroyProgram(&p); });
  const std::string archFlag = "--gpu-architecture=" + arch;
  // -w: the prelude's integer helpers compare unsigned values with 0 in dead branches.
  std::vector<const char*> options = {archFlag.c_str(), "--std=c++17", "-w"};
  nvrtcResult r =
      nvrtc().nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  CompiledModule out;
  out.arch = arch;
  out.log = programLog(prog);
  if (r != NVRTC_SUCCESS) return Status::error(failure(name, arch, out.log));
  size_t size = 0;
  KILN_RETURN_IF_ERROR(check(nvrtc().nvrtcGetCUBINSize(prog, &size), "NVRTC"));
  out.cubin.resize(size);
  KILN_RETURN_IF_ERROR(check(nvrtc().nvrtcGetCUBIN(prog, out.cubin.data()), "NVRTC"));
  int major = 0, minor = 0;
  nvrtc().nvrtcVersion(&major, &minor);
  out.cudaVersion = major * 1000 + minor * 10;
  return out;
}

Status checkDriverFor(const CompiledModule& code, int driverVersion) {
  if (driverVersion >= code.cudaVersion) return Status::ok();
  auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return Status::error("the program was compiled by NVRTC " + text(code.cudaVersion) +
                       ", this GPU's driver supports CUDA " + text(driverVersion) +
                       ": update the driver, or compile the model with that CUDA's toolkit");
}

std::string nvrtcVersionString() {
  if (!nvrtcApi()) return "no NVRTC (" + nvrtcApi().status().message() + ")";
  int major = 0, minor = 0;
  nvrtc().nvrtcVersion(&major, &minor);
  return "NVRTC " + std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace kiln::codegen::cuda
