// OpContext (inputs, attributes, static values and outputs of one ONNX node) and the lowering
// helpers shared by the op families.
#include "frontend/onnx/op_context.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

using AP = pb::AttributeProto;

OpContext::OpContext(Importer& imp, Scope& scope, const pb::NodeProto& node, std::string name,
                     int opset, Builder& builder)
    : b(builder), imp_(imp), scope_(scope), node_(node), name_(std::move(name)), opset_(opset) {
  outputs_.assign(static_cast<size_t>(node.output_size()), nullptr);
  sequenceOutputs_.assign(static_cast<size_t>(node.output_size()), false);
}

Value* OpContext::in(int i) const { return has(i) ? scope_.lookup(node_.input(i)) : nullptr; }

StatusOr<Value*> OpContext::req(int i) const {
  if (!has(i)) return err("input " + std::to_string(i) + " is required");
  Value* v = in(i);
  if (!v && isSequence(i))
    return err("input '" + node_.input(i) +
               "' is a sequence; sequences are only supported as inputs of sequence ops");
  if (!v) return err("input '" + node_.input(i) + "' is not defined");
  return v;
}

StatusOr<std::vector<Value*>> OpContext::sequenceInput(int i) const {
  if (!has(i)) return err("input " + std::to_string(i) + " (a sequence) is required");
  if (const std::vector<Value*>* seq = scope_.lookupSequence(node_.input(i))) return *seq;
  if (in(i))
    return err("input '" + node_.input(i) + "' must be a sequence, got a tensor " +
               in(i)->type().str());
  return err("input '" + node_.input(i) +
             "' is not defined (a sequence must be known while importing)");
}

std::vector<Value*> OpContext::allInputs() const {
  std::vector<Value*> vs;
  for (int i = 0; i < numInputs(); ++i)
    if (has(i)) vs.push_back(in(i));
  return vs;
}

// ---- Attributes ----

const AP* OpContext::find(const std::string& name) const {
  for (const AP& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool OpContext::hasAttr(const std::string& name) const { return find(name) != nullptr; }

const AP* OpContext::rawAttr(const std::string& name) {
  used_.insert(name);
  return find(name);
}

namespace {
// Old models leave AttributeProto.type unset; infer it from the field that is filled.
int attrType(const AP& a) {
  if (a.type() != AP::UNDEFINED) return a.type();
  if (a.has_f()) return AP::FLOAT;
  if (a.has_i()) return AP::INT;
  if (a.has_s()) return AP::STRING;
  if (a.has_t()) return AP::TENSOR;
  if (a.has_g()) return AP::GRAPH;
  if (a.floats_size()) return AP::FLOATS;
  if (a.ints_size()) return AP::INTS;
  if (a.strings_size()) return AP::STRINGS;
  return AP::UNDEFINED;
}
}  // namespace

bool OpContext::checkType(const AP* a, int type, const char* typeName) {
  int t = attrType(*a);
  // An empty list has no filled field, so an untyped empty attribute passes as any list.
  if (t == type || (t == AP::UNDEFINED && (type == AP::INTS || type == AP::FLOATS))) return true;
  if (attrError_.isOk())
    attrError_ = Status::error("attribute '" + a->name() + "' must be " + typeName + ", got " +
                               AP::AttributeType_Name(static_cast<AP::AttributeType>(t)));
  return false;
}

int64_t OpContext::attrInt(const std::string& name, int64_t dflt) {
  const AP* a = rawAttr(name);
  return a && checkType(a, AP::INT, "INT") ? a->i() : dflt;
}

double OpContext::attrFloat(const std::string& name, double dflt) {
  const AP* a = rawAttr(name);
  return a && checkType(a, AP::FLOAT, "FLOAT") ? a->f() : dflt;
}

std::string OpContext::attrString(const std::string& name, const std::string& dflt) {
  const AP* a = rawAttr(name);
  return a && checkType(a, AP::STRING, "STRING") ? a->s() : dflt;
}

std::vector<int64_t> OpContext::attrInts(const std::string& name, std::vector<int64_t> dflt) {
  const AP* a = rawAttr(name);
  if (!a || !checkType(a, AP::INTS, "INTS")) return dflt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<double> OpContext::attrFloats(const std::string& name, std::vector<double> dflt) {
  const AP* a = rawAttr(name);
  if (!a || !checkType(a, AP::FLOATS, "FLOATS")) return dflt;
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

StatusOr<Tensor> OpContext::attrTensor(const std::string& name) {
  const AP* a = rawAttr(name);
  if (!a) return err("attribute '" + name + "' is required");
  if (!checkType(a, AP::TENSOR, "TENSOR")) return attrError_;
  return tensorFromProto(a->t(), "", "attribute '" + name + "'");
}

Status OpContext::finish() const {
  if (!attrError_) return attrError_;
  for (const AP& a : node_.attribute())
    if (!used_.count(a.name()))
      return Status::error("attribute '" + a.name() + "' is not supported");
  return Status::ok();
}

// ---- Static values ----

StatusOr<const KnownValue*> OpContext::knownOf(int i, const std::string& what) {
  if (!has(i)) return err(what + " (input " + std::to_string(i) + ") is required");
  KILN_ASSIGN_OR_RETURN(Value * v, req(i));
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, imp_.knownValue(v));
  if (k) return k;
  std::string why = imp_.unknownReason(v);
  if (!why.empty())
    return err("input '" + node_.input(i) + "' (" + what + ") must be known while importing, but " +
               why);
  std::vector<std::string> deps = imp_.parameterDeps(v);
  imp_.noteNeededInputs(deps);
  std::string from;
  for (const std::string& d : deps) from += (from.empty() ? "'" : ", '") + d + "'";
  return err("input '" + node_.input(i) + "' (" + what +
             ") must be known while importing, but it is computed at run time" +
             (from.empty() ? std::string() : " from graph input " + from));
}

StatusOr<Tensor> OpContext::knownInput(int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, knownOf(i, what));
  if (k->symbolic)
    return err("input '" + node_.input(i) + "' (" + what +
               ") depends on a symbolic dimension; dynamic shapes are not supported");
  return k->tensor;
}

StatusOr<std::vector<int64_t>> OpContext::knownInts(int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(Tensor t, knownInput(i, what));
  if (!isInteger(t.dtype()))
    return err("input '" + node_.input(i) + "' (" + what + ") must be an integer tensor, got " +
               t.type().str());
  std::vector<int64_t> v(static_cast<size_t>(t.numElements()));
  for (int64_t j = 0; j < t.numElements(); ++j) v[static_cast<size_t>(j)] = t.getInt(j);
  return v;
}

StatusOr<std::vector<ShapeEntry>> OpContext::knownDims(int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, knownOf(i, what));
  const Tensor& t = k->tensor;
  if (!isInteger(t.dtype()))
    return err("input '" + node_.input(i) + "' (" + what + ") must be an integer tensor, got " +
               t.type().str());
  std::vector<ShapeEntry> dims;
  for (int64_t j = 0; j < t.numElements(); ++j) {
    int64_t v = t.getInt(j);
    auto sym = k->symbolic ? imp_.dimForSentinel(v) : std::nullopt;
    dims.push_back(sym ? ShapeEntry{0, *sym} : ShapeEntry{v, {}});
  }
  return dims;
}

StatusOr<Shape> OpContext::knownShape(int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(auto entries, knownDims(i, what));
  Shape s;
  for (const ShapeEntry& e : entries) {
    if (!e.isSymbol() && e.value < 0)
      return err("input '" + node_.input(i) + "' (" + what + ") has negative entry " +
                 std::to_string(e.value));
    s.push_back(e.dim());
  }
  return s;
}

StatusOr<double> OpContext::knownScalar(int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(Tensor t, knownInput(i, what));
  if (t.numElements() != 1)
    return err("input '" + node_.input(i) + "' (" + what + ") must hold one value, got " +
               t.type().str());
  return t.getDouble(0);
}

// ---- Outputs ----

void OpContext::setOutput(int i, Value* v) {
  if (!v || i >= numOutputs() || !wantsOutput(i)) return;
  outputs_[static_cast<size_t>(i)] = v;
  const std::string& name = node_.output(i);
  scope_.values[name] = v;
  if (scope_.nameValues && v->name().empty() && v->def()->op() != OpCode::Parameter)
    v->setName(name);
}

void OpContext::setSequenceOutput(int i, std::vector<Value*> elems) {
  if (i >= numOutputs() || !wantsOutput(i)) return;
  sequenceOutputs_[static_cast<size_t>(i)] = true;
  scope_.sequences[node_.output(i)] = std::move(elems);
}

bool OpContext::produced(int i) const {
  return output(i) != nullptr || (i < static_cast<int>(sequenceOutputs_.size()) &&
                                  sequenceOutputs_[static_cast<size_t>(i)]);
}

Value* OpContext::output(int i) const {
  return i < static_cast<int>(outputs_.size()) ? outputs_[static_cast<size_t>(i)] : nullptr;
}

Status OpContext::builderError() const {
  if (!b.ok()) return b.status();
  return Status::error("lowering failed without a message (internal)");
}

// ---- Lowering helpers ----

StatusOr<int64_t> normAxis(int64_t axis, int64_t rank, const std::string& what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return Status::error(what + " " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(rank));
  return a;
}

StatusOr<std::vector<int64_t>> normAxes(const std::vector<int64_t>& axes, int64_t rank,
                                        const std::string& what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, normAxis(a, rank, what));
    if (std::find(out.begin(), out.end(), n) != out.end())
      return Status::error(what + " repeat axis " + std::to_string(n));
    out.push_back(n);
  }
  return out;
}

std::string shapeStr(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + s[i].str();
  return r + "]";
}

StatusOr<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right.
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!da) r[i] = *db;
    else if (!db) r[i] = *da;
    else if (*da == *db) r[i] = *da;
    else if (da->isStatic() && da->value() == 1) r[i] = *db;
    else if (db->isStatic() && db->value() == 1) r[i] = *da;
    else
      return Status::error("shapes " + shapeStr(a) + " and " + shapeStr(b) +
                           " do not broadcast (dimension " + da->str() + " vs " + db->str() + ")");
  }
  return r;
}

StatusOr<std::vector<Value*>> broadcastAll(OpContext& c, std::vector<Value*> vs) {
  Shape common;
  bool first = true;
  for (Value* v : vs) {
    if (!v) continue;
    if (first) {
      common = v->type().dims();
      first = false;
    } else {
      KILN_ASSIGN_OR_RETURN(common, broadcastShapes(common, v->type().dims()));
    }
  }
  for (Value*& v : vs) {
    if (!v) continue;
    v = c.b.broadcastTo(v, common);
    ONNX_BUILT(c, v);
  }
  return vs;
}

StatusOr<Value*> broadcastUni(OpContext& c, Value* x, const Shape& target) {
  ONNX_BUILT(c, x);
  KILN_ASSIGN_OR_RETURN(Shape s, broadcastShapes(target, x->type().dims()));
  if (s != target)
    return Status::error("shape " + x->type().str() + " does not broadcast to " + shapeStr(target));
  Value* r = c.b.broadcastTo(x, target);
  ONNX_BUILT(c, r);
  return r;
}

Status sameDType(OpContext& c, const std::vector<Value*>& vs) {
  for (Value* v : vs)
    if (v && vs[0] && v->type().dtype() != vs[0]->type().dtype())
      return c.err("inputs have different dtypes " + std::string(dtypeName(vs[0]->type().dtype())) +
                   " and " + std::string(dtypeName(v->type().dtype())));
  return Status::ok();
}

Value* scalarConst(Builder& b, DType t, double v) {
  Tensor s(t, {});
  if (isInteger(t)) {
    // Clamp before converting: a double outside the integer range has no defined conversion.
    double lo = dtypeLowest(t), hi = dtypeHighest(t);
    if (std::isnan(v)) v = 0;
    if (v <= lo)
      s.setInt(0, t == DType::I64 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(lo));
    else if (v >= hi && t == DType::U64) s.setUInt(0, std::numeric_limits<uint64_t>::max());
    else if (v >= hi)
      s.setInt(0, t == DType::I64 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(hi));
    else if (t == DType::U64) s.setUInt(0, static_cast<uint64_t>(v));  // may exceed INT64_MAX
    else s.setInt(0, static_cast<int64_t>(v));
  } else {
    s.setDouble(0, v);
  }
  return b.constant(std::move(s));
}

Value* splatType(Builder& b, const TensorType& t, double v) {
  Value* s = scalarConst(b, t.dtype(), v);
  if (t.rank() == 0) return s;
  return b.broadcastInDim(s, t.dims(), {});
}

Value* splat(Builder& b, Value* like, double v) {
  if (!like) return nullptr;
  return splatType(b, like->type(), v);
}

Value* i64Const(Builder& b, const std::vector<int64_t>& v) {
  Tensor t(DType::I64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.mutableData<int64_t>()[i] = v[i];
  return b.constant(std::move(t));
}

bool checkedMul(int64_t a, int64_t b, int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out) && out <= kMaxElements && out >= -kMaxElements;
}

std::optional<Dim> dimProduct(const Shape& dims) {
  std::optional<Dim> p = Dim(1);
  for (const Dim& d : dims)
    if (!(p = *p * d)) return std::nullopt;
  return p;
}

Value* insertUnitDims(Builder& b, Value* x, const std::vector<int64_t>& axes) {
  if (!x) return nullptr;
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  Shape s = x->type().dims();
  for (int64_t a : sorted)
    s.insert(s.begin() + std::min<int64_t>(a, static_cast<int64_t>(s.size())), Dim(1));
  return b.reshape(x, s);
}

Shape dropAxes(const Shape& s, const std::vector<int64_t>& axes) {
  Shape r;
  for (size_t i = 0; i < s.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end())
      r.push_back(s[i]);
  return r;
}

double dtypeLowest(DType t, bool infinite) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::I8: return -128;
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64: return 0;
    case DType::I16: return -32768;
    case DType::I32: return -2147483648.0;
    case DType::I64: return -9223372036854775808.0;
    case DType::F16: return infinite ? -INFINITY : -65504.0;
    case DType::BF16: return infinite ? -INFINITY : -3.3895313892515355e38;
    case DType::F32: return infinite ? -INFINITY : -3.4028234663852886e38;
    case DType::F64: return infinite ? -INFINITY : -1.7976931348623157e308;
    case DType::Str: break;  // strings have no order here: callers take numbers only
  }
  return 0;
}

double dtypeHighest(DType t, bool infinite) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::I8: return 127;
    case DType::U8: return 255;
    case DType::I16: return 32767;
    case DType::U16: return 65535;
    case DType::U32: return 4294967295.0;
    case DType::U64: return 18446744073709551615.0;  // rounds to 2^64 as a double
    case DType::I32: return 2147483647.0;
    case DType::I64: return 9223372036854775807.0;
    default: return -dtypeLowest(t, infinite);
  }
}

StatusOr<Value*> bcastBinary(OpContext& c, OpCode op, Value* a, Value* b) {
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
  KILN_ASSIGN_OR_RETURN(auto vs, broadcastAll(c, {a, b}));
  Value* r = c.b.binary(op, vs[0], vs[1]);
  ONNX_BUILT(c, r);
  return r;
}

StatusOr<Value*> bcastCompare(OpContext& c, const std::string& dir, Value* a, Value* b) {
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
  KILN_ASSIGN_OR_RETURN(auto vs, broadcastAll(c, {a, b}));
  Value* r = c.b.compare(dir, vs[0], vs[1]);
  ONNX_BUILT(c, r);
  return r;
}

}  // namespace kiln::onnx
