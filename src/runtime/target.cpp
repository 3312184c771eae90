// The target registry. See target.h.
#include "runtime/target.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace kiln::runtime {
namespace {

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::unique_ptr<Target>, std::less<>>& registry() {
  static auto* targets = new std::map<std::string, std::unique_ptr<Target>, std::less<>>;
  return *targets;
}

// Targets the build left out and why, as "name: why" entries separated by | or newlines
// (KILN_MISSING_TARGETS, set by CMake).
std::string missingReason(std::string_view name) {
#ifdef KILN_MISSING_TARGETS
  std::string_view all = KILN_MISSING_TARGETS;
#else
  std::string_view all;
#endif
  for (size_t at = 0; at < all.size();) {
    size_t nl = std::min(all.find_first_of("\n|", at), all.size());
    std::string_view line = all.substr(at, nl - at);
    if (line.size() > name.size() + 1 && line.substr(0, name.size()) == name &&
        line[name.size()] == ':')
      return std::string(line.substr(name.size() + 2));
    at = nl + 1;
  }
  return "";
}

}  // namespace

void registerTarget(std::unique_ptr<Target> target) {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::string name = target->name();
  registry().try_emplace(name, std::move(target));
}

StatusOr<const Target*> findTarget(std::string_view name) {
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = registry().find(name);
    if (it != registry().end()) return static_cast<const Target*>(it->second.get());
  }
  std::string have;
  for (const std::string& n : targetNames()) have += (have.empty() ? "" : ", ") + n;
  if (have.empty()) have = "none";
  std::string why = missingReason(name);
  if (!why.empty())
    return Status::error("this build of Kiln has no '" + std::string(name) + "' target (" + why +
                         "); its targets: " + have);
  return Status::error("unknown backend '" + std::string(name) +
                       "' (this build's targets: " + have + ")");
}

std::vector<std::string> targetNames() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> names;
  for (const auto& [name, target] : registry()) names.push_back(name);
  return names;
}

void prepareOutputs(const Function& f, std::vector<Tensor>& outputs, const SymbolBindings& sizes) {
  auto typeOf = [&](const Value* v) { return atSizes(v->type(), sizes); };
  bool reuse = outputs.size() == f.outputs().size();
  for (size_t o = 0; reuse && o < outputs.size(); ++o)
    reuse = outputs[o].defined() && outputs[o].type() == typeOf(f.outputs()[o]) &&
            outputs[o].isUnique();
  if (!reuse) {
    outputs.clear();
    for (const Value* v : f.outputs()) {
      TensorType t = typeOf(v);
      outputs.push_back(Tensor::uninitialized(t.dtype(), t.staticDims()));
    }
  }
}

StatusOr<SymbolBindings> runSizes(const Function& f, std::span<const Tensor> inputs,
                                  const SymbolRanges& ranges) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.dims());
  return runSizes(f, shapes, ranges);
}

StatusOr<SymbolBindings> runSizes(const Function& f,
                                  const std::vector<std::vector<int64_t>>& shapes,
                                  const SymbolRanges& ranges) {
  bool symbolic = false;
  for (size_t i = 0; i < f.numParameters(); ++i) symbolic |= !f.parameter(i)->type().isStatic();
  if (!symbolic) return SymbolBindings{};
  KILN_ASSIGN_OR_RETURN(SymbolBindings sizes, bindingsFromInputShapes(f, shapes));
  for (const auto& [symbol, size] : sizes) {
    auto r = ranges.find(symbol);
    if (r == ranges.end()) return Status::error("dim " + symbol + " has no range in this program");
    if (size < r->second.lo || size > r->second.hi)
      return Status::error("dim " + symbol + " is " + std::to_string(size) +
                           ", outside the range " + std::to_string(r->second.lo) + ".." +
                           std::to_string(r->second.hi) + " the program was compiled for");
  }
  return sizes;
}

}  // namespace kiln::runtime
