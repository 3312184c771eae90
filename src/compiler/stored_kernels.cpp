// Scheduled kernel IR in artifacts. See stored_kernels.h.
#include "compiler/stored_kernels.h"

#include <algorithm>

#include "compiler/module_index.h"
#include "kernel/parse.h"
#include "kernel/verify.h"
#include "runtime/artifact.h"

namespace kiln::compiler {
namespace {

// Binds kernels to `f`'s values from the lines of "kernels.values".
class Binder {
 public:
  explicit Binder(const Function& f) : index_(f) {}

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
        calls_ = kernel::mutableCallsOf(*k);
      } else if (k && w[0] == "call" && w.size() >= 3) {
        KILN_RETURN_IF_ERROR(callLine(line, w).prefix("kernel " + k->name));
      } else if (k && w[0] == "note") {
        k->notes.push_back(textAfter(line, 1));
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
  // "call J origin TEXT", "call J note TEXT" or "call J loc LINE COLUMN FILE": what call J of
  // the kernel (in pre-order) says in messages and `kiln explain`.
  Status callLine(const std::string& line, const std::vector<std::string>& w) {
    std::optional<int64_t> j = number(w[1]);
    if (!j || static_cast<size_t>(*j) >= calls_.size())
      return Status::error("it has no call " + w[1]);
    kernel::Stmt& c = *calls_[static_cast<size_t>(*j)];
    if (w[2] == "origin") c.origin = textAfter(line, 3);
    else if (w[2] == "note") c.note = textAfter(line, 3);
    else if (w[2] == "loc" && w.size() >= 5 && number(w[3]) && number(w[4]))
      c.loc = Location{textAfter(line, 5), static_cast<int>(*number(w[3])),
                       static_cast<int>(*number(w[4]))};
    else return Status::error("malformed call line");
    return Status::ok();
  }

  // "value %b NODE:RESULT" or "view %b NODE:RESULT OFFSET ROW PITCH".
  Status bindBuffer(kernel::Kernel& k, const std::vector<std::string>& w) const {
    const bool view = w[0] == "view";
    if (w.size() != (view ? 6u : 3u) || w[1].size() < 2 || w[1][0] != '%')
      return Status::error("malformed " + w[0] + " line");
    auto it = std::find_if(k.buffers.begin(), k.buffers.end(),
                           [&](const kernel::Buffer& b) { return b.name == w[1].substr(1); });
    if (it == k.buffers.end()) return Status::error("it has no buffer " + w[1]);
    KILN_ASSIGN_OR_RETURN(const Value* v, index_.value(w[2]));
    if (!view) {
      if (v->type().dtype() != it->type ||
          static_cast<size_t>(v->type().rank()) != it->shape.size())
        return Status::error("buffer " + w[1] + " is not of the type of value " + w[2] + " (" +
                             v->type().str() + ")");
      it->value = v;
      return Status::ok();
    }
    std::optional<int64_t> offset = number(w[3]), row = number(w[4]), pitch = number(w[5]);
    if (!offset || !row || !pitch || *row <= 0 || *pitch < *row)
      return Status::error("malformed view of buffer " + w[1]);
    it->view = kernel::Buffer::View{v, *offset, *row, *pitch};
    return Status::ok();
  }

  ModuleIndex index_;
  std::vector<kernel::Stmt*> calls_;  // of the kernel the lines are about
};

}  // namespace

StoredProgram storeKernels(const std::vector<kernel::Kernel>& kernels, const Function& f) {
  StoredProgram s;
  s.ir = kernel::printKernels(kernels);
  const ModuleIndex index(f);
  for (const kernel::Kernel& k : kernels) {
    s.values += "kernel " + k.name + "\n";
    for (const kernel::Buffer& b : k.buffers) {
      if (std::string v = index.id(b.value); v != "-")
        s.values += "value %" + b.name + " " + v + "\n";
      if (std::string of = b.view ? index.id(b.view->of) : "-"; of != "-")
        s.values += "view %" + b.name + " " + of + " " + std::to_string(b.view->offset) + " " +
                    std::to_string(b.view->rowLength) + " " + std::to_string(b.view->pitch) + "\n";
    }
    const std::vector<const kernel::Stmt*> calls = kernel::callsOf(k);
    for (size_t j = 0; j < calls.size(); ++j) {
      const std::string call = "call " + std::to_string(j) + " ";
      if (!calls[j]->origin.empty())
        s.values += call + "origin " + oneLine(calls[j]->origin) + "\n";
      if (calls[j]->loc.known())
        s.values += call + "loc " + std::to_string(calls[j]->loc.line) + " " +
                    std::to_string(calls[j]->loc.column) + " " + oneLine(calls[j]->loc.file) + "\n";
      if (!calls[j]->note.empty()) s.values += call + "note " + oneLine(calls[j]->note) + "\n";
    }
    for (const std::string& note : k.notes) s.values += "note " + oneLine(note) + "\n";
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
