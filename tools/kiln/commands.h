// The subcommands of the kiln tool and the one way they report an error.
#pragma once

#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::cli {

inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Prints `s` as one line, "kiln: error: [file:line:col: ]message", on stderr; returns exitCode.
int reportError(const Status& s, int exitCode);

// `kiln run ARGS...` (the arguments after "run"); returns the exit status.
int runCommand(const std::vector<std::string>& args);
// `kiln import MODEL.onnx [-o OUT.kir]` and `kiln check MODEL.onnx`.
int importCommand(const std::vector<std::string>& args);
int checkCommand(const std::vector<std::string>& args);
// `kiln bench PROGRAM [options]`: compile time by phase and run latency.
int benchCommand(const std::vector<std::string>& args);
// `kiln explain PROGRAM [options]`: the fusion plan of the optimised program.
int explainCommand(const std::vector<std::string>& args);
// `kiln compile PROGRAM -o OUT.kiln [options]`: an ahead-of-time artifact.
int compileCommand(const std::vector<std::string>& args);

}  // namespace kiln::cli
