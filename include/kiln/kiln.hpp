// Kiln's C++ API: compile an ONNX file or a graph-IR module into an Executable and run it.
//
//   kiln::CompileOptions options;
//   options.threads = 2;
//   auto exe = kiln::compileOnnxFile("model.onnx", options);
//   if (!exe) { std::cerr << exe.status().str(); return 1; }
//   auto outputs = (*exe)->run(inputs);   // std::vector<kiln::Tensor>, thread-safe
//
// The C API (kiln/kiln.h) mirrors it for embedding.
#pragma once

#include <memory>
#include <string>

#include "runtime/executable.h"

namespace kiln {

using runtime::CompileOptions;
using runtime::Executable;

// Imports the ONNX model at `path` and compiles it (options.dims binds its symbolic dims). With
// options.cacheDir the compile cache is keyed by a hash of the file's bytes.
StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options = {});

// Loads a .kiln artifact (`kiln compile`, Executable::serialize) without compiling; only
// options.threads applies. Corrupted or mismatched artifacts are refused (Executable::load).
StatusOr<std::unique_ptr<Executable>> loadArtifact(const std::string& path,
                                                   const CompileOptions& options = {});

// Compiles a graph-IR module (from the Builder or parseModule).
StatusOr<std::unique_ptr<Executable>> compileModule(std::unique_ptr<Module> module,
                                                    const CompileOptions& options = {});

}  // namespace kiln
