// Recurrent ONNX ops (RNN, GRU, LSTM). LSTM and GRU with the default activations, no clip and no
// peepholes become the lstm and gru ops (a target may run each as one library call); the rest is
// unrolled over the static sequence length (passes/unroll_recurrence.h). Directions forward,
// reverse and bidirectional; layout 0 and 1. Per-batch sequence lengths shorter than the sequence
// are not supported.
#include "frontend/onnx/ops_common.h"
#include "passes/rewrite_util.h"
#include "passes/unroll_recurrence.h"

namespace kiln::onnx {

namespace {

// Longest sequence unrolled (each step adds a handful of nodes).
constexpr int64_t kMaxSteps = 4096;

using Cell = RecurrentCell;
using rewrite::splatConstant;
using Act = RecurrentActivation;

// The activation functions of every direction (ONNX defaults, alpha/beta by position).
StatusOr<std::vector<Act>> readActs(OpContext& c, Cell cell, int64_t dirs) {
  std::vector<Act> dflt = defaultActivations(cell, 1);
  std::vector<std::string> names;
  if (const pb::AttributeProto* a = c.rawAttr("activations"))
    for (const auto& s : a->strings()) names.push_back(s);
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d)
      for (const Act& a : dflt) names.push_back(a.name);
  if (names.size() != dflt.size() * static_cast<size_t>(dirs))
    return c.err("expected " + std::to_string(dflt.size() * dirs) + " activations, got " +
                 std::to_string(names.size()));
  std::vector<double> alpha = c.attrFloats("activation_alpha"),
                      beta = c.attrFloats("activation_beta");
  std::vector<Act> acts;
  for (size_t i = 0; i < names.size(); ++i) {
    // Defaults as in ONNX's list: LeakyRelu 0.01, ThresholdedRelu 1, HardSigmoid 0.2/0.5, ...
    double da = names[i] == "LeakyRelu" ? 0.01 : names[i] == "HardSigmoid" ? 0.2 : 1.0;
    double db = names[i] == "HardSigmoid" ? 0.5 : 0.0;
    acts.push_back(Act{names[i], i < alpha.size() ? alpha[i] : da, i < beta.size() ? beta[i] : db});
  }
  return acts;
}

// Checks W against hidden_size (which bounds every extent the unrolling makes).
Status checkWeights(OpContext& c, const RecurrenceSpec& k, Value* w, int64_t dirs, int64_t gates) {
  const TensorType& t = w->type();
  if (k.hidden <= 0 || k.hidden > (int64_t(1) << 24))
    return c.err("attribute 'hidden_size' must be in [1, 2^24]");
  if (t.rank() != 3 || t.dim(0) != Dim(dirs) || t.dim(1) != Dim(gates * k.hidden))
    return c.err("W " + t.str() + " does not match " + std::to_string(dirs) + " directions of " +
                 std::to_string(gates) + " gates of hidden size " + std::to_string(k.hidden));
  return Status::ok();
}

// Whether the lstm / gru op computes this node: ONNX's default activations, no clip, no
// peepholes (the op's contract, docs/ops.md).
bool fitsRecurrenceOp(const RecurrenceSpec& k, const RecurrenceOperands& in, int64_t dirs) {
  if (k.cell == Cell::Rnn || k.clip > 0 || in.p) return false;
  std::vector<Act> dflt = defaultActivations(k.cell, dirs);
  for (size_t i = 0; i < dflt.size(); ++i)
    if (k.activations[i].name != dflt[i].name) return false;
  return true;
}

// The lstm / gru op; its y [S, B, D*H] back in ONNX's [S, D, B, H].
StatusOr<RecurrenceResults> recurrenceOp(OpContext& c, const RecurrenceSpec& k,
                                         RecurrenceOperands in, int64_t dirs, int64_t gates) {
  const TensorType& xt = in.x->type();
  const DType dt = xt.dtype();
  const Dim D(dirs), S = xt.dim(0), B = xt.dim(1), H(k.hidden);
  if (!in.b) in.b = splatConstant(c.b, TensorType(dt, {D, Dim(2 * gates * k.hidden)}), 0);
  if (!in.h0) in.h0 = splatConstant(c.b, TensorType(dt, {D, B, H}), 0);
  std::vector<Value*> operands{in.x, in.w, in.r, in.b, in.h0};
  if (k.cell == Cell::Lstm)
    operands.push_back(in.c0 ? in.c0 : splatConstant(c.b, TensorType(dt, {D, B, H}), 0));
  AttrMap attrs{{"direction", enumAttr(k.bidirectional ? "bidirectional"
                                       : k.reverse     ? "reverse"
                                                       : "forward")}};
  if (k.cell == Cell::Gru) attrs["linear_before_reset"] = boolAttr(k.linearBeforeReset);
  std::vector<Value*> rs =
      c.b.opN(k.cell == Cell::Lstm ? OpCode::Lstm : OpCode::Gru, operands, std::move(attrs));
  if (rs.empty()) return c.builderError();
  RecurrenceResults out{c.b.transpose(c.b.reshape(rs[0], {S, B, D, H}), {0, 2, 1, 3}), rs[1],
                        rs.size() > 2 ? rs[2] : nullptr};
  ONNX_BUILT(c, out.y);
  return out;
}

Status recurrent(OpContext& c, Cell cell) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t layout = c.attrInt("layout", 0);
  if (x->type().rank() != 3) return c.err("X must be 3-D, got " + x->type().str());
  if (layout == 1) x = c.b.transpose(x, {1, 0, 2});
  ONNX_BUILT(c, x);
  KILN_ASSIGN_OR_RETURN(auto xd, staticDims(c, x, 0, "X"));
  const int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  RecurrenceSpec k;
  k.cell = cell;
  k.hidden = c.attrInt("hidden_size", 0);
  k.clip = c.attrFloat("clip", 0.0);
  k.linearBeforeReset = c.attrInt("linear_before_reset", 0) != 0;
  if (xd[0] > kMaxSteps) return c.unsupported("sequences longer than " + std::to_string(kMaxSteps));
  if (cell == Cell::Lstm && c.attrInt("input_forget", 0) != 0)
    return c.unsupported("input_forget = 1 is not supported");
  std::string dirName = c.attrString("direction", "forward");
  k.bidirectional = dirName == "bidirectional";
  k.reverse = dirName == "reverse";
  const int64_t dirs = k.bidirectional ? 2 : 1;
  if (dirName != "forward" && !k.reverse && !k.bidirectional)
    return c.err("direction '" + dirName + "' is not forward, reverse or bidirectional");
  RecurrenceOperands in{x,
                        nullptr,
                        nullptr,
                        c.in(3),
                        c.in(5),
                        cell == Cell::Lstm ? c.in(6) : nullptr,
                        cell == Cell::Lstm ? c.in(7) : nullptr};
  KILN_ASSIGN_OR_RETURN(in.w, c.req(1));
  KILN_ASSIGN_OR_RETURN(in.r, c.req(2));
  KILN_RETURN_IF_ERROR(checkWeights(c, k, in.w, dirs, gates));
  if (c.has(4)) {
    KILN_ASSIGN_OR_RETURN(auto lens, c.knownInts(4, "the sequence lengths"));
    for (int64_t l : lens)
      if (l != xd[0]) return c.unsupported("sequence lengths shorter than the sequence");
  }
  KILN_ASSIGN_OR_RETURN(k.activations, readActs(c, cell, dirs));
  if (layout == 1) {
    if (in.h0) in.h0 = c.b.transpose(in.h0, {1, 0, 2});
    if (in.c0) in.c0 = c.b.transpose(in.c0, {1, 0, 2});
  }
  StatusOr<RecurrenceResults> out = fitsRecurrenceOp(k, in, dirs)
                                        ? recurrenceOp(c, k, in, dirs, gates)
                                        : unrollRecurrence(c.b, k, in);
  if (!out) return out.status();
  // Y [steps, dirs, batch, hidden], Y_h and Y_c [dirs, batch, hidden] (batch first for layout 1).
  if (layout == 1) {
    out->y = c.b.transpose(out->y, {2, 0, 1, 3});
    out->yh = c.b.transpose(out->yh, {1, 0, 2});
    if (out->yc) out->yc = c.b.transpose(out->yc, {1, 0, 2});
  }
  ONNX_BUILT(c, out->y);
  ONNX_BUILT(c, out->yh);
  c.setOutput(0, out->y);
  c.setOutput(1, out->yh);
  if (out->yc) c.setOutput(2, out->yc);
  return Status::ok();
}

Status rnn(OpContext& c) { return recurrent(c, Cell::Rnn); }
Status gru(OpContext& c) { return recurrent(c, Cell::Gru); }
Status lstm(OpContext& c) { return recurrent(c, Cell::Lstm); }

}  // namespace

void addRnnOps(OpTable& t) {
  t.add("RNN", 7, rnn);
  t.add("GRU", 7, gru);
  t.add("LSTM", 7, lstm);
}

}  // namespace kiln::onnx
