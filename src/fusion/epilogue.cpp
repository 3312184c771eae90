// The epilogue policy. See epilogue.h.
#include "fusion/epilogue.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "fusion/fusion.h"

namespace kiln::fusion {
namespace {

// The chain's view of one kernel: which nodes are members and which values are stored.
class ChainPlanner {
 public:
  ChainPlanner(const Kernel& k, const std::function<std::string(const Value*)>& name)
      : k_(k), name_(name), members_(k.nodes.begin(), k.nodes.end()) {}

  bool stored(const Value* v) const {
    return std::find(k_.outputs.begin(), k_.outputs.end(), v) != k_.outputs.end();
  }
  bool member(const Node* n) const { return members_.count(n) > 0; }

  // The value of a splat: a one-element constant, read directly or through a broadcast in the
  // kernel.
  std::optional<double> splatValue(const Value* v) const {
    const Node* n = v->def();
    if (member(n) && n->op() == OpCode::BroadcastInDim && !stored(v)) {
      v = n->operand(0);
      n = v->def();
    }
    if (member(n) || n->op() != OpCode::Constant || v->type().numElements() != 1)
      return std::nullopt;
    const Tensor& t = n->constantData().tensor;
    if (!t.defined()) return std::nullopt;
    return t.getDouble(0);
  }

  // `other` as the operand of an add or mul: a value of one of `types` read from memory
  // (computed outside the kernel), directly or through a broadcast in the kernel.
  std::optional<PostOpStep> binaryOperand(PostOpKind kind, const Value* other, size_t rank,
                                          const std::vector<DType>& types) const {
    PostOpStep p;
    p.kind = kind;
    const Node* n = other->def();
    if (member(n) && n->op() == OpCode::BroadcastInDim && !stored(other)) {
      p.operandDims = n->attrInts("dims");
      other = n->operand(0);
      n = other->def();
    } else {
      for (size_t d = 0; d < rank; ++d) p.operandDims.push_back(static_cast<int64_t>(d));
    }
    if (member(n) || std::find(types.begin(), types.end(), other->type().dtype()) == types.end())
      return std::nullopt;
    if (other->type().rank() != static_cast<int64_t>(p.operandDims.size())) return std::nullopt;
    p.operand = other;
    return p;
  }

  // The post-op that `u` (the only user of `cur`) applies to `cur`, or none.
  std::optional<PostOpStep> stepFor(const Node* u, const Value* cur,
                                    const std::vector<DType>& types) const {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    auto step = [](PostOpKind kind, double lo = 0, double hi = 0) {
      PostOpStep p;
      p.kind = kind;
      p.lo = lo;
      p.hi = hi;
      return p;
    };
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
          return u->op() == OpCode::Max ? step(PostOpKind::Clamp, *c, kInf)
                                        : step(PostOpKind::Clamp, -kInf, *c);
        }
        return binaryOperand(u->op() == OpCode::Add ? PostOpKind::Add : PostOpKind::Mul, other,
                             static_cast<size_t>(cur->type().rank()), types);
      }
      case OpCode::Clamp: {
        if (u->operand(1) != cur) return std::nullopt;
        std::optional<double> lo = splatValue(u->operand(0)), hi = splatValue(u->operand(2));
        if (!lo || !hi || std::isnan(*lo) || std::isnan(*hi) || *lo > *hi) return std::nullopt;
        return step(PostOpKind::Clamp, *lo, *hi);
      }
      case OpCode::Sigmoid: return step(PostOpKind::Sigmoid);
      case OpCode::Tanh: return step(PostOpKind::Tanh);
      case OpCode::Gelu:
        return step(u->attrEnum("approximate") == "tanh" ? PostOpKind::GeluTanh : PostOpKind::Gelu);
      default: return std::nullopt;
    }
  }

  // SiLU x * sigmoid(x) of `cur` in the kernel, its sigmoid not stored: the mul's result, or
  // null.
  const Value* swishOf(const Value* cur, const std::vector<DType>& types) const {
    const auto [s, m] = siluOf(cur);
    if (!m || !member(m) || !member(s) || stored(s->result(0))) return nullptr;
    const DType t = m->result(0)->type().dtype();
    return std::find(types.begin(), types.end(), t) != types.end() ? m->result(0) : nullptr;
  }

  PostOpChain run(const EpiloguePolicy& policy) const {
    const Node* a = k_.anchor;
    PostOpChain chain;
    const Value* cur = chain.result = a->result(0);
    auto listed = [](const auto& list, auto x) {
      return std::find(list.begin(), list.end(), x) != list.end();
    };
    if (!policy.postOps) {
      chain.stop = "post-ops are off";
      return chain;
    }
    if (a->numResults() != 1 || !listed(policy.anchors, a->op()) ||
        !listed(policy.types, cur->type().dtype())) {
      std::string types;
      for (DType t : policy.types) types += (types.empty() ? "" : "/") + std::string(dtypeName(t));
      chain.stop = "only " + types + " convolutions and matrix products take post-ops";
      return chain;
    }
    std::vector<PostOpStep>& ops = chain.steps;
    while (true) {
      if (stored(cur)) {
        chain.stop = name_(cur) + " is stored (another kernel or the caller reads it)";
        break;
      }
      if (const Value* silu = swishOf(cur, policy.types)) {
        if (std::string no = policy.refuses ? policy.refuses(*a, PostOpKind::Swish) : "";
            !no.empty()) {
          chain.stop = "swish (" + name_(silu) + "): " + no;
          break;
        }
        PostOpStep p;
        p.kind = PostOpKind::Swish;
        ops.push_back(p);
        chain.result = cur = silu;
        continue;
      }
      if (cur->uses().size() != 1) {
        chain.stop = name_(cur) + " has " + std::to_string(cur->uses().size()) + " uses";
        break;
      }
      const Node* u = cur->uses()[0].user;
      if (!member(u)) break;
      std::optional<PostOpStep> p;
      if (u->numResults() == 1 && listed(policy.types, u->result(0)->type().dtype()))
        p = stepFor(u, cur, policy.types);
      if (!p) {
        chain.stop = std::string(opName(u->op())) + " (" + name_(u->result(0)) +
                     ") is not a post-op (add or mul of an input, max/min/clamp by a constant, " +
                     "sigmoid, tanh, gelu, x * sigmoid(x))";
        break;
      }
      // max then min (or min then max) of splats is one clamp when it stays a clamp.
      if (p->kind == PostOpKind::Clamp && !ops.empty() && ops.back().kind == PostOpKind::Clamp &&
          std::max(ops.back().lo, p->lo) <= std::min(ops.back().hi, p->hi)) {
        ops.back().lo = std::max(ops.back().lo, p->lo);
        ops.back().hi = std::min(ops.back().hi, p->hi);
      } else {
        ops.push_back(*p);
      }
      chain.result = cur = u->result(0);
    }
    return chain;
  }

 private:
  const Kernel& k_;
  const std::function<std::string(const Value*)>& name_;
  std::set<const Node*> members_;
};

}  // namespace

PostOpChain planPostOps(const Kernel& k, const EpiloguePolicy& policy,
                        const std::function<std::string(const Value*)>& name) {
  return ChainPlanner(k, name).run(policy);
}

Silu siluOf(const Value* x) {
  if (x->uses().size() != 2) return {};
  Silu f;
  for (const Use& u : x->uses()) {
    if (u.user->op() == OpCode::Sigmoid) f.sigmoid = u.user;
    else if (u.user->op() == OpCode::Mul) f.mul = u.user;
  }
  if (!f.sigmoid || !f.mul) return {};
  const Value* s = f.sigmoid->result(0);
  const Node* m = f.mul;
  const bool pair =
      (m->operand(0) == x && m->operand(1) == s) || (m->operand(1) == x && m->operand(0) == s);
  return pair && s->uses().size() == 1 ? f : Silu{};
}

const char* postOpKindName(PostOpKind k) {
  switch (k) {
    case PostOpKind::Add: return "add";
    case PostOpKind::Mul: return "mul";
    case PostOpKind::Clamp: return "clamp";
    case PostOpKind::Sigmoid: return "sigmoid";
    case PostOpKind::Tanh: return "tanh";
    case PostOpKind::Gelu: return "gelu";
    case PostOpKind::GeluTanh: return "gelu_tanh";
    case PostOpKind::Swish: return "swish";
  }
  return "?";
}

}  // namespace kiln::fusion
