// Lowering of contraction, attention and opaque kernels: the library call of the anchor op, the
// head of its epilogue folded into post-ops, the rest as loop nests (see lower.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel/lower_opaque.h"
#include "kernel/lowerer.h"

namespace kiln::kernel::lowering {

std::optional<double> Lowerer::splatValue(const Value* v) const {
  const Node* n = v->def();
  if (members_.count(n) && n->op() == OpCode::BroadcastInDim && !isStored(v)) {
    v = n->operand(0);
    n = v->def();
  }
  if (members_.count(n) || n->op() != OpCode::Constant || v->type().numElements() != 1)
    return std::nullopt;
  const Tensor& t = n->constantData().tensor;
  if (!t.defined()) return std::nullopt;
  return t.getDouble(0);
}

std::optional<PostOp> Lowerer::binaryOperand(PostOp::Kind kind, const Value* other,
                                             const std::vector<int64_t>& shape) {
  PostOp p;
  p.kind = kind;
  const Node* n = other->def();
  if (members_.count(n) && n->op() == OpCode::BroadcastInDim && !isStored(other)) {
    p.operandDims = n->attrInts("dims");
    other = n->operand(0);
    n = other->def();
  } else {
    for (size_t d = 0; d < shape.size(); ++d) p.operandDims.push_back(static_cast<int64_t>(d));
  }
  if (members_.count(n) || other->type().dtype() != DType::F32) return std::nullopt;
  p.operandShape = other->type().staticDims();
  if (p.operandShape.size() != p.operandDims.size()) return std::nullopt;
  p.operand = bufferFor(other, BufferRole::Input).name;
  return p;
}

std::optional<PostOp> Lowerer::postOpFor(const Node* u, const Value* cur) {
  const std::vector<int64_t> shape = cur->type().staticDims();
  auto unaryOp = [](PostOp::Kind kind) {
    PostOp p;
    p.kind = kind;
    return p;
  };
  auto clamp = [&](double lo, double hi) {
    PostOp p = unaryOp(PostOp::Kind::Clamp);
    p.lo = lo;
    p.hi = hi;
    return p;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (u->op()) {
    case OpCode::Add:
    case OpCode::Mul:
    case OpCode::Max:
    case OpCode::Min: {
      if (u->operand(0) == cur && u->operand(1) == cur) return std::nullopt;
      const Value* other = u->operand(0) == cur ? u->operand(1) : u->operand(0);
      if (u->op() == OpCode::Max || u->op() == OpCode::Min) {
        std::optional<double> c = splatValue(other);
        if (!c || std::isnan(*c)) return std::nullopt;
        return u->op() == OpCode::Max ? clamp(*c, kInf) : clamp(-kInf, *c);
      }
      return binaryOperand(u->op() == OpCode::Add ? PostOp::Kind::Add : PostOp::Kind::Mul, other,
                           shape);
    }
    case OpCode::Clamp: {
      if (u->operand(1) != cur) return std::nullopt;
      std::optional<double> lo = splatValue(u->operand(0)), hi = splatValue(u->operand(2));
      if (!lo || !hi || std::isnan(*lo) || std::isnan(*hi) || *lo > *hi) return std::nullopt;
      return clamp(*lo, *hi);
    }
    case OpCode::Sigmoid: return unaryOp(PostOp::Kind::Sigmoid);
    case OpCode::Tanh: return unaryOp(PostOp::Kind::Tanh);
    case OpCode::Gelu: {
      bool tanh = u->attrEnum("approximate") == "tanh";
      return unaryOp(tanh ? PostOp::Kind::GeluTanh : PostOp::Kind::Gelu);
    }
    default: return std::nullopt;
  }
}

const Value* Lowerer::foldPostOps(std::vector<PostOp>& ops, std::string& why) {
  const Node* a = k_.anchor;
  const Value* cur = a->result(0);
  if (!options_.postOps || a->numResults() != 1 ||
      (a->op() != OpCode::DotGeneral && a->op() != OpCode::Convolution) ||
      cur->type().dtype() != DType::F32) {
    why = !options_.postOps ? "post-ops are off"
                            : "only f32 convolutions and matrix products take post-ops";
    return cur;
  }
  while (true) {
    if (isStored(cur)) {
      why = name(cur) + " is stored (another kernel or the caller reads it)";
      break;
    }
    if (cur->uses().size() != 1) {
      why = name(cur) + " has " + std::to_string(cur->uses().size()) + " uses";
      break;
    }
    const Node* u = cur->uses()[0].user;
    if (!members_.count(u)) break;
    std::optional<PostOp> p;
    if (u->numResults() == 1 && u->result(0)->type().dtype() == DType::F32) p = postOpFor(u, cur);
    if (!p) {
      why = std::string(opName(u->op())) + " (" + name(u->result(0)) +
            ") is not a post-op (add or mul of an input, max/min/clamp by a constant, " +
            "sigmoid, tanh, gelu)";
      break;
    }
    // max then min (or min then max) of splats is one clamp when it stays a clamp.
    if (p->kind == PostOp::Kind::Clamp && !ops.empty() && ops.back().kind == PostOp::Kind::Clamp &&
        std::max(ops.back().lo, p->lo) <= std::min(ops.back().hi, p->hi)) {
      ops.back().lo = std::max(ops.back().lo, p->lo);
      ops.back().hi = std::min(ops.back().hi, p->hi);
    } else {
      ops.push_back(*p);
    }
    cur = u->result(0);
  }
  return cur;
}

StatusOr<StmtRef> Lowerer::lowerCall() {
  const Node* a = k_.anchor;
  std::vector<std::string> args;
  for (const Value* v : a->operands()) args.push_back(bufferFor(v, BufferRole::Input).name);
  std::vector<PostOp> postOps;
  std::string why;
  const Value* last = foldPostOps(postOps, why);
  for (size_t r = 0; r < a->numResults(); ++r) {
    const Value* v = r == 0 ? last : a->result(r);
    BufferRole role = isStored(v) ? BufferRole::Output : BufferRole::Temp;
    const Buffer& b = bufferFor(v, role);
    args.push_back(b.name);
    // The rest of the epilogue reads the call's result from its buffer.
    std::string bname = b.name;
    std::vector<int64_t> shape = b.shape;
    DType dt = v->type().dtype();
    overrides_[v] = [bname, shape, dt](const Index& idx) {
      return cast(load(bname, dt, flatIndex(idx, shape)), computeType(dt));
    };
  }
  for (const PostOp& p : postOps)
    if (!p.operand.empty()) args.push_back(p.operand);
  StmtRef c = call(std::string(opName(a->op())), a, args, std::move(postOps));
  if (k_.kind == fusion::KernelKind::Opaque) {  // loops instead of the call (lower_opaque.h)
    const auto mid = args.begin() + static_cast<std::ptrdiff_t>(a->numOperands());
    std::vector<std::string> ins(args.begin(), mid);
    std::vector<std::string> outs(mid, mid + static_cast<std::ptrdiff_t>(a->numResults()));
    KILN_ASSIGN_OR_RETURN(std::optional<StmtRef> loops, lowerOpaqueOp(*a, ins, outs));
    if (loops) c = *loops;
  }
  std::vector<const Value*> rest;
  for (const Value* v : k_.outputs)
    if (v != last && v->def() != a) rest.push_back(v);
  if (rest.empty()) return c;
  c->note = why;
  KILN_ASSIGN_OR_RETURN(StmtRef after, storeAll(rest));
  return block({c, after});
}
}  // namespace kiln::kernel::lowering
