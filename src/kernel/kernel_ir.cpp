// Kernel IR builders (with the folding of index arithmetic); the printer is in print.cpp.
#include "kernel/kernel_ir.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace kiln::kernel {

const char* unaryOpName(UnaryOp op) {
  static const char* const names[] = {
      "neg",      "abs",      "sign",    "floor",     "ceil",   "round_nearest_even",
      "exp",      "expm1",    "log",     "log1p",     "sqrt",   "rsqrt",
      "sin",      "cos",      "tan",     "asin",      "acos",   "atan",
      "sinh",     "cosh",     "asinh",   "acosh",     "atanh",  "tanh",
      "erf",      "sigmoid",  "not",     "is_finite", "is_inf", "is_nan",
      "warp_sum", "warp_max", "warp_min"};
  return names[static_cast<int>(op)];
}

const char* binaryOpName(BinaryOp op) {
  static const char* const names[] = {"add",  "sub",   "mul", "div", "rem", "pow", "max",
                                      "min",  "atan2", "and", "or",  "xor", "shl", "shr",
                                      "shru", "lt",    "le",  "gt",  "ge",  "eq",  "ne"};
  return names[static_cast<int>(op)];
}

const char* loopKindName(LoopKind k) {
  switch (k) {
    case LoopKind::Serial: return "serial";
    case LoopKind::Parallel: return "parallel";
    case LoopKind::Vectorized: return "vectorized";
    case LoopKind::Unrolled: return "unrolled";
    case LoopKind::GpuBlock: return "gpu_block";
    case LoopKind::GpuThread: return "gpu_thread";
  }
  return "?";
}

const char* reduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Prod: return "prod";
    case ReduceKind::Max: return "max";
    case ReduceKind::Min: return "min";
    case ReduceKind::And: return "and";
    case ReduceKind::Or: return "or";
    case ReduceKind::SelectMax: return "select_max";
  }
  return "?";
}

ExprRef reduceIdentity(ReduceKind k, DType t) {
  switch (k) {
    case ReduceKind::Sum: return constOf(0, t);
    case ReduceKind::Prod: return constOf(1, t);
    case ReduceKind::And: return intConst(1, t);
    case ReduceKind::Or: return intConst(0, t);
    default: break;
  }
  bool isMax = k != ReduceKind::Min;
  if (isFloat(t)) {
    double inf = std::numeric_limits<double>::infinity();
    return floatConst(isMax ? -inf : inf, t);
  }
  int64_t lo = 0, hi = 0;
  switch (t) {
    case DType::I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case DType::U8: lo = 0, hi = UINT8_MAX; break;
    case DType::I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case DType::I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case DType::U16: lo = 0, hi = UINT16_MAX; break;
    case DType::U32: lo = 0, hi = UINT32_MAX; break;
    case DType::U64: lo = 0, hi = -1; break;  // UINT64_MAX's bit pattern (Const.i is i64)
    default: lo = INT64_MIN, hi = INT64_MAX; break;
  }
  return intConst(isMax ? lo : hi, t);
}

ExprRef reduceCombine(ReduceKind k, ExprRef acc, ExprRef x) {
  switch (k) {
    case ReduceKind::Sum: return binary(BinaryOp::Add, acc, x);
    case ReduceKind::Prod: return binary(BinaryOp::Mul, acc, x);
    case ReduceKind::Max: return binary(BinaryOp::Max, acc, x);
    case ReduceKind::Min: return binary(BinaryOp::Min, acc, x);
    case ReduceKind::And: return binary(BinaryOp::And, acc, x);
    case ReduceKind::Or: return binary(BinaryOp::Or, acc, x);
    case ReduceKind::SelectMax: return select(binary(BinaryOp::Gt, acc, x), acc, x);
  }
  return acc;
}

bool reduceDependsOnOrder(ReduceKind k, DType t) {
  return (k == ReduceKind::Sum || k == ReduceKind::Prod) && isFloat(t);
}

namespace {

// The table of live expressions, keyed by structure: building an expression equal to a live one
// returns that one, so structural equality is pointer equality. Entries are weak: the table
// keeps no expression alive, and dead entries are swept when the table has doubled since the last
// sweep. Kernels are lowered on several threads, hence the lock.
class ExprTable {
 public:
  ExprRef intern(Expr&& e) {
    size_t h = hashOf(e);
    std::lock_guard<std::mutex> lock(mu_);
    auto range = table_.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
      if (ExprRef live = it->second.lock(); live && sameFields(*live, e)) return live;
    auto made = std::make_shared<const Expr>(std::move(e));
    table_.emplace(h, made);
    if (table_.size() >= sweepAt_) {
      std::erase_if(table_, [](const auto& entry) { return entry.second.expired(); });
      sweepAt_ = std::max<size_t>(2 * table_.size(), 1024);
    }
    return made;
  }

 private:
  static size_t mix(size_t h, uint64_t v) {
    return h ^ (std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
  static size_t hashOf(const Expr& e) {
    size_t h = mix(static_cast<size_t>(e.kind), static_cast<uint64_t>(e.type));
    h = mix(h, static_cast<uint64_t>(e.i));
    h = mix(h, std::bit_cast<uint64_t>(e.f));
    h = mix(h, std::hash<std::string>()(e.name));
    h = mix(h, (static_cast<uint64_t>(e.unary) << 8) | static_cast<uint64_t>(e.binary));
    for (const ExprRef& a : e.args) h = mix(h, reinterpret_cast<uintptr_t>(a.get()));
    return h;
  }
  // Equal fields with the same (interned) operands; floats compare by their bits, so NaN
  // constants are equal and -0.0 differs from 0.0.
  static bool sameFields(const Expr& a, const Expr& b) {
    return a.kind == b.kind && a.type == b.type && a.i == b.i &&
           std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f) && a.name == b.name &&
           a.unary == b.unary && a.binary == b.binary && a.args == b.args;
  }

  std::mutex mu_;
  std::unordered_multimap<size_t, std::weak_ptr<const Expr>> table_;
  size_t sweepAt_ = 1024;
};

ExprRef intern(Expr&& e) {
  static ExprTable* table = new ExprTable;  // never destroyed: expressions may outlive main
  return table->intern(std::move(e));
}

}  // namespace

ExprRef intConst(int64_t v, DType type) {
  Expr e;
  e.kind = Expr::Kind::Const;
  e.type = type;
  e.i = v;
  e.f = static_cast<double>(v);
  return intern(std::move(e));
}

ExprRef floatConst(double v, DType type) {
  Expr e;
  e.kind = Expr::Kind::Const;
  e.type = type;
  e.f = v;
  return intern(std::move(e));
}

ExprRef constOf(double v, DType type) {
  if (isFloat(type)) return floatConst(v, type);
  if (isBool(type)) return intConst(v != 0 ? 1 : 0, type);
  return intConst(static_cast<int64_t>(v), type);
}

ExprRef var(const std::string& name) {
  Expr e;
  e.kind = Expr::Kind::Var;
  e.type = DType::I64;
  e.name = name;
  return intern(std::move(e));
}

ExprRef load(const std::string& buffer, DType type, ExprRef index) {
  Expr e;
  e.kind = Expr::Kind::Load;
  e.type = type;
  e.name = buffer;
  e.args = {std::move(index)};
  return intern(std::move(e));
}

ExprRef unary(UnaryOp op, ExprRef a) {
  Expr e;
  e.kind = Expr::Kind::Unary;
  bool predicate = op == UnaryOp::IsFinite || op == UnaryOp::IsInf || op == UnaryOp::IsNan;
  e.type = predicate ? DType::Bool : a->type;
  e.unary = op;
  e.args = {std::move(a)};
  return intern(std::move(e));
}

namespace {

bool isIntConst(const ExprRef& e, int64_t v) {
  return e->kind == Expr::Kind::Const && !isFloat(e->type) && e->i == v;
}

bool isComparison(BinaryOp op) {
  return op == BinaryOp::Lt || op == BinaryOp::Le || op == BinaryOp::Gt || op == BinaryOp::Ge ||
         op == BinaryOp::Eq || op == BinaryOp::Ne;
}

}  // namespace

ExprRef binary(BinaryOp op, ExprRef a, ExprRef b) {
  // Index arithmetic (i64) folds, so lowered indices read like i0 * 8 + i1.
  if (a->type == DType::I64 && b->type == DType::I64) {
    bool ca = a->kind == Expr::Kind::Const, cb = b->kind == Expr::Kind::Const;
    if (ca && cb) {
      switch (op) {
        case BinaryOp::Add: return intConst(a->i + b->i);
        case BinaryOp::Sub: return intConst(a->i - b->i);
        case BinaryOp::Mul: return intConst(a->i * b->i);
        case BinaryOp::Div:
          if (b->i > 0 && a->i >= 0) return intConst(a->i / b->i);
          break;
        case BinaryOp::Rem:
          if (b->i > 0 && a->i >= 0) return intConst(a->i % b->i);
          break;
        default: break;
      }
    }
    if (op == BinaryOp::Add && isIntConst(b, 0)) return a;
    if (op == BinaryOp::Add && isIntConst(a, 0)) return b;
    if (op == BinaryOp::Sub && isIntConst(b, 0)) return a;
    if (op == BinaryOp::Mul && (isIntConst(a, 0) || isIntConst(b, 0))) return intConst(0);
    if (op == BinaryOp::Mul && isIntConst(b, 1)) return a;
    if (op == BinaryOp::Mul && isIntConst(a, 1)) return b;
    if (op == BinaryOp::Div && isIntConst(b, 1)) return a;
    if (op == BinaryOp::Rem && isIntConst(b, 1)) return intConst(0);
  }
  Expr e;
  e.kind = Expr::Kind::Binary;
  e.type = isComparison(op) ? DType::Bool : a->type;
  e.binary = op;
  e.args = {std::move(a), std::move(b)};
  return intern(std::move(e));
}

ExprRef select(ExprRef cond, ExprRef a, ExprRef b) {
  if (cond->kind == Expr::Kind::Const) return cond->i ? a : b;
  Expr e;
  e.kind = Expr::Kind::Select;
  e.type = a->type;
  e.args = {std::move(cond), std::move(a), std::move(b)};
  return intern(std::move(e));
}

namespace {

// Whether every value of `from` converts to `to` exactly (and so back to `from` unchanged).
bool widens(DType from, DType to) {
  if (from == to) return true;
  if (from == DType::F16 || from == DType::BF16) return to == DType::F32 || to == DType::F64;
  if (from == DType::F32) return to == DType::F64;
  if (!isFloat(from) && from != DType::Bool && !isFloat(to) && to != DType::Bool) {
    const size_t f = dtypeSize(from), t = dtypeSize(to);
    if (isUnsignedInteger(from)) return t > f || (t == f && isUnsignedInteger(to));
    return !isUnsignedInteger(to) && t >= f;
  }
  return false;
}

}  // namespace

// A round trip through a type that holds every value exactly is the value itself:
// f16(f32(x)) is x for an f16 x (precision lowering leaves such chains between ops).
ExprRef cast(ExprRef a, DType type) {
  if (a->type == type) return a;
  if (a->kind == Expr::Kind::Cast && a->args[0]->type == type && widens(type, a->type))
    return a->args[0];
  Expr e;
  e.kind = Expr::Kind::Cast;
  e.type = type;
  e.args = {std::move(a)};
  return intern(std::move(e));
}

ExprRef gelu(ExprRef x, bool tanh) {
  DType t = x->type;
  auto c = [&](double d) { return floatConst(d, t); };
  ExprRef inner;
  if (tanh) {
    ExprRef x3 = binary(BinaryOp::Mul, binary(BinaryOp::Mul, x, x), x);
    inner = unary(UnaryOp::Tanh,
                  binary(BinaryOp::Mul, c(std::sqrt(2.0 / M_PI)),
                         binary(BinaryOp::Add, x, binary(BinaryOp::Mul, c(0.044715), x3))));
  } else {
    inner = unary(UnaryOp::Erf, binary(BinaryOp::Mul, x, c(M_SQRT1_2)));
  }
  return binary(BinaryOp::Mul, binary(BinaryOp::Mul, c(0.5), x),
                binary(BinaryOp::Add, c(1.0), inner));
}

ExprRef warpCombine(UnaryOp op, ExprRef a, int64_t lanes) {
  Expr e;
  e.kind = Expr::Kind::Unary;
  e.type = a->type;
  e.unary = op;
  e.i = lanes >= 32 ? 0 : lanes;
  e.args = {std::move(a)};
  return intern(std::move(e));
}

ExprRef withArgs(const ExprRef& e, std::vector<ExprRef> args) {
  if (args == e->args) return e;
  switch (e->kind) {
    case Expr::Kind::Const:
    case Expr::Kind::Var: return e;
    case Expr::Kind::Load: return load(e->name, e->type, std::move(args[0]));
    case Expr::Kind::Unary:
      return e->i ? warpCombine(e->unary, std::move(args[0]), e->i)
                  : unary(e->unary, std::move(args[0]));
    case Expr::Kind::Binary: return binary(e->binary, std::move(args[0]), std::move(args[1]));
    case Expr::Kind::Select:
      return select(std::move(args[0]), std::move(args[1]), std::move(args[2]));
    case Expr::Kind::Cast: return cast(std::move(args[0]), e->type);
  }
  return e;
}

StmtRef block(std::vector<StmtRef> body) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Block;
  s->body = std::move(body);
  return s;
}

StmtRef forLoop(const std::string& v, ExprRef extent, LoopKind kind, StmtRef body) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::For;
  s->var = v;
  s->extent = std::move(extent);
  s->loop = kind;
  s->body = {std::move(body)};
  return s;
}

StmtRef store(const std::string& buffer, ExprRef index, ExprRef value) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Store;
  s->buffer = buffer;
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

StmtRef alloc(const std::string& buffer, DType type, int64_t size, MemoryScope scope,
              StmtRef body) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Alloc;
  s->buffer = buffer;
  s->type = type;
  s->size = size;
  s->scope = scope;
  s->body = {std::move(body)};
  return s;
}

StmtRef ifThen(ExprRef cond, StmtRef then, StmtRef otherwise) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::If;
  s->cond = std::move(cond);
  s->body = {std::move(then), std::move(otherwise)};
  return s;
}

StmtRef barrier() {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Barrier;
  return s;
}

StmtRef reduceInto(const std::string& buffer, ExprRef index, ReduceKind kind,
                   std::vector<std::string> vars, std::vector<ExprRef> extents, ExprRef value) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Reduce;
  s->buffer = buffer;
  s->index = std::move(index);
  s->reduce = kind;
  s->vars = std::move(vars);
  s->extents = std::move(extents);
  s->value = std::move(value);
  return s;
}

StmtRef call(OpCode op, AttrMap attrs, std::vector<std::string> args, std::vector<PostOp> postOps) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Call;
  s->op = op;
  s->attrs = std::move(attrs);
  s->args = std::move(args);
  s->postOps = std::move(postOps);
  return s;
}

StmtRef wideCopy(const std::string& buffer, ExprRef index, const std::string& from,
                 ExprRef fromIndex, int64_t lanes) {
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::Copy;
  s->buffer = buffer;
  s->index = std::move(index);
  s->from = from;
  s->fromIndex = std::move(fromIndex);
  s->lanes = lanes;
  return s;
}

StmtRef copyAsStores(const Stmt& copy, DType type) {
  std::vector<StmtRef> stores;
  for (int64_t l = 0; l < copy.lanes; ++l)
    stores.push_back(
        store(copy.buffer, binary(BinaryOp::Add, copy.index, intConst(l)),
              load(copy.from, type, binary(BinaryOp::Add, copy.fromIndex, intConst(l)))));
  return block(std::move(stores));
}

size_t callResults(const Stmt& call) { return static_cast<size_t>(opInfo(call.op).numResults); }

size_t callOperands(const Stmt& call) {
  size_t operandsOfPostOps = 0;
  for (const PostOp& p : call.postOps) operandsOfPostOps += p.operand.empty() ? 0 : 1;
  const size_t fixed = callResults(call) + operandsOfPostOps;
  return call.args.size() > fixed ? call.args.size() - fixed : 0;
}

bool postOpReadsWhole(const PostOp& p, const std::vector<int64_t>& shape) {
  if (p.operandShape != shape) return false;
  for (size_t j = 0; j < p.operandDims.size(); ++j)
    if (p.operandDims[j] != static_cast<int64_t>(j)) return false;
  return true;
}

int postOpVectorDim(const PostOp& p) {
  int along = -1;
  for (size_t j = 0; j < p.operandShape.size(); ++j) {
    if (p.operandShape[j] == 1) continue;
    if (along >= 0) return -1;
    along = static_cast<int>(p.operandDims[j]);
  }
  return along;
}

const char* postOpName(PostOp::Kind k) {
  switch (k) {
    case PostOp::Kind::Add: return "add";
    case PostOp::Kind::Mul: return "mul";
    case PostOp::Kind::Clamp: return "clamp";
    case PostOp::Kind::Sigmoid: return "sigmoid";
    case PostOp::Kind::Tanh: return "tanh";
    case PostOp::Kind::Gelu: return "gelu";
    case PostOp::Kind::GeluTanh: return "gelu_tanh";
    case PostOp::Kind::Swish: return "swish";
  }
  return "?";
}

ShapeNest shapeNest(const std::vector<ExprRef>& extents, FreshNames& names,
                    const std::string& prefix) {
  ShapeNest n;
  n.extents = extents;
  for (const ExprRef& e : extents) {
    const bool one = e->kind == Expr::Kind::Const && e->i == 1;
    n.vars.push_back(one ? "" : names.fresh(prefix));
    n.idx.push_back(one ? intConst(0) : var(n.vars.back()));
  }
  return n;
}

ShapeNest shapeNest(const std::vector<int64_t>& shape, FreshNames& names,
                    const std::string& prefix) {
  return shapeNest(constExtents(shape), names, prefix);
}

StmtRef ShapeNest::wrap(StmtRef body) const {
  for (size_t d = vars.size(); d-- > 0;)
    if (!vars[d].empty()) body = forLoop(vars[d], extents[d], LoopKind::Serial, body);
  return body;
}

ExprRef flatIndex(const std::vector<ExprRef>& idx, const std::vector<int64_t>& shape) {
  return flatIndex(idx, constExtents(shape));
}

ExprRef flatIndex(const std::vector<ExprRef>& idx, const std::vector<ExprRef>& extents) {
  ExprRef flat = intConst(0);
  for (size_t i = 0; i < extents.size(); ++i)
    flat = binary(BinaryOp::Add, binary(BinaryOp::Mul, flat, extents[i]), idx[i]);
  return flat;
}

std::vector<ExprRef> constExtents(const std::vector<int64_t>& shape) {
  std::vector<ExprRef> out;
  for (int64_t d : shape) out.push_back(intConst(d));
  return out;
}

int64_t elementCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ExprRef elementCount(const std::vector<ExprRef>& extents) {
  ExprRef n = intConst(1);
  for (const ExprRef& e : extents) n = binary(BinaryOp::Mul, n, e);
  return n;
}

namespace {
template <typename S>
void collectCalls(const StmtRef& s, std::vector<S*>& out) {
  if (!s) return;
  if (s->kind == Stmt::Kind::Call) out.push_back(s.get());
  for (const auto& b : s->body) collectCalls(b, out);
}
}  // namespace

std::vector<const Stmt*> callsOf(const Kernel& k) {
  std::vector<const Stmt*> out;
  collectCalls(k.body, out);
  return out;
}

std::vector<Stmt*> mutableCallsOf(Kernel& k) {
  std::vector<Stmt*> out;
  collectCalls(k.body, out);
  return out;
}

bool isSymbolicCall(const Kernel& k, const Stmt& call) {
  for (const std::string& a : call.args)
    if (const Buffer* b = k.find(a); b && b->isSymbolic()) return true;
  return false;
}

int64_t Buffer::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ExprRef> Buffer::extents() const { return dims.empty() ? constExtents(shape) : dims; }

const Symbol* Kernel::symbol(const std::string& n) const {
  for (const Symbol& s : symbols)
    if (s.name == n) return &s;
  return nullptr;
}

std::optional<int64_t>
evaluateExtent(const ExprRef& e,
               const std::function<std::optional<int64_t>(const std::string&)>& valueOf) {
  if (!e || e->type != DType::I64) return std::nullopt;
  switch (e->kind) {
    case Expr::Kind::Const:
      if (e->i < 0) return std::nullopt;
      return e->i;
    case Expr::Kind::Var: return valueOf(e->name);
    case Expr::Kind::Binary: {
      const BinaryOp op = e->binary;
      if (op != BinaryOp::Add && op != BinaryOp::Mul && op != BinaryOp::Div) return std::nullopt;
      std::optional<int64_t> a = evaluateExtent(e->args[0], valueOf);
      std::optional<int64_t> b = evaluateExtent(e->args[1], valueOf);
      if (!a || !b) return std::nullopt;
      // A quotient by a constant only: upperBound evaluates at the symbols' tops, where a
      // symbolic divisor would give the least value, not the largest.
      if (op == BinaryOp::Div)
        return *b > 0 && e->args[1]->kind == Expr::Kind::Const ? std::optional<int64_t>(*a / *b)
                                                               : std::nullopt;
      int64_t r = 0;
      bool overflow = e->binary == BinaryOp::Add ? __builtin_add_overflow(*a, *b, &r)
                                                 : __builtin_mul_overflow(*a, *b, &r);
      if (overflow) return std::nullopt;
      return r;
    }
    default: return std::nullopt;
  }
}

std::optional<int64_t> evaluateExtent(const ExprRef& e,
                                      const std::map<std::string, int64_t>& sizes) {
  return evaluateExtent(e, [&](const std::string& name) -> std::optional<int64_t> {
    auto it = sizes.find(name);
    return it == sizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
  });
}

std::optional<int64_t> upperBound(const ExprRef& e, const std::vector<Symbol>& symbols) {
  return evaluateExtent(e, [&](const std::string& name) -> std::optional<int64_t> {
    for (const Symbol& s : symbols)
      if (s.name == name) return s.hi;
    return std::nullopt;
  });
}

const Buffer* Kernel::find(const std::string& n) const {
  for (const Buffer& b : buffers)
    if (b.name == n) return &b;
  return nullptr;
}

namespace {

StmtRef replaced(const StmtRef& s, const Stmt* target, const StmtRef& with) {
  if (!s) return s;
  if (s.get() == target) return with;
  StmtRef out = s;
  for (size_t i = 0; i < s->body.size(); ++i) {
    StmtRef b = replaced(s->body[i], target, with);
    if (b == s->body[i]) continue;
    if (out == s) out = std::make_shared<Stmt>(*s);
    out->body[i] = b;
  }
  return out;
}

}  // namespace

Kernel replaceStmt(const Kernel& k, const Stmt* target, StmtRef with) {
  Kernel out = k;
  out.body = replaced(k.body, target, with);
  return out;
}

FreshNames::FreshNames(const Kernel& k) {
  for (const Buffer& b : k.buffers) used_.insert(b.name);
  for (const Symbol& s : k.symbols) used_.insert(s.name);
  collect(k.body);
}

std::string FreshNames::fresh(const std::string& prefix) {
  for (int i = 0;; ++i)
    if (used_.insert(prefix + std::to_string(i)).second) return prefix + std::to_string(i);
}

void FreshNames::collect(const StmtRef& s) {
  if (!s) return;
  if (!s->var.empty()) used_.insert(s->var);
  if (!s->buffer.empty()) used_.insert(s->buffer);
  for (const std::string& v : s->vars) used_.insert(v);
  for (const StmtRef& b : s->body) collect(b);
}

std::set<std::string> loadedBuffers(const Kernel& k) {
  std::set<std::string> out;
  std::set<const Expr*> seen;
  std::function<void(const ExprRef&)> expr = [&](const ExprRef& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->kind == Expr::Kind::Load) out.insert(e->name);
    for (const ExprRef& a : e->args) expr(a);
  };
  std::function<void(const StmtRef&)> stmt = [&](const StmtRef& s) {
    if (!s) return;
    for (const ExprRef& e : {s->extent, s->index, s->value, s->cond, s->fromIndex}) expr(e);
    for (const ExprRef& e : s->extents) expr(e);
    if (s->kind == Stmt::Kind::Copy) out.insert(s->from);
    for (const StmtRef& b : s->body) stmt(b);
  };
  stmt(k.body);
  return out;
}

}  // namespace kiln::kernel
