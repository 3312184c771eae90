// The pass manager: instrumentation around each pass run, and pass specs with options.
#include "passes/pass_manager.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ir/text/text.h"
#include "ir/verifier.h"
#include "passes/convolution_to_matmul.h"
#include "passes/layout_assignment.h"
#include "passes/specialize_shapes.h"

namespace kiln {
namespace {

// Options given to a pass that takes none are an error rather than silently ignored.
Status noOptions(const std::string& name) {
  return Status::error("pass '" + name + "' takes no options");
}

std::string registryList() {
  std::string s;
  for (const std::string& n : passNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<Pass>> createPassFromSpec(const std::string& spec) {
  size_t eq = spec.find('=');
  std::string name = spec.substr(0, eq);
  bool hasOptions = eq != std::string::npos;
  std::string options = hasOptions ? spec.substr(eq + 1) : std::string();
  if (name == "specialize-shapes") {
    if (!hasOptions)
      return Status::error("pass 'specialize-shapes' needs bindings, e.g. specialize-shapes=N=1");
    KILN_ASSIGN_OR_RETURN(SymbolBindings b, parseSymbolBindings(options));
    return makeSpecializeShapesPass(std::move(b));
  }
  if (name == "convolution-to-matmul" && hasOptions) {
    if (options != "keep-winograd")
      return Status::error("unknown option '" + options +
                           "' of convolution-to-matmul (expected keep-winograd)");
    ConvolutionToMatmulOptions o;
    o.keepWinograd = true;
    return makeConvolutionToMatmulPass(o);
  }
  if (name == "layout-assignment" && hasOptions) {
    KILN_ASSIGN_OR_RETURN(LayoutTarget t, parseLayoutTarget(options));
    return makeLayoutAssignmentPass(t);
  }
  std::unique_ptr<Pass> p = createPass(name);
  if (!p) return Status::error("unknown pass '" + name + "' (known: " + registryList() + ")");
  if (hasOptions) return noOptions(name);
  return p;
}

namespace {

// How dumps and --print-after print a module: constant data over 4 KiB elided unless asked for.
PrintOptions dumpOptions(const PassManagerOptions& o) {
  PrintOptions po;
  if (!o.dumpConstants) po.elideDataOver = 4096;
  return po;
}

}  // namespace

StatusOr<size_t> parseInstrumentationFlag(const std::vector<std::string>& args, size_t i,
                                          PassManagerOptions& options) {
  const std::string& a = args[i];
  if (a == "--verify-each") {
    options.verifyEach = true;
    return size_t{1};
  }
  if (a == "--time-passes") {
    options.timePasses = true;
    return size_t{1};
  }
  if (a == "--dump-constants") {
    options.dumpConstants = true;
    return size_t{1};
  }
  for (const std::string flag : {"--dump-dir", "--print-after"}) {
    std::string value;
    size_t used = 0;
    if (a.rfind(flag + "=", 0) == 0) {
      value = a.substr(flag.size() + 1);
      used = 1;
    } else if (a == flag) {
      if (i + 1 >= args.size()) return Status::error(flag + " needs a value");
      value = args[i + 1];
      used = 2;
    } else {
      continue;
    }
    if (value.empty()) return Status::error(flag + " needs a value");
    if (flag == "--dump-dir") options.dumpDir = value;
    else options.printAfter.insert(value);
    return used;
  }
  return size_t{0};
}

const char* instrumentationFlagsHelp() {
  return "  --verify-each          verify the IR after every pass (always on in debug builds)\n"
         "  --dump-dir DIR         write the IR to DIR before the first pass and after each one\n"
         "                         (00-<start>.kir, 01-<pass>.kir, ...); constant data\n"
         "                         over 4 KiB prints as `elided`\n"
         "  --dump-constants       write all constant data in dumps and --print-after\n"
         "  --time-passes          print the wall time of each pass to stderr\n"
         "  --print-after=PASS     print the IR to stderr after PASS (or all)\n";
}

PassManager::PassManager(PassManagerOptions options) : options_(std::move(options)) {}

void PassManager::addPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

Status PassManager::addPass(const std::string& spec) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Pass> p, createPassFromSpec(spec));
  passes_.push_back(std::move(p));
  return Status::ok();
}

bool PassManager::shouldVerify() const {
#ifndef NDEBUG
  return true;
#else
  return options_.verifyEach;
#endif
}

StatusOr<bool> PassManager::run(Module& m) {
  bool changed = false;
  for (const auto& p : passes_) {
    KILN_ASSIGN_OR_RETURN(bool c, runPass(*p, m));
    changed = changed || c;
  }
  return changed;
}

StatusOr<bool> PassManager::runPass(const std::string& spec, Module& m) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Pass> p, createPassFromSpec(spec));
  return runPass(*p, m);
}

StatusOr<bool> PassManager::runPass(Pass& pass, Module& m) {
  if (!options_.dumpDir.empty() && dumpIndex_ == 0)
    KILN_RETURN_IF_ERROR(dump(m, options_.inputLabel));
  auto start = std::chrono::steady_clock::now();
  StatusOr<bool> changed = pass.run(m);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!changed) {
    Status s = changed.status();
    return s.prefix("pass '" + pass.name() + "'");
  }
  if (options_.timePasses) recordTiming(pass.name(), *changed, ms);
  if (shouldVerify()) {
    Status v = verify(m);
    if (!v) return v.prefix("module does not verify after pass '" + pass.name() + "'");
  }
  if (!options_.dumpDir.empty()) KILN_RETURN_IF_ERROR(dump(m, pass.name()));
  if (options_.printAfter.count(pass.name()) || options_.printAfter.count("all")) {
    std::ostream& os = options_.printStream ? *options_.printStream : std::cerr;
    os << "// ----- IR after " << pass.name() << (*changed ? "" : " (unchanged)") << " -----\n"
       << printModule(m, dumpOptions(options_));
  }
  return *changed;
}

Status PassManager::dump(const Module& m, const std::string& label) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options_.dumpDir, ec);
  if (ec)
    return Status::error("cannot create dump directory '" + options_.dumpDir +
                         "': " + ec.message());
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d-", dumpIndex_++);
  fs::path path = fs::path(options_.dumpDir) / (prefix + label + ".kir");
  std::ofstream out(path);
  out << printModule(m, dumpOptions(options_));
  out.close();
  if (!out) return Status::error("cannot write IR dump '" + path.string() + "'");
  return Status::ok();
}

void PassManager::recordTiming(const std::string& name, bool changed, double ms) {
  PassTiming* t = nullptr;
  for (PassTiming& e : timings_)
    if (e.name == name) t = &e;
  if (!t) {
    timings_.push_back(PassTiming{name, 0, 0, 0});
    t = &timings_.back();
  }
  t->runs += 1;
  t->changed += changed ? 1 : 0;
  t->ms += ms;
}

std::string PassManager::timingReport() const {
  if (timings_.empty()) return {};
  double total = 0;
  size_t width = 4;
  for (const PassTiming& t : timings_) {
    total += t.ms;
    width = std::max(width, t.name.size());
  }
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %6s %8s %11s %7s\n", static_cast<int>(width), "pass",
                "runs", "changed", "time (ms)", "share");
  out += line;
  for (const PassTiming& t : timings_) {
    std::snprintf(line, sizeof line, "%-*s %6d %8d %11.3f %6.1f%%\n", static_cast<int>(width),
                  t.name.c_str(), t.runs, t.changed, t.ms, total > 0 ? 100.0 * t.ms / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-*s %6s %8s %11.3f %6.1f%%\n", static_cast<int>(width),
                "total", "", "", total, 100.0);
  out += line;
  return out;
}

}  // namespace kiln
