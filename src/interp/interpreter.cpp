// The interpreter driver: checks inputs against the parameter types, walks the nodes in program
// order, frees each value after its last use, and dispatches every node to the kernel of its op
// family. Result types with symbolic dims are made concrete by re-running the op's type rule on
// the operands' concrete types.
#include "interp/interpreter.h"

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "interp/eval.h"
#include "passes/expose_dynamic_sizes.h"

namespace kiln {
namespace {

// Extent of each symbol seen so far, and where it was first bound ("input 0", "operand 1").
struct SymbolBinding {
  int64_t extent;
  std::string where;
};
using SymbolMap = std::map<std::string, SymbolBinding>;

// A symbol's extent in `symbols`, for Dim::evaluate.
auto boundIn(const SymbolMap& symbols) {
  return [&symbols](const std::string& f) -> std::optional<int64_t> {
    auto it = symbols.find(f);
    return it == symbols.end() ? std::nullopt : std::optional<int64_t>(it->second.extent);
  };
}

// Matches concrete dims against `declared`: static extents must agree, and each symbol takes the
// first extent seen and must then agree everywhere. `where` names the value for messages.
Status matchType(const TensorType& declared, DType dtype, const std::vector<int64_t>& dims,
                 const std::string& where, SymbolMap& symbols) {
  auto mismatch = [&] {
    return Status::error(where + ": expected " + declared.str() + ", got " +
                         TensorType::of(dtype, dims).str());
  };
  if (declared.dtype() != dtype || declared.rank() != static_cast<int64_t>(dims.size()))
    return mismatch();
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = declared.dim(i);
    if (d.isStatic()) {
      if (d.value() != dims[i]) return mismatch();
      continue;
    }
    if (!d.isSymbol()) {  // a product: checked once its symbols are bound
      auto v = d.evaluate(boundIn(symbols));
      if (v && *v != dims[i]) return mismatch();
      continue;
    }
    std::string whereShort = where.substr(0, where.find(" ("));
    auto [it, fresh] = symbols.try_emplace(d.symbolName(), SymbolBinding{dims[i], whereShort});
    if (!fresh && it->second.extent != dims[i])
      return Status::error("symbol " + d.symbolName() + " is " + std::to_string(it->second.extent) +
                           " in " + it->second.where + " but " + std::to_string(dims[i]) + " in " +
                           whereShort);
  }
  return Status::ok();
}

// `t` with every bound symbol replaced by its extent.
TensorType substitute(const TensorType& t, const SymbolMap& symbols) {
  Shape dims = t.dims();
  for (Dim& d : dims) {
    auto v = d.evaluate(boundIn(symbols));
    if (v) d = Dim(*v);
  }
  return t.withDims(std::move(dims));
}

// A reshape to a type with one unbound symbol (reshape f32[N,4] to f32[M]) fixes that symbol
// by the element count.
Status solveReshape(const TensorType& declared, int64_t count, TensorType& out) {
  int64_t known = 1;
  int symbolic = 0;
  for (const Dim& d : declared.dims()) {
    if (d.isStatic()) known *= d.value();
    else ++symbolic;
  }
  if (symbolic != 1) return Status::ok();
  if (known == 0 || count % known != 0)
    return Status::error("cannot reshape " + std::to_string(count) + " elements to " +
                         declared.str());
  Shape dims = declared.dims();
  for (Dim& d : dims)
    if (d.isSymbolic()) d = Dim(count / known);
  out = declared.withDims(std::move(dims));
  return Status::ok();
}

// The concrete result types of `n` for these operand values. `bound` holds the symbols a run has
// bound already: a result dim that no operand carries (a broadcast or iota to f32[N,4]) takes its
// extent from there.
StatusOr<std::vector<TensorType>>
resolveResultTypes(const Node& n, std::span<const Tensor> operands, const SymbolMap& bound) {
  SymbolMap symbols;
  std::vector<TensorType> concrete;
  concrete.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    if (!t.defined()) return Status::error("operand " + std::to_string(i) + " has no value");
    KILN_RETURN_IF_ERROR(matchType(n.operand(i)->type(), t.dtype(), t.dims(),
                                   "operand " + std::to_string(i), symbols));
    concrete.push_back(t.type());
  }
  std::vector<TensorType> declared;
  for (size_t i = 0; i < n.numResults(); ++i)
    declared.push_back(substitute(n.result(i)->type(), symbols));
  // `declared` keeps the run's symbols unsubstituted, so that a result disagreeing with them is
  // reported by the caller naming the symbol; the type rule sees them filled in.
  std::vector<TensorType> given = declared;
  for (TensorType& t : given) t = substitute(t, bound);
  if (n.op() == OpCode::Reshape && !given[0].isStatic())
    KILN_RETURN_IF_ERROR(solveReshape(given[0], operands[0].numElements(), given[0]));
  // The type rule both checks the operand values (so kernels can rely on it) and gives dims.
  InferInput in{n.op(), concrete, n.attrs(), given};
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> types, inferResultTypes(in));
  if (types.size() != n.numResults())
    return Status::error("the type rule gives " + std::to_string(types.size()) +
                         " results for a node with " + std::to_string(n.numResults()));
  for (size_t i = 0; i < types.size(); ++i) {
    if (!types[i].isStatic())
      return Status::error("cannot determine the extents of result " + std::to_string(i) + " (" +
                           types[i].str() + ") from the operands");
    KILN_RETURN_IF_ERROR(matchType(declared[i], types[i].dtype(), types[i].staticDims(),
                                   "result " + std::to_string(i), symbols));
  }
  return types;
}

// The kernel of each op. Every op is listed and there is no default, so -Wswitch names an op
// added to ops.def without a kernel.
interp::EvalResult dispatch(const interp::EvalContext& c) {
  // clang-format off
  switch (c.node.op()) {
    case OpCode::Constant: return std::vector<Tensor>{c.node.constantData().tensor};
    case OpCode::Parameter:
      return Status::error("a parameter has no kernel; interpret() binds it to an input");
    case OpCode::Iota: case OpCode::Convert:
    case OpCode::Abs: case OpCode::Neg: case OpCode::Sign:
    case OpCode::Floor: case OpCode::Ceil: case OpCode::RoundNearestEven:
    case OpCode::Exp: case OpCode::Expm1: case OpCode::Log: case OpCode::Log1p:
    case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Sin: case OpCode::Cos: case OpCode::Tan:
    case OpCode::Asin: case OpCode::Acos: case OpCode::Atan: case OpCode::Sinh: case OpCode::Cosh:
    case OpCode::Asinh: case OpCode::Acosh: case OpCode::Atanh: case OpCode::Tanh:
    case OpCode::Erf: case OpCode::Sigmoid: case OpCode::Not:
    case OpCode::IsFinite: case OpCode::IsInf: case OpCode::IsNan:
    case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div: case OpCode::Rem:
    case OpCode::Pow: case OpCode::Max: case OpCode::Min: case OpCode::Atan2:
    case OpCode::And: case OpCode::Or: case OpCode::Xor: case OpCode::ShiftLeft:
    case OpCode::ShiftRightArithmetic: case OpCode::ShiftRightLogical: case OpCode::Compare:
    case OpCode::Select: case OpCode::Clamp:
      return interp::evalElementwise(c);
    case OpCode::BroadcastInDim: case OpCode::Reshape: case OpCode::Transpose:
    case OpCode::Slice: case OpCode::DynamicSlice: case OpCode::DynamicUpdateSlice:
    case OpCode::Concatenate: case OpCode::Pad: case OpCode::Gather: case OpCode::Scatter:
    case OpCode::Reverse: case OpCode::Resize: case OpCode::GridSample:
    case OpCode::SetDimensionSize: case OpCode::GetDimensionSize:
      return interp::evalDataMovement(c);
    case OpCode::Reduce: case OpCode::ArgMax: case OpCode::ArgMin: case OpCode::ReduceWindow:
    case OpCode::Cumsum: case OpCode::Sort: case OpCode::TopK: case OpCode::NonZero:
      return interp::evalReduction(c);
    case OpCode::Unique: case OpCode::NonMaxSuppression:
      return interp::evalDynamicSize(c);
    case OpCode::StringNormalize:
      return interp::evalStrings(c);
    case OpCode::DotGeneral: case OpCode::Convolution:
      return interp::evalContraction(c);
    case OpCode::Softmax: case OpCode::LogSoftmax: case OpCode::LayerNorm:
    case OpCode::BatchNormInference: case OpCode::Gelu: case OpCode::Attention:
    case OpCode::Lstm: case OpCode::Gru:
      return interp::evalComposite(c);
  }
  // clang-format on
  return Status::error("op code " + std::to_string(static_cast<int>(c.node.op())) +
                       " is not in the op table");
}

std::string inputName(const Function& f, size_t i) {
  const std::string& name = f.parameter(i)->name();
  return "input " + std::to_string(i) + (name.empty() ? "" : " (%" + name + ")");
}

Status checkInputs(const Function& f, std::span<const Tensor> inputs, SymbolMap& symbols) {
  if (inputs.size() != f.numParameters())
    return Status::error("function @" + f.name() + " takes " + std::to_string(f.numParameters()) +
                         " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) return Status::error(inputName(f, i) + ": the tensor has no data");
    KILN_RETURN_IF_ERROR(matchType(f.parameter(i)->type(), inputs[i].dtype(), inputs[i].dims(),
                                   inputName(f, i), symbols));
  }
  return Status::ok();
}

// Values alive during a run, each with the number of uses still to come.
class Environment {
 public:
  explicit Environment(const Function& f) {
    for (const Value* v : f.outputs()) outputs_.insert(v);
  }
  void define(const Value* v, Tensor t) {
    if (v->uses().empty() && !outputs_.count(v)) return;  // dead value: drop it at once
    values_[v] = Entry{std::move(t), v->uses().size()};
  }
  const Tensor* find(const Value* v) const {
    auto it = values_.find(v);
    return it == values_.end() ? nullptr : &it->second.tensor;
  }
  // One use of v is done; frees it after its last use unless the function returns it.
  void release(const Value* v) {
    auto it = values_.find(v);
    if (it == values_.end()) return;
    if (it->second.remaining > 0) --it->second.remaining;
    if (it->second.remaining == 0 && !outputs_.count(v)) values_.erase(it);
  }

 private:
  struct Entry {
    Tensor tensor;
    size_t remaining;
  };
  std::unordered_map<const Value*, Entry> values_;
  std::unordered_set<const Value*> outputs_;
};

StatusOr<std::vector<Tensor>> evaluateBound(const Node& n, std::span<const Tensor> operands,
                                            const SymbolMap& bound);

// Evaluates one non-parameter node of a run and records its results. Errors name the node.
Status runNode(const Node& n, Environment& env, SymbolMap& symbols) {
  auto fail = [&](Status s) { return s.prefix(n.describe()).at(n.loc()); };
  std::vector<Tensor> operands;
  operands.reserve(n.numOperands());
  for (size_t i = 0; i < n.numOperands(); ++i) {
    const Tensor* t = env.find(n.operand(i));
    if (!t)
      return fail(
          Status::error("operand " + std::to_string(i) + " is not computed before its use"));
    operands.push_back(*t);
  }
  auto results = evaluateBound(n, operands, symbols);
  if (!results) return results.status();
  // Symbols in result types must agree with the extents bound by the inputs.
  for (size_t i = 0; i < results->size(); ++i) {
    const Tensor& r = (*results)[i];
    Status s =
        matchType(n.result(i)->type(), r.dtype(), r.dims(), "result " + std::to_string(i), symbols);
    if (!s) return fail(s);
  }
  operands.clear();
  for (size_t i = 0; i < n.numOperands(); ++i) env.release(n.operand(i));
  for (size_t i = 0; i < results->size(); ++i) env.define(n.result(i), std::move((*results)[i]));
  return Status::ok();
}

// The set_dimension_size in the chain of them that defines v which sizes `dim`, or nullptr.
const Node* sizedBy(const Value* v, int64_t dim) {
  for (; v->def()->op() == OpCode::SetDimensionSize; v = v->def()->operand(0))
    if (v->def()->attrInt("dimension") == dim) return v->def();
  return nullptr;
}

}  // namespace

StatusOr<std::vector<Tensor>> interpret(const Function& f, std::span<const Tensor> inputs) {
  SymbolMap symbols;
  KILN_RETURN_IF_ERROR(checkInputs(f, inputs, symbols));
  std::unordered_map<const Node*, size_t> paramIndex;
  for (size_t i = 0; i < f.numParameters(); ++i) paramIndex[f.parameterNodes()[i]] = i;

  Environment env(f);
  std::unordered_map<const Node*, int64_t> sizes;  // of each set_dimension_size
  for (const auto& np : f.nodes()) {
    const Node& n = *np;
    if (n.op() == OpCode::Parameter) {
      auto it = paramIndex.find(&n);
      if (it == paramIndex.end())
        return Status::error(n.describe() + ": parameter is not in the parameter list", n.loc());
      env.define(n.result(), inputs[it->second]);
      continue;
    }
    if (n.op() == OpCode::SetDimensionSize) {
      const Tensor* size = env.find(n.operand(1));
      if (size && size->numElements() == 1) sizes[&n] = size->getInt(0);
    }
    // The size a set_dimension_size of the operand gave (values further from it are sized only
    // after exposeDynamicSizes: interpretSized); else the extent.
    if (n.op() == OpCode::GetDimensionSize) {
      const Node* s = sizedBy(n.operand(0), n.attrInt("dimension"));
      if (s && sizes.count(s)) {
        Tensor size(DType::I64, {});
        size.setInt(0, sizes[s]);
        env.define(n.result(), std::move(size));
        continue;
      }
    }
    KILN_RETURN_IF_ERROR(runNode(n, env, symbols));
  }
  std::vector<Tensor> outputs;
  outputs.reserve(f.outputs().size());
  for (size_t i = 0; i < f.outputs().size(); ++i) {
    const Value* v = f.outputs()[i];
    const Tensor* t = v ? env.find(v) : nullptr;
    if (!t)
      return Status::error("function @" + f.name() + " output " + std::to_string(i) +
                           " is not computed by any node");
    outputs.push_back(*t);
    // An output of run-time size (set_dimension_size) has only its first `size` entries.
    for (; v->def()->op() == OpCode::SetDimensionSize; v = v->def()->operand(0))
      outputs.back() = trimDim(outputs.back(), v->def()->attrInt("dimension"), sizes[v->def()]);
  }
  return outputs;
}

StatusOr<std::vector<Tensor>> interpretSized(Function& f, std::span<const Tensor> inputs) {
  const size_t visible = f.outputs().size();
  KILN_ASSIGN_OR_RETURN(std::vector<DynamicDim> dims, exposeDynamicSizes(f));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, interpret(f, inputs));
  if (!dims.empty()) KILN_RETURN_IF_ERROR(trimDynamicOutputs(dims, visible, outputs));
  return outputs;
}

namespace {

// evaluateNode within a run, given the symbols the run has bound.
StatusOr<std::vector<Tensor>> evaluateBound(const Node& n, std::span<const Tensor> operands,
                                            const SymbolMap& bound) {
  auto fail = [&](Status s) { return s.prefix(n.describe()).at(n.loc()); };
  if (n.op() == OpCode::Parameter)
    return fail(Status::error("a parameter cannot be evaluated on its own"));
  if (operands.size() != n.numOperands())
    return fail(Status::error("expected " + std::to_string(n.numOperands()) +
                              " operand values, got " + std::to_string(operands.size())));
  auto types = resolveResultTypes(n, operands, bound);
  if (!types) return fail(types.status());
  interp::EvalContext c{n, operands, *types};
  auto results = dispatch(c);
  if (!results) return fail(results.status());
  KILN_CHECK(results->size() == types->size(),
             n.describe() + ": kernel returned " + std::to_string(results->size()) + " results");
  for (size_t i = 0; i < results->size(); ++i)
    KILN_CHECK((*results)[i].type() == (*types)[i], n.describe() + ": kernel result " +
                                                        (*results)[i].type().str() + " is not " +
                                                        (*types)[i].str());
  return results;
}

}  // namespace

StatusOr<std::vector<Tensor>> evaluateNode(const Node& n, std::span<const Tensor> operands) {
  return evaluateBound(n, operands, SymbolMap{});
}

}  // namespace kiln
