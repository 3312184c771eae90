// ONNX sequence ops, resolved while importing. The IR has no sequence type: a sequence is the
// ordered list of its tensors (Scope::sequences), so its length and every position used on it
// must be known while importing. SequenceAt, SequenceLength and ConcatFromSequence turn it back
// into tensors; a sequence that reaches a graph output or a subgraph boundary is unsupported.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// Longest sequence built (each element is a separate IR value).
constexpr int64_t kMaxSequence = int64_t(1) << 16;

// The known position at input i, normalised against a sequence of `n` elements: valid positions
// are [-n, n - 1], or [-n, n] when `inserting` (n appends).
StatusOr<size_t> knownPosition(OpContext& c, int i, size_t n, bool inserting) {
  KILN_ASSIGN_OR_RETURN(auto pos, c.knownInts(i, "the sequence position"));
  if (pos.size() != 1)
    return c.err("the sequence position must be a scalar, got " + std::to_string(pos.size()) +
                 " values");
  int64_t len = static_cast<int64_t>(n), p = pos[0];
  int64_t hi = inserting ? len : len - 1;
  if (p < -len || p > hi)
    return c.err("sequence position " + std::to_string(p) + " is out of range for a sequence of " +
                 std::to_string(len) + (len == 1 ? " element" : " elements"));
  return static_cast<size_t>(p < 0 ? p + len : p);
}

Status checkLength(OpContext& c, size_t n) {
  if (static_cast<int64_t>(n) > kMaxSequence)
    return c.unsupported("sequences longer than " + std::to_string(kMaxSequence) +
                         " elements are not supported");
  return Status::ok();
}

Status sequenceEmpty(OpContext& c) {
  c.ignoreAttr("dtype");  // an empty list has no elements to type
  c.setSequenceOutput(0, {});
  return Status::ok();
}

Status sequenceConstruct(OpContext& c) {
  std::vector<Value*> xs;
  for (int i = 0; i < c.numInputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * x, c.req(i));
    xs.push_back(x);
  }
  if (xs.empty()) return c.err("needs at least one input");
  KILN_RETURN_IF_ERROR(sameDType(c, xs));
  KILN_RETURN_IF_ERROR(checkLength(c, xs.size()));
  c.setSequenceOutput(0, std::move(xs));
  return Status::ok();
}

Status sequenceInsert(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> seq, c.sequenceInput(0));
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(1));
  if (!seq.empty() && seq[0]->type().dtype() != x->type().dtype())
    return c.err("inserting a " + x->type().str() + " tensor into a sequence of " +
                 std::string(dtypeName(seq[0]->type().dtype())) + " tensors");
  size_t at = seq.size();
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(at, knownPosition(c, 2, seq.size(), true));
  }
  seq.insert(seq.begin() + static_cast<std::ptrdiff_t>(at), x);
  KILN_RETURN_IF_ERROR(checkLength(c, seq.size()));
  c.setSequenceOutput(0, std::move(seq));
  return Status::ok();
}

Status sequenceErase(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> seq, c.sequenceInput(0));
  if (seq.empty()) return c.err("cannot erase from an empty sequence");
  size_t at = seq.size() - 1;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(at, knownPosition(c, 1, seq.size(), false));
  }
  seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(at));
  c.setSequenceOutput(0, std::move(seq));
  return Status::ok();
}

Status sequenceAt(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> seq, c.sequenceInput(0));
  KILN_ASSIGN_OR_RETURN(size_t at, knownPosition(c, 1, seq.size(), false));
  c.setOutput(0, seq[at]);
  return Status::ok();
}

Status sequenceLength(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> seq, c.sequenceInput(0));
  Value* n = scalarConst(c.b, DType::I64, static_cast<double>(seq.size()));
  ONNX_BUILT(c, n);
  c.setOutput(0, n);
  return Status::ok();
}

Status concatFromSequence(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> seq, c.sequenceInput(0));
  if (!c.hasAttr("axis")) return c.err("attribute 'axis' is required");
  int64_t axisAttr = c.attrInt("axis", 0);
  int64_t newAxis = c.attrInt("new_axis", 0);
  if (newAxis != 0 && newAxis != 1)
    return c.err("new_axis must be 0 or 1, got " + std::to_string(newAxis));
  if (seq.empty()) return c.err("cannot concatenate an empty sequence");
  KILN_RETURN_IF_ERROR(sameDType(c, seq));
  int64_t rank = seq[0]->type().rank();
  for (Value* x : seq)
    if (x->type().rank() != rank)
      return c.err("sequence elements have different ranks (" + seq[0]->type().str() + " and " +
                   x->type().str() + ")");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(axisAttr, rank + newAxis));
  if (newAxis) {
    for (Value*& x : seq) {
      x = insertUnitDims(c.b, x, {axis});
      ONNX_BUILT(c, x);
    }
  }
  Value* out = seq.size() == 1 ? seq[0] : c.b.concatenate(seq, axis);
  ONNX_BUILT(c, out);
  c.setOutput(0, out);
  return Status::ok();
}

Status splitToSequence(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  if (rank == 0) return c.err("cannot split a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), rank));
  int64_t keepdims = c.attrInt("keepdims", 1);
  const Dim& dim = x->type().dim(axis);
  if (!dim.isStatic())
    return c.unsupported("splitting symbolic dimension " + dim.str() +
                         ": the sequence length must be known while importing");
  int64_t d = dim.value();
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(Tensor split, c.knownInput(1, "the split sizes"));
    if (!isInteger(split.dtype()))
      return c.err("the split sizes must be an integer tensor, got " + split.type().str());
    if (split.rank() == 0) {
      int64_t chunk = split.getInt(0);
      if (chunk <= 0) return c.err("split chunk size " + std::to_string(chunk) + " must be > 0");
      for (int64_t at = 0; at < d; at += chunk) sizes.push_back(std::min(chunk, d - at));
    } else if (split.rank() == 1) {
      int64_t total = 0;
      for (int64_t j = 0; j < split.numElements(); ++j) {
        int64_t s = split.getInt(j);
        if (s < 0 || s > d - total)
          return c.err("split sizes do not fit dimension " + std::to_string(d));
        total += s;
        sizes.push_back(s);
      }
      if (total != d)
        return c.err("split sizes add up to " + std::to_string(total) + ", not " +
                     std::to_string(d));
    } else {
      return c.err("the split sizes must be a scalar or 1-D, got " + split.type().str());
    }
  } else {
    if (keepdims != 0 && keepdims != 1)
      return c.err("keepdims must be 0 or 1, got " + std::to_string(keepdims));
    sizes.assign(static_cast<size_t>(d), 1);
    squeeze = keepdims == 0;
  }
  KILN_RETURN_IF_ERROR(checkLength(c, sizes.size()));
  std::vector<Value*> seq;
  int64_t at = 0;
  for (int64_t s : sizes) {
    Value* piece = s == d ? x : sliceAxis(c.b, x, axis, at, at + s);
    if (squeeze && piece) piece = c.b.reshape(piece, dropAxes(piece->type().dims(), {axis}));
    ONNX_BUILT(c, piece);
    seq.push_back(piece);
    at += s;
  }
  c.setSequenceOutput(0, std::move(seq));
  return Status::ok();
}

}  // namespace

void addSequenceOps(OpTable& t) {
  t.add("SequenceEmpty", 11, sequenceEmpty);
  t.add("SequenceConstruct", 11, sequenceConstruct);
  t.add("SequenceInsert", 11, sequenceInsert);
  t.add("SequenceErase", 11, sequenceErase);
  t.add("SequenceAt", 11, sequenceAt);
  t.add("SequenceLength", 11, sequenceLength);
  t.add("ConcatFromSequence", 11, concatFromSequence);
  t.add("SplitToSequence", 11, splitToSequence);
}

}  // namespace kiln::onnx
