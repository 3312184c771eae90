#include "ir/ir.h"

#include <algorithm>

namespace kiln {

bool Value::isFunctionOutput() const {
  const Function* f = def_->parent();
  return std::find(f->outputs().begin(), f->outputs().end(), this) != f->outputs().end();
}

bool Value::hasUses() const { return !uses_.empty() || isFunctionOutput(); }

Node::~Node() = default;

void Node::setOperand(size_t i, Value* v) {
  Value* old = operands_[i];
  if (old == v) return;
  auto& u = old->uses_;
  u.erase(std::find(u.begin(), u.end(), Use{this, static_cast<unsigned>(i)}));
  operands_[i] = v;
  v->uses_.push_back(Use{this, static_cast<unsigned>(i)});
}

const ConstantData& Node::constantData() const {
  KILN_CHECK(op_ == OpCode::Constant, "constantData() of a non-constant node");
  auto it = attrs_.find("value");
  KILN_CHECK(it != attrs_.end() && attrKind(it->second) == AttrKind::Tensor,
             "constant without a tensor value");
  return std::get<static_cast<size_t>(AttrKind::Tensor)>(it->second);
}

std::string Node::describe() const {
  std::string s;
  if (!origin_.empty()) s = "node '" + origin_ + "' (" + std::string(opName(op_)) + ")";
  else s = std::string(opName(op_));
  if (loc_.known()) s += " at " + loc_.str();
  return s;
}

Value* Function::addParameter(TensorType type, std::string name) {
  AttrMap attrs;
  attrs["index"] = intAttr(static_cast<int64_t>(params_.size()));
  // Parameters go after the existing parameters, before any other node.
  Node* before = nullptr;
  for (auto& n : nodes_)
    if (n->op() != OpCode::Parameter) {
      before = n.get();
      break;
    }
  Node* n = createNode(OpCode::Parameter, {}, {std::move(type)}, std::move(attrs), before);
  n->result()->setName(std::move(name));
  params_.push_back(n);
  return n->result();
}

Node* Function::createNode(OpCode op, std::vector<Value*> operands,
                           std::vector<TensorType> resultTypes, AttrMap attrs, Node* before) {
  std::unique_ptr<Node> node(new Node(this, op));
  Node* n = node.get();
  n->operands_ = std::move(operands);
  for (size_t i = 0; i < n->operands_.size(); ++i) {
    KILN_CHECK(n->operands_[i] != nullptr, "null operand");
    n->operands_[i]->uses_.push_back(Use{n, static_cast<unsigned>(i)});
  }
  for (size_t i = 0; i < resultTypes.size(); ++i)
    n->results_.emplace_back(new Value(n, static_cast<unsigned>(i), std::move(resultTypes[i])));
  n->attrs_ = std::move(attrs);
  auto pos = before ? before->self_ : nodes_.end();
  n->self_ = nodes_.insert(pos, std::move(node));
  return n;
}

void Function::erase(Node* n) {
  for (size_t i = 0; i < n->numResults(); ++i)
    KILN_CHECK(!n->result(i)->hasUses(), "erasing " + n->describe() + " whose result has uses");
  for (size_t i = 0; i < n->operands_.size(); ++i) {
    auto& u = n->operands_[i]->uses_;
    u.erase(std::find(u.begin(), u.end(), Use{n, static_cast<unsigned>(i)}));
  }
  if (n->op() == OpCode::Parameter) params_.erase(std::find(params_.begin(), params_.end(), n));
  nodes_.erase(n->self_);
}

void Function::setOutputs(std::vector<Value*> outs) {
  std::vector<std::string> names;
  for (const Value* v : outs) names.push_back(v->name());
  setOutputs(std::move(outs), std::move(names));
}

void Function::setOutputs(std::vector<Value*> outs, std::vector<std::string> names) {
  KILN_CHECK(outs.size() == names.size(), "setOutputs: one name per output");
  outputs_ = std::move(outs);
  outputNames_ = std::move(names);
}

void Function::replaceAllUsesWith(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.user->setOperand(u.operandIndex, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

Function* Module::addFunction(std::string name) {
  functions_.push_back(std::make_unique<Function>(std::move(name)));
  return functions_.back().get();
}

Function* Module::function(std::string_view name) const {
  for (auto& f : functions_)
    if (f->name() == name) return f.get();
  return nullptr;
}

Function* Module::entry() const {
  if (Function* f = function("main")) return f;
  return functions_.empty() ? nullptr : functions_.front().get();
}

const Node* firstStringNode(const Function& f) {
  for (const auto& n : f.nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      if (isString(n->result(r)->type().dtype())) return n.get();
  return nullptr;
}

}  // namespace kiln
