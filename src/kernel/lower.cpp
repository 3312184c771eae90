// Lowering of fusion kernels into kernel IR (see lower.h for the shapes of the loop nests).
#include "kernel/lower.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ir/text/text.h"
#include "kernel/lower_opaque.h"
#include "kernel/simplify.h"

namespace kiln::kernel {
namespace {

using fusion::OpPattern;
using Index = std::vector<ExprRef>;

// The multi-index of a flat index in `shape`.
Index unflatten(const ExprRef& flat, const std::vector<int64_t>& shape) {
  Index idx(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    ExprRef q = binary(BinaryOp::Div, flat, intConst(stride));
    idx[i] = i == 0 ? q : binary(BinaryOp::Rem, q, intConst(shape[i]));
    stride *= shape[i];
  }
  return idx;
}

ExprRef clampIndex(const ExprRef& i, int64_t extent) {
  return binary(BinaryOp::Min, binary(BinaryOp::Max, i, intConst(0)),
                intConst(std::max<int64_t>(extent - 1, 0)));
}

ExprRef andAll(const std::vector<ExprRef>& conds) {
  ExprRef all;
  for (const ExprRef& c : conds) all = all ? binary(BinaryOp::And, all, c) : c;
  return all ? all : intConst(1, DType::Bool);
}

// The type arithmetic runs in: f32 for f16/bf16 (rounded on store), the dtype otherwise.
DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

std::optional<UnaryOp> unaryFor(OpCode op) {
  switch (op) {
#define KILN_UN(x) \
  case OpCode::x: return UnaryOp::x;
    KILN_UN(Neg)
    KILN_UN(Abs)
    KILN_UN(Sign)
    KILN_UN(Floor)
    KILN_UN(Ceil)
    KILN_UN(RoundNearestEven)
    KILN_UN(Exp)
    KILN_UN(Expm1)
    KILN_UN(Log)
    KILN_UN(Log1p)
    KILN_UN(Sqrt)
    KILN_UN(Rsqrt)
    KILN_UN(Sin)
    KILN_UN(Cos)
    KILN_UN(Tan)
    KILN_UN(Asin)
    KILN_UN(Acos)
    KILN_UN(Atan)
    KILN_UN(Sinh)
    KILN_UN(Cosh)
    KILN_UN(Asinh)
    KILN_UN(Acosh)
    KILN_UN(Atanh)
    KILN_UN(Tanh)
    KILN_UN(Erf)
    KILN_UN(Sigmoid)
    KILN_UN(Not)
    KILN_UN(IsFinite)
    KILN_UN(IsInf)
    KILN_UN(IsNan)
#undef KILN_UN
    default: return std::nullopt;
  }
}

std::optional<BinaryOp> binaryFor(OpCode op) {
  switch (op) {
#define KILN_BIN(x) \
  case OpCode::x: return BinaryOp::x;
    KILN_BIN(Add)
    KILN_BIN(Sub)
    KILN_BIN(Mul)
    KILN_BIN(Div)
    KILN_BIN(Rem)
    KILN_BIN(Pow)
    KILN_BIN(Max)
    KILN_BIN(Min)
    KILN_BIN(Atan2)
    KILN_BIN(And)
    KILN_BIN(Or)
    KILN_BIN(Xor)
    KILN_BIN(ShiftLeft)
    KILN_BIN(ShiftRightArithmetic)
    KILN_BIN(ShiftRightLogical)
#undef KILN_BIN
    default: return std::nullopt;
  }
}

BinaryOp compareOp(const std::string& direction) {
  if (direction == "eq") return BinaryOp::Eq;
  if (direction == "ne") return BinaryOp::Ne;
  if (direction == "lt") return BinaryOp::Lt;
  if (direction == "le") return BinaryOp::Le;
  if (direction == "gt") return BinaryOp::Gt;
  return BinaryOp::Ge;
}

class Lowerer {
 public:
  // `names`: the printed names of f's values (printedValueNames), shared by its kernels.
  Lowerer(const fusion::Kernel& k, const LowerOptions& options,
          const std::map<const Value*, std::string>& names)
      : k_(k), options_(options), names_(names) {
    members_.insert(k.nodes.begin(), k.nodes.end());
    out_.kind = std::string(fusion::kernelKindName(k.kind));
    out_.name = "k" + std::to_string(k.id) + "_" + out_.kind;
  }

  StatusOr<Kernel> run() {
    for (const Node* n : k_.nodes)
      for (size_t r = 0; r < n->numResults(); ++r)
        if (!n->result(r)->type().isStatic())
          return Status::error("kernel " + out_.name + ": " + name(n->result(r)) + " has type " +
                               n->result(r)->type().str() +
                               "; lowering needs static shapes (specialise first)");
    StatusOr<StmtRef> body = Status::error("unreachable");
    switch (k_.kind) {
      case fusion::KernelKind::Loop: body = lowerLoop(); break;
      case fusion::KernelKind::Reduction: body = lowerReduction(); break;
      default: body = lowerCall(); break;
    }
    if (!body) return Status(body.status()).prefix("kernel " + out_.name);
    // Inputs, then outputs, then temps.
    std::vector<Buffer> ordered;
    for (BufferRole role : {BufferRole::Input, BufferRole::Output, BufferRole::Temp})
      for (const Buffer& b : buffers_)
        if (b.role == role) ordered.push_back(b);
    out_.buffers = std::move(ordered);
    out_.body = *body;
    return std::move(out_);
  }

 private:
  std::string name(const Value* v) const {
    auto it = names_.find(v);
    return it == names_.end() ? "%?" : it->second;
  }

  // A buffer name for a value: its printed name reduced to [A-Za-z0-9_], made unique.
  const Buffer& bufferFor(const Value* v, BufferRole role) {
    for (const Buffer& b : buffers_)
      if (b.value == v && b.role == role) return b;
    std::string base;
    for (char c : name(v)) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    while (!base.empty() && base[0] == '_') base.erase(0, 1);
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
    if (role == BufferRole::Temp) base += "_tmp";
    std::string n = base;
    for (int i = 1; usedNames_.count(n); ++i) n = base + "_" + std::to_string(i);
    usedNames_.insert(n);
    Buffer b;
    b.name = n;
    b.type = v->type().dtype();
    b.shape = v->type().staticDims();
    b.role = role;
    b.value = v;
    buffers_.push_back(b);
    return buffers_.back();
  }

  bool isStored(const Value* v) const {
    for (const Value* o : k_.outputs)
      if (o == v) return true;
    return false;
  }

  // Fresh loop variable names: i0, i1, ... (r0, ... for reduction loops).
  std::string freshVar(const char* prefix) { return prefix + std::to_string(vars_++); }

  // A serial loop nest over `shape`: calls body(index) for the innermost body. Dims of extent 1
  // get no loop (their index is 0). The target's schedule picks parallel and vector loops.
  StmtRef nest(const std::vector<int64_t>& shape, const std::function<StmtRef(const Index&)>& body,
               const char* prefix = "i") {
    Index idx;
    std::vector<std::string> names;
    for (int64_t extent : shape) {
      names.push_back(extent == 1 ? "" : freshVar(prefix));
      idx.push_back(extent == 1 ? intConst(0) : var(names.back()));
    }
    StmtRef s = body(idx);
    for (size_t i = shape.size(); i-- > 0;)
      if (!names[i].empty()) s = forLoop(names[i], intConst(shape[i]), LoopKind::Serial, s);
    return s;
  }

  // The value of `v` at `idx`, computed inside the kernel (members) or loaded (inputs).
  StatusOr<ExprRef> valueAt(const Value* v, const Index& idx) {
    auto ov = overrides_.find(v);
    if (ov != overrides_.end()) return ov->second(idx);
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(v));
    for (const ExprRef& i : idx) key += "," + std::to_string(reinterpret_cast<uintptr_t>(i.get()));
    auto memo = memo_.find(key);
    if (memo != memo_.end()) return memo->second.first;
    KILN_ASSIGN_OR_RETURN(ExprRef e, compute(v, idx));
    // f16/bf16 values compute in f32 but, as in the graph, each op's result is rounded to its
    // dtype before the next op uses it.
    DType dt = v->type().dtype();
    if ((dt == DType::F16 || dt == DType::BF16) && members_.count(v->def()))
      e = cast(cast(e, dt), computeType(dt));
    // The index is kept with the entry: the key holds its addresses, which must not be reused.
    memo_[key] = {e, idx};
    return e;
  }

  StatusOr<ExprRef> compute(const Value* v, const Index& idx) {
    const Node* n = v->def();
    DType dt = v->type().dtype();
    if (!members_.count(n)) {
      if (n->op() == OpCode::Constant && v->type().numElements() == 1) {
        const Tensor& t = n->constantData().tensor;
        return constOf(t.getDouble(0), computeType(dt));
      }
      const Buffer& b = bufferFor(v, BufferRole::Input);
      return cast(load(b.name, dt, flatIndex(idx, b.shape)), computeType(dt));
    }
    auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
    std::vector<int64_t> shape = v->type().staticDims();
    if (auto u = unaryFor(n->op())) {
      KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
      return unary(*u, a);
    }
    if (auto b = binaryFor(n->op())) {
      KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef c, operand(1, idx));
      return binary(*b, a, c);
    }
    switch (n->op()) {
      case OpCode::Compare: {
        KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
        KILN_ASSIGN_OR_RETURN(ExprRef c, operand(1, idx));
        return binary(compareOp(n->attrEnum("direction")), a, c);
      }
      case OpCode::Convert: {
        KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
        // Through the stored type, so an f32 -> bf16 -> f32 chain rounds as the graph says.
        return cast(cast(a, dt), computeType(dt));
      }
      case OpCode::Select: {
        KILN_ASSIGN_OR_RETURN(ExprRef c, operand(0, idx));
        KILN_ASSIGN_OR_RETURN(ExprRef a, operand(1, idx));
        KILN_ASSIGN_OR_RETURN(ExprRef b, operand(2, idx));
        return select(c, a, b);
      }
      case OpCode::Clamp: {
        // clamp(min, x, max) = min(max(x, min), max); rank-0 bounds apply everywhere.
        auto bound = [&](size_t i) {
          return n->operand(i)->type().rank() == 0 ? valueAt(n->operand(i), {})
                                                   : valueAt(n->operand(i), idx);
        };
        KILN_ASSIGN_OR_RETURN(ExprRef lo, bound(0));
        KILN_ASSIGN_OR_RETURN(ExprRef x, operand(1, idx));
        KILN_ASSIGN_OR_RETURN(ExprRef hi, bound(2));
        return binary(BinaryOp::Min, binary(BinaryOp::Max, x, lo), hi);
      }
      case OpCode::Gelu: {
        KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
        DType ct = x->type;
        auto c = [&](double d) { return floatConst(d, ct); };
        ExprRef inner;
        if (n->attrEnum("approximate") == "tanh") {
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
      case OpCode::BatchNormInference: {
        size_t fi = static_cast<size_t>(n->attrInt("feature_index"));
        Index ch = {idx[fi]};
        KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
        KILN_ASSIGN_OR_RETURN(ExprRef scale, operand(1, ch));
        KILN_ASSIGN_OR_RETURN(ExprRef offset, operand(2, ch));
        KILN_ASSIGN_OR_RETURN(ExprRef mean, operand(3, ch));
        KILN_ASSIGN_OR_RETURN(ExprRef variance, operand(4, ch));
        DType ct = x->type;
        ExprRef inv = binary(BinaryOp::Div, floatConst(1.0, ct),
                             unary(UnaryOp::Sqrt, binary(BinaryOp::Add, variance,
                                                         floatConst(n->attrFloat("epsilon"), ct))));
        return binary(BinaryOp::Add,
                      binary(BinaryOp::Mul,
                             binary(BinaryOp::Mul, binary(BinaryOp::Sub, x, mean), inv), scale),
                      offset);
      }
      case OpCode::BroadcastInDim: {
        auto dims = n->attrInts("dims");
        std::vector<int64_t> in = n->operand(0)->type().staticDims();
        Index at(in.size());
        for (size_t i = 0; i < in.size(); ++i)
          at[i] = in[i] == 1 ? intConst(0) : idx[static_cast<size_t>(dims[i])];
        return operand(0, at);
      }
      case OpCode::Reshape: {
        std::vector<int64_t> in = n->operand(0)->type().staticDims();
        return operand(0, unflatten(flatIndex(idx, shape), in));
      }
      case OpCode::Transpose: {
        auto perm = n->attrInts("permutation");
        Index at(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) at[static_cast<size_t>(perm[i])] = idx[i];
        return operand(0, at);
      }
      case OpCode::Slice: {
        auto start = n->attrInts("start");
        auto stride = n->attrInts("stride", std::vector<int64_t>(start.size(), 1));
        Index at(idx.size());
        for (size_t i = 0; i < idx.size(); ++i)
          at[i] = binary(BinaryOp::Add, intConst(start[i]),
                         binary(BinaryOp::Mul, idx[i], intConst(stride[i])));
        return operand(0, at);
      }
      case OpCode::Reverse: {
        auto dims = n->attrInts("dims");
        Index at = idx;
        for (int64_t d : dims) {
          size_t i = static_cast<size_t>(d);
          at[i] = binary(BinaryOp::Sub, intConst(shape[i] - 1), idx[i]);
        }
        return operand(0, at);
      }
      case OpCode::Iota: {
        // Iota has no operands: the index along its dimension, as the dtype.
        int64_t d = n->attrInt("dimension");
        return cast(idx[static_cast<size_t>(d)], computeType(dt));
      }
      case OpCode::Pad: {
        auto low = n->attrInts("low");
        auto interior = n->attrInts("interior", std::vector<int64_t>(low.size(), 0));
        std::vector<int64_t> in = n->operand(0)->type().staticDims();
        Index at(idx.size());
        std::vector<ExprRef> valid;
        for (size_t i = 0; i < idx.size(); ++i) {
          ExprRef q = binary(BinaryOp::Sub, idx[i], intConst(low[i]));
          int64_t step = interior[i] + 1;
          ExprRef src = binary(BinaryOp::Div, q, intConst(step));
          valid.push_back(binary(BinaryOp::Ge, q, intConst(0)));
          valid.push_back(binary(BinaryOp::Lt, src, intConst(in[i])));
          if (step > 1)
            valid.push_back(
                binary(BinaryOp::Eq, binary(BinaryOp::Rem, q, intConst(step)), intConst(0)));
          at[i] = clampIndex(src, in[i]);
        }
        KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, at));
        KILN_ASSIGN_OR_RETURN(ExprRef padValue, valueAt(n->operand(1), {}));
        return select(andAll(valid), x, padValue);
      }
      case OpCode::Gather: {
        // StableHLO gather: the output's batch dims pick an index vector, whose components
        // (clamped so the slice stays inside) start the slice along start_index_map's dims;
        // the output's offset dims walk the slice's dims that are not collapsed.
        auto offsetDims = n->attrInts("offset_dims");
        auto collapsed = n->attrInts("collapsed_slice_dims");
        auto startMap = n->attrInts("start_index_map");
        auto sizes = n->attrInts("slice_sizes");
        int64_t vectorDim = n->attrInt("index_vector_dim");
        auto has = [](const std::vector<int64_t>& v, int64_t x) {
          return std::find(v.begin(), v.end(), x) != v.end();
        };
        std::vector<int64_t> xd = n->operand(0)->type().staticDims();
        Index batch;
        for (size_t i = 0; i < idx.size(); ++i)
          if (!has(offsetDims, static_cast<int64_t>(i))) batch.push_back(idx[i]);
        std::vector<ExprRef> start(xd.size(), intConst(0));
        for (size_t k = 0; k < startMap.size(); ++k) {
          Index at;
          size_t b = 0;
          for (int64_t i = 0; i < n->operand(1)->type().rank(); ++i)
            at.push_back(i == vectorDim ? intConst(static_cast<int64_t>(k)) : batch[b++]);
          KILN_ASSIGN_OR_RETURN(ExprRef v, valueAt(n->operand(1), at));
          auto od = static_cast<size_t>(startMap[k]);
          start[od] = clampIndex(cast(v, DType::I64), xd[od] - sizes[od] + 1);
        }
        Index at(xd.size());
        size_t w = 0;
        for (size_t d = 0; d < xd.size(); ++d)
          at[d] = has(collapsed, static_cast<int64_t>(d))
                      ? start[d]
                      : binary(BinaryOp::Add, start[d], idx[static_cast<size_t>(offsetDims[w++])]);
        return operand(0, at);
      }
      case OpCode::DynamicSlice:
      case OpCode::DynamicUpdateSlice: {
        // Start indices (rank-0 operands after the data) are clamped so the slice or update
        // stays inside, as StableHLO specifies.
        bool update = n->op() == OpCode::DynamicUpdateSlice;
        std::vector<int64_t> xd = n->operand(0)->type().staticDims();
        std::vector<int64_t> window = (update ? n->operand(1) : v)->type().staticDims();
        size_t first = update ? 2 : 1;
        Index start(xd.size());
        for (size_t d = 0; d < xd.size(); ++d) {
          KILN_ASSIGN_OR_RETURN(ExprRef s, valueAt(n->operand(first + d), {}));
          start[d] = clampIndex(cast(s, DType::I64), xd[d] - window[d] + 1);
        }
        if (!update) {
          Index at(xd.size());
          for (size_t d = 0; d < xd.size(); ++d) at[d] = binary(BinaryOp::Add, start[d], idx[d]);
          return operand(0, at);
        }
        Index at(xd.size());
        std::vector<ExprRef> inside;
        for (size_t d = 0; d < xd.size(); ++d) {
          ExprRef rel = binary(BinaryOp::Sub, idx[d], start[d]);
          inside.push_back(binary(BinaryOp::Ge, rel, intConst(0)));
          inside.push_back(binary(BinaryOp::Lt, rel, intConst(window[d])));
          at[d] = clampIndex(rel, window[d]);
        }
        KILN_ASSIGN_OR_RETURN(ExprRef u, operand(1, at));
        KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
        return select(andAll(inside), u, x);
      }
      case OpCode::Concatenate: {
        size_t d = static_cast<size_t>(n->attrInt("dimension"));
        ExprRef result;
        int64_t offset = 0;
        std::vector<std::pair<ExprRef, ExprRef>> parts;
        for (size_t i = 0; i < n->numOperands(); ++i) {
          int64_t extent = n->operand(i)->type().dims()[d].value();
          Index at = idx;
          at[d] = clampIndex(binary(BinaryOp::Sub, idx[d], intConst(offset)), extent);
          KILN_ASSIGN_OR_RETURN(ExprRef x, operand(i, at));
          offset += extent;
          parts.push_back({binary(BinaryOp::Lt, idx[d], intConst(offset)), x});
        }
        for (size_t i = parts.size(); i-- > 0;)
          result = result ? select(parts[i].first, parts[i].second, result) : parts[i].second;
        return result;
      }
      default:
        return Status::error(std::string(opName(n->op())) + " (" + name(v) +
                             ") has no loop lowering");
    }
  }

  // Stores `v` at `idx` (rounding to its dtype).
  StatusOr<StmtRef> storeValue(const Value* v, const Index& idx) {
    const Buffer& b = bufferFor(v, BufferRole::Output);
    std::string bname = b.name;
    std::vector<int64_t> shape = b.shape;
    KILN_ASSIGN_OR_RETURN(ExprRef e, valueAt(v, idx));
    return store(bname, flatIndex(idx, shape), cast(e, v->type().dtype()));
  }

  // The stores of each of `values` at `idx`.
  StatusOr<StmtRef> storeValues(const std::vector<const Value*>& values, const Index& idx) {
    std::vector<StmtRef> stores;
    for (const Value* v : values) {
      KILN_ASSIGN_OR_RETURN(StmtRef st, storeValue(v, idx));
      stores.push_back(st);
    }
    return block(std::move(stores));
  }

  // A nest over `shape` storing each of `values` (all of that shape).
  StatusOr<StmtRef> storeNest(const std::vector<const Value*>& values,
                              const std::vector<int64_t>& shape) {
    if (values.size() == 1 && values[0]->def()->op() == OpCode::Concatenate &&
        members_.count(values[0]->def()) && !overrides_.count(values[0]))
      return storeConcatenate(values[0], shape);
    Status err = Status::ok();
    StmtRef s = nest(shape, [&](const Index& idx) -> StmtRef {
      auto st = storeValues(values, idx);
      if (st) return *st;
      err = st.status();
      return block({});
    });
    KILN_RETURN_IF_ERROR(err);
    return s;
  }

  // A stored concatenate computed in the kernel: the loops over the dims before the
  // concatenated one are shared, and inside them one nest per operand stores that operand alone
  // over its part of the result. Computed element by element instead, every element would
  // evaluate every operand and select one (a 9-way im2col concatenation of slices of a pad ran at
  // 0.2 GB/s), and the selects keep the loop from vectorizing. Sharing the outer loops makes an
  // im2col one parallel loop over pixels, each storing its nine rows, instead of nine.
  StatusOr<StmtRef> storeConcatenate(const Value* v, const std::vector<int64_t>& shape) {
    const Node* n = v->def();
    size_t d = static_cast<size_t>(n->attrInt("dimension"));
    const Buffer& b = bufferFor(v, BufferRole::Output);
    std::string bname = b.name;
    std::vector<int64_t> bshape = b.shape;
    // Outer loops of fewer than kMinSharedOuter iterations in all would leave the threads
    // little to split: each operand's nest then takes all the dims and a parallel loop of its own.
    constexpr int64_t kMinSharedOuter = 16;
    std::vector<int64_t> outer(shape.begin(), shape.begin() + static_cast<ptrdiff_t>(d));
    if (elementCount(outer) < kMinSharedOuter) outer.clear();
    std::vector<int64_t> inner(shape.begin() + static_cast<ptrdiff_t>(outer.size()), shape.end());
    const size_t di = d - outer.size();  // the concatenated dim within `inner`
    Status err = Status::ok();
    // The parts of the result at the outer index `at`, one nest per operand.
    auto parts = [&](const Index& at) -> StmtRef {
      std::vector<StmtRef> nests;
      int64_t offset = 0;
      for (size_t i = 0; i < n->numOperands() && err.isOk(); ++i) {
        std::vector<int64_t> part = inner;
        part[di] = n->operand(i)->type().dims()[d].value();
        if (part[di] == 0) continue;
        memo_.clear();
        nests.push_back(nest(part, [&](const Index& within) -> StmtRef {
          Index idx = at;
          idx.insert(idx.end(), within.begin(), within.end());
          auto x = valueAt(n->operand(i), idx);
          if (!x) {
            err = x.status();
            return block({});
          }
          idx[d] = binary(BinaryOp::Add, idx[d], intConst(offset));
          return store(bname, flatIndex(idx, bshape), cast(*x, v->type().dtype()));
        }));
        offset += part[di];
      }
      return block(std::move(nests));
    };
    StmtRef s = outer.empty() ? parts({}) : nest(outer, parts);
    KILN_RETURN_IF_ERROR(err);
    return s;
  }

  // `s`, then the nests that store `rest` (the kernel's outputs of other shapes).
  StatusOr<StmtRef> thenStore(StmtRef s, const std::vector<const Value*>& rest) {
    if (rest.empty()) return s;
    KILN_ASSIGN_OR_RETURN(StmtRef others, storeAll(rest));
    return block({s, others});
  }

  // One nest per distinct shape among `values`.
  StatusOr<StmtRef> storeAll(const std::vector<const Value*>& values) {
    std::vector<std::pair<std::vector<int64_t>, std::vector<const Value*>>> byShape;
    for (const Value* v : values) {
      std::vector<int64_t> s = v->type().staticDims();
      auto it =
          std::find_if(byShape.begin(), byShape.end(), [&](const auto& p) { return p.first == s; });
      if (it == byShape.end()) byShape.push_back({s, {v}});
      else it->second.push_back(v);
    }
    std::vector<StmtRef> nests;
    for (const auto& [shape, vs] : byShape) {
      memo_.clear();
      KILN_ASSIGN_OR_RETURN(StmtRef s, storeNest(vs, shape));
      nests.push_back(s);
    }
    return block(std::move(nests));
  }

  StatusOr<StmtRef> lowerLoop() { return storeAll(k_.outputs); }

  // ---- reductions -----------------------------------------------------------------------

  static ReduceKind reduceKind(const std::string& kind) {
    if (kind == "sum") return ReduceKind::Sum;
    if (kind == "prod") return ReduceKind::Prod;
    if (kind == "max") return ReduceKind::Max;
    if (kind == "min") return ReduceKind::Min;
    if (kind == "and") return ReduceKind::And;
    return ReduceKind::Or;
  }

  // Values to store, split: those of `shape` (stored in the main nest) and the rest (each in a
  // nest of its own, recomputed).
  void splitOutputs(const std::vector<int64_t>& shape, std::vector<const Value*>& main,
                    std::vector<const Value*>& rest) const {
    for (const Value* v : k_.outputs) {
      if (v->type().staticDims() == shape) main.push_back(v);
      else rest.push_back(v);
    }
  }

  StatusOr<StmtRef> lowerReduction() {
    const Node* a = k_.anchor;
    switch (a->op()) {
      case OpCode::Reduce:
      case OpCode::ArgMax:
      case OpCode::ArgMin:
      case OpCode::ReduceWindow: return lowerRowReduction();
      case OpCode::Softmax:
      case OpCode::LogSoftmax:
      case OpCode::LayerNorm: return lowerRowNormalization();
      default: return Status::error(std::string(opName(a->op())) + " has no reduction lowering");
    }
  }

  // The reduced loops of output index `o` of a reduce, argmax/argmin or reduce_window, the input
  // index they read, and (for a window with padding or dilation) when that index is valid.
  struct ReductionIndex {
    std::vector<std::string> rvars;
    std::vector<int64_t> rextents;
    Index inIdx;
    ExprRef valid;
  };
  ReductionIndex reductionIndex(const Index& o) {
    const Node* a = k_.anchor;
    std::vector<int64_t> in = a->operand(0)->type().staticDims();
    bool arg = a->op() == OpCode::ArgMax || a->op() == OpCode::ArgMin;
    ReductionIndex ri;
    std::vector<std::string>& rvars = ri.rvars;
    std::vector<int64_t>& rextents = ri.rextents;
    Index& inIdx = ri.inIdx;
    inIdx.resize(in.size());
    ExprRef& valid = ri.valid;
    if (a->op() == OpCode::ReduceWindow) {
      auto win = a->attrInts("window_dimensions");
      size_t r = in.size();
      // Absent attributes are all `fill`.
      auto attr = [&](const char* name, int64_t fill) {
        std::vector<int64_t> v = a->attrInts(name);
        if (v.empty()) v.assign(r, fill);
        return v;
      };
      const std::vector<int64_t> strides = attr("window_strides", 1);
      const std::vector<int64_t> bdil = attr("base_dilations", 1);
      const std::vector<int64_t> wdil = attr("window_dilations", 1);
      const std::vector<int64_t> lo = attr("padding_low", 0);
      std::vector<ExprRef> conds;
      for (size_t d = 0; d < r; ++d) {
        rvars.push_back(freshVar("w"));
        rextents.push_back(win[d]);
        ExprRef q = binary(BinaryOp::Sub,
                           binary(BinaryOp::Add, binary(BinaryOp::Mul, o[d], intConst(strides[d])),
                                  binary(BinaryOp::Mul, var(rvars.back()), intConst(wdil[d]))),
                           intConst(lo[d]));
        int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * bdil[d] + 1;
        if (win[d] != 1 || lo[d] != 0 || strides[d] != 1 || bdil[d] != 1) {
          conds.push_back(binary(BinaryOp::Ge, q, intConst(0)));
          conds.push_back(binary(BinaryOp::Lt, q, intConst(dilated)));
        }
        if (bdil[d] > 1)
          conds.push_back(
              binary(BinaryOp::Eq, binary(BinaryOp::Rem, q, intConst(bdil[d])), intConst(0)));
        inIdx[d] = clampIndex(binary(BinaryOp::Div, q, intConst(bdil[d])), in[d]);
      }
      if (!conds.empty()) valid = andAll(conds);
    } else {
      std::set<int64_t> reduced;
      if (arg) reduced.insert(a->attrInt("axis"));
      else
        for (int64_t d : a->attrInts("dims")) reduced.insert(d);
      size_t oi = 0;
      for (size_t d = 0; d < in.size(); ++d) {
        if (reduced.count(static_cast<int64_t>(d))) {
          rvars.push_back(freshVar("r"));
          rextents.push_back(in[d]);
          inIdx[d] = var(rvars.back());
        } else {
          inIdx[d] = o[oi++];
        }
      }
    }
    return ri;
  }

  // reduce, argmax/argmin and reduce_window: per output element, a loop over the reduced
  // elements into local accumulators, then the epilogue at the output index.
  // Whether a reduce or reduce_window keeps its input's innermost dim as its result's innermost
  // (pooling in NHWC, a reduction over rows): then the accumulators of a run of that dim are
  // updated together, in a vectorized loop inside the reduced loops (lowerChannelReduction).
  bool keepsInnermost() const {
    const Node* a = k_.anchor;
    std::vector<int64_t> in = a->operand(0)->type().staticDims();
    std::vector<int64_t> out = a->result()->type().staticDims();
    if (in.empty() || out.empty() || in.back() != out.back() || out.back() < 8 || out.back() > 4096)
      return false;
    size_t last = in.size() - 1;
    if (a->op() == OpCode::Reduce) {
      for (int64_t d : a->attrInts("dims"))
        if (d == static_cast<int64_t>(last)) return false;
      return true;
    }
    if (a->op() != OpCode::ReduceWindow) return false;
    auto at = [&](const char* name, int64_t fill) {
      std::vector<int64_t> v = a->attrInts(name, std::vector<int64_t>(in.size(), fill));
      return v.size() == in.size() ? v[last] : -1;
    };
    return at("window_dimensions", 1) == 1 && at("window_strides", 1) == 1 &&
           at("base_dilations", 1) == 1 && at("window_dilations", 1) == 1 &&
           at("padding_low", 0) == 0 && at("padding_high", 0) == 0;
  }

  // A reduce or reduce_window that keeps the innermost dim (keepsInnermost): per index of the
  // other result dims, a local accumulator per innermost element,
  //   vectorized for c: acc[c] = identity
  //   for the reduced loops { vectorized for c: acc[c] = acc[c] op x(..., c) }
  //   vectorized for c: the stored values at (..., c), the result being acc[c].
  // Each accumulator sees its elements in the same order as one per output element would.
  StatusOr<StmtRef> lowerChannelReduction() {
    const Node* a = k_.anchor;
    const Value* x = a->operand(0);
    std::vector<int64_t> outShape = a->result()->type().staticDims();
    std::vector<int64_t> outer(outShape.begin(), outShape.end() - 1);
    int64_t channels = outShape.back();
    DType ct = computeType(x->type().dtype());
    DType resultType = a->result()->type().dtype();
    ReduceKind kind = reduceKind(a->attrEnum("kind"));
    std::vector<const Value*> main, rest;
    splitOutputs(outShape, main, rest);
    std::string acc = "acc" + std::to_string(vars_);
    Status err = Status::ok();
    auto perOuter = [&](const Index& oo) -> StmtRef {
      memo_.clear();
      std::string c = freshVar("c");
      Index o = oo;
      o.push_back(var(c));
      ReductionIndex ri = reductionIndex(o);
      auto xv = valueAt(x, ri.inIdx);
      if (!xv) {
        err = xv.status();
        return block({});
      }
      ExprRef cur = load(acc, ct, var(c));
      ExprRef next = reduceCombine(kind, cur, *xv);
      if (ri.valid) next = select(ri.valid, next, cur);
      StmtRef update = forLoop(c, intConst(channels), LoopKind::Serial, store(acc, var(c), next));
      for (size_t i = ri.rvars.size(); i-- > 0;)
        update = forLoop(ri.rvars[i], intConst(ri.rextents[i]), LoopKind::Serial, update);
      std::string c0 = freshVar("c"), c1 = freshVar("c");
      StmtRef init = forLoop(c0, intConst(channels), LoopKind::Serial,
                             store(acc, var(c0), reduceIdentity(kind, ct)));
      memo_.clear();
      overrides_[a->result()] = [acc, ct, resultType](const Index& i) {
        return cast(cast(load(acc, ct, i.back()), resultType), computeType(resultType));
      };
      Index o1 = oo;
      o1.push_back(var(c1));
      auto stores = storeValues(main, o1);
      overrides_.erase(a->result());
      if (!stores) {
        err = stores.status();
        return block({});
      }
      StmtRef out = forLoop(c1, intConst(channels), LoopKind::Serial, *stores);
      return alloc(acc, ct, channels, MemoryScope::Local, block({init, update, out}));
    };
    StmtRef s = nest(outer, perOuter);
    KILN_RETURN_IF_ERROR(err);
    return thenStore(s, rest);
  }

  // One step of argmax/argmin over the variable `pos`: the first NaN wins (argmax: NaN is the
  // largest; argmin: the smallest); ties keep the first index unless select_last_index.
  StmtRef argUpdate(const std::string& acc, const std::string& accIdx, DType ct, ExprRef v,
                    const std::string& pos) {
    const Node* a = k_.anchor;
    ExprRef cur = load(acc, ct, intConst(0));
    BinaryOp better = a->op() == OpCode::ArgMax ? BinaryOp::Gt : BinaryOp::Lt;
    ExprRef take = binary(better, v, cur);
    if (a->attrBool("select_last_index"))
      take = binary(BinaryOp::Or, take, binary(BinaryOp::Eq, v, cur));
    if (isFloat(ct)) {
      ExprRef curNan = unary(UnaryOp::IsNan, cur);
      take = binary(BinaryOp::And, unary(UnaryOp::Not, curNan),
                    binary(BinaryOp::Or, take, unary(UnaryOp::IsNan, v)));
    }
    ExprRef first = binary(BinaryOp::Lt, load(accIdx, DType::I64, intConst(0)), intConst(0));
    take = binary(BinaryOp::Or, take, first);
    return ifThen(take, block({store(acc, intConst(0), v), store(accIdx, intConst(0), var(pos))}));
  }

  StatusOr<StmtRef> lowerRowReduction() {
    const Node* a = k_.anchor;
    if (keepsInnermost()) return lowerChannelReduction();
    const Value* x = a->operand(0);
    std::vector<int64_t> in = x->type().staticDims();
    std::vector<int64_t> outShape = a->result()->type().staticDims();
    DType xt = x->type().dtype();
    DType ct = computeType(xt);
    bool arg = a->op() == OpCode::ArgMax || a->op() == OpCode::ArgMin;
    ReduceKind kind = arg ? (a->op() == OpCode::ArgMax ? ReduceKind::Max : ReduceKind::Min)
                          : reduceKind(a->attrEnum("kind"));
    std::vector<const Value*> main, rest;
    splitOutputs(outShape, main, rest);
    std::string acc = "acc" + std::to_string(vars_), accIdx = "arg" + std::to_string(vars_);
    Status err = Status::ok();
    auto perOutput = [&](const Index& o) -> StmtRef {
      memo_.clear();
      std::vector<StmtRef> body;
      body.push_back(store(acc, intConst(0), reduceIdentity(kind, ct)));
      if (arg) body.push_back(store(accIdx, intConst(0), intConst(-1)));
      ReductionIndex ri = reductionIndex(o);
      auto xv = valueAt(x, ri.inIdx);
      if (!xv) {
        err = xv.status();
        return block({});
      }
      StmtRef update;
      if (arg) {
        update = argUpdate(acc, accIdx, ct, *xv, ri.rvars[0]);
        for (size_t i = ri.rvars.size(); i-- > 0;)
          update = forLoop(ri.rvars[i], intConst(ri.rextents[i]), LoopKind::Serial, update);
      } else {
        // An element outside a padded window counts as the identity.
        ExprRef v = ri.valid ? select(ri.valid, *xv, reduceIdentity(kind, ct)) : *xv;
        std::vector<ExprRef> extents;
        for (int64_t e : ri.rextents) extents.push_back(intConst(e));
        update = ri.rvars.empty()
                     ? store(acc, intConst(0), reduceCombine(kind, load(acc, ct, intConst(0)), v))
                     : reduceInto(acc, intConst(0), kind, ri.rvars, extents, v);
      }
      body.push_back(update);
      // The epilogue at the output index reads the accumulator.
      DType resultType = a->result()->type().dtype();
      std::string accName = arg ? accIdx : acc;
      overrides_[a->result()] = [accName, arg, resultType, ct](const Index&) {
        return arg ? load(accName, DType::I64, intConst(0))
                   : cast(cast(load(accName, ct, intConst(0)), resultType),
                          computeType(resultType));
      };
      auto stores = storeValues(main, o);
      if (!stores) {
        err = stores.status();
        return block({});
      }
      body.push_back(*stores);
      // The accumulators are scratch of this output element (inside any parallel loop, so each
      // thread has its own).
      StmtRef s = alloc(acc, ct, 1, MemoryScope::Local, block(std::move(body)));
      if (arg) s = alloc(accIdx, DType::I64, 1, MemoryScope::Local, s);
      return s;
    };
    StmtRef s = nest(outShape, perOutput);
    overrides_.erase(a->result());
    KILN_RETURN_IF_ERROR(err);
    return thenStore(s, rest);
  }

  // softmax, log_softmax, layer_norm: per row, passes over the row with local accumulators,
  // and the result (with its epilogue) stored in the last pass.
  StatusOr<StmtRef> lowerRowNormalization() {
    const Node* a = k_.anchor;
    const Value* x = a->operand(0);
    std::vector<int64_t> in = x->type().staticDims();
    DType ct = computeType(x->type().dtype());
    int64_t axis = a->attrInt("axis");
    bool layerNorm = a->op() == OpCode::LayerNorm;
    // Row dims and the dims of one row: softmax normalises one axis, layer_norm [axis, rank).
    std::vector<size_t> rowDims, lineDims;
    for (size_t d = 0; d < in.size(); ++d) {
      bool line = layerNorm ? d >= static_cast<size_t>(axis) : d == static_cast<size_t>(axis);
      (line ? lineDims : rowDims).push_back(d);
    }
    std::vector<int64_t> rowShape, lineShape;
    for (size_t d : rowDims) rowShape.push_back(in[d]);
    for (size_t d : lineDims) lineShape.push_back(in[d]);
    int64_t lineSize = elementCount(lineShape);
    std::vector<const Value*> main, rest;
    splitOutputs(in, main, rest);
    std::string a0 = "acc" + std::to_string(vars_), a1 = "sum" + std::to_string(vars_);
    bool logarithm = a->op() == OpCode::LogSoftmax;
    Status err = Status::ok();
    auto perRow = [&](const Index& r) -> StmtRef {
      auto fullAt = [&](const Index& l) {
        Index full(in.size());
        for (size_t i = 0; i < rowDims.size(); ++i) full[rowDims[i]] = r[i];
        for (size_t i = 0; i < lineDims.size(); ++i) full[lineDims[i]] = l[i];
        return full;
      };
      // One pass over the line: body(full index, line index).
      auto pass = [&](const std::function<StatusOr<StmtRef>(const Index&, const Index&)>& f) {
        memo_.clear();
        return nest(
            lineShape,
            [&](const Index& l) -> StmtRef {
              auto s = f(fullAt(l), l);
              if (!s) {
                err = s.status();
                return block({});
              }
              return *s;
            },
            "j");
      };
      auto xAt = [&](const Index& full) { return valueAt(x, full); };
      // acc = acc `kind` value(full index) over the line: one Reduce over its dims.
      auto reduceLine = [&](const std::string& acc, ReduceKind kind,
                            const std::function<StatusOr<ExprRef>(const Index&)>& value) {
        memo_.clear();
        Index l;
        std::vector<std::string> vars;
        std::vector<ExprRef> extents;
        for (int64_t e : lineShape) {
          if (e != 1) vars.push_back(freshVar("j")), extents.push_back(intConst(e));
          l.push_back(e == 1 ? intConst(0) : var(vars.back()));
        }
        StatusOr<ExprRef> v = value(fullAt(l));
        if (!v) {
          err = v.status();
          return block({});
        }
        if (vars.empty())
          return store(acc, intConst(0), reduceCombine(kind, load(acc, ct, intConst(0)), *v));
        return reduceInto(acc, intConst(0), kind, vars, extents, *v);
      };
      ExprRef acc0 = load(a0, ct, intConst(0)), acc1 = load(a1, ct, intConst(0));
      std::vector<StmtRef> body;
      if (layerNorm) {
        body.push_back(store(a0, intConst(0), floatConst(0, ct)));
        body.push_back(reduceLine(a0, ReduceKind::Sum, xAt));
        body.push_back(
            store(a0, intConst(0), binary(BinaryOp::Div, acc0, floatConst(double(lineSize), ct))));
        body.push_back(store(a1, intConst(0), floatConst(0, ct)));
        body.push_back(reduceLine(a1, ReduceKind::Sum, [&](const Index& full) -> StatusOr<ExprRef> {
          KILN_ASSIGN_OR_RETURN(ExprRef v, xAt(full));
          ExprRef d = binary(BinaryOp::Sub, v, acc0);
          return binary(BinaryOp::Mul, d, d);
        }));
        // a1 becomes 1 / sqrt(var + eps).
        body.push_back(
            store(a1, intConst(0),
                  binary(BinaryOp::Div, floatConst(1, ct),
                         unary(UnaryOp::Sqrt,
                               binary(BinaryOp::Add,
                                      binary(BinaryOp::Div, acc1, floatConst(double(lineSize), ct)),
                                      floatConst(a->attrFloat("epsilon"), ct))))));
      } else {
        body.push_back(
            store(a0, intConst(0), floatConst(-std::numeric_limits<double>::infinity(), ct)));
        body.push_back(reduceLine(a0, logarithm ? ReduceKind::Max : ReduceKind::SelectMax, xAt));
        body.push_back(store(a1, intConst(0), floatConst(0, ct)));
        body.push_back(reduceLine(a1, ReduceKind::Sum, [&](const Index& full) -> StatusOr<ExprRef> {
          KILN_ASSIGN_OR_RETURN(ExprRef v, xAt(full));
          return unary(UnaryOp::Exp, binary(BinaryOp::Sub, v, acc0));
        }));
        // softmax multiplies by 1 / sum (within an ulp of dividing by it, one division a row).
        if (!logarithm)
          body.push_back(store(a1, intConst(0), binary(BinaryOp::Div, floatConst(1, ct), acc1)));
      }
      // The last pass: the anchor's value at each element, and every stored value of x's shape.
      DType resultType = a->result()->type().dtype();
      body.push_back(pass([&](const Index& full, const Index& line) -> StatusOr<StmtRef> {
        KILN_ASSIGN_OR_RETURN(ExprRef v, xAt(full));
        ExprRef y;
        if (layerNorm) {
          KILN_ASSIGN_OR_RETURN(ExprRef scale, valueAt(a->operand(1), line));
          y = binary(BinaryOp::Mul, binary(BinaryOp::Mul, binary(BinaryOp::Sub, v, acc0), acc1),
                     scale);
          if (a->numOperands() > 2) {
            KILN_ASSIGN_OR_RETURN(ExprRef bias, valueAt(a->operand(2), line));
            y = binary(BinaryOp::Add, y, bias);
          }
        } else if (logarithm) {
          y = binary(BinaryOp::Sub, binary(BinaryOp::Sub, v, acc0), unary(UnaryOp::Log, acc1));
        } else {
          y = binary(BinaryOp::Mul, unary(UnaryOp::Exp, binary(BinaryOp::Sub, v, acc0)), acc1);
        }
        ExprRef rounded = cast(cast(y, resultType), computeType(resultType));
        overrides_[a->result()] = [rounded](const Index&) { return rounded; };
        StatusOr<StmtRef> stores = storeValues(main, full);
        overrides_.erase(a->result());
        return stores;
      }));
      return alloc(a0, ct, 1, MemoryScope::Local,
                   alloc(a1, ct, 1, MemoryScope::Local, block(std::move(body))));
    };
    StmtRef rows = nest(rowShape, perRow);
    KILN_RETURN_IF_ERROR(err);
    return thenStore(rows, rest);
  }

  // ---- library calls ----------------------------------------------------------------------

  // The value of a splat: a broadcast (in the kernel) of a one-element constant.
  std::optional<double> splatValue(const Value* v) const {
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

  // `other` as the operand of an add or mul post-op: a value read from memory (computed
  // outside the kernel), directly or through a broadcast in the kernel.
  std::optional<PostOp> binaryOperand(PostOp::Kind kind, const Value* other,
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

  // The post-op that `u` (the only user of `cur`) applies to `cur`, or none.
  std::optional<PostOp> postOpFor(const Node* u, const Value* cur) {
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

  // Folds the leading elementwise ops after the anchor into post-ops (LowerOptions::postOps).
  // Returns the value the call then writes (the anchor's result when nothing folds); `why` says
  // why the chain stops where it does when an epilogue op remains.
  const Value* foldPostOps(std::vector<PostOp>& ops, std::string& why) {
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
      if (p->kind == PostOp::Kind::Clamp && !ops.empty() &&
          ops.back().kind == PostOp::Kind::Clamp &&
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

  StatusOr<StmtRef> lowerCall() {
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

  const fusion::Kernel& k_;
  LowerOptions options_;
  Kernel out_;
  std::map<const Value*, std::string> names_;
  std::set<const Node*> members_;
  std::vector<Buffer> buffers_;
  std::set<std::string> usedNames_;
  std::map<const Value*, std::function<ExprRef(const Index&)>> overrides_;
  std::map<std::string, std::pair<ExprRef, Index>> memo_;
  int vars_ = 0;
};

}  // namespace

namespace {

StatusOr<Kernel> lowerWithNames(const fusion::Kernel& k, const LowerOptions& options,
                                const std::map<const Value*, std::string>& names) {
  KILN_ASSIGN_OR_RETURN(Kernel lowered, Lowerer(k, options, names).run());
  return simplifyIndices(lowered);
}

}  // namespace

StatusOr<Kernel> lowerKernel(const Function& f, const fusion::Kernel& k,
                             const LowerOptions& options) {
  return lowerWithNames(k, options, printedValueNames(f));
}

StatusOr<std::vector<Kernel>> lowerPlan(const Function& f, const fusion::FusionPlan& plan,
                                        const LowerOptions& options) {
  // The value names are computed once: per kernel they cost a walk over the whole function.
  const std::map<const Value*, std::string> names = printedValueNames(f);
  std::vector<Kernel> out;
  for (const fusion::Kernel& k : plan.kernels) {
    KILN_ASSIGN_OR_RETURN(Kernel lowered, lowerWithNames(k, options, names));
    out.push_back(std::move(lowered));
  }
  return out;
}

}  // namespace kiln::kernel
