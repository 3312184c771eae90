// The kernel IR verifier. See verify.h.
#include "kernel/verify.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "kernel/lanes.h"

namespace kiln::kernel {
namespace {

std::string tn(DType t) { return std::string(dtypeName(t)); }

bool isComparison(BinaryOp op) {
  return op == BinaryOp::Lt || op == BinaryOp::Le || op == BinaryOp::Gt || op == BinaryOp::Ge ||
         op == BinaryOp::Eq || op == BinaryOp::Ne;
}

bool isPredicate(UnaryOp op) {
  return op == UnaryOp::IsFinite || op == UnaryOp::IsInf || op == UnaryOp::IsNan;
}

class Verifier {
 public:
  explicit Verifier(const Kernel& k) : k_(k) {}

  Status run() {
    for (const Symbol& s : k_.symbols) {
      if (!vars_.insert(s.name).second) return fail("symbol " + s.name + " is declared twice");
      if (s.lo < 0 || s.hi < s.lo) return fail("symbol " + s.name + " has an empty range");
    }
    for (const Buffer& b : k_.buffers) {
      if (!buffers_.emplace(b.name, b.type).second)
        return fail("buffer %" + b.name + " is declared twice");
      if (b.role == BufferRole::Internal) internal_.insert(b.name);
      if (!b.layout.empty()) blocked_[b.name] = b.layout;
      KILN_RETURN_IF_ERROR(dims(b));
    }
    if (!k_.body) return fail("it has no body");
    KILN_RETURN_IF_ERROR(stmt(*k_.body));
    return launches();
  }

 private:
  // A symbolic buffer's dims are expressions of the symbols whose largest values are `shape`.
  Status dims(const Buffer& b) const {
    if (b.dims.empty()) return Status::ok();
    if (b.dims.size() != b.shape.size())
      return fail("buffer %" + b.name + " has " + std::to_string(b.dims.size()) +
                  " symbolic dims for a rank of " + std::to_string(b.shape.size()));
    for (size_t d = 0; d < b.dims.size(); ++d) {
      std::optional<int64_t> hi = upperBound(b.dims[d], k_.symbols);
      if (!hi || *hi != b.shape[d])
        return fail("buffer %" + b.name + " dim " + std::to_string(d) + " (" +
                    printExpr(b.dims[d]) + ") is at most " +
                    (hi ? std::to_string(*hi) : "unbounded") + ", but its shape says " +
                    std::to_string(b.shape[d]));
    }
    return Status::ok();
  }

  Status fail(const std::string& why) const {
    return Status::error("kernel " + k_.name + ": " + why);
  }
  Status failAt(const Stmt& s, const std::string& why) const {
    std::string text;
    if (s.kind == Stmt::Kind::Store) text = "%" + s.buffer + "[" + printExpr(s.index) + "] = ...";
    else if (s.kind == Stmt::Kind::For) text = "for " + s.var;
    else if (s.kind == Stmt::Kind::Call) text = "call " + s.callee();
    else if (s.kind == Stmt::Kind::If) text = "if (...)";
    else if (s.kind == Stmt::Kind::Alloc) text = "local %" + s.buffer;
    else if (s.kind == Stmt::Kind::Barrier) text = "barrier";
    else if (s.kind == Stmt::Kind::Copy) text = "%" + s.buffer + "[...] = %" + s.from + "[...]";
    else if (s.kind == Stmt::Kind::Reduce) text = "%" + s.buffer + "[...] = reduce";
    return fail(why + (text.empty() ? "" : " (in `" + text.substr(0, 200) + "`)"));
  }

  // The type of `e` after checking it (each DAG node once).
  StatusOr<DType> expr(const ExprRef& e) {
    if (!e) return Status::error("a missing expression");
    if (checked_.count(e.get())) return e->type;
    std::vector<DType> args;
    for (const ExprRef& a : e->args) {
      KILN_ASSIGN_OR_RETURN(DType t, expr(a));
      args.push_back(t);
    }
    switch (e->kind) {
      case Expr::Kind::Const: break;
      case Expr::Kind::Var:
        if (!vars_.count(e->name))
          return Status::error("variable " + e->name +
                               " is not the variable of an enclosing loop or a symbol");
        if (e->type != DType::I64) return Status::error("variable " + e->name + " is not i64");
        break;
      case Expr::Kind::Load: {
        auto it = buffers_.find(e->name);
        if (it == buffers_.end()) return Status::error("load of unknown buffer %" + e->name);
        if (internal_.count(e->name)) return Status::error(noMemory(e->name));
        if (blocked_.count(e->name)) return Status::error(notRowMajor(e->name));
        if (args.size() != 1 || args[0] != DType::I64)
          return Status::error("the index of a load of %" + e->name + " is not i64");
        if (e->type != it->second)
          return Status::error("a load of %" + e->name + " is " + tn(e->type) + ", the buffer " +
                               tn(it->second));
        break;
      }
      case Expr::Kind::Unary: {
        DType want = isPredicate(e->unary) ? DType::Bool : args[0];
        if (args.size() != 1 || e->type != want)
          return Status::error(std::string(unaryOpName(e->unary)) + " of " + tn(args[0]) +
                               " is typed " + tn(e->type));
        break;
      }
      case Expr::Kind::Binary: {
        if (args.size() != 2 || args[0] != args[1])
          return Status::error(std::string(binaryOpName(e->binary)) + " of " + tn(args[0]) +
                               " and " + tn(args[1]));
        DType want = isComparison(e->binary) ? DType::Bool : args[0];
        if (e->type != want)
          return Status::error(std::string(binaryOpName(e->binary)) + " of " + tn(args[0]) +
                               " is typed " + tn(e->type));
        break;
      }
      case Expr::Kind::Select:
        if (args.size() != 3 || args[0] != DType::Bool)
          return Status::error("a select's condition is not bool");
        if (args[1] != args[2] || e->type != args[1])
          return Status::error(std::string("a select of ") + tn(args[1]) + " and " + tn(args[2]) +
                               " is typed " + tn(e->type));
        break;
      case Expr::Kind::Cast:
        if (args.size() != 1) return Status::error("a cast without one operand");
        break;
    }
    checked_.insert(e.get());
    return e->type;
  }

  Status exprAt(const Stmt& s, const ExprRef& e, std::optional<DType> want, const char* what) {
    StatusOr<DType> t = expr(e);
    if (!t) return failAt(s, t.status().message());
    if (want && *t != *want)
      return failAt(s, std::string(what) + " is " + tn(*t) + ", not " + tn(*want));
    return Status::ok();
  }

  Status declare(const Stmt& s, const std::string& name, DType type) {
    if (buffers_.count(name)) return failAt(s, "%" + name + " is declared twice");
    buffers_.emplace(name, type);
    return Status::ok();
  }

  Status stmt(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Block:
        for (const StmtRef& b : s.body)
          if (b) KILN_RETURN_IF_ERROR(stmt(*b));
        return Status::ok();
      case Stmt::Kind::For: {
        KILN_RETURN_IF_ERROR(exprAt(s, s.extent, DType::I64, "the extent"));
        if (s.var.empty() || !vars_.insert(s.var).second)
          return failAt(s, "loop variable '" + s.var + "' is empty or already in scope");
        // The loop's scope ends with it; its variable may be reused by a later loop.
        Status inner =
            s.body.empty() || !s.body[0] ? failAt(s, "a loop without a body") : stmt(*s.body[0]);
        vars_.erase(s.var);
        forgetChecked();
        return inner;
      }
      case Stmt::Kind::Store: {
        auto it = buffers_.find(s.buffer);
        if (it == buffers_.end()) return failAt(s, "store to unknown buffer %" + s.buffer);
        if (internal_.count(s.buffer)) return failAt(s, noMemory(s.buffer));
        if (blocked_.count(s.buffer)) return failAt(s, notRowMajor(s.buffer));
        KILN_RETURN_IF_ERROR(exprAt(s, s.index, DType::I64, "the index"));
        return exprAt(s, s.value, it->second, "the stored value");
      }
      case Stmt::Kind::Alloc: {
        if (s.size <= 0) return failAt(s, "a scratch buffer of size " + std::to_string(s.size));
        KILN_RETURN_IF_ERROR(declare(s, s.buffer, s.type));
        Status inner =
            s.body.empty() || !s.body[0] ? failAt(s, "an alloc without a body") : stmt(*s.body[0]);
        buffers_.erase(s.buffer);
        forgetChecked();
        return inner;
      }
      case Stmt::Kind::If:
        KILN_RETURN_IF_ERROR(exprAt(s, s.cond, DType::Bool, "the condition"));
        for (const StmtRef& b : s.body)
          if (b) KILN_RETURN_IF_ERROR(stmt(*b));
        return Status::ok();
      case Stmt::Kind::Barrier: return Status::ok();
      case Stmt::Kind::Reduce: return reduce(s);
      case Stmt::Kind::Copy: return copy(s);
      case Stmt::Kind::Call:
        for (const std::string& a : s.args)
          if (!buffers_.count(a)) return failAt(s, "argument %" + a + " is no buffer");
        for (const PostOp& p : s.postOps)
          if (!p.operand.empty() && !buffers_.count(p.operand))
            return failAt(s, "post-op operand %" + p.operand + " is no buffer");
        return callTypes(s);
    }
    return failAt(s, "an unknown statement");
  }

  // Where a statement is, for the launch structure: a step of the kernel (its body, or an
  // element of a block that is one), inside a step that is not a launch, directly inside a
  // gpu_block loop, or inside a launch's gpu_thread loop.
  enum class Place : uint8_t { Step, Host, Grid, Thread };

  // A kernel with GPU loops is a sequence of steps, each a library call or one launch:
  //   gpu_block for b in [0, grid) { gpu_thread for t in [0, T) { ... } }
  // with T a constant in [1, 1024] (a CUDA block's most threads); barriers and shared scratch
  // only inside a launch, whose threads they synchronise and share.
  Status launches() const {
    bool gpu = false;
    KILN_RETURN_IF_ERROR(place(*k_.body, Place::Step, gpu));
    if (!gpu) return Status::ok();
    std::vector<const Stmt*> steps;
    collectSteps(*k_.body, steps);
    for (const Stmt* s : steps)
      if (s->kind != Stmt::Kind::Call &&
          !(s->kind == Stmt::Kind::For && s->loop == LoopKind::GpuBlock))
        return failAt(*s, "a kernel with launches has a step that is neither a launch nor a "
                          "library call");
    return Status::ok();
  }

  static void collectSteps(const Stmt& s, std::vector<const Stmt*>& steps) {
    if (s.kind != Stmt::Kind::Block) return steps.push_back(&s);
    for (const StmtRef& b : s.body)
      if (b) collectSteps(*b, steps);
  }

  Status place(const Stmt& s, Place where, bool& gpu) const {
    const Place inside = where == Place::Step ? Place::Host : where;
    Place body = inside;
    if (s.kind == Stmt::Kind::For && s.loop == LoopKind::GpuBlock) {
      gpu = true;
      if (where != Place::Step) return failAt(s, "a gpu_block loop is not a step of the kernel");
      const Stmt* t = s.body.empty() ? nullptr : s.body[0].get();
      if (!t || t->kind != Stmt::Kind::For || t->loop != LoopKind::GpuThread)
        return failAt(s, "a gpu_block loop's body is not a gpu_thread loop");
      body = Place::Grid;
    } else if (s.kind == Stmt::Kind::For && s.loop == LoopKind::GpuThread) {
      if (where != Place::Grid) return failAt(s, "a gpu_thread loop is not a gpu_block's body");
      if (s.extent->kind != Expr::Kind::Const || s.extent->i < 1 || s.extent->i > 1024)
        return failAt(s, "a gpu_thread loop's extent is not a constant in [1, 1024]");
      body = Place::Thread;
    } else if (s.kind == Stmt::Kind::Block) {
      body = where;
    } else if (where != Place::Thread &&
               (s.kind == Stmt::Kind::Barrier ||
                (s.kind == Stmt::Kind::Alloc && s.scope == MemoryScope::Shared))) {
      return failAt(s, s.kind == Stmt::Kind::Barrier ? "a barrier outside a launch"
                                                     : "shared scratch outside a launch");
    }
    for (const StmtRef& b : s.body)
      if (b) KILN_RETURN_IF_ERROR(place(*b, body, gpu));
    return Status::ok();
  }

  // A call is self-contained: its operands are as many as its op takes, and where its buffers'
  // dims are static the op's type rule gives its result buffers' types from its operands'.
  Status callTypes(const Stmt& s) const {
    const OpInfo& info = opInfo(s.op);
    const size_t operands = callOperands(s), results = callResults(s);
    if (operands + results > s.args.size() || operands < static_cast<size_t>(info.minOperands) ||
        (info.maxOperands >= 0 && operands > static_cast<size_t>(info.maxOperands)))
      return failAt(s, std::to_string(s.args.size()) + " arguments are not " + info.name +
                           "'s operands, its " + std::to_string(results) +
                           " results and the post-ops' operands");
    std::vector<TensorType> in, out;
    for (size_t i = 0; i < operands + results; ++i) {
      const Buffer* b = k_.find(s.args[i]);
      if (!b || b->isSymbolic()) return Status::ok();
      (i < operands ? in : out).emplace_back(b->type, Shape(b->shape.begin(), b->shape.end()));
    }
    StatusOr<std::vector<TensorType>> inferred =
        inferResultTypes(InferInput{s.op, in, s.attrs, out});
    if (!inferred) return failAt(s, inferred.status().message());
    for (size_t r = 0; r < results && r < inferred->size(); ++r)
      if ((*inferred)[r] != out[r])
        return failAt(s, "result %" + s.args[operands + r] + " is " + out[r].str() + ", but " +
                             info.name + " of its operands gives " + (*inferred)[r].str());
    return Status::ok();
  }

  // Both sides are buffers in memory of one element type, each index a proven multiple of the
  // element count (the access is aligned to its size).
  Status copy(const Stmt& s) {
    auto to = buffers_.find(s.buffer), from = buffers_.find(s.from);
    if (to == buffers_.end() || from == buffers_.end())
      return failAt(s, "a copy between unknown buffers %" + s.buffer + " and %" + s.from);
    for (const std::string& b : {s.buffer, s.from}) {
      if (internal_.count(b)) return failAt(s, noMemory(b));
      if (blocked_.count(b)) return failAt(s, notRowMajor(b));
    }
    if (to->second != from->second)
      return failAt(s, "a copy from " + tn(from->second) + " to " + tn(to->second));
    if (s.lanes < 1 || s.lanes > 64)
      return failAt(s, "a copy of " + std::to_string(s.lanes) + " elements (1 to 64)");
    KILN_RETURN_IF_ERROR(exprAt(s, s.index, DType::I64, "the index"));
    KILN_RETURN_IF_ERROR(exprAt(s, s.fromIndex, DType::I64, "the source index"));
    for (const ExprRef& i : {s.index, s.fromIndex})
      if (knownMultiple(i) % s.lanes != 0)
        return failAt(s, "index " + printExpr(i) + " is not known to be a multiple of " +
                             std::to_string(s.lanes) + " (the copy would not be aligned)");
    return Status::ok();
  }

  // The accumulator is outside the reduction's loops, the value inside them.
  Status reduce(const Stmt& s) {
    auto it = buffers_.find(s.buffer);
    if (it == buffers_.end()) return failAt(s, "reduction into unknown buffer %" + s.buffer);
    if (internal_.count(s.buffer)) return failAt(s, noMemory(s.buffer));
    if (blocked_.count(s.buffer)) return failAt(s, notRowMajor(s.buffer));
    KILN_RETURN_IF_ERROR(exprAt(s, s.index, DType::I64, "the index"));
    if (s.vars.empty() || s.vars.size() != s.extents.size())
      return failAt(s, "a reduction needs one extent per loop variable, and a loop");
    for (const ExprRef& e : s.extents) KILN_RETURN_IF_ERROR(exprAt(s, e, DType::I64, "an extent"));
    for (const std::string& v : s.vars)
      if (v.empty() || !vars_.insert(v).second)
        return failAt(s, "reduction variable '" + v + "' is empty or already in scope");
    Status inner = exprAt(s, s.value, it->second, "the reduced value");
    for (const std::string& v : s.vars) vars_.erase(v);
    forgetChecked();
    return inner;
  }

  // An internal buffer passes a value between a custom kernel's calls, which keep it in their
  // own storage: it has no memory to load or store.
  std::string notRowMajor(const std::string& name) const {
    return "%" + name + " holds its value in layout " + blocked_.at(name) +
           ": only library calls read and write it";
  }
  static std::string noMemory(const std::string& name) {
    return "%" + name +
           " is internal to the kernel's calls (no memory): it cannot be loaded or stored";
  }

  // Expressions checked in a scope that ended may name its variables: check them again.
  void forgetChecked() { checked_.clear(); }

  const Kernel& k_;
  std::map<std::string, DType> buffers_;
  std::set<std::string> internal_;              // buffers of role Internal
  std::map<std::string, std::string> blocked_;  // buffers not in the IR's layout, and theirs
  std::set<std::string> vars_;
  std::unordered_set<const Expr*> checked_;
};

}  // namespace

Status verifyKernel(const Kernel& k) { return Verifier(k).run(); }

}  // namespace kiln::kernel
