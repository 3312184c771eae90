// Program loading by extension: .kir through the text parser, .onnx through the ONNX importer,
// .kiln (an artifact) read for runtime::Executable::load.
// A new frontend is one more branch in loadProgram().
#include "program.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/import_options.h"
#include "inputs.h"
#include "ir/text/text.h"
#include "kiln/kiln.hpp"
#include "runtime/source_key.h"
#include "support/hash.h"
#include "support/mapped_file.h"
#include "support/npy.h"

namespace kiln::cli {
namespace {

StatusOr<std::string> readTextFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::error("is a directory", Location{path, 0, 0});
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string why = std::filesystem::exists(path, ec) ? "cannot read file" : "no such file";
    return Status::error(why, Location{path, 0, 0});
  }
  std::string data;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    data.resize(static_cast<size_t>(size));
    in.read(data.data(), size);
  }
  if (in.bad() || (size > 0 && in.gcount() != size))
    return Status::error("cannot read file", Location{path, 0, 0});
  return data;
}

// `s` with, for each input the importer needed and has no value for, how to give one.
Status withValueHint(const Status& s, const onnx::ImportReport& report,
                     const std::map<std::string, Tensor>& given) {
  std::string names, flags;
  for (const std::string& n : report.neededInputs) {
    if (given.count(n)) continue;
    names += (names.empty() ? "'" : ", '") + n + "'";
    flags += (flags.empty() ? "" : " ") + ("--input " + n + "=FILE.npy");
  }
  if (names.empty()) return s;
  return Status::error(s.message() + "; give the value of input " + names + " with " + flags +
                           " (the program is then compiled for that value)",
                       s.location());
}

// What identifies the inputs an import used: each given input's name and type, and the bytes
// of the bound ones (the module holds them), for the compile cache's key.
std::string inputsKey(const std::map<std::string, Tensor>& given,
                      const std::vector<BoundValue>& bound) {
  std::string text;
  for (const auto& [name, t] : given) text += name + ":" + t.type().str() + ";";
  Hash64 h(hash64(text));
  for (const BoundValue& b : bound)
    h.update(std::string_view(reinterpret_cast<const char*>(b.value.bytes()), b.value.byteSize()));
  return " inputs " + hex64(h.finish());
}

// Imports the ONNX model at `path`; when that fails and input files are given, imports it again
// with their values (loadProgram says how). `args` is null for a command without --input.
StatusOr<std::unique_ptr<Module>> importOnnx(const std::string& path,
                                             const std::vector<InputArg>* args, LoadedProgram& p) {
  onnx::ImportReport report;
  auto m = onnx::importModelFile(path, onnx::ImportOptions{}, &report);
  if (m || !args) return m;
  if (args->empty()) return withValueHint(m.status(), report, {});
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, onnx::graphInputNames(path));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> files, assignFiles(names, *args));
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < names.size(); ++i) {
    if (files[i].empty()) continue;
    StatusOr<Tensor> t = readNpy(files[i]);
    if (!t)
      return Status::error("input '" + names[i] + "': " + files[i] + ": " + t.status().message());
    values[names[i]] = p.read[files[i]] = std::move(t).value();
  }
  KILN_ASSIGN_OR_RETURN(onnx::ImportOptions io, onnx::importOptionsForInputs(path, values));
  p.fixedDims = io.dimValues;
  onnx::ImportReport again;
  m = onnx::importModelFile(path, io, &again);
  if (!m) return withValueHint(m.status(), again, values);
  p.parameterInputs.emplace();
  for (size_t i = 0; i < names.size(); ++i) {
    if (again.boundInputs.count(names[i]))
      p.bound.push_back({names[i], files[i], values[names[i]]});
    else if (!files[i].empty()) p.parameterInputs->push_back({names[i], files[i]});
  }
  p.sourceKey += inputsKey(values, p.bound);
  return m;
}

}  // namespace

StatusOr<BoundInputs> bindExecutableInputs(runtime::Executable& exe, const RunOptions& o) {
  const Function& f = exe.function();
  std::vector<std::string> names;
  for (size_t i = 0; i < f.numParameters(); ++i) names.push_back(parameterName(f, i));
  SymbolBindings compiled;
  for (const runtime::DimGuard& g : exe.guards().dims) compiled[g.symbol] = g.value;
  const runtime::ModuleSource& recorded = exe.source();
  if (!recorded.path.empty() && !recorded.load)
    exe.setSource(kiln::fileSource(recorded.format, recorded.path, recorded.key));
  return bindInputs(names, exe.inputTypes(), o, nullptr, compiled);
}

runtime::ModuleSource sourceOf(const std::string& path, const LoadedProgram& p) {
  if (!p.bound.empty() || p.parameterInputs || (p.format != "onnx" && p.format != "kir"))
    return runtime::ModuleSource{};
  return kiln::fileSource(p.format, path, p.sourceKey);
}

std::string describeBound(const BoundValue& b) {
  return "input '" + b.name + "' (" + b.value.type().str() + ", " + b.file +
         ") is bound to its value: the importer needs it as a constant (a shape, axes, pads or a "
         "count), so the program is compiled for that value";
}

StatusOr<RunOptions> forParameters(const RunOptions& o, const LoadedProgram& p) {
  RunOptions r = o;
  if (p.parameterInputs) r.inputs = *p.parameterInputs;
  for (const auto& [symbol, size] : p.fixedDims) {
    auto it = r.dims.find(symbol);
    if (it == r.dims.end()) continue;
    if (it->second != size)
      return Status::error("--dim " + symbol + "=" + std::to_string(it->second) +
                           ": the input files make it " + std::to_string(size));
    r.dims.erase(it);
  }
  return r;
}

StatusOr<LoadedProgram> loadProgram(const std::string& path, const runtime::CompileOptions* cache,
                                    const std::vector<InputArg>* inputs) {
  auto start = std::chrono::steady_clock::now();
  std::string ext = std::filesystem::path(path).extension().string();
  LoadedProgram p;
  auto done = [&] {
    p.loadMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  // A compile-cache hit for the source key just computed.
  auto cached = [&]() -> StatusOr<bool> {
    if (!cache) return false;
    runtime::CompileOptions co = *cache;
    co.sourceKey = p.sourceKey;
    KILN_ASSIGN_OR_RETURN(p.cached, runtime::Executable::fromCache(co));
    return p.cached != nullptr;
  };
  if (ext == ".kir") {
    KILN_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
    p.format = "kir";
    KILN_ASSIGN_OR_RETURN(p.sourceKey,
                          runtime::sourceFileKey("kir", path, cache ? cache->cacheDir : ""));
    done();
    KILN_ASSIGN_OR_RETURN(bool hit, cached());
    if (hit) return p;
    KILN_ASSIGN_OR_RETURN(p.module, parseModule(text, path));
  } else if (ext == ".onnx") {
    KILN_ASSIGN_OR_RETURN(p.sourceKey,
                          runtime::sourceFileKey("onnx", path, cache ? cache->cacheDir : ""));
    p.format = "onnx";
    done();
    KILN_ASSIGN_OR_RETURN(bool hit, cached());
    if (hit) return p;
    KILN_ASSIGN_OR_RETURN(p.module, importOnnx(path, inputs, p));
  } else if (ext == ".kiln") {
    KILN_ASSIGN_OR_RETURN(p.artifact, MappedFile::open(path));
    p.format = "kiln";
    p.loadMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return p;
  } else {
    std::string what = ext.empty() ? "no file extension" : "unknown extension '" + ext + "'";
    return Status::error("cannot tell the program format: " + what +
                             " (expected .kir, .onnx or .kiln)",
                         Location{path, 0, 0});
  }
  if (!p.module->entry())
    return Status::error("the program has no function to run", Location{path, 0, 0});
  std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  p.loadMs = ms.count();
  return p;
}

}  // namespace kiln::cli
