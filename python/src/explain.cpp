// Executable.explain(). See explain.h.
#include "explain.h"

#include <algorithm>
#include <map>
#include <pybind11/stl.h>
#include <sstream>

#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/kernel_ir.h"
#include "runtime/buffer_plan.h"

namespace kiln::python {
namespace {

namespace py = pybind11;

using Names = std::map<const Value*, std::string>;

std::string nameOf(const Names& names, const Value* v) {
  auto it = names.find(v);
  return it == names.end() ? std::string("%?") : it->second;
}

py::list valueNames(const Names& names, const std::vector<const Value*>& values) {
  py::list out;
  for (const Value* v : values) out.append(nameOf(names, v));
  return out;
}

py::list libraryCalls(const kernel::Kernel* k) {
  py::list calls;
  if (!k) return calls;
  for (const kernel::Stmt* s : kernel::callsOf(*k)) {
    py::list postOps;
    for (const kernel::PostOp& p : s->postOps) postOps.append(kernel::postOpName(p.kind));
    py::dict call;
    call["callee"] = s->callee();
    call["op"] = std::string(opName(s->op));
    call["layout"] = s->layout;
    call["post_ops"] = postOps;
    call["epilogue_note"] = s->note;
    calls.append(call);
  }
  return calls;
}

py::dict kernelData(const fusion::Kernel& k, const kernel::Kernel* ir, const Names& names) {
  py::list ops;
  for (const Node* n : k.nodes) {
    py::dict op;
    op["value"] = nameOf(names, n->result());
    op["op"] = std::string(opName(n->op()));
    op["type"] = n->result()->type().str();
    py::list operands;
    for (const Value* v : n->operands()) operands.append(nameOf(names, v));
    op["operands"] = operands;
    op["stored"] = std::find(k.outputs.begin(), k.outputs.end(), n->result()) != k.outputs.end();
    if (!n->origin().empty()) op["origin"] = n->origin();
    ops.append(op);
  }
  py::dict d;
  d["id"] = k.id;
  d["name"] = ir ? ir->name : "k" + std::to_string(k.id);
  d["kind"] = std::string(fusion::kernelKindName(k.kind));
  d["anchor"] = k.anchor ? std::string(opName(k.anchor->op())) : std::string();
  d["ops"] = ops;
  d["inputs"] = valueNames(names, k.inputs);
  d["outputs"] = valueNames(names, k.outputs);
  d["bytes_read"] = k.bytesRead;
  d["bytes_written"] = k.bytesWritten;
  d["flops"] = k.flops;
  d["library_calls"] = libraryCalls(ir);
  return d;
}

const char* storageName(runtime::Storage s) {
  switch (s) {
    case runtime::Storage::Parameter: return "parameter";
    case runtime::Storage::Constant: return "constant";
    case runtime::Storage::Output: return "output";
    case runtime::Storage::Arena: return "arena";
  }
  return "?";
}

py::dict memoryData(const runtime::BufferPlan& p, const Function& f, const Names& names) {
  py::list values;
  // In program order, so that the list reads like the function.
  auto add = [&](const Value* v) {
    auto it = p.values.find(v);
    if (it == p.values.end()) return;
    const runtime::Slot& s = it->second;
    py::dict d;
    d["value"] = nameOf(names, v);
    d["storage"] = storageName(s.storage);
    d["bytes"] = s.bytes;
    if (s.storage == runtime::Storage::Arena) {
      d["offset"] = s.offset;
      d["live"] = py::make_tuple(s.first, s.last);
    }
    if (s.sharesWith) d["in_place_of"] = nameOf(names, s.sharesWith);
    values.append(d);
  };
  for (const auto& n : f.nodes())
    for (size_t r = 0; r < n->numResults(); ++r) add(n->result(r));
  py::dict m;
  m["arena_bytes"] = p.arenaBytes;
  m["lower_bound_bytes"] = p.lowerBoundBytes;
  m["in_place"] = p.inPlace;
  m["summary"] = runtime::describeBufferPlan(p);
  m["values"] = values;
  return m;
}

}  // namespace

py::list guards(const runtime::Executable& exe) {
  const Function& f = exe.function();
  py::list out;
  for (const runtime::DimGuard& g : exe.guards().dims) {
    py::dict d;
    d["symbol"] = g.symbol;
    d["value"] = g.value;
    if (g.range)
      d["range"] = g.range->pow2   ? py::object(py::make_tuple(g.range->lo, g.range->hi, "pow2"))
                   : g.range->each ? py::object(py::make_tuple(g.range->lo, g.range->hi, "each"))
                                   : py::object(py::make_tuple(g.range->lo, g.range->hi));
    py::list checks;
    for (auto [input, dim] : g.checks)
      checks.append(py::make_tuple(f.parameter(input)->name(), dim));
    d["checks"] = checks;
    out.append(d);
  }
  return out;
}

py::dict explain(const runtime::Executable& exe) {
  const Function& f = exe.function();
  const fusion::FusionPlan& plan = exe.plan();
  Names names = printedValueNames(f);
  std::map<std::string, const kernel::Kernel*> byName;
  for (const kernel::Kernel& k : exe.kernels()) byName[k.name] = &k;
  py::list kernels;
  for (const fusion::Kernel& k : plan.kernels) {
    const kernel::Kernel* ir = nullptr;
    std::string prefix = "k" + std::to_string(k.id) + "_";
    for (const auto& [name, kernel] : byName)
      if (name.rfind(prefix, 0) == 0) ir = kernel;
    kernels.append(kernelData(k, ir, names));
  }
  py::list decisions;
  for (const fusion::Decision& d : plan.decisions) {
    py::dict e;
    e["producer"] = nameOf(names, d.producer->result());
    e["consumer"] = nameOf(names, d.consumer->result());
    e["fused"] = d.fused;
    e["how"] = d.how;
    e["reason"] = d.reason;
    decisions.append(e);
  }
  py::list calls;
  std::istringstream lines(exe.libraryCallDetails());
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) calls.append(line);
  py::dict out;
  out["function"] = f.name();
  out["backend"] = exe.target().name();
  out["kernels"] = kernels;
  out["decisions"] = decisions;
  out["bytes_unfused"] = plan.bytesUnfused;
  out["memory"] = memoryData(exe.buffers(), f, names);
  out["library_calls"] = calls;
  out["text"] = fusion::explainPlan(f, plan);
  out["guards"] = guards(exe);
  return out;
}

}  // namespace kiln::python
