// Recurrent ONNX ops (RNN, GRU, LSTM), unrolled over the static sequence length: the input
// projection of all steps is one dot_general, then each step is a small graph of dot_general and
// elementwise ops. Directions forward, reverse and bidirectional; layout 0 and 1; clip; the
// activation functions ONNX lists. Per-batch sequence lengths shorter than the sequence are not
// supported.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// Longest sequence unrolled (each step adds a handful of nodes).
constexpr int64_t kMaxSteps = 4096;

enum class Cell { Rnn, Gru, Lstm };

struct Act {
  std::string name;
  double alpha, beta;
};

StatusOr<Value*> activate(OpContext& c, const Act& a, Value* x) {
  auto k = [&](double v) { return splat(c.b, x, v); };
  const std::string& n = a.name;
  if (n == "Tanh") return c.b.unary(OpCode::Tanh, x);
  if (n == "Sigmoid") return c.b.unary(OpCode::Sigmoid, x);
  if (n == "Relu") return c.b.max(x, k(0));
  if (n == "Affine") return c.b.add(c.b.mul(x, k(a.alpha)), k(a.beta));
  if (n == "LeakyRelu") return c.b.select(c.b.compare("lt", x, k(0)), c.b.mul(x, k(a.alpha)), x);
  if (n == "ThresholdedRelu") return c.b.select(c.b.compare("gt", x, k(a.alpha)), x, k(0));
  if (n == "ScaledTanh") return c.b.mul(k(a.alpha), c.b.unary(OpCode::Tanh, c.b.mul(x, k(a.beta))));
  if (n == "HardSigmoid")
    return c.b.max(k(0), c.b.min(k(1), c.b.add(c.b.mul(x, k(a.alpha)), k(a.beta))));
  if (n == "Elu")
    return c.b.select(c.b.compare("gt", x, k(0)), x,
                      c.b.mul(c.b.unary(OpCode::Expm1, c.b.min(x, k(0))), k(a.alpha)));
  if (n == "Softsign") return c.b.div(x, c.b.add(k(1), c.b.unary(OpCode::Abs, x)));
  if (n == "Softplus") return c.b.unary(OpCode::Log1p, c.b.unary(OpCode::Exp, x));
  return c.unsupported("activation '" + n + "'");
}

// The activation functions of every direction (ONNX defaults, alpha/beta by position).
StatusOr<std::vector<Act>> readActs(OpContext& c, Cell cell, int64_t dirs) {
  std::vector<std::string> dflt = cell == Cell::Rnn ? std::vector<std::string>{"Tanh"}
                                  : cell == Cell::Gru
                                      ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<std::string> names;
  if (const pb::AttributeProto* a = c.rawAttr("activations"))
    for (const auto& s : a->strings()) names.push_back(s);
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), dflt.begin(), dflt.end());
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
  if (!v) return nullptr;
  return sliceAxis(b, v, v->type().rank() - 1, g * h, (g + 1) * h);
}

struct Dir {
  std::vector<Value*> ys;  // per step, [batch, hidden] in time order
  Value* h = nullptr;
  Value* cState = nullptr;
};

struct Ctx {
  Cell cell;
  int64_t hidden, steps, gates;
  double clip;
  bool linearBeforeReset;
};

StatusOr<Value*> clipped(OpContext& c, const Ctx& k, Value* x) {
  ONNX_BUILT(c, x);
  if (k.clip <= 0) return x;
  return c.b.clamp(scalarConst(c.b, x->type().dtype(), -k.clip), x,
                   scalarConst(c.b, x->type().dtype(), k.clip));
}

// One direction: xw [steps, batch, gates*hidden] holds X W^T + biases (except GRU's Rbh when
// linear_before_reset).
StatusOr<Dir> runDirection(OpContext& c, const Ctx& k, Value* xw, Value* r, Value* rbh, Value* p,
                           Dir st, const Act* acts, bool reverse) {
  int64_t H = k.hidden;
  std::vector<Value*> ys(static_cast<size_t>(k.steps));
  for (int64_t s = 0; s < k.steps; ++s) {
    int64_t t = reverse ? k.steps - 1 - s : s;
    Value* xt = dirSlice(c.b, xw, t);
    Value* hr = c.b.dotGeneral(st.h, r, DotDims{{}, {}, {1}, {1}});  // H R^T
    ONNX_BUILT(c, xt);
    ONNX_BUILT(c, hr);
    if (k.cell == Cell::Rnn) {
      KILN_ASSIGN_OR_RETURN(Value * pre, clipped(c, k, c.b.add(xt, hr)));
      KILN_ASSIGN_OR_RETURN(st.h, activate(c, acts[0], pre));
    } else if (k.cell == Cell::Gru) {
      KILN_ASSIGN_OR_RETURN(Value * zp,
                            clipped(c, k, c.b.add(gate(c.b, xt, 0, H), gate(c.b, hr, 0, H))));
      KILN_ASSIGN_OR_RETURN(Value * rp,
                            clipped(c, k, c.b.add(gate(c.b, xt, 1, H), gate(c.b, hr, 1, H))));
      KILN_ASSIGN_OR_RETURN(Value * z, activate(c, acts[0], zp));
      KILN_ASSIGN_OR_RETURN(Value * rg, activate(c, acts[0], rp));
      Value* hPart;
      if (k.linearBeforeReset) {
        Value* lin = c.b.add(gate(c.b, hr, 2, H), rbh);
        hPart = c.b.mul(rg, lin);
      } else {
        Value* rhRows = sliceAxis(c.b, r, 0, 2 * H, 3 * H);
        hPart = c.b.dotGeneral(c.b.mul(rg, st.h), rhRows, DotDims{{}, {}, {1}, {1}});
      }
      KILN_ASSIGN_OR_RETURN(Value * hp, clipped(c, k, c.b.add(gate(c.b, xt, 2, H), hPart)));
      KILN_ASSIGN_OR_RETURN(Value * hh, activate(c, acts[1], hp));
      // H = (1 - z) * h~ + z * H_prev
      st.h = c.b.add(c.b.mul(c.b.sub(splat(c.b, z, 1), z), hh), c.b.mul(z, st.h));
    } else {
      Value* pre = c.b.add(xt, hr);
      auto peep = [&](int64_t g, Value* cs) -> Value* {
        if (!p || !cs) return nullptr;
        Value* pg = sliceAxis(c.b, p, 0, g * H, (g + 1) * H);
        return c.b.mul(c.b.broadcastInDim(pg, cs->type().dims(), {1}), cs);
      };
      Value* ip = gate(c.b, pre, 0, H);
      Value* fp = gate(c.b, pre, 2, H);
      if (p) {
        ip = c.b.add(ip, peep(0, st.cState));
        fp = c.b.add(fp, peep(2, st.cState));
      }
      KILN_ASSIGN_OR_RETURN(Value * ic, clipped(c, k, ip));
      KILN_ASSIGN_OR_RETURN(Value * fc, clipped(c, k, fp));
      KILN_ASSIGN_OR_RETURN(Value * cc, clipped(c, k, gate(c.b, pre, 3, H)));
      KILN_ASSIGN_OR_RETURN(Value * i, activate(c, acts[0], ic));
      KILN_ASSIGN_OR_RETURN(Value * f, activate(c, acts[0], fc));
      KILN_ASSIGN_OR_RETURN(Value * g, activate(c, acts[1], cc));
      st.cState = c.b.add(c.b.mul(f, st.cState), c.b.mul(i, g));
      Value* op = gate(c.b, pre, 1, H);
      if (p) op = c.b.add(op, peep(1, st.cState));
      KILN_ASSIGN_OR_RETURN(Value * oc, clipped(c, k, op));
      KILN_ASSIGN_OR_RETURN(Value * o, activate(c, acts[0], oc));
      KILN_ASSIGN_OR_RETURN(Value * hc, activate(c, acts[2], st.cState));
      st.h = c.b.mul(o, hc);
    }
    ONNX_BUILT(c, st.h);
    ys[static_cast<size_t>(t)] = st.h;
  }
  st.ys = std::move(ys);
  return st;
}

struct Inputs {
  Value* x;   // [steps, batch, input]
  Value* w;   // [dirs, gates*hidden, input]
  Value* r;   // [dirs, gates*hidden, hidden]
  Value* b;   // [dirs, 2*gates*hidden] or null
  Value* h0;  // [dirs, batch, hidden] or null
  Value* c0;  // LSTM: [dirs, batch, hidden] or null
  Value* p;   // LSTM peepholes [dirs, 3*hidden] or null
  int64_t batch;
};

// One direction d: the input projection of every step (X W^T plus the biases), then the steps.
StatusOr<Dir> direction(OpContext& c, const Ctx& k, const Inputs& in, int64_t d, const Act* acts,
                        bool reverse) {
  int64_t H = k.hidden, G = k.gates, B = in.batch;
  DType dt = in.x->type().dtype();
  Value* xw = c.b.dotGeneral(in.x, dirSlice(c.b, in.w, d), DotDims{{}, {}, {2}, {1}});
  ONNX_BUILT(c, xw);
  Value* rbh = nullptr;
  if (in.b) {
    Value* bd = dirSlice(c.b, in.b, d);
    Value* wb = sliceAxis(c.b, bd, 0, 0, G * H);
    Value* rb = sliceAxis(c.b, bd, 0, G * H, 2 * G * H);
    if (k.cell == Cell::Gru && k.linearBeforeReset) {
      // Rbh is added inside the reset product; the other recurrent biases join the input's.
      rbh = c.b.broadcastInDim(sliceAxis(c.b, rb, 0, 2 * H, 3 * H), {Dim(B), Dim(H)}, {1});
      rb = c.b.concatenate(
          {sliceAxis(c.b, rb, 0, 0, 2 * H), splatType(c.b, TensorType(dt, {Dim(H)}), 0)}, 0);
    }
    xw = c.b.add(xw, c.b.broadcastInDim(c.b.add(wb, rb), xw->type().dims(), {2}));
  } else if (k.cell == Cell::Gru && k.linearBeforeReset) {
    rbh = splatType(c.b, TensorType(dt, {Dim(B), Dim(H)}), 0);
  }
  Dir st;
  TensorType stateT(dt, {Dim(B), Dim(H)});
  st.h = in.h0 ? dirSlice(c.b, in.h0, d) : splatType(c.b, stateT, 0);
  if (k.cell == Cell::Lstm) st.cState = in.c0 ? dirSlice(c.b, in.c0, d) : splatType(c.b, stateT, 0);
  Value* p = in.p ? dirSlice(c.b, in.p, d) : nullptr;
  return runDirection(c, k, xw, dirSlice(c.b, in.r, d), rbh, p, st, acts, reverse);
}

// Checks W against hidden_size (which bounds every extent the unrolling makes).
Status checkWeights(OpContext& c, const Ctx& k, Value* w, int64_t dirs) {
  const TensorType& t = w->type();
  if (k.hidden <= 0 || k.hidden > (int64_t(1) << 24))
    return c.err("attribute 'hidden_size' must be in [1, 2^24]");
  if (t.rank() != 3 || t.dim(0) != Dim(dirs) || t.dim(1) != Dim(k.gates * k.hidden))
    return c.err("W " + t.str() + " does not match " + std::to_string(dirs) + " directions of " +
                 std::to_string(k.gates) + " gates of hidden size " + std::to_string(k.hidden));
  return Status::ok();
}

void setRecurrentOutputs(OpContext& c, const std::vector<Dir>& dirs, int64_t B, int64_t H,
                         bool batchFirst);

Status recurrent(OpContext& c, Cell cell) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t layout = c.attrInt("layout", 0);
  if (x->type().rank() != 3) return c.err("X must be 3-D, got " + x->type().str());
  if (layout == 1) x = c.b.transpose(x, {1, 0, 2});
  ONNX_BUILT(c, x);
  KILN_ASSIGN_OR_RETURN(auto xd, staticDims(c, x, 0, "X"));
  Ctx k{cell,
        c.attrInt("hidden_size", 0),
        xd[0],
        cell == Cell::Rnn   ? 1
        : cell == Cell::Gru ? 3
                            : 4,
        c.attrFloat("clip", 0.0),
        c.attrInt("linear_before_reset", 0) != 0};
  if (k.steps > kMaxSteps)
    return c.unsupported("sequences longer than " + std::to_string(kMaxSteps));
  if (cell == Cell::Lstm && c.attrInt("input_forget", 0) != 0)
    return c.unsupported("input_forget = 1 is not supported");
  std::string dirName = c.attrString("direction", "forward");
  int64_t dirs = dirName == "bidirectional" ? 2 : 1;
  if (dirName != "forward" && dirName != "reverse" && dirs != 2)
    return c.err("direction '" + dirName + "' is not forward, reverse or bidirectional");
  Inputs in{x,
            nullptr,
            nullptr,
            c.in(3),
            c.in(5),
            cell == Cell::Lstm ? c.in(6) : nullptr,
            cell == Cell::Lstm ? c.in(7) : nullptr,
            xd[1]};
  KILN_ASSIGN_OR_RETURN(in.w, c.req(1));
  KILN_ASSIGN_OR_RETURN(in.r, c.req(2));
  KILN_RETURN_IF_ERROR(checkWeights(c, k, in.w, dirs));
  if (c.has(4)) {
    KILN_ASSIGN_OR_RETURN(auto lens, c.knownInts(4, "the sequence lengths"));
    for (int64_t l : lens)
      if (l != k.steps) return c.unsupported("sequence lengths shorter than the sequence");
  }
  KILN_ASSIGN_OR_RETURN(auto acts, readActs(c, cell, dirs));
  if (layout == 1) {
    if (in.h0) in.h0 = c.b.transpose(in.h0, {1, 0, 2});
    if (in.c0) in.c0 = c.b.transpose(in.c0, {1, 0, 2});
  }
  std::vector<Dir> results;
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = dirName == "reverse" || d == 1;
    KILN_ASSIGN_OR_RETURN(
        Dir st,
        direction(c, k, in, d, &acts[static_cast<size_t>(d) * acts.size() / dirs], reverse));
    results.push_back(std::move(st));
  }
  setRecurrentOutputs(c, results, in.batch, k.hidden, layout == 1);
  return Status::ok();
}

// Y [steps, dirs, batch, hidden], Y_h and Y_c [dirs, batch, hidden] (batch first for layout 1).
void setRecurrentOutputs(OpContext& c, const std::vector<Dir>& dirs, int64_t B, int64_t H,
                         bool batchFirst) {
  std::vector<Value*> ysDirs, hs, cs;
  for (const Dir& st : dirs) {
    std::vector<Value*> steps;
    for (Value* y : st.ys) steps.push_back(c.b.reshape(y, {Dim(1), Dim(1), Dim(B), Dim(H)}));
    ysDirs.push_back(steps.size() == 1 ? steps[0] : c.b.concatenate(steps, 0));
    hs.push_back(c.b.reshape(st.h, {Dim(1), Dim(B), Dim(H)}));
    if (st.cState) cs.push_back(c.b.reshape(st.cState, {Dim(1), Dim(B), Dim(H)}));
  }
  Value* y = ysDirs.size() == 1 ? ysDirs[0] : c.b.concatenate(ysDirs, 1);
  Value* yh = hs.size() == 1 ? hs[0] : c.b.concatenate(hs, 0);
  Value* yc = cs.empty() ? nullptr : cs.size() == 1 ? cs[0] : c.b.concatenate(cs, 0);
  if (batchFirst) {
    y = c.b.transpose(y, {2, 0, 1, 3});
    yh = c.b.transpose(yh, {1, 0, 2});
    if (yc) yc = c.b.transpose(yc, {1, 0, 2});
  }
  c.setOutput(0, y);
  c.setOutput(1, yh);
  if (yc) c.setOutput(2, yc);
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
