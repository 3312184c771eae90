// Library calls of kernel IR as nodes. See call_node.h.
#include "codegen/cpu/call_node.h"

#include <algorithm>
#include <optional>
#include <string>

#include "ir/builder.h"

namespace kiln::codegen::cpu {
namespace {

// The dims of buffer `b` at `sizes` (its static shape when it has no symbolic dims).
StatusOr<Shape> dimsAt(const kernel::Buffer& b, const SymbolBindings* sizes) {
  if (!b.isSymbolic()) return Shape(b.shape.begin(), b.shape.end());
  Shape dims;
  for (size_t d = 0; d < b.dims.size(); ++d) {
    std::optional<int64_t> extent =
        sizes ? kernel::evaluateExtent(b.dims[d], *sizes) : std::nullopt;
    if (!extent)
      return Status::error("%" + b.name + " dim " + std::to_string(d) + " (" +
                           kernel::printExpr(b.dims[d]) + ") has no size");
    dims.emplace_back(*extent);
  }
  return dims;
}

}  // namespace

const Node* callConstant(const kernel::Kernel& k, const kernel::Stmt& call, size_t i) {
  const kernel::Buffer* b = i < kernel::callOperands(call) ? k.find(call.args[i]) : nullptr;
  const Node* def = b && b->value ? b->value->def() : nullptr;
  return def && def->op() == OpCode::Constant ? def : nullptr;
}

StatusOr<CallNode> callNode(const kernel::Kernel& k, const kernel::Stmt& call,
                            const SymbolBindings* sizes, bool constants) {
  auto fail = [&](const Status& s) {
    return Status(s).prefix("kernel " + k.name + ": call " + call.callee());
  };
  auto typeOf = [&](const std::string& name) -> StatusOr<TensorType> {
    const kernel::Buffer* b = k.find(name);
    if (!b) return Status::error("argument %" + name + " is no buffer");
    KILN_ASSIGN_OR_RETURN(Shape dims, dimsAt(*b, sizes));
    return TensorType(b->type, std::move(dims));
  };
  CallNode c;
  c.module = std::make_shared<Module>();
  Function* f = c.module->addFunction("call");
  Builder b(f);
  const size_t operands = kernel::callOperands(call), results = kernel::callResults(call);
  if (operands + results > call.args.size())
    return fail(Status::error("has fewer arguments than its operands and results"));
  std::vector<Value*> in;
  for (size_t i = 0; i < operands; ++i) {
    const Node* def = constants ? callConstant(k, call, i) : nullptr;
    StatusOr<TensorType> t = typeOf(call.args[i]);
    if (!t) return fail(t.status());
    // A constant shares its data (or is held, as the graph's is).
    in.push_back(def ? b.op(OpCode::Constant, {}, def->attrs(), {def->result(0)->type()})
                     : b.parameter(*t));
  }
  std::vector<TensorType> declared;
  for (size_t r = 0; r < results; ++r) {
    StatusOr<TensorType> t = typeOf(call.args[operands + r]);
    if (!t) return fail(t.status());
    declared.push_back(*t);
  }
  if (!b.ok()) return fail(b.status());
  StatusOr<Node*> n = b.tryBuild(call.op, in, call.attrs, declared);
  if (!n) return fail(n.status());
  std::vector<Value*> out;
  for (size_t r = 0; r < results; ++r) out.push_back((*n)->result(r));
  f->setOutputs(out);
  // Messages name the graph node the call came from: "node 'conv1' (convolution)".
  (*n)->setOrigin(call.origin);
  (*n)->setLoc(call.loc);
  c.node = *n;
  c.postOps = call.postOps;
  for (kernel::PostOp& p : c.postOps) {
    if (p.operand.empty()) continue;
    StatusOr<TensorType> t = typeOf(p.operand);
    if (!t) return fail(Status(t.status()).prefix("post-op operand"));
    p.operandShape = t->staticDims();
  }
  return c;
}

StoredBlocked storedBlocked(const kernel::Kernel& k, const kernel::Stmt& call) {
  StoredBlocked s;
  for (size_t i = 0; i < call.args.size(); ++i) {
    const kernel::Buffer* b = k.find(call.args[i]);
    if (!b || b->layout.empty()) continue;
    s.positions.push_back(i);
    s.layout = b->layout;
  }
  return s;
}

Status tellStoredBlocked(LibraryKernel& lk, const StoredBlocked& stored) {
  const std::vector<size_t> blockable = lk.blockableBuffers();
  for (size_t p : stored.positions)
    if (lk.blockedLayout() != stored.layout ||
        std::find(blockable.begin(), blockable.end(), p) == blockable.end())
      return Status::error("its argument " + std::to_string(p) + " is stored in layout " +
                           stored.layout + ", and its library kernel (" + lk.describe() +
                           ") does not read and write it so");
  if (!blockable.empty()) lk.storeBlocked(stored.positions);
  return Status::ok();
}

}  // namespace kiln::codegen::cpu
