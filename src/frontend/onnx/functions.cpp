// Function expansion: ONNX ops defined by a function body, and model-local functions.
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
    return report(name, op,
                  Status::error("function expansion nested more than " +
                                std::to_string(kMaxExpansionDepth) +
                                " deep (a recursive function?)"));
  if (node.input_size() > fn.input_size() || node.output_size() > fn.output_size())
    return report(name, op,
                  Status::error("the node has more inputs or outputs than function '" + fn.name() +
                                "' declares"));
  Scope inner;
  inner.depth = outer.depth + 1;
  inner.nameValues = false;
  inner.originPrefix = name + "/";
  inner.opsets = outer.opsets;
  for (const auto& o : fn.opset_import())
    inner.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) continue;
    if (const std::vector<Value*>* seq = outer.lookupSequence(node.input(i))) {
      inner.sequences[fn.input(i)] = *seq;
      continue;
    }
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
    if (const std::vector<Value*>* seq = inner.lookupSequence(fn.output(i))) {
      outer.sequences[node.output(i)] = *seq;
      continue;
    }
    Value* v = inner.lookup(fn.output(i));
    if (!v)
      return report(
          name, op,
          Status::error("function '" + fn.name() + "' does not produce '" + fn.output(i) + "'"));
    outer.values[node.output(i)] = v;
    if (outer.nameValues && v->name().empty() && v->def()->op() != OpCode::Parameter)
      v->setName(node.output(i));
  }
  return Status::ok();
}

}  // namespace kiln::onnx
