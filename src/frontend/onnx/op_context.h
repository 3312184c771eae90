// Private to the ONNX frontend: what an op mapping sees (OpContext), the table of mappings keyed
// by (op type, since-version), and lowering helpers shared by the op families (numpy
// broadcasting, axis normalisation, scalar constants, keepdims).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/importer.h"

namespace kiln::onnx {

// An entry of a shape tensor known while importing: an integer (possibly -1 or 0 with a
// special meaning) or a symbolic dim.
struct ShapeEntry {
  int64_t value = 0;
  Dim symbolic;  // a symbolic dim, or static when the entry is `value`
  bool isSymbol() const { return symbolic.isSymbolic(); }
  Dim dim() const { return isSymbol() ? symbolic : Dim(value); }
};

class OpContext {
 public:
  OpContext(Importer& imp, Scope& scope, const pb::NodeProto& node, std::string name, int opset,
            Builder& b);

  Builder& b;

  Importer& importer() const { return imp_; }
  const pb::NodeProto& node() const { return node_; }
  const std::string& name() const { return name_; }
  const std::string& opType() const { return node_.op_type(); }
  int opset() const { return opset_; }

  // Inputs: `in(i)` is nullptr for an absent optional input; `req(i)` makes it an error.
  int numInputs() const { return node_.input_size(); }
  bool has(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  Value* in(int i) const;
  StatusOr<Value*> req(int i) const;
  // Every present input, in order (variadic ops).
  std::vector<Value*> allInputs() const;

  // Attributes. A wrong attribute type is recorded and reported after the mapping returns;
  // the getter then gives the default.
  bool hasAttr(const std::string& name) const;
  int64_t attrInt(const std::string& name, int64_t dflt);
  double attrFloat(const std::string& name, double dflt);
  std::string attrString(const std::string& name, const std::string& dflt);
  std::vector<int64_t> attrInts(const std::string& name, std::vector<int64_t> dflt = {});
  std::vector<double> attrFloats(const std::string& name, std::vector<double> dflt = {});
  StatusOr<Tensor> attrTensor(const std::string& name);
  const pb::AttributeProto* rawAttr(const std::string& name);
  // Marks an attribute as deliberately not needed (it only restates what the types say).
  void ignoreAttr(const std::string& name) { used_.insert(name); }
  // Attribute type errors, and attributes the mapping never read.
  Status finish() const;

  // Static values of inputs. `what` says what the value is for ("the target shape").
  StatusOr<Tensor> knownInput(int i, const std::string& what);
  StatusOr<std::vector<int64_t>> knownInts(int i, const std::string& what);
  // Like knownInts, but entries that stand for symbolic dims come back as symbols.
  StatusOr<std::vector<ShapeEntry>> knownDims(int i, const std::string& what);
  // knownDims for an output shape: every entry a symbol or >= 0.
  StatusOr<Shape> knownShape(int i, const std::string& what);
  StatusOr<double> knownScalar(int i, const std::string& what);
  // The known value of any IR value (nullptr when it depends on parameters).
  StatusOr<const KnownValue*> known(Value* v) { return imp_.knownValue(v); }

  // Outputs.
  int numOutputs() const { return node_.output_size(); }
  bool wantsOutput(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }
  void setOutput(int i, Value* v);
  Value* output(int i) const;
  // Sequences (known while importing; see Scope::sequences).
  bool isSequence(int i) const { return has(i) && scope_.lookupSequence(node_.input(i)); }
  StatusOr<std::vector<Value*>> sequenceInput(int i) const;
  void setSequenceOutput(int i, std::vector<Value*> elems);
  // Output i was set, as a tensor or a sequence.
  bool produced(int i) const;

  Status unsupported(const std::string& reason) const { return Status::error(reason); }
  Status err(const std::string& msg) const { return Status::error(msg); }
  // The builder's error, or a generic one when a helper returned nullptr without one.
  Status builderError() const;

 private:
  const pb::AttributeProto* find(const std::string& name) const;
  bool checkType(const pb::AttributeProto* a, int type, const char* typeName);
  StatusOr<const KnownValue*> knownOf(int i, const std::string& what);

  Importer& imp_;
  Scope& scope_;
  const pb::NodeProto& node_;
  std::string name_;
  int opset_;
  std::vector<Value*> outputs_;
  std::vector<bool> sequenceOutputs_;
  std::set<std::string> used_;
  Status attrError_;
};

// Returns the builder's error from the enclosing mapping when `v` is null.
#define ONNX_BUILT(ctx, v)                 \
  do {                                     \
    if (!(v)) return (ctx).builderError(); \
  } while (0)

// ---- The mapping table ----

using MapFn = Status (*)(OpContext&);

class OpTable {
 public:
  void add(const std::string& opType, int since, MapFn fn) { entries_[opType][since] = fn; }
  // The entry with the largest since-version <= opset, or null.
  MapFn find(const std::string& opType, int opset) const;
  bool knows(const std::string& opType) const { return entries_.count(opType) != 0; }

 private:
  std::map<std::string, std::map<int, MapFn>> entries_;
};

const OpTable& opTable();

// Each op family registers its mappings (ops_*.cpp).
void addElementwiseOps(OpTable& t);
void addActivationOps(OpTable& t);
void addMathOps(OpTable& t);
void addShapeOps(OpTable& t);
void addSliceOps(OpTable& t);
void addIndexOps(OpTable& t);
void addReduceOps(OpTable& t);
void addNnOps(OpTable& t);
void addPoolOps(OpTable& t);
void addNormOps(OpTable& t);
void addMiscOps(OpTable& t);
void addEinsumOps(OpTable& t);
void addRnnOps(OpTable& t);
void addResizeOps(OpTable& t);
void addSequenceOps(OpTable& t);
void addDynamicSizeOps(OpTable& t);

// ---- Lowering helpers ----

// Normalises an ONNX axis (negative counts from the end) into [0, rank).
StatusOr<int64_t> normAxis(int64_t axis, int64_t rank, const std::string& what = "axis");
StatusOr<std::vector<int64_t>> normAxes(const std::vector<int64_t>& axes, int64_t rank,
                                        const std::string& what = "axes");

// "[N,3,224]" for messages.
std::string shapeStr(const Shape& s);

// Numpy (multidirectional) broadcast of two shapes: a 1 stretches; symbols must match exactly.
StatusOr<Shape> broadcastShapes(const Shape& a, const Shape& b);
// Broadcasts every value to the common shape (nullptr entries are kept as nullptr).
StatusOr<std::vector<Value*>> broadcastAll(OpContext& c, std::vector<Value*> vs);
// Unidirectional broadcast of `x` to `target` (ONNX's "unidirectional broadcasting").
StatusOr<Value*> broadcastUni(OpContext& c, Value* x, const Shape& target);
// Checks that the values have one dtype ("inputs of Add have different dtypes f32 and i64").
Status sameDType(OpContext& c, const std::vector<Value*>& vs);

// A rank-0 constant of `t`.
Value* scalarConst(Builder& b, DType t, double v);
// A constant with the dtype and shape of `like`, every element `v`.
Value* splat(Builder& b, Value* like, double v);
Value* splatType(Builder& b, const TensorType& t, double v);
// A 1-D i64 constant.
Value* i64Const(Builder& b, const std::vector<int64_t>& v);

// a * b into `out`; false on overflow or when |a * b| exceeds kMaxElements.
bool checkedMul(int64_t a, int64_t b, int64_t& out);
// The product of dims (nullopt past kMaxElements), symbolic when it is one symbol times static 1s;
// nullopt otherwise.
std::optional<Dim> dimProduct(const Shape& dims);
// `x` with 1s inserted at the (sorted) result positions `axes` (keepdims after a reduce).
Value* insertUnitDims(Builder& b, Value* x, const std::vector<int64_t>& axes);
// The shape of `x` with `axes` removed.
Shape dropAxes(const Shape& s, const std::vector<int64_t>& axes);

// Lowest / largest finite value of a dtype (-inf / +inf for floats when `infinite`).
double dtypeLowest(DType t, bool infinite = true);
double dtypeHighest(DType t, bool infinite = true);

// Elementwise helpers with numpy broadcasting and matching dtypes.
StatusOr<Value*> bcastBinary(OpContext& c, OpCode op, Value* a, Value* b);
StatusOr<Value*> bcastCompare(OpContext& c, const std::string& dir, Value* a, Value* b);

}  // namespace kiln::onnx
