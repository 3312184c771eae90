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
using runtime::ModuleSource;

// The model file at `path` ("onnx" or "kir" `format`) as an executable's source for recompiles
// (Executable::run with other sizes of its symbolic dims): it is imported or parsed again then.
// With `key` (runtime/source_key.h), a file that changed since is refused.
ModuleSource fileSource(const std::string& format, const std::string& path,
                        const std::string& key = "");

// Imports the ONNX model at `path` and compiles it (options.dims binds its symbolic dims). With
// options.cacheDir the compile cache is keyed by a hash of the file's bytes. A run with other
// sizes of its symbolic dims imports the file again and compiles it for them
// (options.recompile; Executable::run).
StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options = {});

// Loads a .kiln artifact (`kiln compile`, Executable::serialize) without compiling; only
// options.threads, recompile and cacheDir apply. Corrupted or mismatched artifacts are refused
// (Executable::load). An artifact that records its source file recompiles from it for other
// sizes of its symbolic dims (through the cache of options.cacheDir).
StatusOr<std::unique_ptr<Executable>> loadArtifact(const std::string& path,
                                                   const CompileOptions& options = {});

// Compiles a graph-IR module (from the Builder or parseModule). `source` gives the module again
// for recompiles; without one, a module with symbolic input dims is kept as a copy (its
// constants included) while options.recompile is set (Executable::compile).
StatusOr<std::unique_ptr<Executable>>
compileModule(std::unique_ptr<Module> module, const CompileOptions& options = {},
              std::optional<ModuleSource> source = std::nullopt);

}  // namespace kiln
