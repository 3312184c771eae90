// Recurrences unrolled into core ops. See unroll_recurrence.h.
#include "passes/unroll_recurrence.h"

#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::splatConstant;

Value* sliceAxis(Builder& b, Value* v, int64_t axis, int64_t start, int64_t limit) {
  if (!v) return nullptr;
  std::vector<int64_t> lo(static_cast<size_t>(v->type().rank()), 0), hi;
  for (const Dim& d : v->type().dims()) hi.push_back(d.isStatic() ? d.value() : 0);
  lo[static_cast<size_t>(axis)] = start;
  hi[static_cast<size_t>(axis)] = limit;
  return b.slice(v, lo, hi, {});
}

Value* splat(Builder& b, Value* like, double v) {
  return like ? splatConstant(b, like->type(), v) : nullptr;
}

StatusOr<Value*> activate(Builder& b, const RecurrentActivation& a, Value* x) {
  auto k = [&](double v) { return splat(b, x, v); };
  const std::string& n = a.name;
  if (n == "Tanh") return b.unary(OpCode::Tanh, x);
  if (n == "Sigmoid") return b.unary(OpCode::Sigmoid, x);
  if (n == "Relu") return b.max(x, k(0));
  if (n == "Affine") return b.add(b.mul(x, k(a.alpha)), k(a.beta));
  if (n == "LeakyRelu") return b.select(b.compare("lt", x, k(0)), b.mul(x, k(a.alpha)), x);
  if (n == "ThresholdedRelu") return b.select(b.compare("gt", x, k(a.alpha)), x, k(0));
  if (n == "ScaledTanh") return b.mul(k(a.alpha), b.unary(OpCode::Tanh, b.mul(x, k(a.beta))));
  if (n == "HardSigmoid") return b.max(k(0), b.min(k(1), b.add(b.mul(x, k(a.alpha)), k(a.beta))));
  if (n == "Elu")
    return b.select(b.compare("gt", x, k(0)), x,
                    b.mul(b.unary(OpCode::Expm1, b.min(x, k(0))), k(a.alpha)));
  if (n == "Softsign") return b.div(x, b.add(k(1), b.unary(OpCode::Abs, x)));
  if (n == "Softplus") return b.unary(OpCode::Log1p, b.unary(OpCode::Exp, x));
  return Status::error("activation '" + n + "' is not supported");
}

// Row `d` of a [dirs, ...] tensor, without the leading dim.
Value* dirSlice(Builder& b, Value* v, int64_t d) {
  if (!v) return nullptr;
  Value* s = sliceAxis(b, v, 0, d, d + 1);
  if (!s) return nullptr;
  Shape rest(s->type().dims().begin() + 1, s->type().dims().end());
  return b.reshape(s, rest);
}

// Gate chunk g (of size h) along the last axis.
Value* gate(Builder& b, Value* v, int64_t g, int64_t h) {
  return v ? sliceAxis(b, v, v->type().rank() - 1, g * h, (g + 1) * h) : nullptr;
}

struct Dir {
  std::vector<Value*> ys;  // per step, [batch, hidden] in time order
  Value* h = nullptr;
  Value* cState = nullptr;
};

class Unroller {
 public:
  Unroller(Builder& b, const RecurrenceSpec& k, int64_t steps, int64_t gates)
      : b_(b), k_(k), steps_(steps), gates_(gates) {}

  // One direction d: the input projection of every step (X W^T plus the biases), then the steps.
  StatusOr<Dir> direction(const RecurrenceOperands& in, int64_t d, const RecurrentActivation* acts,
                          bool reverse);

 private:
  Value* clipped(Value* x) {
    if (!x || k_.clip <= 0) return x;
    TensorType t(x->type().dtype(), {});
    return b_.clamp(splatConstant(b_, t, -k_.clip), x, splatConstant(b_, t, k_.clip));
  }
  StatusOr<Value*> act(const RecurrentActivation& a, Value* x) {
    if (!x) return b_.status();
    return activate(b_, a, x);
  }
  StatusOr<Value*> gruStep(Value* xt, Value* hr, Value* r, Value* rbh, Value* h,
                           const RecurrentActivation* acts);
  StatusOr<Dir> lstmStep(Value* xt, Value* hr, Value* p, Dir st, const RecurrentActivation* acts);

  Builder& b_;
  const RecurrenceSpec& k_;
  int64_t steps_, gates_;
};

StatusOr<Value*> Unroller::gruStep(Value* xt, Value* hr, Value* r, Value* rbh, Value* h,
                                   const RecurrentActivation* acts) {
  const int64_t H = k_.hidden;
  KILN_ASSIGN_OR_RETURN(Value * z,
                        act(acts[0], clipped(b_.add(gate(b_, xt, 0, H), gate(b_, hr, 0, H)))));
  KILN_ASSIGN_OR_RETURN(Value * rg,
                        act(acts[0], clipped(b_.add(gate(b_, xt, 1, H), gate(b_, hr, 1, H)))));
  Value* hPart;
  if (k_.linearBeforeReset) {
    hPart = b_.mul(rg, b_.add(gate(b_, hr, 2, H), rbh));
  } else {
    Value* rhRows = sliceAxis(b_, r, 0, 2 * H, 3 * H);
    hPart = b_.dotGeneral(b_.mul(rg, h), rhRows, DotDims{{}, {}, {1}, {1}});
  }
  KILN_ASSIGN_OR_RETURN(Value * hh, act(acts[1], clipped(b_.add(gate(b_, xt, 2, H), hPart))));
  // H = (1 - z) * h~ + z * H_prev
  return b_.add(b_.mul(b_.sub(splat(b_, z, 1), z), hh), b_.mul(z, h));
}

StatusOr<Dir> Unroller::lstmStep(Value* xt, Value* hr, Value* p, Dir st,
                                 const RecurrentActivation* acts) {
  const int64_t H = k_.hidden;
  Value* pre = b_.add(xt, hr);
  auto peep = [&](int64_t g, Value* cs) -> Value* {
    if (!p || !cs) return nullptr;
    Value* pg = sliceAxis(b_, p, 0, g * H, (g + 1) * H);
    return b_.mul(b_.broadcastInDim(pg, cs->type().dims(), {1}), cs);
  };
  Value* ip = gate(b_, pre, 0, H);
  Value* fp = gate(b_, pre, 2, H);
  if (p) {
    ip = b_.add(ip, peep(0, st.cState));
    fp = b_.add(fp, peep(2, st.cState));
  }
  KILN_ASSIGN_OR_RETURN(Value * i, act(acts[0], clipped(ip)));
  KILN_ASSIGN_OR_RETURN(Value * f, act(acts[0], clipped(fp)));
  KILN_ASSIGN_OR_RETURN(Value * g, act(acts[1], clipped(gate(b_, pre, 3, H))));
  st.cState = b_.add(b_.mul(f, st.cState), b_.mul(i, g));
  Value* op = gate(b_, pre, 1, H);
  if (p) op = b_.add(op, peep(1, st.cState));
  KILN_ASSIGN_OR_RETURN(Value * o, act(acts[0], clipped(op)));
  KILN_ASSIGN_OR_RETURN(Value * hc, act(acts[2], st.cState));
  st.h = b_.mul(o, hc);
  return st;
}

StatusOr<Dir> Unroller::direction(const RecurrenceOperands& in, int64_t d,
                                  const RecurrentActivation* acts, bool reverse) {
  const int64_t H = k_.hidden, G = gates_;
  const Dim B = in.x->type().dim(1);
  const DType dt = in.x->type().dtype();
  Value* xw = b_.dotGeneral(in.x, dirSlice(b_, in.w, d), DotDims{{}, {}, {2}, {1}});
  Value* rbh = nullptr;
  const bool lbr = k_.cell == RecurrentCell::Gru && k_.linearBeforeReset;
  if (in.b) {
    Value* bd = dirSlice(b_, in.b, d);
    Value* wb = sliceAxis(b_, bd, 0, 0, G * H);
    Value* rb = sliceAxis(b_, bd, 0, G * H, 2 * G * H);
    if (lbr) {
      // Rbh is added inside the reset product; the other recurrent biases join the input's.
      rbh = b_.broadcastInDim(sliceAxis(b_, rb, 0, 2 * H, 3 * H), {B, Dim(H)}, {1});
      rb = b_.concatenate(
          {sliceAxis(b_, rb, 0, 0, 2 * H), splatConstant(b_, TensorType(dt, {Dim(H)}), 0)}, 0);
    }
    if (xw) xw = b_.add(xw, b_.broadcastInDim(b_.add(wb, rb), xw->type().dims(), {2}));
  } else if (lbr) {
    rbh = splatConstant(b_, TensorType(dt, {B, Dim(H)}), 0);
  }
  Dir st;
  const TensorType stateT(dt, {B, Dim(H)});
  st.h = in.h0 ? dirSlice(b_, in.h0, d) : splatConstant(b_, stateT, 0);
  if (k_.cell == RecurrentCell::Lstm)
    st.cState = in.c0 ? dirSlice(b_, in.c0, d) : splatConstant(b_, stateT, 0);
  Value* p = in.p ? dirSlice(b_, in.p, d) : nullptr;
  Value* r = dirSlice(b_, in.r, d);
  if (!b_.ok()) return b_.status();
  st.ys.resize(static_cast<size_t>(steps_));
  for (int64_t s = 0; s < steps_; ++s) {
    const int64_t t = reverse ? steps_ - 1 - s : s;
    Value* xt = dirSlice(b_, xw, t);
    Value* hr = b_.dotGeneral(st.h, r, DotDims{{}, {}, {1}, {1}});  // H R^T
    if (k_.cell == RecurrentCell::Rnn) {
      KILN_ASSIGN_OR_RETURN(st.h, act(acts[0], clipped(b_.add(xt, hr))));
    } else if (k_.cell == RecurrentCell::Gru) {
      KILN_ASSIGN_OR_RETURN(st.h, gruStep(xt, hr, r, rbh, st.h, acts));
    } else {
      KILN_ASSIGN_OR_RETURN(st, lstmStep(xt, hr, p, std::move(st), acts));
    }
    if (!st.h) return b_.status();
    st.ys[static_cast<size_t>(t)] = st.h;
  }
  return st;
}

}  // namespace

std::vector<RecurrentActivation> defaultActivations(RecurrentCell cell, int64_t dirs) {
  std::vector<std::string> one = cell == RecurrentCell::Rnn ? std::vector<std::string>{"Tanh"}
                                 : cell == RecurrentCell::Gru
                                     ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                     : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<RecurrentActivation> acts;
  for (int64_t d = 0; d < dirs; ++d)
    for (const std::string& n : one) acts.push_back(RecurrentActivation{n, 1, 0});
  return acts;
}

StatusOr<RecurrenceResults> unrollRecurrence(Builder& b, const RecurrenceSpec& spec,
                                             const RecurrenceOperands& in) {
  const TensorType& xt = in.x->type();
  if (xt.rank() != 3 || !xt.dim(0).isStatic() || !xt.dim(1).isStatic())
    return Status::error("x " + xt.str() + " must be 3-D with static steps and batch");
  const int64_t steps = xt.dim(0).value(), B = xt.dim(1).value(), H = spec.hidden;
  const int64_t dirs = spec.bidirectional ? 2 : 1;
  const int64_t gates = spec.cell == RecurrentCell::Rnn   ? 1
                        : spec.cell == RecurrentCell::Gru ? 3
                                                          : 4;
  const size_t perDir = static_cast<size_t>(gates == 4 ? 3 : gates == 3 ? 2 : 1);
  if (spec.activations.size() != perDir * static_cast<size_t>(dirs))
    return Status::error("expected " + std::to_string(perDir * dirs) + " activations, got " +
                         std::to_string(spec.activations.size()));
  Unroller u(b, spec, steps, gates);
  std::vector<Value*> ysDirs, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = spec.reverse || d == 1;
    KILN_ASSIGN_OR_RETURN(
        Dir st, u.direction(in, d, &spec.activations[static_cast<size_t>(d) * perDir], reverse));
    std::vector<Value*> ys;
    for (Value* y : st.ys) ys.push_back(b.reshape(y, {Dim(1), Dim(1), Dim(B), Dim(H)}));
    ysDirs.push_back(ys.size() == 1 ? ys[0] : b.concatenate(ys, 0));
    hs.push_back(b.reshape(st.h, {Dim(1), Dim(B), Dim(H)}));
    if (st.cState) cs.push_back(b.reshape(st.cState, {Dim(1), Dim(B), Dim(H)}));
  }
  RecurrenceResults r;
  r.y = ysDirs.size() == 1 ? ysDirs[0] : b.concatenate(ysDirs, 1);
  r.yh = hs.size() == 1 ? hs[0] : b.concatenate(hs, 0);
  if (!cs.empty()) r.yc = cs.size() == 1 ? cs[0] : b.concatenate(cs, 0);
  if (!b.ok()) return b.status();
  return r;
}

}  // namespace kiln
