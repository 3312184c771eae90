// Function expansion (ONNX ops defined by a function body, and model-local functions) and If
// nodes whose condition is known while importing (the chosen branch is inlined; control flow
// that depends on run-time values is not supported).
#include <onnx/defs/schema.h>

#include "frontend/onnx/op_context.h"

namespace kiln::onnx {

namespace {

// Nested expansions deeper than this are taken for recursion.
constexpr int kMaxExpansionDepth = 32;

// A copy of a body node with attribute references (ref_attr_name) replaced by the caller's
// attributes, or the op schema's default; a reference to neither is dropped (the body node's
// own default applies).
pb::NodeProto instantiate(const pb::NodeProto& bodyNode, const pb::NodeProto& caller,
                          const ::onnx::OpSchema* schema) {
  pb::NodeProto n = bodyNode;
  n.clear_attribute();
  for (const auto& a : bodyNode.attribute()) {
    if (a.ref_attr_name().empty()) {
      *n.add_attribute() = a;
      continue;
    }
    const pb::AttributeProto* value = nullptr;
    for (const auto& ca : caller.attribute())
      if (ca.name() == a.ref_attr_name()) value = &ca;
    if (!value && schema) {
      auto it = schema->attributes().find(a.ref_attr_name());
      if (it != schema->attributes().end() &&
          it->second.default_value.type() != pb::AttributeProto::UNDEFINED)
        value = &it->second.default_value;
    }
    if (!value) continue;
    pb::AttributeProto copy = *value;
    copy.set_name(a.name());
    *n.add_attribute() = copy;
  }
  return n;
}

}  // namespace

const pb::FunctionProto* Importer::localFunction(const std::string& domain,
                                                 const std::string& name) const {
  for (const auto& f : model_.functions())
    if (f.name() == name && f.domain() == domain) return &f;
  return nullptr;
}

Status Importer::expandFunction(const pb::FunctionProto& fn, const pb::NodeProto& node,
                                Scope& outer, const std::string& name,
                                const ::onnx::OpSchema* schema) {
  std::string op = (node.domain().empty() ? "ai.onnx" : node.domain()) + "::" + node.op_type();
  if (outer.depth >= kMaxExpansionDepth)
    return report(name, op, Status::error("function expansion nested more than " +
                                          std::to_string(kMaxExpansionDepth) +
                                          " deep (a recursive function?)"));
  if (node.input_size() > fn.input_size() || node.output_size() > fn.output_size())
    return report(name, op, Status::error("the node has more inputs or outputs than function '" +
                                          fn.name() + "' declares"));
  Scope inner;
  inner.depth = outer.depth + 1;
  inner.nameValues = false;
  inner.originPrefix = name + "/";
  inner.opsets = outer.opsets;
  for (const auto& o : fn.opset_import())
    inner.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) continue;
    Value* v = outer.lookup(node.input(i));
    if (!v) return report(name, op, Status::error("input '" + node.input(i) + "' is not defined"));
    inner.values[fn.input(i)] = v;
  }
  // Formal inputs the caller leaves out are absent inside the body.
  std::set<std::string> absent;
  for (int i = node.input_size(); i < fn.input_size(); ++i) absent.insert(fn.input(i));
  for (int i = 0; i < node.input_size(); ++i)
    if (node.input(i).empty()) absent.insert(fn.input(i));
  std::vector<pb::NodeProto> body;
  for (const auto& bn : fn.node()) {
    pb::NodeProto n = instantiate(bn, node, schema);
    for (int i = 0; i < n.input_size(); ++i)
      if (absent.count(n.input(i))) n.set_input(i, "");
    body.push_back(std::move(n));
  }
  std::vector<const pb::NodeProto*> ptrs;
  for (const auto& n : body) ptrs.push_back(&n);
  size_t before = unsupported_.size();
  KILN_RETURN_IF_ERROR(importNodeList(ptrs, inner));
  if (unsupported_.size() != before) {  // check mode: already reported
    placeholdOutputs(node, outer);
    return Status::ok();
  }
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    Value* v = inner.lookup(fn.output(i));
    if (!v)
      return report(name, op, Status::error("function '" + fn.name() + "' does not produce '" +
                                            fn.output(i) + "'"));
    outer.values[node.output(i)] = v;
    if (outer.nameValues && v->name().empty() && v->def()->op() != OpCode::Parameter)
      v->setName(node.output(i));
  }
  return Status::ok();
}

Status Importer::importIf(const pb::NodeProto& node, Scope& scope, const std::string& name) {
  const pb::GraphProto* thenG = nullptr;
  const pb::GraphProto* elseG = nullptr;
  for (const auto& a : node.attribute()) {
    if (a.name() == "then_branch" && a.has_g()) thenG = &a.g();
    if (a.name() == "else_branch" && a.has_g()) elseG = &a.g();
  }
  if (!thenG || !elseG) return Status::error("then_branch and else_branch are required");
  Value* cond = node.input_size() > 0 ? scope.lookup(node.input(0)) : nullptr;
  if (!cond) return Status::error("the condition input is required");
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, knownValue(cond));
  if (!k || k->symbolic) {
    if (!k) noteNeededInputs(parameterDeps(cond));
    return Status::error(
        "the condition is computed at run time; control flow is not supported");
  }
  if (k->tensor.numElements() != 1)
    return Status::error("the condition must hold one value, got " + k->tensor.type().str());
  const pb::GraphProto& g = k->tensor.getDouble(0) != 0 ? *thenG : *elseG;
  if (g.output_size() != node.output_size())
    return Status::error("the branch has " + std::to_string(g.output_size()) +
                         " outputs, the node " + std::to_string(node.output_size()));
  Scope branch;
  branch.parent = &scope;
  branch.opsets = scope.opsets;
  branch.originPrefix = name + "/";
  branch.depth = scope.depth + 1;
  if (branch.depth >= kMaxExpansionDepth) return Status::error("If nested too deeply");
  KILN_RETURN_IF_ERROR(importInitializerList(g, branch));
  size_t before = unsupported_.size();
  KILN_RETURN_IF_ERROR(importGraphNodes(g, branch));
  if (unsupported_.size() != before) {
    placeholdOutputs(node, scope);
    return Status::ok();
  }
  for (int i = 0; i < node.output_size(); ++i) {
    Value* v = branch.lookup(g.output(i).name());
    if (!v) return Status::error("the branch output '" + g.output(i).name() + "' is not defined");
    if (node.output(i).empty()) continue;
    scope.values[node.output(i)] = v;
  }
  return Status::ok();
}

}  // namespace kiln::onnx
