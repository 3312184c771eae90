// Private to the ONNX frontend: the importer's state, shared by the graph walk and the op
// mappings.
//
// Values are looked up by ONNX name in a Scope (the main graph, an inlined If branch, an
// expanded function body). The importer also knows the *values* of some tensors while importing:
// constants, and anything computed from constants alone, found by running the reference
// interpreter on the IR already built (knownValue). Shapes of tensors with symbolic dims are
// tracked the same way: each symbolic dim (N, or a product such as 4*N) stands for a sentinel
// integer that data-movement ops carry along and that multiplication and exact division combine,
// so Shape -> Gather -> Mul -> Concat -> Reshape works with batch and sequence dims.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontend/onnx/import_options.h"
#include "frontend/onnx/proto.h"
#include "ir/builder.h"

namespace onnx {
class OpSchema;
}  // namespace onnx

namespace kiln::onnx {

class OpContext;

// A name scope of ONNX values.
struct Scope {
  Scope* parent = nullptr;  // enclosing graph visible from an inlined branch; null for functions
  std::unordered_map<std::string, Value*> values;
  // ONNX sequences known while importing: the IR has no sequence type, so a sequence is the
  // ordered list of its tensors, resolved by the sequence ops themselves.
  std::unordered_map<std::string, std::vector<Value*>> sequences;
  std::map<std::string, int> opsets;  // domain ("" for ai.onnx) -> version
  bool nameValues = true;             // give IR values the ONNX tensor names
  std::string originPrefix;           // "Outer/" for nodes of an expanded function
  int depth = 0;                      // nesting of expansions (bounded)

  Value* lookup(const std::string& name) const;
  const std::vector<Value*>* lookupSequence(const std::string& name) const;
  // A tensor or a sequence of that name is visible.
  bool defines(const std::string& name) const { return lookup(name) || lookupSequence(name); }
};

enum class Mode { Import, Check };

// A statically known value: a tensor, possibly holding sentinels that stand for symbolic dims.
struct KnownValue {
  Tensor tensor;
  bool symbolic = false;
};

class Importer {
 public:
  Importer(const pb::ModelProto& model, std::string baseDir, Mode mode,
           const ImportOptions& options, std::set<std::string> boundInputs);
  // The main graph's initializers converted beforehand (their raw data moved into the tensors),
  // used instead of converting them again.
  void useConvertedInitializers(const std::map<const pb::TensorProto*, StatusOr<Tensor>>* c) {
    converted_ = c;
  }

  // Import mode: the module or the first error. Check mode: always a module (to be discarded);
  // problems are listed by unsupported().
  StatusOr<std::unique_ptr<Module>> run();
  const std::vector<Unsupported>& unsupported() const { return unsupported_; }
  // Graph inputs whose values some node needed while importing.
  const std::set<std::string>& neededInputs() const { return neededInputs_; }

  Function* function() const { return f_; }
  Mode mode() const { return mode_; }
  const pb::ModelProto& model() const { return model_; }

  // The value of `v` if it is computable from constants alone (nullptr when it depends on a
  // parameter); an error when the evaluation itself fails.
  StatusOr<const KnownValue*> knownValue(Value* v);
  // Why knownValue(v) gave nullptr when v does not come from parameters ("" otherwise).
  std::string unknownReason(Value* v) const;
  // Names of the parameters `v` depends on (for messages and the bind-and-retry loop).
  std::vector<std::string> parameterDeps(Value* v);
  void noteNeededInputs(const std::vector<std::string>& names);

  // Sentinels for symbolic dims: a dim's stand-in integer and back.
  int64_t sentinelFor(const Dim& d);
  std::optional<Dim> dimForSentinel(int64_t v) const;
  bool holdsSentinel(const Tensor& t) const;
  // `n` (i64 Mul, Div, Add, Sub, or a Compare that every size decides) on operands holding
  // sentinels, as dims; nullopt if some element's result is no dim.
  std::optional<Tensor> dimArithmetic(const Node& n, const std::vector<Tensor>& operands);
  std::optional<Tensor> dimComparison(const Node& n, const std::vector<Tensor>& operands);
  // Records that `v` holds sentinels (an i64 shape of a tensor with symbolic dims); such values
  // must not survive as data: the importer checks that they are dead at the end.
  void addSymbolicConstant(Value* v, KnownValue k);

  // A fresh symbol for a dim that a model leaves unnamed ("unk0", "unk1", ...).
  std::string freshSymbol();
  // The symbol for an ONNX dim_param (sanitised to [A-Za-z0-9_], kept distinct).
  std::string symbolFor(const std::string& dimParam);

  // Imports the nodes of `g` into `scope` (used for the main graph and inlined If branches),
  // in dependency order; undefined inputs and cycles are errors.
  Status importGraphNodes(const pb::GraphProto& g, Scope& scope);
  // Imports nodes that are already in order (function bodies).
  Status importNodeList(const std::vector<const pb::NodeProto*>& nodes, Scope& scope);
  // Imports one node (dispatch by domain / op type / opset, function expansion).
  Status importNode(const pb::NodeProto& node, Scope& scope, const std::string& name);
  // Expands a function body in place of `node`. Attributes the body refers to and the node
  // leaves out take the schema's defaults (when the function belongs to an ONNX op).
  Status expandFunction(const pb::FunctionProto& fn, const pb::NodeProto& node, Scope& outer,
                        const std::string& name, const ::onnx::OpSchema* schema = nullptr);

  // Model-local function by (domain, name).
  const pb::FunctionProto* localFunction(const std::string& domain, const std::string& name) const;

 private:
  Status importInitializers(Scope& scope);
  Status importInputs(Scope& scope);
  Status importOutputs(Scope& scope);
  StatusOr<TensorType> typeOfValueInfo(const pb::ValueInfoProto& vi, const std::string& what);
  Status checkDeadSymbolic();
  void removeDeadNodes();
  // Check mode: records a problem; Import mode: returns it. `opset` > 0 adds the opset to the
  // message.
  Status report(const std::string& node, const std::string& opType, const Status& s, int opset = 0);
  // Control flow (control_flow.cpp): inlined or unrolled where the decisions are known.
  Status importIf(const pb::NodeProto& node, Scope& scope, const std::string& name);
  Status importLoop(const pb::NodeProto& node, Scope& scope, const std::string& name);
  Status importScan(const pb::NodeProto& node, Scope& scope, const std::string& name, int opset);
  // Imports subgraph `g` with its inputs bound to `inputs`; its outputs, or an empty list when
  // check mode reported a problem inside.
  StatusOr<std::vector<Value*>> runSubgraph(const pb::GraphProto& g, Scope& outer,
                                            const std::string& prefix,
                                            const std::vector<Value*>& inputs, bool nameValues);
  StatusOr<bool> knownFlag(Value* v, const std::string& what);
  // A Scan's inputs: loop state, scanned tensors, and the axis / direction attributes.
  struct ScanSpec {
    std::vector<Value*> state, xs;
    std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;
  };
  StatusOr<std::vector<Value*>> scanOnce(const pb::GraphProto& body, Scope& scope,
                                         const std::string& prefix, ScanSpec spec);
  StatusOr<std::vector<Value*>> scanBatched(const pb::GraphProto& body, Scope& scope,
                                            const std::string& prefix, ScanSpec spec);
  Status bindOutputs(const pb::NodeProto& node, Scope& scope, const std::vector<Value*>& outs);
  StatusOr<Value*> stack(Builder& b, std::vector<Value*> parts, int64_t axis, bool reverse);
  // Runs a table mapping for one node: builder errors, attribute checks, missing outputs.
  Status runMapping(Status (*fn)(OpContext&), const pb::NodeProto& node, Scope& scope,
                    const std::string& name, int opset);
  Status importInitializerList(const pb::GraphProto& g, Scope& scope);
  // Check mode: a node whose inputs come from failed nodes cannot be checked itself.
  bool skipPoisoned(const pb::NodeProto& node, Scope& scope, const std::string& name);
  // Check mode: stands in for outputs of a node that failed, when the model states
  // their types, so that later nodes can still be checked.
  void placeholdOutputs(const pb::NodeProto& node, Scope& scope);
  Status evaluate(Node* n);

  const pb::ModelProto& model_;

  const std::map<const pb::TensorProto*, StatusOr<Tensor>>* converted_ = nullptr;
  std::string baseDir_;
  Mode mode_;
  const ImportOptions& options_;
  std::set<std::string> boundInputs_;
  std::unique_ptr<Module> module_;
  Function* f_ = nullptr;
  std::vector<Unsupported> unsupported_;
  std::set<std::string> neededInputs_;
  std::unordered_map<const Value*, KnownValue> known_;
  // Values not computable while importing, with the reason when it is not a parameter (shape
  // arithmetic on a symbolic dim).
  std::unordered_map<const Value*, std::string> unknowable_;
  std::unordered_set<const Node*> symbolicConstants_;
  std::map<std::string, int64_t> sentinels_;
  std::map<int64_t, Dim> sentinelSymbols_;
  std::map<std::string, std::string> dimParams_;
  std::set<std::string> usedSymbols_;
  int unkCounter_ = 0;
  int expansionCounter_ = 0;
  std::unordered_set<std::string> poisoned_;
  // Check mode: value types the model states, for placeholders.
  std::unordered_map<std::string, pb::TypeProto> hintTypes_;
};

}  // namespace kiln::onnx
