// Loading a program for the kiln tool: the one place that chooses a frontend by file extension.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "runtime/executable.h"
#include "support/mapped_file.h"

namespace kiln::cli {

struct LoadedProgram {
  std::unique_ptr<Module> module;  // null for an artifact
  std::string format;              // "kir", "onnx" or "kiln" (an artifact of `kiln compile`)
  double loadMs = 0;               // read + parse (or import) + verify
  MappedFile artifact;             // a .kiln artifact, mapped
  // What identifies the source for the compile cache: format and a hash of the file's bytes.
  std::string sourceKey;
  // A compile-cache hit (loadProgram's `cache`): the executable, with no module imported.
  std::unique_ptr<runtime::Executable> cached;
};

// Reads, parses and verifies the program at `path` (an artifact is only read: Executable::load
// checks it). Errors carry the file (and line:col where the frontend knows it). With `cache`
// (compile options with a cache directory), a .kir or ONNX program whose compile the cache
// holds is not parsed or imported: `cached` holds the executable instead of `module`.
StatusOr<LoadedProgram> loadProgram(const std::string& path,
                                    const runtime::CompileOptions* cache = nullptr);

}  // namespace kiln::cli
