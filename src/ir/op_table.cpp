// The op table: attribute schemas and type rules for every op of ops.def.
#include <array>

#include "ir/op.h"
#include "ir/shape_rules.h"

namespace kiln {
namespace {

using K = AttrKind;

AttrSpec req(const char* name, AttrKind kind, std::vector<const char*> words = {}) {
  return AttrSpec{name, kind, true, std::nullopt, std::move(words)};
}
AttrSpec opt(const char* name, AttrKind kind) {
  return AttrSpec{name, kind, false, std::nullopt, {}};
}
AttrSpec optInt(const char* name, int64_t d) {
  return AttrSpec{name, K::Int, false, intAttr(d), {}};
}
AttrSpec optFloat(const char* name, double d) {
  return AttrSpec{name, K::Float, false, floatAttr(d), {}};
}
AttrSpec optBool(const char* name, bool d) {
  return AttrSpec{name, K::Bool, false, boolAttr(d), {}};
}
AttrSpec optEnum(const char* name, const char* d, std::vector<const char*> words) {
  return AttrSpec{name, K::Enum, false, enumAttr(d), std::move(words)};
}

struct Extra {
  std::vector<AttrSpec> attrs;
  InferFn infer;
};

// Attributes and type rule of each op.
Extra extraFor(OpCode op) {
  switch (op) {
    case OpCode::Constant: return {{req("value", K::Tensor)}, inferConstant};
    case OpCode::Parameter: return {{req("index", K::Int)}, inferDeclared};
    case OpCode::Iota: return {{req("dimension", K::Int)}, inferIota};

    case OpCode::Abs:
    case OpCode::Neg:
    case OpCode::Sign:
    case OpCode::Floor:
    case OpCode::Ceil:
    case OpCode::RoundNearestEven:
    case OpCode::Exp:
    case OpCode::Expm1:
    case OpCode::Log:
    case OpCode::Log1p:
    case OpCode::Sqrt:
    case OpCode::Rsqrt:
    case OpCode::Sin:
    case OpCode::Cos:
    case OpCode::Tan:
    case OpCode::Asin:
    case OpCode::Acos:
    case OpCode::Atan:
    case OpCode::Sinh:
    case OpCode::Cosh:
    case OpCode::Asinh:
    case OpCode::Acosh:
    case OpCode::Atanh:
    case OpCode::Tanh:
    case OpCode::Erf:
    case OpCode::Sigmoid:
    case OpCode::Not:
    case OpCode::IsFinite:
    case OpCode::IsInf:
    case OpCode::IsNan: return {{}, inferUnary};
    case OpCode::Convert: return {{}, inferConvert};

    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Pow:
    case OpCode::Max:
    case OpCode::Min:
    case OpCode::Atan2:
    case OpCode::And:
    case OpCode::Or:
    case OpCode::Xor:
    case OpCode::ShiftLeft:
    case OpCode::ShiftRightArithmetic:
    case OpCode::ShiftRightLogical: return {{}, inferBinary};
    case OpCode::Compare:
      return {{req("direction", K::Enum, {"eq", "ne", "lt", "le", "gt", "ge"})}, inferBinary};

    case OpCode::Select: return {{}, inferSelect};
    case OpCode::Clamp: return {{}, inferClamp};

    case OpCode::BroadcastInDim: return {{req("dims", K::Ints)}, inferBroadcastInDim};
    case OpCode::Reshape: return {{}, inferReshape};
    case OpCode::Transpose: return {{req("permutation", K::Ints)}, inferTranspose};
    case OpCode::Slice:
      return {{req("start", K::Ints), req("limit", K::Ints), opt("stride", K::Ints)}, inferSlice};
    case OpCode::DynamicSlice: return {{req("sizes", K::Ints)}, inferDynamicSlice};
    case OpCode::DynamicUpdateSlice: return {{}, inferDynamicUpdateSlice};
    case OpCode::Concatenate: return {{req("dimension", K::Int)}, inferConcatenate};
    case OpCode::Pad:
      return {{req("low", K::Ints), req("high", K::Ints), opt("interior", K::Ints)}, inferPad};
    case OpCode::Gather:
      return {{req("offset_dims", K::Ints), req("collapsed_slice_dims", K::Ints),
               req("start_index_map", K::Ints), req("index_vector_dim", K::Int),
               req("slice_sizes", K::Ints)},
              inferGather};
    case OpCode::Scatter:
      return {{req("update_window_dims", K::Ints), req("inserted_window_dims", K::Ints),
               req("scatter_dims_to_operand_dims", K::Ints), req("index_vector_dim", K::Int),
               optEnum("reduction", "none", {"none", "add", "mul", "max", "min"})},
              inferScatter};
    case OpCode::Reverse: return {{req("dims", K::Ints)}, inferReverse};
    case OpCode::Resize:
      return {{req("mode", K::Enum, {"nearest", "linear", "cubic"}),
               optEnum("coordinate_transformation_mode", "half_pixel",
                       {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                        "asymmetric", "tf_half_pixel_for_nn"}),
               optEnum("nearest_mode", "round_prefer_floor",
                       {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}),
               optFloat("cubic_coeff_a", -0.75), optBool("exclude_outside", false),
               opt("scales", K::Floats)},
              inferResize};
    case OpCode::GridSample:
      return {{optEnum("mode", "bilinear", {"bilinear", "nearest", "bicubic"}),
               optEnum("padding_mode", "zeros", {"zeros", "border", "reflection"}),
               optBool("align_corners", false)},
              inferGridSample};
    case OpCode::SetDimensionSize: return {{req("dimension", K::Int)}, inferSetDimensionSize};
    case OpCode::GetDimensionSize: return {{req("dimension", K::Int)}, inferGetDimensionSize};

    case OpCode::Reduce:
      return {
          {req("dims", K::Ints), req("kind", K::Enum, {"sum", "prod", "max", "min", "and", "or"})},
          inferReduce};
    case OpCode::ArgMax:
    case OpCode::ArgMin:
      return {{req("axis", K::Int), optBool("select_last_index", false)}, inferArgReduce};
    case OpCode::ReduceWindow:
      return {{req("kind", K::Enum, {"sum", "max", "min"}), req("window_dimensions", K::Ints),
               opt("window_strides", K::Ints), opt("base_dilations", K::Ints),
               opt("window_dilations", K::Ints), opt("padding_low", K::Ints),
               opt("padding_high", K::Ints)},
              inferReduceWindow};
    case OpCode::Cumsum:
      return {{req("axis", K::Int), optBool("exclusive", false), optBool("reverse", false)},
              inferCumsum};
    case OpCode::Sort: return {{req("dimension", K::Int), optBool("descending", false)}, inferSort};
    case OpCode::TopK:
      return {{req("k", K::Int), req("axis", K::Int), optBool("largest", true)}, inferTopK};
    case OpCode::NonZero: return {{}, inferNonZero};
    case OpCode::Unique: return {{opt("axis", K::Int), optBool("sorted", true)}, inferUnique};
    case OpCode::NonMaxSuppression:
      return {{req("bound_per_class", K::Int), optBool("center_point_box", false)},
              inferNonMaxSuppression};
    case OpCode::StringNormalize:
      return {{optEnum("case_change", "none", {"none", "lower", "upper"}),
               optBool("case_sensitive", false)},
              inferStringNormalize};

    case OpCode::DotGeneral:
      return {{opt("lhs_batch", K::Ints), opt("rhs_batch", K::Ints),
               opt("lhs_contracting", K::Ints), opt("rhs_contracting", K::Ints)},
              inferDotGeneral};
    case OpCode::Convolution:
      return {{opt("window_strides", K::Ints), opt("padding_low", K::Ints),
               opt("padding_high", K::Ints), opt("lhs_dilation", K::Ints),
               opt("rhs_dilation", K::Ints), optInt("feature_group_count", 1),
               optInt("batch_group_count", 1), opt("dimension_numbers", K::String)},
              inferConvolution};

    case OpCode::Softmax:
    case OpCode::LogSoftmax: return {{req("axis", K::Int)}, inferSoftmax};
    case OpCode::LayerNorm:
      return {{req("axis", K::Int), optFloat("epsilon", 1e-5)}, inferLayerNorm};
    case OpCode::BatchNormInference:
      return {{optFloat("epsilon", 1e-5), optInt("feature_index", 1)}, inferBatchNorm};
    case OpCode::Gelu: return {{optEnum("approximate", "none", {"none", "tanh"})}, inferGelu};
    case OpCode::Attention:
      return {{opt("scale", K::Float), optBool("causal", false)}, inferAttention};
    case OpCode::Lstm:
      return {{optEnum("direction", "forward", {"forward", "reverse", "bidirectional"})},
              inferRecurrence};
    case OpCode::Gru:
      return {{optEnum("direction", "forward", {"forward", "reverse", "bidirectional"}),
               optBool("linear_before_reset", false)},
              inferRecurrence};
  }
  return {{}, nullptr};
}

std::array<OpInfo, kNumOps> buildTable() {
  std::array<OpInfo, kNumOps> t;
  size_t i = 0;
#define KILN_OP(id, nm, cls, minOps, maxOps, results)                  \
  {                                                                    \
    Extra e = extraFor(OpCode::id);                                    \
    t[i++] = OpInfo{OpCode::id, nm,      OpClass::cls,       minOps,   \
                    maxOps,     results, std::move(e.attrs), e.infer}; \
  }
#include "ir/ops.def"
#undef KILN_OP
  return t;
}

const std::array<OpInfo, kNumOps>& table() {
  static const std::array<OpInfo, kNumOps> t = buildTable();
  return t;
}

const AttrValue* lookup(const AttrMap& a, const char* name) {
  auto it = a.find(name);
  return it == a.end() ? nullptr : &it->second;
}

const AttrValue& attrOrDefault(OpCode op, const AttrMap& a, const char* name) {
  if (const AttrValue* v = lookup(a, name)) return *v;
  const AttrSpec* s = findAttrSpec(op, name);
  KILN_CHECK(s && s->defaultValue,
             std::string(opName(op)) + " has no attribute '" + name + "' and no default for it");
  return *s->defaultValue;
}

}  // namespace

const char* attrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "integer";
    case AttrKind::Float: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::Enum: return "enum word";
    case AttrKind::Ints: return "integer list";
    case AttrKind::Floats: return "float list";
    case AttrKind::DType: return "dtype";
    case AttrKind::String: return "string";
    case AttrKind::Tensor: return "tensor";
  }
  return "?";
}

const OpInfo& opInfo(OpCode op) { return table()[static_cast<size_t>(op)]; }
std::string_view opName(OpCode op) { return opInfo(op).name; }

std::optional<OpCode> opFromName(std::string_view name) {
  for (const OpInfo& info : table())
    if (name == info.name) return info.code;
  return std::nullopt;
}

const AttrSpec* findAttrSpec(OpCode op, std::string_view attrName) {
  for (const AttrSpec& s : opInfo(op).attrs)
    if (attrName == s.name) return &s;
  return nullptr;
}

StatusOr<std::vector<TensorType>> inferResultTypes(const InferInput& in) {
  const OpInfo& info = opInfo(in.op);
  std::string op(info.name);
  int n = static_cast<int>(in.operands.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands)) {
    std::string want = info.minOperands == info.maxOperands ? std::to_string(info.minOperands)
                       : info.maxOperands < 0 ? "at least " + std::to_string(info.minOperands)
                                              : std::to_string(info.minOperands) + " to " +
                                                    std::to_string(info.maxOperands);
    return Status::error(op + " takes " + want + " operands, got " + std::to_string(n));
  }
  for (const auto& [name, value] : in.attrs) {
    const AttrSpec* s = findAttrSpec(in.op, name);
    if (!s) return Status::error(op + " has no attribute '" + name + "'");
    if (attrKind(value) != s->kind)
      return Status::error(op + " attribute '" + name + "' must be " + attrKindName(s->kind) +
                           ", got " + attrKindName(attrKind(value)));
    if (s->kind == AttrKind::Enum) {
      const std::string& w = std::get<3>(value);
      bool found = false;
      std::string allowed;
      for (const char* e : s->enumValues) {
        found |= w == e;
        allowed += allowed.empty() ? e : std::string(", ") + e;
      }
      if (!found)
        return Status::error(op + " attribute '" + name + "' is '" + w + "', expected one of " +
                             allowed);
    }
  }
  for (const AttrSpec& s : info.attrs)
    if (s.required && !in.attrs.count(s.name))
      return Status::error(op + " requires attribute '" + s.name + "'");
  for (const TensorType& t : in.operands)
    for (const Dim& d : t.dims())
      if (d.isStatic() && d.value() > kMaxElements)
        return Status::error(op + " operand dimension " + d.str() + " is too large");
  if (!in.declared.empty() && static_cast<int>(in.declared.size()) != info.numResults)
    return Status::error(op + " has " + std::to_string(info.numResults) + " results, " +
                         std::to_string(in.declared.size()) + " given");
  for (const TensorType& t : in.declared) {
    std::vector<int64_t> staticDims;
    for (const Dim& d : t.dims())
      if (d.isStatic()) staticDims.push_back(d.value());
    auto count = checkedNumElements(staticDims);
    if (!count)
      return Status::error(op + " result type " + t.str() + ": " + count.status().message());
  }
  KILN_RETURN_IF_ERROR(checkStrings(in).prefix(op));
  auto r = info.infer(in);
  if (!r) {
    Status s = r.status();
    return s.prefix(op);
  }
  return r;
}

int64_t getInt(OpCode op, const AttrMap& a, const char* name) {
  return std::get<0>(attrOrDefault(op, a, name));
}
double getFloat(OpCode op, const AttrMap& a, const char* name) {
  return std::get<1>(attrOrDefault(op, a, name));
}
bool getBool(OpCode op, const AttrMap& a, const char* name) {
  return std::get<2>(attrOrDefault(op, a, name));
}
const std::string& getEnum(OpCode op, const AttrMap& a, const char* name) {
  return std::get<3>(attrOrDefault(op, a, name));
}
std::vector<int64_t> getInts(const AttrMap& a, const char* name, std::vector<int64_t> fallback) {
  const AttrValue* v = lookup(a, name);
  return v && attrKind(*v) == AttrKind::Ints ? std::get<4>(*v) : std::move(fallback);
}
std::vector<double> getFloats(const AttrMap& a, const char* name, std::vector<double> fallback) {
  const AttrValue* v = lookup(a, name);
  return v && attrKind(*v) == AttrKind::Floats ? std::get<5>(*v) : std::move(fallback);
}
bool hasAttr(const AttrMap& a, const char* name) { return a.count(name) != 0; }

std::string defaultConvDimensionNumbers(int64_t numSpatial) {
  std::string sp;
  for (int64_t i = 0; i < numSpatial; ++i) sp += static_cast<char>('0' + i);
  return "bf" + sp + "_oi" + sp + "->bf" + sp;
}

StatusOr<ConvDimensionNumbers> parseConvDimensionNumbers(std::string_view s) {
  auto bad = [&](const std::string& why) {
    return Status::error("dimension_numbers '" + std::string(s) + "': " + why);
  };
  size_t us = s.find('_'), arrow = s.find("->");
  if (us == std::string_view::npos || arrow == std::string_view::npos || us > arrow)
    return bad("expected the form bf01_oi01->bf01");
  std::string_view in = s.substr(0, us), ker = s.substr(us + 1, arrow - us - 1),
                   out = s.substr(arrow + 2);
  if (in.size() != ker.size() || in.size() != out.size() || in.size() < 2)
    return bad("the three parts must have one rank of at least 2");
  size_t ns = in.size() - 2;
  ConvDimensionNumbers d;
  d.inputSpatial.assign(ns, -1);
  d.kernelSpatial.assign(ns, -1);
  d.outputSpatial.assign(ns, -1);
  auto fill = [&](std::string_view part, char a, char b, int64_t& da, int64_t& db,
                  std::vector<int64_t>& sp) -> bool {
    int64_t seenA = -1, seenB = -1;
    for (size_t i = 0; i < part.size(); ++i) {
      char c = part[i];
      if (c == a && seenA < 0) seenA = static_cast<int64_t>(i);
      else if (c == b && seenB < 0) seenB = static_cast<int64_t>(i);
      else if (c >= '0' && c < '0' + static_cast<int>(ns) && sp[c - '0'] < 0)
        sp[c - '0'] = static_cast<int64_t>(i);
      else return false;
    }
    da = seenA;
    db = seenB;
    return seenA >= 0 && seenB >= 0;
  };
  if (!fill(in, 'b', 'f', d.inputBatch, d.inputFeature, d.inputSpatial))
    return bad("input part must use b, f and each spatial digit once");
  if (!fill(ker, 'o', 'i', d.kernelOutput, d.kernelInput, d.kernelSpatial))
    return bad("kernel part must use o, i and each spatial digit once");
  if (!fill(out, 'b', 'f', d.outputBatch, d.outputFeature, d.outputSpatial))
    return bad("output part must use b, f and each spatial digit once");
  return d;
}

ConvWindow convWindow(const AttrMap& a, size_t numSpatial) {
  auto list = [&](const char* name, int64_t fill) {
    return getInts(a, name, std::vector<int64_t>(numSpatial, fill));
  };
  return ConvWindow{list("window_strides", 1), list("padding_low", 0), list("padding_high", 0),
                    list("lhs_dilation", 1), list("rhs_dilation", 1)};
}

StatusOr<ConvDimensionNumbers> convDimensionNumbers(const AttrMap& a, int64_t rank) {
  auto it = a.find("dimension_numbers");
  std::string s = it != a.end() ? std::get<7>(it->second) : defaultConvDimensionNumbers(rank - 2);
  auto d = parseConvDimensionNumbers(s);
  if (!d) return d;
  if (static_cast<int64_t>(d->inputSpatial.size()) + 2 != rank)
    return Status::error("dimension_numbers '" + s + "' are for rank " +
                         std::to_string(d->inputSpatial.size() + 2) + ", operands have rank " +
                         std::to_string(rank));
  return d;
}

}  // namespace kiln
