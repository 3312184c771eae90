// Toolkit libraries opened with dlopen on first use instead of linked: a linked library's
// relocated pages are resident in every process (cuBLASLt's about 150 MB, NVRTC's about 30),
// CPU runs included. Each user lists the functions it calls (an X-macro) and loads them once.
#pragma once

#include <dlfcn.h>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::codegen::cuda {

// The first of `paths` that opens (kept open for the process), or an error naming `what` and
// the loader's reason.
inline StatusOr<void*> openLibrary(const std::vector<std::string>& paths, const std::string& what) {
  std::string why;
  for (const std::string& p : paths) {
    if (void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    why = dlerror();
  }
  return Status::error(what + ": cannot load " + paths.front() + " (" + why + ")");
}

// Function `name` of `lib` as `fn`, or an error naming it.
template <typename F>
Status loadFunction(void* lib, const char* name, F& fn, const std::string& what) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) return Status::error(what + " has no " + name);
  return Status::ok();
}

}  // namespace kiln::codegen::cuda
