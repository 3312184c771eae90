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

void prepareOutputs(const Function& f, std::vector<Tensor>& outputs) {
  bool reuse = outputs.size() == f.outputs().size();
  for (size_t o = 0; reuse && o < outputs.size(); ++o)
    reuse = outputs[o].defined() && outputs[o].type() == f.outputs()[o]->type() &&
            outputs[o].isUnique();
  if (!reuse) {
    outputs.clear();
    for (const Value* v : f.outputs())
      outputs.push_back(Tensor::uninitialized(v->type().dtype(), v->type().staticDims()));
  }
}

}  // namespace kiln::runtime
