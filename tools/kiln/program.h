// Loading a program for the kiln tool: the one place that chooses a frontend by file extension.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"

namespace kiln::cli {

struct LoadedProgram {
  std::unique_ptr<Module> module;
  std::string format;  // "kir" or "onnx"
  double loadMs = 0;   // read + parse (or import) + verify
};

// Reads, parses and verifies the program at `path`. Errors carry the file (and line:col where
// the frontend knows it).
StatusOr<LoadedProgram> loadProgram(const std::string& path);

}  // namespace kiln::cli
