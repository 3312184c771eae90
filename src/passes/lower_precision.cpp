// lower-precision. See lower_precision.h.
#include "passes/lower_precision.h"

#include <vector>

#include "ir/tensor.h"

namespace kiln {
namespace {

TensorType withDType(const TensorType& t, DType d) { return TensorType(d, t.dims()); }

Tensor rounded(const Tensor& t, DType low) {
  Tensor out(low, t.dims());
  for (int64_t i = 0; i < t.numElements(); ++i) out.setDouble(i, t.getDouble(i));
  return out;
}

bool lowerFunction(Function& f, DType low) {
  bool changed = false;
  std::vector<bool> f32Output;
  for (const Value* v : f.outputs()) f32Output.push_back(v->type().dtype() == DType::F32);
  // Parameters: uses go through a convert to `low`, created before the first other node.
  Node* first = nullptr;
  for (const auto& n : f.nodes())
    if (n->op() != OpCode::Parameter) {
      first = n.get();
      break;
    }
  std::vector<std::pair<Value*, Value*>> params;  // f32 parameter, its low copy
  for (size_t i = 0; i < f.numParameters(); ++i) {
    Value* p = f.parameter(i);
    if (p->type().dtype() != DType::F32 || !p->hasUses()) continue;
    Node* c = f.createNode(OpCode::Convert, {p}, {withDType(p->type(), low)}, {}, first);
    params.emplace_back(p, c->result());
  }
  // Nodes: f32 results take `low`; f32 constants are rounded.
  for (const auto& n : f.nodes()) {
    if (n->op() == OpCode::Parameter) continue;
    for (size_t r = 0; r < n->numResults(); ++r) {
      Value* v = n->result(r);
      if (v->type().dtype() != DType::F32) continue;
      v->setType(withDType(v->type(), low));
      changed = true;
    }
    if (n->op() == OpCode::Constant && n->result()->type().dtype() == low &&
        n->constantData().tensor.dtype() == DType::F32) {
      ConstantData d = n->constantData();
      n->setAttr("value", tensorAttr(rounded(d.tensor, low), d.poolName));
    }
  }
  // Uses of each parameter by nodes move to its copy (a returned parameter stays itself).
  for (auto& [p, c] : params) {
    for (const auto& n : f.nodes())
      if (n.get() != c->def())
        for (size_t i = 0; i < n->numOperands(); ++i)
          if (n->operand(i) == p) n->setOperand(i, c);
    changed = true;
  }
  // Outputs that were f32: converted back where they are returned.
  for (size_t o = 0; o < f.outputs().size(); ++o) {
    Value* v = f.outputs()[o];
    if (!f32Output[o] || v->type().dtype() != low) continue;
    Node* c = f.createNode(OpCode::Convert, {v}, {withDType(v->type(), DType::F32)});
    f.setOutput(o, c->result());
  }
  return changed;
}

}  // namespace

StatusOr<bool> lowerPrecision(Module& m, DType low) {
  if (low != DType::F16 && low != DType::BF16)
    return Status::error("lower-precision takes f16 or bf16, not " + std::string(dtypeName(low)));
  bool changed = false;
  for (const auto& f : m.functions()) changed |= lowerFunction(*f, low);
  return changed;
}

}  // namespace kiln
