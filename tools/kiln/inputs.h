// Binding a program's inputs from .npy files, --dim values and --random-inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"
#include "run_options.h"

namespace kiln::cli {

struct BoundInput {
  std::string name;  // the parameter's name
  Tensor value;
  std::string source;  // the .npy path, or "random"
};

// The display name of parameter i: its name in the program, or arg<i> when it has none.
std::string parameterName(const Function& f, size_t i);

struct BoundInputs {
  std::vector<BoundInput> inputs;          // one per parameter, in parameter order
  std::map<std::string, int64_t> symbols;  // the size of each symbolic dim of the parameters
};

// The file given for each of the inputs `names` ("" where none is): named arguments by name,
// then each positional one takes the next input not named. Errors: unknown or repeated names,
// more files than inputs.
StatusOr<std::vector<std::string>> assignFiles(const std::vector<std::string>& names,
                                               const std::vector<InputArg>& args);

// A value for every parameter of `f`. Errors name the input and the cause:
// unknown or repeated names, missing inputs, unreadable files, dtype/shape mismatches
// ("input 'x': expected f32[2,3], got f64[2,3] from x.npy"), conflicting or missing symbol sizes.
// `read` holds files read already (by path), which are not read again.
StatusOr<BoundInputs> bindInputs(const Function& f, const RunOptions& o,
                                 const std::map<std::string, Tensor>* read = nullptr);
// The same for inputs of these names and types (an executable's Executable::inputTypes());
// symbols no file or --dim sizes take their size from `defaults` (the compiled sizes).
StatusOr<BoundInputs> bindInputs(const std::vector<std::string>& names,
                                 const std::vector<TensorType>& types, const RunOptions& o,
                                 const std::map<std::string, Tensor>* read = nullptr,
                                 const SymbolBindings& defaults = {});

}  // namespace kiln::cli
