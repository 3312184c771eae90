#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {

Status verifyNode(const Node& n) {
  std::vector<TensorType> operandTypes;
  operandTypes.reserve(n.numOperands());
  for (Value* v : n.operands()) operandTypes.push_back(v->type());
  std::vector<TensorType> declared;
  for (size_t i = 0; i < n.numResults(); ++i) declared.push_back(n.result(i)->type());
  InferInput in{n.op(), operandTypes, n.attrs(), declared};
  auto inferred = inferResultTypes(in);
  if (!inferred) {
    Status s = inferred.status();
    return s.at(n.loc());
  }
  if (inferred->size() != declared.size())
    return Status::error(std::string(opName(n.op())) + " has " + std::to_string(declared.size()) +
                             " results, expected " + std::to_string(inferred->size()),
                         n.loc());
  for (size_t i = 0; i < declared.size(); ++i) {
    if ((*inferred)[i] != declared[i]) {
      std::string which = declared.size() > 1 ? " result " + std::to_string(i) : std::string();
      return Status::error(std::string(opName(n.op())) + which + " has type " + declared[i].str() +
                               " but its operands and attributes give " + (*inferred)[i].str(),
                           n.loc());
    }
  }
  return Status::ok();
}

Status verify(const Function& f) {
  std::unordered_set<const Value*> defined;
  int64_t paramIndex = 0;
  bool pastParams = false;
  for (const auto& np : f.nodes()) {
    const Node& n = *np;
    if (n.parent() != &f)
      return Status::error(n.describe() + " belongs to another function", n.loc());
    if (n.op() == OpCode::Parameter) {
      if (pastParams) return Status::error("parameter after a non-parameter node", n.loc());
      if (n.attrInt("index") != paramIndex)
        return Status::error("parameter " + std::to_string(n.attrInt("index")) +
                                 " out of order (expected " + std::to_string(paramIndex) + ")",
                             n.loc());
      ++paramIndex;
    } else {
      pastParams = true;
    }
    for (size_t i = 0; i < n.numOperands(); ++i) {
      const Value* v = n.operand(i);
      if (!defined.count(v)) {
        std::string name = v->name().empty() ? "a value" : "%" + v->name();
        return Status::error(std::string(opName(n.op())) + " operand " + std::to_string(i) +
                                 " uses " + name + " before it is defined",
                             n.loc());
      }
      const auto& uses = v->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(&n), unsigned(i)}) ==
          uses.end())
        return Status::error("use list of an operand of " + n.describe() + " is out of date",
                             n.loc());
    }
    KILN_RETURN_IF_ERROR(verifyNode(n));
    for (size_t i = 0; i < n.numResults(); ++i) defined.insert(n.result(i));
  }
  if (static_cast<size_t>(paramIndex) != f.numParameters())
    return Status::error("function @" + f.name() + " parameter list is out of date");
  if (f.outputs().empty()) return Status::error("function @" + f.name() + " returns nothing");
  for (const Value* v : f.outputs())
    if (!v || !defined.count(v))
      return Status::error("function @" + f.name() + " returns a value it does not define");
  return Status::ok();
}

Status verify(const Module& m) {
  if (m.functions().empty()) return Status::error("module has no functions");
  std::unordered_set<std::string> names;
  for (const auto& f : m.functions()) {
    if (!names.insert(f->name()).second)
      return Status::error("function @" + f->name() + " is defined twice");
    KILN_RETURN_IF_ERROR(verify(*f));
  }
  return Status::ok();
}

}  // namespace kiln
