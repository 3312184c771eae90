// The text sections of an Executable's artifact. See executable_sections.h.
#include "runtime/executable_sections.h"

#include <algorithm>
#include <cstdlib>

#include "support/version.h"

namespace kiln::runtime {

// The options that shape the generated code, as text (artifact meta, cache keys).
std::string optionsText(const CompileOptions& o) {
  std::string s = "O" + std::to_string(o.optLevel) + (o.fuse ? " fuse" : " no-fuse") +
                  (o.postOps ? " post-ops" : " no-post-ops") +
                  (o.reassociate ? " reassociate" : " no-reassociate") +
                  (o.libraryCalls ? "" : " no-library-calls");
  for (const auto& [symbol, size] : o.dims) s += " " + symbol + "=" + std::to_string(size);
  for (const auto& [symbol, r] : o.ranges) s += " " + symbol + "=" + r.str();
  if (!o.cudaArch.empty()) s += " arch=" + o.cudaArch;
  if (o.precision != "f32") s += " precision=" + o.precision;
  return s;
}

Status parseOptionsText(const std::string& text, CompileOptions& o) {
  std::vector<std::string> words;
  for (size_t at = 0; at < text.size();) {
    size_t sp = text.find(' ', at);
    if (sp == std::string::npos) sp = text.size();
    words.push_back(text.substr(at, sp - at));
    at = sp + 1;
  }
  if (words.size() < 4 || (words[0] != "O0" && words[0] != "O1"))
    return Status::error("the artifact's options '" + text + "' are not readable");
  o.optLevel = words[0][1] - '0';
  o.fuse = words[1] == "fuse";
  o.postOps = words[2] == "post-ops";
  o.reassociate = words[3] == "reassociate";
  o.libraryCalls = !(words.size() > 4 && words[4] == "no-library-calls");
  o.dims.clear();
  o.ranges.clear();
  for (size_t i = 4; i < words.size(); ++i) {
    const std::string& w = words[i];
    size_t eq = w.find('=');
    if (eq == std::string::npos) continue;
    if (w.rfind("precision=", 0) == 0) {
      o.precision = w.substr(10);
    } else if (w.rfind("arch=", 0) == 0) {
      o.cudaArch = w.substr(5);
    } else if (w.find("..") != std::string::npos) {
      // A symbol's range (SYMBOL=LO..HI).
      StatusOr<SymbolRanges> r = parseSymbolRanges(w);
      if (!r) return Status::error("the artifact's options '" + text + "' are not readable");
      o.ranges.insert(r->begin(), r->end());
    } else {
      // A symbol's size (optionsText writes them as SYMBOL=SIZE).
      char* end = nullptr;
      long long v = std::strtoll(w.c_str() + eq + 1, &end, 10);
      if (*end || v < 0)
        return Status::error("the artifact's options '" + text + "' are not readable");
      o.dims[w.substr(0, eq)] = v;
    }
  }
  return Status::ok();
}

// An artifact's "source" section: the file its module was read from (ModuleSource), a line
// each for "format", "path" and "key".
std::string sourceText(const ModuleSource& s) {
  if (s.path.empty()) return "";
  return "format " + s.format + "\npath " + s.path + "\nkey " + s.key + "\n";
}

ModuleSource parseSourceText(const std::vector<std::string>& lines) {
  ModuleSource s;
  for (const std::string& l : lines) {
    size_t sp = l.find(' ');
    std::string word = l.substr(0, sp), rest = sp == std::string::npos ? "" : l.substr(sp + 1);
    if (word == "format") s.format = rest;
    if (word == "path") s.path = s.name = rest;
    if (word == "key") s.key = rest;
  }
  return s;
}

// The target an artifact's meta names, if it is this Kiln's and for this machine.
StatusOr<const Target*> artifactTarget(std::map<std::string, std::string>& meta,
                                       const std::string& source) {
  if (meta["kiln"] != kKilnVersion)
    return Status::error(source + ": compiled by Kiln " + meta["kiln"] + ", this is Kiln " +
                         kKilnVersion + ": compile the model again");
  std::string backend = meta.count("backend") ? meta["backend"] : "cpu";
  StatusOr<const Target*> found = findTarget(backend);
  if (!found) return Status(found.status()).prefix(source);
  const Target* target = *found;
  if (meta["target"] != target->machine())
    return Status::error(source + ": compiled for " + backend + " '" + meta["target"] +
                         "', this machine is '" + target->machine() +
                         "': compile the model again here");
  return target;
}

// The artifact's run-time sizes, checked against its output names and its module's outputs:
// they are the last outputs, after the source's (one per distinct size).
StatusOr<std::vector<DynamicDim>> storedRunTimeSizes(const DecodedArtifact& s,
                                                     const std::vector<std::string>& outputNames,
                                                     size_t numOutputs, const std::string& source) {
  std::vector<DynamicDim> dynamic;
  if (s.has("dynamic")) {
    StatusOr<std::vector<DynamicDim>> parsed = parseDynamicDims(s["dynamic"], numOutputs);
    if (!parsed) return Status(parsed.status()).prefix(source);
    dynamic = std::move(*parsed);
  }
  size_t named = outputNames.size(), last = named;
  for (const DynamicDim& d : dynamic) {
    if (d.sizeOutput < named || d.output >= named)
      return Status::error(source + ": its run-time sizes do not match its outputs");
    last = std::max(last, d.sizeOutput + 1);
  }
  if (last != numOutputs)
    return Status::error(source + ": its output names do not match its module's outputs");
  return dynamic;
}

}  // namespace kiln::runtime
