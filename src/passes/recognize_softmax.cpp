// recognize-patterns: softmax.
//   exp(x - max(x)) / sum(exp(x - max(x)))  -> softmax(x)
//   exp(y) / sum(exp(y))                     -> softmax(y)
// over one axis; the max and the sum are reductions brought back to x's shape by broadcast_in_dim
// (and a keepdims reshape, as exporters write ReduceMax/ReduceSum with keepdims = 1).
#include "passes/recognize_matchers.h"
#include "passes/recognize_util.h"
#include "passes/rewrite_util.h"

namespace kiln::recognize {

Value* recognizeSoftmax(Node& root) {
  const TensorType& type = root.result()->type();
  if (root.op() != OpCode::Div || !isFloat(type.dtype())) return nullptr;
  Value* e = root.operand(0);
  if (!isOp(e, OpCode::Exp)) return nullptr;
  auto sum = matchReduceChain(root.operand(1));
  if (!sum || sum->input != e || sum->kind != "sum" || !sum->steps.empty() || sum->dims.size() != 1)
    return nullptr;
  Value* x = e->def()->operand(0);
  // softmax(x - max(x)) = softmax(x): drop the stabilising subtraction the composite does itself.
  if (isOp(x, OpCode::Sub)) {
    auto max = matchReduceChain(x->def()->operand(1));
    if (max && max->input == x->def()->operand(0) && max->kind == "max" && max->steps.empty() &&
        max->dims == sum->dims)
      x = max->input;
  }
  Builder b = rewrite::builderBefore(&root);
  return b.op(OpCode::Softmax, {x}, {{"axis", intAttr(sum->dims[0])}});
}

}  // namespace kiln::recognize
