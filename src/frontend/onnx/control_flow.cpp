// Control flow whose decisions are known while importing: If with a known condition inlines the
// chosen branch; Loop with a known trip count / condition and Scan over a static sequence are
// unrolled. Control flow that depends on run-time values is not supported (the IR has none yet).
#include "frontend/onnx/op_context.h"
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// Nested subgraphs deeper than this are refused.
constexpr int kMaxNesting = 32;
// Most iterations a Loop or Scan is unrolled into.
constexpr int64_t kMaxUnroll = 1024;

const pb::GraphProto* graphAttr(const pb::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name && a.has_g()) return &a.g();
  return nullptr;
}

std::vector<int64_t> intsAttrOf(const pb::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  return {};
}

int64_t intAttrOf(const pb::NodeProto& node, const std::string& name, int64_t dflt) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

}  // namespace

StatusOr<std::vector<Value*>> Importer::runSubgraph(const pb::GraphProto& g, Scope& outer,
                                                    const std::string& prefix,
                                                    const std::vector<Value*>& inputs,
                                                    bool nameValues) {
  if (static_cast<size_t>(g.input_size()) != inputs.size())
    return Status::error("the subgraph '" + g.name() + "' takes " + std::to_string(g.input_size()) +
                         " inputs, " + std::to_string(inputs.size()) + " given");
  Scope sub;
  sub.parent = &outer;
  sub.opsets = outer.opsets;
  sub.originPrefix = prefix;
  sub.nameValues = nameValues;
  sub.depth = outer.depth + 1;
  if (sub.depth >= kMaxNesting) return Status::error("subgraphs nested too deeply");
  for (int i = 0; i < g.input_size(); ++i)
    sub.values[g.input(i).name()] = inputs[static_cast<size_t>(i)];
  KILN_RETURN_IF_ERROR(importInitializerList(g, sub));
  size_t before = unsupported_.size();
  KILN_RETURN_IF_ERROR(importGraphNodes(g, sub));
  if (unsupported_.size() != before) return std::vector<Value*>{};  // check mode: reported
  std::vector<Value*> outs;
  for (const auto& o : g.output()) {
    Value* v = sub.lookup(o.name());
    if (!v && sub.lookupSequence(o.name()))
      return Status::error("the subgraph output '" + o.name() +
                           "' is a sequence; sequences passed out of subgraphs are not supported");
    if (!v) return Status::error("the subgraph output '" + o.name() + "' is not defined");
    outs.push_back(v);
  }
  return outs;
}

StatusOr<bool> Importer::knownFlag(Value* v, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, knownValue(v));
  if (!k || k->symbolic) {
    if (!k) noteNeededInputs(parameterDeps(v));
    return Status::error(what + " is computed at run time; control flow is not supported");
  }
  if (k->tensor.numElements() != 1)
    return Status::error(what + " must hold one value, got " + k->tensor.type().str());
  return k->tensor.getDouble(0) != 0;
}

Status Importer::bindOutputs(const pb::NodeProto& node, Scope& scope,
                             const std::vector<Value*>& outs) {
  if (outs.empty() && node.output_size() > 0) {  // check mode: the body was reported
    placeholdOutputs(node, scope);
    return Status::ok();
  }
  if (outs.size() < static_cast<size_t>(node.output_size()))
    return Status::error("the node has more outputs than its body produces");
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    Value* v = outs[static_cast<size_t>(i)];
    scope.values[node.output(i)] = v;
    if (scope.nameValues && v->name().empty() && v->def()->op() != OpCode::Parameter)
      v->setName(node.output(i));
  }
  return Status::ok();
}

Status Importer::importIf(const pb::NodeProto& node, Scope& scope, const std::string& name) {
  const pb::GraphProto* thenG = graphAttr(node, "then_branch");
  const pb::GraphProto* elseG = graphAttr(node, "else_branch");
  if (!thenG || !elseG) return Status::error("then_branch and else_branch are required");
  Value* cond = node.input_size() > 0 ? scope.lookup(node.input(0)) : nullptr;
  if (!cond) return Status::error("the condition input is required");
  KILN_ASSIGN_OR_RETURN(bool taken, knownFlag(cond, "the condition"));
  const pb::GraphProto& g = taken ? *thenG : *elseG;
  KILN_ASSIGN_OR_RETURN(auto outs, runSubgraph(g, scope, name + "/", {}, scope.nameValues));
  return bindOutputs(node, scope, outs);
}

// Stacks per-iteration values along a new axis `axis` (reversed order when `reverse`).
StatusOr<Value*> Importer::stack(Builder& b, std::vector<Value*> parts, int64_t axis,
                                 bool reverse) {
  if (parts.empty()) return Status::error("no iterations to stack a scan output from");
  if (reverse) std::reverse(parts.begin(), parts.end());
  Shape s = parts[0]->type().dims();
  KILN_ASSIGN_OR_RETURN(axis,
                        normAxis(axis, static_cast<int64_t>(s.size()) + 1, "scan output axis"));
  s.insert(s.begin() + axis, Dim(1));
  for (Value*& p : parts) p = b.reshape(p, s);
  Value* r = parts.size() == 1 ? parts[0] : b.concatenate(parts, axis);
  if (!r) return b.status();
  return r;
}

Status Importer::importLoop(const pb::NodeProto& node, Scope& scope, const std::string& name) {
  const pb::GraphProto* body = graphAttr(node, "body");
  if (!body) return Status::error("the body attribute is required");
  auto in = [&](int i) -> Value* {
    return i < node.input_size() && !node.input(i).empty() ? scope.lookup(node.input(i)) : nullptr;
  };
  int64_t trips = -1;
  if (Value* m = in(0)) {
    KILN_ASSIGN_OR_RETURN(const KnownValue* k, knownValue(m));
    if (!k || k->symbolic || k->tensor.numElements() != 1) {
      if (!k) noteNeededInputs(parameterDeps(m));
      return Status::error("the trip count is computed at run time; control flow is not supported");
    }
    trips = k->tensor.getInt(0);
  }
  bool cond = true;
  if (Value* cv = in(1)) {
    KILN_ASSIGN_OR_RETURN(cond, knownFlag(cv, "the loop condition"));
  }
  if (trips < 0 && !in(1))
    return Status::error("a loop without trip count or condition never ends");
  std::vector<Value*> carried;
  for (int i = 2; i < node.input_size(); ++i) carried.push_back(in(i));
  size_t nCarried = carried.size();
  std::vector<std::vector<Value*>> scans;
  Builder b(f_);
  b.setOrigin(name);
  for (int64_t it = 0; cond && (trips < 0 || it < trips); ++it) {
    if (it >= kMaxUnroll)
      return Status::error("unrolling more than " + std::to_string(kMaxUnroll) + " iterations");
    std::vector<Value*> args{scalarConst(b, DType::I64, static_cast<double>(it)),
                             scalarConst(b, DType::Bool, 1.0)};
    args.insert(args.end(), carried.begin(), carried.end());
    std::string prefix = name + "/" + std::to_string(it) + "/";
    KILN_ASSIGN_OR_RETURN(auto outs, runSubgraph(*body, scope, prefix, args, false));
    if (outs.empty()) return bindOutputs(node, scope, outs);
    if (outs.size() < 1 + nCarried) return Status::error("the body returns too few values");
    KILN_ASSIGN_OR_RETURN(cond, knownFlag(outs[0], "the loop condition"));
    carried.assign(outs.begin() + 1, outs.begin() + 1 + static_cast<std::ptrdiff_t>(nCarried));
    scans.resize(outs.size() - 1 - nCarried);
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(outs[1 + nCarried + k]);
  }
  std::vector<Value*> results = carried;
  size_t nScans = static_cast<size_t>(body->output_size()) - 1 - nCarried;
  for (size_t k = 0; k < nScans; ++k) {
    if (k >= scans.size())
      return Status::error("a loop that runs no iteration has no scan output shape");
    KILN_ASSIGN_OR_RETURN(Value * v, stack(b, scans[k], 0, false));
    results.push_back(v);
  }
  return bindOutputs(node, scope, results);
}

StatusOr<std::vector<Value*>> Importer::scanOnce(const pb::GraphProto& body, Scope& scope,
                                                 const std::string& prefix, ScanSpec spec) {
  Builder b(f_);
  b.setOrigin(prefix.substr(0, prefix.size() - 1));
  int64_t steps = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < spec.xs.size(); ++j) {
    int64_t want = j < spec.inAxes.size() ? spec.inAxes[j] : 0;
    KILN_ASSIGN_OR_RETURN(int64_t ax, normAxis(want, spec.xs[j]->type().rank(), "scan_input_axes"));
    const Dim& d = spec.xs[j]->type().dim(ax);
    if (!d.isStatic())
      return Status::error("scanning symbolic dimension " + d.str() + " is not supported");
    if (steps >= 0 && d.value() != steps) return Status::error("scan inputs differ in length");
    steps = d.value();
    axes.push_back(ax);
  }
  if (steps > kMaxUnroll)
    return Status::error("unrolling more than " + std::to_string(kMaxUnroll) + " steps");
  std::vector<std::vector<Value*>> scans;
  std::vector<Value*> state = spec.state;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Value*> args = state;
    for (size_t j = 0; j < spec.xs.size(); ++j) {
      int64_t at = j < spec.inDirs.size() && spec.inDirs[j] ? steps - 1 - t : t;
      Value* sl = sliceAxis(b, spec.xs[j], axes[j], at, at + 1);
      args.push_back(sl ? b.reshape(sl, dropAxes(sl->type().dims(), {axes[j]})) : nullptr);
      if (!args.back()) return b.status();
    }
    KILN_ASSIGN_OR_RETURN(auto outs,
                          runSubgraph(body, scope, prefix + std::to_string(t) + "/", args, false));
    if (outs.empty()) return outs;
    if (outs.size() < state.size()) return Status::error("the body returns too few values");
    state.assign(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(state.size()));
    scans.resize(outs.size() - state.size());
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(outs[state.size() + k]);
  }
  std::vector<Value*> results = state;
  for (size_t k = 0; k < scans.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(Value * v,
                          stack(b, scans[k], k < spec.outAxes.size() ? spec.outAxes[k] : 0,
                                k < spec.outDirs.size() && spec.outDirs[k] != 0));
    results.push_back(v);
  }
  return results;
}

// Scan before opset 9 has a leading batch axis on every input and output, and optional
// sequence lengths first: each batch entry is scanned on its own and the results stacked.
StatusOr<std::vector<Value*>> Importer::scanBatched(const pb::GraphProto& body, Scope& scope,
                                                    const std::string& prefix, ScanSpec spec) {
  Builder b(f_);
  b.setOrigin(prefix.substr(0, prefix.size() - 1));
  Value* first = spec.xs.empty() ? nullptr : spec.xs[0];
  if (!first || first->type().rank() < 2 || !first->type().dim(0).isStatic())
    return Status::error("Scan-8 needs scan inputs with a static batch axis");
  int64_t batch = first->type().dim(0).value();
  auto entry = [&](Value* v, int64_t i) -> Value* {
    Value* sl = sliceAxis(b, v, 0, i, i + 1);
    return sl ? b.reshape(sl, dropAxes(sl->type().dims(), {0})) : nullptr;
  };
  std::vector<std::vector<Value*>> perBatch;
  for (int64_t i = 0; i < batch; ++i) {
    ScanSpec one = spec;
    for (Value*& v : one.state) v = entry(v, i);
    for (Value*& v : one.xs) v = entry(v, i);
    if (!b.ok()) return b.status();
    KILN_ASSIGN_OR_RETURN(auto outs,
                          scanOnce(body, scope, prefix + "b" + std::to_string(i) + "/", one));
    if (outs.empty()) return outs;
    perBatch.push_back(outs);
  }
  std::vector<Value*> results;
  for (size_t k = 0; !perBatch.empty() && k < perBatch[0].size(); ++k) {
    std::vector<Value*> parts;
    for (auto& r : perBatch) parts.push_back(r[k]);
    KILN_ASSIGN_OR_RETURN(Value * v, stack(b, parts, 0, false));
    results.push_back(v);
  }
  return results;
}

Status Importer::importScan(const pb::NodeProto& node, Scope& scope, const std::string& name,
                            int opset) {
  const pb::GraphProto* body = graphAttr(node, "body");
  if (!body) return Status::error("the body attribute is required");
  int64_t m = intAttrOf(node, "num_scan_inputs", -1);
  int first = opset < 9 ? 1 : 0;  // Scan-8 starts with the optional sequence lengths
  if (opset < 9 && node.input_size() > 0 && !node.input(0).empty())
    return Status::error("Scan-8 with sequence lengths is not supported");
  int64_t total = node.input_size() - first;
  if (m < 1 || m > total) return Status::error("num_scan_inputs is out of range");
  ScanSpec spec;
  spec.inAxes = intsAttrOf(node, "scan_input_axes");
  spec.inDirs = intsAttrOf(node, opset < 9 ? "directions" : "scan_input_directions");
  spec.outAxes = intsAttrOf(node, "scan_output_axes");
  spec.outDirs = intsAttrOf(node, "scan_output_directions");
  for (int64_t i = 0; i < total; ++i) {
    const std::string& n = node.input(static_cast<int>(first + i));
    Value* v = scope.lookup(n);
    if (!v) return Status::error("input '" + n + "' is not defined");
    (i < total - m ? spec.state : spec.xs).push_back(v);
  }
  std::vector<Value*> results;
  if (opset < 9) {
    KILN_ASSIGN_OR_RETURN(results, scanBatched(*body, scope, name + "/", spec));
  } else {
    KILN_ASSIGN_OR_RETURN(results, scanOnce(*body, scope, name + "/", spec));
  }
  return bindOutputs(node, scope, results);
}

}  // namespace kiln::onnx
