// The node walk: dependency order (so graphs that are not sorted still import, and cycles and
// undefined inputs are named), dispatch of each node to its mapping by (domain, op type, opset),
// expansion of ops that ONNX defines as functions, and check mode's carrying on past failures.
#include <onnx/defs/schema.h>
#include <optional>
#include <queue>

#include "frontend/onnx/op_context.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {

std::string nodeName(const pb::NodeProto& n, int index) {
  return n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
}

std::string qualifiedOp(const pb::NodeProto& n) {
  std::string d = n.domain().empty() ? "ai.onnx" : n.domain();
  return d + "::" + n.op_type();
}

// Names a subgraph reads from enclosing scopes (an If branch may use outer values directly).
void outerNames(const pb::GraphProto& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !defined.count(i)) out.insert(i);
    for (const auto& a : n.attribute()) {
      std::set<std::string> inner;
      if (a.has_g()) outerNames(a.g(), inner);
      for (const auto& sg : a.graphs()) outerNames(sg, inner);
      for (const auto& s : inner)
        if (!defined.count(s)) out.insert(s);
    }
  }
}

// Every value name node `n` reads: its inputs and what its subgraphs read from outside.
std::set<std::string> readsOf(const pb::NodeProto& n) {
  std::set<std::string> r;
  for (const auto& i : n.input())
    if (!i.empty()) r.insert(i);
  for (const auto& a : n.attribute()) {
    if (a.has_g()) outerNames(a.g(), r);
    for (const auto& sg : a.graphs()) outerNames(sg, r);
  }
  return r;
}

}  // namespace

Status Importer::importGraphNodes(const pb::GraphProto& g, Scope& scope) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : g.node(i).output()) {
      if (o.empty()) continue;
      auto [it, fresh] = producer.emplace(o, i);
      if (!fresh)
        return report(nodeName(g.node(i), i), qualifiedOp(g.node(i)),
                      Status::error("value '" + o + "' is also produced by node '" +
                                    nodeName(g.node(it->second), it->second) + "'"));
    }
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> waiting(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    for (const std::string& name : readsOf(g.node(i))) {
      auto it = producer.find(name);
      if (it != producer.end()) {
        users[static_cast<size_t>(it->second)].push_back(i);
        ++waiting[static_cast<size_t>(i)];
      } else if (!scope.defines(name) && !poisoned_.count(name)) {
        KILN_RETURN_IF_ERROR(report(nodeName(g.node(i), i), qualifiedOp(g.node(i)),
                                    Status::error("input '" + name +
                                                  "' is not produced by any node, initializer "
                                                  "or graph input")));
        poisoned_.insert(name);
      }
    }
  }
  // Kahn's algorithm, preferring the model's own order among ready nodes.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (waiting[static_cast<size_t>(i)] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[static_cast<size_t>(i)])
      if (--waiting[static_cast<size_t>(u)] == 0) ready.push(u);
  }
  if (static_cast<int>(order.size()) != n) {
    std::string names;
    int listed = 0;
    for (int i = 0; i < n && listed < 8; ++i)
      if (waiting[static_cast<size_t>(i)] > 0) {
        names += (listed++ ? ", '" : "'") + nodeName(g.node(i), i) + "'";
      }
    return report("graph '" + g.name() + "'", "", Status::error("cycle through nodes " + names));
  }
  for (int i : order) {
    const pb::NodeProto& node = g.node(i);
    std::string name = scope.originPrefix + nodeName(node, i);
    if (skipPoisoned(node, scope, name)) continue;
    KILN_RETURN_IF_ERROR(importNode(node, scope, name));
  }
  return Status::ok();
}

Status Importer::importNodeList(const std::vector<const pb::NodeProto*>& nodes, Scope& scope) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const pb::NodeProto& node = *nodes[i];
    std::string name = scope.originPrefix + nodeName(node, static_cast<int>(i));
    if (skipPoisoned(node, scope, name)) continue;
    for (const auto& in : node.input())
      if (!in.empty() && !scope.defines(in))
        return report(name, qualifiedOp(node),
                      Status::error("input '" + in + "' is not defined in the function body"));
    KILN_RETURN_IF_ERROR(importNode(node, scope, name));
  }
  return Status::ok();
}

bool Importer::skipPoisoned(const pb::NodeProto& node, Scope& scope, const std::string& name) {
  if (mode_ != Mode::Check) return false;
  bool poisoned = false;
  for (const std::string& in : readsOf(node)) poisoned |= !scope.defines(in) && poisoned_.count(in);
  if (!poisoned) return false;
  // The node cannot be checked in full without its inputs; still say if its op is unknown.
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto opset = scope.opsets.find(domain);
  bool known = domain.empty() && opset != scope.opsets.end() &&
               (opTable().find(node.op_type(), opset->second) ||
                ::onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, ""));
  known |= localFunction(node.domain(), node.op_type()) != nullptr;
  if (!known) (void)report(name, qualifiedOp(node), Status::error("op not supported"));
  for (const auto& o : node.output()) poisoned_.insert(o);
  return true;
}

void Importer::placeholdOutputs(const pb::NodeProto& node, Scope& scope) {
  if (mode_ != Mode::Check) return;
  for (const auto& o : node.output()) {
    if (o.empty() || scope.defines(o)) continue;
    auto it = hintTypes_.find(o);
    if (it != hintTypes_.end()) {
      pb::ValueInfoProto vi;
      *vi.mutable_type() = it->second;
      auto type = typeOfValueInfo(vi, o);
      if (type) {
        scope.values[o] = f_->addParameter(*type, o);
        continue;
      }
    }
    poisoned_.insert(o);
  }
}

namespace {

// The input types a context-dependent function body is built for (absent inputs stay empty).
std::vector<pb::TypeProto> inputTypes(const pb::NodeProto& node, const Scope& scope) {
  std::vector<pb::TypeProto> types;
  for (int i = 0; i < node.input_size(); ++i) {
    pb::TypeProto t;
    if (Value* v = node.input(i).empty() ? nullptr : scope.lookup(node.input(i))) {
      auto* tt = t.mutable_tensor_type();
      tt->set_elem_type(onnxFromDType(v->type().dtype()));
      auto* shape = tt->mutable_shape();
      for (const Dim& d : v->type().dims()) {
        if (d.isStatic()) shape->add_dim()->set_dim_value(d.value());
        else shape->add_dim()->set_dim_param(d.str());
      }
    }
    types.push_back(std::move(t));
  }
  return types;
}

// The function body ONNX defines for the op at this opset, if any.
std::optional<pb::FunctionProto> schemaFunction(const ::onnx::OpSchema& schema,
                                                const pb::NodeProto& node, const Scope& scope) {
  if (schema.HasFunction() && schema.GetFunction()) return *schema.GetFunction();
  if (!schema.HasContextDependentFunction()) return std::nullopt;
  ::onnx::FunctionBodyBuildContextImpl ctx(node, inputTypes(node, scope));
  pb::FunctionProto body;
  try {
    if (schema.BuildContextDependentFunction(ctx, body)) return body;
  } catch (const std::exception&) {
    // A builder that rejects the node leaves the op unsupported.
  }
  return std::nullopt;
}

}  // namespace

Status Importer::runMapping(MapFn fn, const pb::NodeProto& node, Scope& scope,
                            const std::string& name, int opset) {
  Builder b(f_);
  b.setOrigin(name);
  OpContext ctx(*this, scope, node, name, opset, b);
  Status s = fn(ctx);
  if (s && !b.ok()) s = b.status();
  if (s) s = ctx.finish();
  for (int i = 0; s && i < node.output_size(); ++i)
    if (ctx.wantsOutput(i) && !ctx.produced(i))
      s = Status::error("output " + std::to_string(i) + " ('" + node.output(i) +
                        "') is not supported");
  return s;
}

Status Importer::importNode(const pb::NodeProto& node, Scope& scope, const std::string& name) {
  std::string op = qualifiedOp(node);
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto opsetIt = scope.opsets.find(domain);
  Status s;
  int opset = 0;
  if (const pb::FunctionProto* fn = localFunction(node.domain(), node.op_type())) {
    s = expandFunction(*fn, node, scope, name);
  } else if (!domain.empty()) {
    s = report(name, op, Status::error("domain '" + domain + "' is not supported"));
  } else if (opsetIt == scope.opsets.end()) {
    s = report(name, op, Status::error("the model imports no opset of the default domain"));
  } else if (opset = opsetIt->second;
             node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan") {
    s = node.op_type() == "If"     ? importIf(node, scope, name)
        : node.op_type() == "Loop" ? importLoop(node, scope, name)
                                   : importScan(node, scope, name, opset);
    if (!s) placeholdOutputs(node, scope);
    return report(name, op, s, opset);
  } else if (MapFn fn = opTable().find(node.op_type(), opset)) {
    s = runMapping(fn, node, scope, name, opset);
    if (!s) placeholdOutputs(node, scope);
    return report(name, op, s, opset);
  } else {
    const auto* schema = ::onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "");
    if (auto body = schema ? schemaFunction(*schema, node, scope) : std::nullopt) {
      s = expandFunction(*body, node, scope, name, schema);
    } else {
      std::string why =
          schema ? "op not supported"
                 : "op not supported (no such op in opset " + std::to_string(opset) + ")";
      s = report(name, op, Status::error(why), opset);
    }
  }
  // Check mode reports and returns ok; stand-ins keep later nodes checkable.
  if (!s || !scope.defines(node.output_size() ? node.output(0) : "")) placeholdOutputs(node, scope);
  return s;
}

}  // namespace kiln::onnx
