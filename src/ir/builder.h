// Builds graph IR op by op with type inference, in the spirit of XlaBuilder.
//
// Every op is checked against its schema and type rule as it is built. Two styles:
//  - tryBuild(...) returns StatusOr: the error is a value for the caller to handle;
//  - the named helpers (add, reshape, ...) return Value*, nullptr on error, and the builder keeps
//    the first error (status()); an op given a nullptr operand returns nullptr without a new error,
//    so a chain of calls can be checked once at the end, like XlaBuilder's deferred errors.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln {

struct DotDims {
  std::vector<int64_t> lhsBatch, rhsBatch, lhsContracting, rhsContracting;
};

class Builder {
 public:
  explicit Builder(Function* f) : f_(f) {}

  Function* function() const { return f_; }
  // New nodes go before `n` (nullptr: at the end).
  void setInsertionPoint(Node* n) { before_ = n; }
  // Location and origin given to new nodes (for error messages naming the source node).
  void setLoc(Location l) { loc_ = std::move(l); }
  void setOrigin(std::string o) { origin_ = std::move(o); }

  // First error of the Value*-returning helpers, with the origin of the op that failed.
  const Status& status() const { return status_; }
  bool ok() const { return status_.isOk(); }

  // Checked construction of any op. `declared` gives result types for ops that need them
  // (reshape, broadcast_in_dim, iota, constant, convert, resize) and may be empty otherwise.
  StatusOr<Node*> tryBuild(OpCode op, std::vector<Value*> operands, AttrMap attrs = {},
                           std::vector<TensorType> declared = {});

  // Generic deferred-error form of tryBuild; returns result 0.
  Value* op(OpCode op, std::vector<Value*> operands, AttrMap attrs = {},
            std::vector<TensorType> declared = {});
  // All results of a multi-result op (empty on error).
  std::vector<Value*> opN(OpCode op, std::vector<Value*> operands, AttrMap attrs = {},
                          std::vector<TensorType> declared = {});

  Value* parameter(TensorType t, std::string name = {});
  Value* constant(Tensor t);
  Value* scalar(DType t, double v);  // rank-0 constant
  Value* iota(TensorType t, int64_t dimension);

  Value* unary(OpCode op, Value* x) { return this->op(op, {x}); }
  Value* binary(OpCode op, Value* a, Value* b) { return this->op(op, {a, b}); }
  Value* add(Value* a, Value* b) { return binary(OpCode::Add, a, b); }
  Value* sub(Value* a, Value* b) { return binary(OpCode::Sub, a, b); }
  Value* mul(Value* a, Value* b) { return binary(OpCode::Mul, a, b); }
  Value* div(Value* a, Value* b) { return binary(OpCode::Div, a, b); }
  Value* max(Value* a, Value* b) { return binary(OpCode::Max, a, b); }
  Value* min(Value* a, Value* b) { return binary(OpCode::Min, a, b); }
  // direction: eq, ne, lt, le, gt, ge
  Value* compare(const std::string& direction, Value* a, Value* b);
  Value* select(Value* pred, Value* onTrue, Value* onFalse);
  Value* clamp(Value* lo, Value* x, Value* hi);
  Value* convert(Value* x, DType t);

  Value* broadcastInDim(Value* x, Shape resultDims, std::vector<int64_t> dims);
  // Numpy-style broadcast of x to `resultDims` (trailing alignment).
  Value* broadcastTo(Value* x, const Shape& resultDims);
  Value* reshape(Value* x, Shape dims);
  Value* transpose(Value* x, std::vector<int64_t> perm);
  Value* slice(Value* x, std::vector<int64_t> start, std::vector<int64_t> limit,
               std::vector<int64_t> stride = {});
  Value* concatenate(std::vector<Value*> xs, int64_t dimension);
  Value* pad(Value* x, Value* padValue, std::vector<int64_t> low, std::vector<int64_t> high,
             std::vector<int64_t> interior = {});
  // kind: sum, prod, max, min, and, or
  Value* reduce(Value* x, std::vector<int64_t> dims, const std::string& kind);
  Value* dotGeneral(Value* lhs, Value* rhs, const DotDims& d);

 private:
  Value* record(StatusOr<Node*> n, size_t result = 0);
  bool anyNull(const std::vector<Value*>& vs) const;

  Function* f_;
  Node* before_ = nullptr;
  Location loc_;
  std::string origin_;
  Status status_;
};

}  // namespace kiln
