// Loading a program for the kiln tool: the one place that chooses a frontend by file extension.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"

namespace kiln::cli {

struct LoadedProgram {
  std::unique_ptr<Module> module;  // null for an artifact
  std::string format;              // "kir", "onnx" or "kiln" (an artifact of `kiln compile`)
  double loadMs = 0;               // read + parse (or import) + verify
  std::string artifact;            // the bytes of a .kiln artifact
  // What identifies the source for the compile cache: format and a hash of the file's bytes.
  std::string sourceKey;
};

// Reads, parses and verifies the program at `path` (an artifact is only read: Executable::load
// checks it). Errors carry the file (and line:col where the frontend knows it).
StatusOr<LoadedProgram> loadProgram(const std::string& path);

}  // namespace kiln::cli
