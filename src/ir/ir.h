// Graph IR: a Module owns Functions; a Function owns its Nodes (kept in a valid topological
// order); a Node owns its result Values. Everything else holds non-owning pointers. Use lists are
// maintained by setOperand / replaceAllUsesWith / erase only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/op.h"
#include "ir/types.h"
#include "support/status.h"

namespace kiln {

class Function;
class Node;

struct Use {
  Node* user;
  unsigned operandIndex;
  bool operator==(const Use& o) const { return user == o.user && operandIndex == o.operandIndex; }
};

// An SSA value: result `index` of node `def`.
class Value {
 public:
  Node* def() const { return def_; }
  unsigned index() const { return index_; }
  const TensorType& type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  // The name from the source (.kir "%name", ONNX tensor name); may be empty.
  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  const std::vector<Use>& uses() const { return uses_; }
  // True if some node uses this value or the function returns it.
  bool hasUses() const;
  bool isFunctionOutput() const;

 private:
  friend class Node;
  friend class Function;
  Value(Node* def, unsigned index, TensorType type)
      : def_(def), index_(index), type_(std::move(type)) {}
  Node* def_;
  unsigned index_;
  TensorType type_;
  std::string name_;
  std::vector<Use> uses_;
};

class Node {
 public:
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  OpCode op() const { return op_; }
  const OpInfo& info() const { return opInfo(op_); }
  Function* parent() const { return parent_; }

  size_t numOperands() const { return operands_.size(); }
  Value* operand(size_t i) const { return operands_[i]; }
  const std::vector<Value*>& operands() const { return operands_; }
  void setOperand(size_t i, Value* v);

  size_t numResults() const { return results_.size(); }
  Value* result(size_t i = 0) const { return results_[i].get(); }

  const AttrMap& attrs() const { return attrs_; }
  void setAttr(const std::string& name, AttrValue v) { attrs_[name] = std::move(v); }
  void removeAttr(const std::string& name) { attrs_.erase(name); }
  // Typed access with schema defaults.
  int64_t attrInt(const char* name) const { return getInt(op_, attrs_, name); }
  double attrFloat(const char* name) const { return getFloat(op_, attrs_, name); }
  bool attrBool(const char* name) const { return getBool(op_, attrs_, name); }
  const std::string& attrEnum(const char* name) const { return getEnum(op_, attrs_, name); }
  std::vector<int64_t> attrInts(const char* name, std::vector<int64_t> fallback = {}) const {
    return getInts(attrs_, name, std::move(fallback));
  }
  // The data of a `constant` node.
  const ConstantData& constantData() const;

  // Where the node came from: a .kir line:column or a model file.
  const Location& loc() const { return loc_; }
  void setLoc(Location l) { loc_ = std::move(l); }
  // The name of the source operation (an ONNX node name); printed as loc("...").
  const std::string& origin() const { return origin_; }
  void setOrigin(std::string o) { origin_ = std::move(o); }

  // "node 'origin' (op)" or "op at line:col", for error messages.
  std::string describe() const;

 private:
  friend class Function;
  Node(Function* parent, OpCode op) : op_(op), parent_(parent) {}
  OpCode op_;
  Function* parent_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  AttrMap attrs_;
  Location loc_;
  std::string origin_;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

class Function {
 public:
  explicit Function(std::string name) : name_(std::move(name)) {}
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;

  const std::string& name() const { return name_; }

  // Parameters are `parameter` nodes; addParameter appends one (its `index` attribute is its
  // position) and returns its value.
  Value* addParameter(TensorType type, std::string name = {});
  size_t numParameters() const { return params_.size(); }
  Value* parameter(size_t i) const { return params_[i]->result(); }
  const std::vector<Node*>& parameterNodes() const { return params_; }

  // The results, each with its name: the program's interface (a .kir `return %y`, an ONNX graph
  // output). A name belongs to the output, not to the value: one value may be returned under
  // several names, and a parameter under a name of its own (ONNX Identity of a graph input).
  // Replacing an output's value (setOutput, replaceAllUsesWith) keeps its name.
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<std::string>& outputNames() const { return outputNames_; }
  const std::string& outputName(size_t i) const { return outputNames_[i]; }
  // Outputs named after their values.
  void setOutputs(std::vector<Value*> outs);
  // Outputs with names of their own (`names` has one per output).
  void setOutputs(std::vector<Value*> outs, std::vector<std::string> names);
  void setOutput(size_t i, Value* v) { outputs_[i] = v; }

  // Creates a node without any checks (the verifier checks later). Inserted before `before`, or at
  // the end when null. Operands get uses recorded.
  Node* createNode(OpCode op, std::vector<Value*> operands, std::vector<TensorType> resultTypes,
                   AttrMap attrs = {}, Node* before = nullptr);
  // Removes a node whose results have no uses (KILN_CHECKs that).
  void erase(Node* n);
  // Every use of `from` (including function outputs) now uses `to`.
  void replaceAllUsesWith(Value* from, Value* to);

  // Nodes in program order (parameters included, first).
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t numNodes() const { return nodes_.size(); }

 private:
  std::string name_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<Node*> params_;
  std::vector<Value*> outputs_;
  std::vector<std::string> outputNames_;  // one per output
};

// The first node with a string result, or nullptr: such a function has no kernel IR (text has
// no fixed element size), so only the interpreter runs it.
const Node* firstStringNode(const Function& f);

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  Function* addFunction(std::string name);
  Function* function(std::string_view name) const;  // nullptr if absent
  // The entry function: "main" if present, otherwise the first.
  Function* entry() const;
  const std::vector<std::unique_ptr<Function>>& functions() const { return functions_; }

  // Decisions of the graph passes worth a reader's eye ("convolution-to-matmul: node '...'
  // (convolution): ..."), in the order made; `kiln explain` prints them.
  void addRemark(std::string remark) { remarks_.push_back(std::move(remark)); }
  const std::vector<std::string>& remarks() const { return remarks_; }

 private:
  std::vector<std::unique_ptr<Function>> functions_;
  std::vector<std::string> remarks_;
};

}  // namespace kiln
