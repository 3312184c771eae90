// Scheduled kernel IR in artifacts. See stored_kernels.h.
#include "compiler/stored_kernels.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <sstream>

#include "kernel/parse.h"
#include "kernel/verify.h"
#include "runtime/artifact.h"

namespace kiln::compiler {
namespace {

// "NODE RESULT": a value by its node's position in `f` and its result index.
std::map<const Value*, std::string> valueIds(const Function& f) {
  std::map<const Value*, std::string> ids;
  size_t i = 0;
  for (const auto& n : f.nodes()) {
    for (size_t r = 0; r < n->numResults(); ++r)
      ids[n->result(r)] = std::to_string(i) + " " + std::to_string(r);
    ++i;
  }
  return ids;
}

// The words of a line.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

std::optional<int64_t> number(const std::string& s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// Binds kernels to `f`'s values from the lines of "kernels.values".
class Binder {
 public:
  explicit Binder(const Function& f) {
    for (const auto& n : f.nodes()) nodes_.push_back(n.get());
  }

  Status bind(std::vector<kernel::Kernel>& kernels, const std::vector<std::string>& lines) {
    kernel::Kernel* k = nullptr;
    size_t next = 0;
    for (const std::string& line : lines) {
      std::vector<std::string> w = words(line);
      if (w.empty()) continue;
      if (w[0] == "kernel" && w.size() == 2) {
        if (next >= kernels.size() || kernels[next].name != w[1])
          return Status::error("its kernel values name kernel " + w[1] + " out of order");
        k = &kernels[next++];
      } else if (k && w[0] == "note") {
        k->notes.push_back(line.size() > 5 ? line.substr(5) : "");
      } else if (k && (w[0] == "value" || w[0] == "view")) {
        KILN_RETURN_IF_ERROR(bindBuffer(*k, w).prefix("kernel " + k->name));
      } else {
        return Status::error("malformed kernel values line '" + line.substr(0, 80) + "'");
      }
    }
    if (next != kernels.size())
      return Status::error("its kernel values cover " + std::to_string(next) + " of " +
                           std::to_string(kernels.size()) + " kernels");
    // A kernel's inputs and outputs are graph values; temps and internal buffers are not.
    for (const kernel::Kernel& k : kernels)
      for (const kernel::Buffer& b : k.buffers)
        if (!b.value &&
            (b.role == kernel::BufferRole::Input || b.role == kernel::BufferRole::Output))
          return Status::error("kernel " + k.name + ": its kernel values bind no value to %" +
                               b.name);
    return Status::ok();
  }

 private:
  StatusOr<const Value*> value(const std::string& node, const std::string& result) const {
    std::optional<int64_t> n = number(node), r = number(result);
    if (!n || !r || static_cast<size_t>(*n) >= nodes_.size() ||
        static_cast<size_t>(*r) >= nodes_[static_cast<size_t>(*n)]->numResults())
      return Status::error("no value " + node + " " + result + " in the module");
    return nodes_[static_cast<size_t>(*n)]->result(static_cast<size_t>(*r));
  }

  // "value %b NODE RESULT" or "view %b NODE RESULT OFFSET ROW PITCH".
  Status bindBuffer(kernel::Kernel& k, const std::vector<std::string>& w) const {
    const bool view = w[0] == "view";
    if (w.size() != (view ? 7u : 4u) || w[1].size() < 2 || w[1][0] != '%')
      return Status::error("malformed " + w[0] + " line");
    auto it = std::find_if(k.buffers.begin(), k.buffers.end(),
                           [&](const kernel::Buffer& b) { return b.name == w[1].substr(1); });
    if (it == k.buffers.end()) return Status::error("it has no buffer " + w[1]);
    KILN_ASSIGN_OR_RETURN(const Value* v, value(w[2], w[3]));
    if (!view) {
      if (v->type().dtype() != it->type ||
          static_cast<size_t>(v->type().rank()) != it->shape.size())
        return Status::error("buffer " + w[1] + " is not of the type of value " + w[2] + " " +
                             w[3] + " (" + v->type().str() + ")");
      it->value = v;
      return Status::ok();
    }
    std::optional<int64_t> offset = number(w[4]), row = number(w[5]), pitch = number(w[6]);
    if (!offset || !row || !pitch || *row <= 0 || *pitch < *row)
      return Status::error("malformed view of buffer " + w[1]);
    it->view = kernel::Buffer::View{v, *offset, *row, *pitch};
    return Status::ok();
  }

  std::vector<const Node*> nodes_;
};

}  // namespace

StoredKernels storeKernels(const std::vector<kernel::Kernel>& kernels, const Function& f) {
  StoredKernels s;
  s.ir = kernel::printKernels(kernels);
  const std::map<const Value*, std::string> ids = valueIds(f);
  for (const kernel::Kernel& k : kernels) {
    s.values += "kernel " + k.name + "\n";
    for (const kernel::Buffer& b : k.buffers) {
      auto v = b.value ? ids.find(b.value) : ids.end();
      if (v != ids.end()) s.values += "value %" + b.name + " " + v->second + "\n";
      auto of = b.view ? ids.find(b.view->of) : ids.end();
      if (of != ids.end())
        s.values += "view %" + b.name + " " + of->second + " " + std::to_string(b.view->offset) +
                    " " + std::to_string(b.view->rowLength) + " " + std::to_string(b.view->pitch) +
                    "\n";
    }
    for (const std::string& note : k.notes) {
      std::string line = note;
      std::replace(line.begin(), line.end(), '\n', ' ');
      s.values += "note " + line + "\n";
    }
  }
  return s;
}

StatusOr<std::vector<kernel::Kernel>> loadKernels(std::string_view ir, std::string_view values,
                                                  const Function& f, const std::string& source) {
  StatusOr<std::vector<kernel::Kernel>> kernels =
      kernel::parseKernels(ir, source + " (kernels.ir)");
  if (!kernels) return kernels.status();
  for (const kernel::Kernel& k : *kernels)
    KILN_RETURN_IF_ERROR(kernel::verifyKernel(k).prefix(source));
  Binder binder(f);
  KILN_RETURN_IF_ERROR(binder.bind(*kernels, runtime::sectionLines(values)).prefix(source));
  return kernels;
}

}  // namespace kiln::compiler
