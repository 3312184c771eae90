// Loading a program for the kiln tool: the one place that chooses a frontend by file extension.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inputs.h"
#include "ir/ir.h"
#include "run_options.h"
#include "runtime/executable.h"
#include "support/mapped_file.h"

namespace kiln::cli {

// An ONNX graph input that the importer needed as a constant (a Reshape's shape, pads, axes, a
// count) and that was bound to the value of its --input file: the module holds the value.
struct BoundValue {
  std::string name;
  std::string file;
  Tensor value;
};

struct LoadedProgram {
  std::unique_ptr<Module> module;  // null for an artifact
  std::string format;              // "kir", "onnx" or "kiln" (an artifact of `kiln compile`)
  double loadMs = 0;               // read + parse (or import) + verify
  MappedFile artifact;             // a .kiln artifact, mapped
  // What identifies the source for the compile cache: format and a hash of the file's bytes.
  std::string sourceKey;
  // A compile-cache hit (loadProgram's `cache`): the executable, with no module imported.
  std::unique_ptr<runtime::Executable> cached;
  // ONNX inputs bound to their values while importing (their files are part of `sourceKey`).
  std::vector<BoundValue> bound;
  // When the model was imported with the input files' values: the --input arguments of the
  // inputs left as parameters, each named, and the files read (by path).
  std::optional<std::vector<InputArg>> parameterInputs;
  std::map<std::string, Tensor> read;
  std::map<std::string, int64_t> fixedDims;  // named dims the input files made static
};

// Reads, parses and verifies the program at `path` (an artifact is only read: Executable::load
// checks it). Errors carry the file (and line:col where the frontend knows it). With `cache`
// (compile options with a cache directory), a .kir or ONNX program whose compile the cache
// holds is not parsed or imported: `cached` holds the executable instead of `module`.
// An ONNX model that does not import as it is is imported again with the values of the `inputs`
// files (onnx::importOptionsForInputs, as `kiln conformance` does with each data set): inputs
// it needs as constants are bound to them, and the named dims of the given inputs take their
// sizes. A needed input without a file is an error naming it and the --input option. `inputs`
// is null for a command that takes no --input (explain, compile): the model imports as it is.
StatusOr<LoadedProgram> loadProgram(const std::string& path,
                                    const runtime::CompileOptions* cache = nullptr,
                                    const std::vector<InputArg>* inputs = nullptr);

// The inputs of an executable loaded from an artifact or the compile cache: bound against its
// input types (Executable::inputTypes: a symbolic dim of the source may take another size, by a
// file or --dim; the compiled size otherwise). Makes the source file the artifact records
// readable for the recompile other sizes need.
StatusOr<BoundInputs> bindExecutableInputs(runtime::Executable& exe, const RunOptions& o);

// The source of a program loaded from a file, for the executable compiled from it: its file
// when imported as it is (an artifact records it, and recompiles from it), else none.
runtime::ModuleSource sourceOf(const std::string& path, const LoadedProgram& p);

// "input 'shape' (i64[2], shape.npy) is bound to its value: ...", a line of the report.
std::string describeBound(const BoundValue& b);

// `o` with the --input arguments left for the program's parameters (`p.parameterInputs` when
// the model was imported with the input files' values), and without the --dim sizes the files
// fixed already (an error when they disagree).
StatusOr<RunOptions> forParameters(const RunOptions& o, const LoadedProgram& p);

}  // namespace kiln::cli
