// Reference kernels of the composite ops: softmax, log_softmax, layer_norm, batch_norm_inference,
// gelu, attention, lstm and gru (semantics in docs/ops.md).
//
// These are computed directly with loops, not through the ops' decompositions: the decompose-
// composites pass is checked against these kernels, so they must not share its code. Work is done
// in double for f32/f64 and in float for f16/bf16, rounding once when the result is stored.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "interp/eval.h"
#include "interp/eval_util.h"

namespace kiln::interp {
namespace {

// Working precision: f16/bf16 in f32 (as the op contract says), f32 and f64 in double.
template <DType D>
using Work = std::conditional_t<D == DType::F16 || D == DType::BF16, float, double>;

// A kernel error; the driver puts the node's name and location in front.
Status fail(const EvalContext&, const std::string& msg) { return Status::error(msg); }

// A result of `dims`, checked against the node's result type: the kernels compute result dims
// from the operand values, and a disagreement (possible only when symbolic dims were bound
// inconsistently) is reported rather than trusted.
StatusOr<Tensor> newResult(const EvalContext& c, DType dtype, const std::vector<int64_t>& dims) {
  TensorType t = TensorType::of(dtype, dims);
  if (!c.resultTypes.empty() && c.resultTypes[0] != t)
    return fail(c, "operands give result type " + t.str() + " but the node declares " +
                       c.resultTypes[0].str());
  return Tensor::create(dtype, dims);
}

template <DType D>
std::vector<Work<D>> loadAll(const Tensor& t) {
  std::vector<Work<D>> v(static_cast<size_t>(t.numElements()));
  const Storage<D>* p = t.data<Storage<D>>();
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<Work<D>>(load<D>(p, static_cast<int64_t>(i)));
  return v;
}

template <DType D>
void storeAll(Tensor& t, const std::vector<Work<D>>& v) {
  Storage<D>* p = t.mutableData<Storage<D>>();
  for (size_t i = 0; i < v.size(); ++i)
    store<D>(p, static_cast<int64_t>(i), static_cast<Compute<D>>(v[i]));
}

// Runs f(tag) for a float dtype; every composite is float-only (its type rule says so), and the
// other dtypes are not instantiated at all.
template <typename F>
EvalResult withFloatDType(const EvalContext& c, DType t, F&& f) {
  switch (t) {
    case DType::F16: return f(DTypeTag<DType::F16>{});
    case DType::BF16: return f(DTypeTag<DType::BF16>{});
    case DType::F32: return f(DTypeTag<DType::F32>{});
    case DType::F64: return f(DTypeTag<DType::F64>{});
    default: break;
  }
  return fail(c, "operand must be a float type, got " + std::string(dtypeName(t)));
}

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

// softmax / log_softmax of one strided line of n elements, in place. NaN anywhere makes the
// line NaN, and a line of -inf gives NaN (exp(-inf - -inf)), as the decomposition does.
template <typename W>
void softmaxLine(W* x, int64_t n, int64_t stride, bool logarithm) {
  W m = -std::numeric_limits<W>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    W v = x[j * stride];
    if (std::isnan(m) || std::isnan(v)) m = std::numeric_limits<W>::quiet_NaN();
    else if (v > m) m = v;
  }
  W sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j * stride] - m);
  W logSum = std::log(sum);
  for (int64_t j = 0; j < n; ++j) {
    W& v = x[j * stride];
    v = logarithm ? v - m - logSum : std::exp(v - m) / sum;
  }
}

EvalResult evalSoftmax(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  int64_t axis = c.node.attrInt("axis");
  if (axis < 0 || axis >= x.rank()) return fail(c, "axis out of range");
  size_t a = static_cast<size_t>(axis);
  int64_t outer = product(x.dims(), 0, a), n = x.dims()[a],
          inner = product(x.dims(), a + 1, x.dims().size());
  bool logarithm = c.node.op() == OpCode::LogSoftmax;
  return withFloatDType(c, x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    auto v = loadAll<D>(x);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        softmaxLine(v.data() + o * n * inner + i, n, inner, logarithm);
    KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, x.dtype(), x.dims()));
    storeAll<D>(out, v);
    return std::vector<Tensor>{std::move(out)};
  });
}

// ---------------------------------------------------------------------------------------------
// layer_norm, batch_norm_inference

EvalResult evalLayerNorm(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  int64_t axis = c.node.attrInt("axis");
  if (axis < 0 || axis >= x.rank()) return fail(c, "axis out of range");
  std::vector<int64_t> normDims(x.dims().begin() + axis, x.dims().end());
  for (size_t i = 1; i < c.operands.size(); ++i)
    if (c.operands[i].dims() != normDims || c.operands[i].dtype() != x.dtype())
      return fail(c, std::string(i == 1 ? "scale" : "bias") + " " + c.operands[i].type().str() +
                         " must be " + TensorType::of(x.dtype(), normDims).str());
  int64_t inner = product(normDims, 0, normDims.size());
  int64_t outer = inner == 0 ? 0 : x.numElements() / inner;
  double eps = c.node.attrFloat("epsilon");
  bool hasBias = c.operands.size() > 2;
  return withFloatDType(c, x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    using W = Work<D>;
    auto v = loadAll<D>(x), scale = loadAll<D>(c.operands[1]);
    std::vector<W> bias = hasBias ? loadAll<D>(c.operands[2]) : std::vector<W>(scale.size(), W(0));
    for (int64_t o = 0; o < outer; ++o) {
      W* row = v.data() + o * inner;
      W mean = 0, var = 0;
      for (int64_t j = 0; j < inner; ++j) mean += row[j];
      mean /= static_cast<W>(inner);
      for (int64_t j = 0; j < inner; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<W>(inner);
      W inv = W(1) / std::sqrt(var + static_cast<W>(eps));
      for (int64_t j = 0; j < inner; ++j)
        row[j] =
            (row[j] - mean) * inv * scale[static_cast<size_t>(j)] + bias[static_cast<size_t>(j)];
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, x.dtype(), x.dims()));
    storeAll<D>(out, v);
    return std::vector<Tensor>{std::move(out)};
  });
}

EvalResult evalBatchNorm(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  int64_t fi = c.node.attrInt("feature_index");
  if (fi < 0 || fi >= x.rank()) return fail(c, "feature_index out of range");
  size_t f = static_cast<size_t>(fi);
  int64_t outer = product(x.dims(), 0, f), features = x.dims()[f],
          inner = product(x.dims(), f + 1, x.dims().size());
  for (size_t i = 1; i < 5; ++i)
    if (c.operands[i].dims() != std::vector<int64_t>{features} ||
        c.operands[i].dtype() != x.dtype())
      return fail(c, "operand " + std::to_string(i) + " " + c.operands[i].type().str() +
                         " must be " + TensorType::of(x.dtype(), {features}).str());
  double eps = c.node.attrFloat("epsilon");
  return withFloatDType(c, x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    using W = Work<D>;
    auto v = loadAll<D>(x), scale = loadAll<D>(c.operands[1]), offset = loadAll<D>(c.operands[2]),
         mean = loadAll<D>(c.operands[3]), var = loadAll<D>(c.operands[4]);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ch = 0; ch < features; ++ch) {
        size_t k = static_cast<size_t>(ch);
        W inv = W(1) / std::sqrt(var[k] + static_cast<W>(eps));
        W* p = v.data() + (o * features + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) p[i] = (p[i] - mean[k]) * inv * scale[k] + offset[k];
      }
    KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, x.dtype(), x.dims()));
    storeAll<D>(out, v);
    return std::vector<Tensor>{std::move(out)};
  });
}

// ---------------------------------------------------------------------------------------------
// gelu

EvalResult evalGelu(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  bool tanhForm = c.node.attrEnum("approximate") == "tanh";
  return withFloatDType(c, x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    using W = Work<D>;
    auto v = loadAll<D>(x);
    const W sqrt2 = static_cast<W>(std::sqrt(2.0));
    const W sqrt2OverPi = static_cast<W>(std::sqrt(2.0 / 3.14159265358979323846));
    for (W& e : v) {
      W inner =
          tanhForm ? std::tanh(sqrt2OverPi * (e + W(0.044715) * e * e * e)) : std::erf(e / sqrt2);
      e = W(0.5) * e * (W(1) + inner);
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, x.dtype(), x.dims()));
    storeAll<D>(out, v);
    return std::vector<Tensor>{std::move(out)};
  });
}

// ---------------------------------------------------------------------------------------------
// attention

struct AttentionShape {
  int64_t batch, sq, sk, d, dv;
};

// Checks q/k/v/mask extents against each other (the type rule did so for the declared types;
// concrete values are checked again because symbolic dims are bound per run).
StatusOr<AttentionShape> attentionShape(const EvalContext& c) {
  const Tensor &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
  size_t r = static_cast<size_t>(q.rank());
  if (r < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    return fail(c, "q, k and v need one rank of at least 2");
  for (size_t i = 0; i + 2 < r; ++i)
    if (q.dims()[i] != k.dims()[i] || q.dims()[i] != v.dims()[i])
      return fail(c, "q, k and v must share leading dimensions");
  AttentionShape s{product(q.dims(), 0, r - 2), q.dims()[r - 2], k.dims()[r - 2], q.dims()[r - 1],
                   v.dims()[r - 1]};
  if (k.dims()[r - 1] != s.d) return fail(c, "q and k head sizes differ");
  if (v.dims()[r - 2] != s.sk) return fail(c, "k and v sequence lengths differ");
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    return fail(c, "q, k and v must share a dtype");
  if (c.operands.size() == 4) {
    std::vector<int64_t> want = q.dims();
    want[r - 1] = s.sk;
    const Tensor& m = c.operands[3];
    if (m.dims() != want || (m.dtype() != DType::Bool && m.dtype() != q.dtype()))
      return fail(c, "mask " + m.type().str() + " must be bool or " +
                         std::string(dtypeName(q.dtype())) + " of shape " +
                         TensorType::of(q.dtype(), want).str());
  }
  return s;
}

// Scores of one query row: scale * q.k + mask term, -inf where masked out or causally hidden.
template <DType D>
void attentionScores(const std::vector<Work<D>>& q, const std::vector<Work<D>>& k,
                     const Tensor* mask, const AttentionShape& s, int64_t b, int64_t i,
                     Work<D> scale, bool causal, std::vector<Work<D>>& scores) {
  using W = Work<D>;
  const W* qRow = q.data() + (b * s.sq + i) * s.d;
  int64_t maskRow = (b * s.sq + i) * s.sk;
  for (int64_t j = 0; j < s.sk; ++j) {
    const W* kRow = k.data() + (b * s.sk + j) * s.d;
    W dot = 0;
    for (int64_t e = 0; e < s.d; ++e) dot += qRow[e] * kRow[e];
    W score = scale * dot;
    if (mask && mask->dtype() == DType::Bool) {
      if (!mask->data<uint8_t>()[maskRow + j]) score = -std::numeric_limits<W>::infinity();
    } else if (mask) {
      score += static_cast<W>(load<D>(mask->data<Storage<D>>(), maskRow + j));
    }
    // Bottom-right aligned: the last query sees every key.
    if (causal && j > i + (s.sk - s.sq)) score = -std::numeric_limits<W>::infinity();
    scores[static_cast<size_t>(j)] = score;
  }
}

EvalResult evalAttention(const EvalContext& c) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, attentionShape(c));
  const Tensor& q = c.operands[0];
  const Tensor* mask = c.operands.size() == 4 ? &c.operands[3] : nullptr;
  bool causal = c.node.attrBool("causal");
  double scale = hasAttr(c.node.attrs(), "scale") ? c.node.attrFloat("scale")
                                                  : 1.0 / std::sqrt(static_cast<double>(s.d));
  std::vector<int64_t> outDims = q.dims();
  outDims.back() = s.dv;
  return withFloatDType(c, q.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    using W = Work<D>;
    auto qv = loadAll<D>(q), kv = loadAll<D>(c.operands[1]), vv = loadAll<D>(c.operands[2]);
    std::vector<W> scores(static_cast<size_t>(s.sk)),
        out(static_cast<size_t>(s.batch * s.sq * s.dv), W(0));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.sq; ++i) {
        attentionScores<D>(qv, kv, mask, s, b, i, static_cast<W>(scale), causal, scores);
        softmaxLine(scores.data(), s.sk, 1, false);
        W* o = out.data() + (b * s.sq + i) * s.dv;
        for (int64_t j = 0; j < s.sk; ++j) {
          const W* vRow = vv.data() + (b * s.sk + j) * s.dv;
          for (int64_t e = 0; e < s.dv; ++e) o[e] += scores[static_cast<size_t>(j)] * vRow[e];
        }
      }
    KILN_ASSIGN_OR_RETURN(Tensor result, newResult(c, q.dtype(), outDims));
    storeAll<D>(result, out);
    return std::vector<Tensor>{std::move(result)};
  });
}

// ---------------------------------------------------------------------------------------------
// lstm and gru: the ONNX cells with their default activations (docs/ops.md), step by step.

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// One direction d of a recurrence over all steps: writes y [S, B, D*H] at column offset d*H and
// the final states hT (and cT) [B, H].
struct Recurrence {
  bool lstm, linearBeforeReset;
  int64_t steps, batch, input, hidden, dirs;
  std::vector<double> x, w, r, b, h0, c0;
};

void runDirection(const Recurrence& k, int64_t d, bool reverse, std::vector<double>& y,
                  std::vector<double>& hT, std::vector<double>& cT) {
  const int64_t H = k.hidden, G = k.lstm ? 4 : 3, B = k.batch, I = k.input;
  const double* w = k.w.data() + d * G * H * I;
  const double* r = k.r.data() + d * G * H * H;
  const double* wb = k.b.data() + d * 2 * G * H;
  const double* rb = wb + G * H;
  std::vector<double> h(k.h0.begin() + d * B * H, k.h0.begin() + (d + 1) * B * H), c;
  if (k.lstm) c.assign(k.c0.begin() + d * B * H, k.c0.begin() + (d + 1) * B * H);
  std::vector<double> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H));
  for (int64_t s = 0; s < k.steps; ++s) {
    const int64_t t = reverse ? k.steps - 1 - s : s;
    std::vector<double> next = h;
    for (int64_t n = 0; n < B; ++n) {
      const double* xt = k.x.data() + (t * B + n) * I;
      const double* hp = h.data() + n * H;
      for (int64_t j = 0; j < G * H; ++j) {
        double a = wb[j], e = rb[j];
        for (int64_t i = 0; i < I; ++i) a += xt[i] * w[j * I + i];
        for (int64_t i = 0; i < H; ++i) e += hp[i] * r[j * H + i];
        xw[static_cast<size_t>(j)] = a;
        hr[static_cast<size_t>(j)] = e;
      }
      auto at = [&](const std::vector<double>& v, int64_t g, int64_t j) {
        return v[static_cast<size_t>(g * H + j)];
      };
      std::vector<double> rh(static_cast<size_t>(H));  // gru: r * h_prev
      for (int64_t j = 0; j < H && !k.lstm; ++j)
        rh[static_cast<size_t>(j)] = sigmoid(at(xw, 1, j) + at(hr, 1, j)) * hp[j];
      for (int64_t j = 0; j < H; ++j) {
        double out;
        if (k.lstm) {  // gates i, o, f, c
          double i = sigmoid(at(xw, 0, j) + at(hr, 0, j)), o = sigmoid(at(xw, 1, j) + at(hr, 1, j));
          double f = sigmoid(at(xw, 2, j) + at(hr, 2, j)),
                 g = std::tanh(at(xw, 3, j) + at(hr, 3, j));
          double& cs = c[static_cast<size_t>(n * H + j)];
          cs = f * cs + i * g;
          out = o * std::tanh(cs);
        } else {  // gates z, r, h
          double z = sigmoid(at(xw, 0, j) + at(hr, 0, j));
          double rg = sigmoid(at(xw, 1, j) + at(hr, 1, j));
          double lin = at(hr, 2, j);   // h_prev R_h^T + Rb_h
          if (!k.linearBeforeReset) {  // (r * h_prev) R_h^T + Rb_h
            lin = rb[2 * H + j];
            for (int64_t i = 0; i < H; ++i)
              lin += rh[static_cast<size_t>(i)] * r[(2 * H + j) * H + i];
            rg = 1;
          }
          double hh = std::tanh(at(xw, 2, j) + rg * lin);
          out = (1 - z) * hh + z * hp[j];
        }
        next[static_cast<size_t>(n * H + j)] = out;
        y[static_cast<size_t>((t * B + n) * k.dirs * H + d * H + j)] = out;
      }
    }
    h = std::move(next);
  }
  hT = std::move(h);
  cT = std::move(c);
}

EvalResult evalRecurrence(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  Recurrence k;
  k.lstm = c.node.op() == OpCode::Lstm;
  k.linearBeforeReset = !k.lstm && c.node.attrBool("linear_before_reset");
  const bool bidirectional = c.node.attrEnum("direction") == "bidirectional";
  const bool reverse = c.node.attrEnum("direction") == "reverse";
  k.dirs = bidirectional ? 2 : 1;
  if (x.rank() != 3 || c.operands[2].rank() != 3) return fail(c, "x and r must be 3-D");
  k.steps = x.dims()[0];
  k.batch = x.dims()[1];
  k.input = x.dims()[2];
  k.hidden = c.operands[2].dims()[2];
  const int64_t G = k.lstm ? 4 : 3;
  const std::vector<std::vector<int64_t>> want = {
      {k.steps, k.batch, k.input},      {k.dirs, G * k.hidden, k.input},
      {k.dirs, G * k.hidden, k.hidden}, {k.dirs, 2 * G * k.hidden},
      {k.dirs, k.batch, k.hidden},      {k.dirs, k.batch, k.hidden}};
  for (size_t i = 0; i < c.operands.size(); ++i)
    if (c.operands[i].dims() != want[i] || c.operands[i].dtype() != x.dtype())
      return fail(c, "operand " + std::to_string(i) + " " + c.operands[i].type().str() +
                         " does not fit x " + x.type().str());
  return withFloatDType(c, x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    auto toDouble = [](const std::vector<Work<D>>& v) {
      return std::vector<double>(v.begin(), v.end());
    };
    std::vector<double>* fields[] = {&k.x, &k.w, &k.r, &k.b, &k.h0, &k.c0};
    for (size_t i = 0; i < c.operands.size(); ++i) *fields[i] = toDouble(loadAll<D>(c.operands[i]));
    std::vector<double> y(static_cast<size_t>(k.steps * k.batch * k.dirs * k.hidden));
    std::vector<double> hs, cs;
    for (int64_t d = 0; d < k.dirs; ++d) {
      std::vector<double> hT, cT;
      runDirection(k, d, reverse || d == 1, y, hT, cT);
      hs.insert(hs.end(), hT.begin(), hT.end());
      cs.insert(cs.end(), cT.begin(), cT.end());
    }
    std::vector<Tensor> results;
    for (const std::vector<double>* v : {&y, &hs, &cs}) {
      if (results.size() == c.node.numResults()) break;
      const std::vector<int64_t> dims =
          v == &y ? std::vector<int64_t>{k.steps, k.batch, k.dirs * k.hidden} : want[4];
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(x.dtype(), dims));
      storeAll<D>(t, std::vector<Work<D>>(v->begin(), v->end()));
      results.push_back(std::move(t));
    }
    return results;
  });
}

}  // namespace

EvalResult evalComposite(const EvalContext& c) {
  switch (c.node.op()) {
    case OpCode::Softmax:
    case OpCode::LogSoftmax: return evalSoftmax(c);
    case OpCode::LayerNorm: return evalLayerNorm(c);
    case OpCode::BatchNormInference: return evalBatchNorm(c);
    case OpCode::Gelu: return evalGelu(c);
    case OpCode::Attention: return evalAttention(c);
    case OpCode::Lstm:
    case OpCode::Gru: return evalRecurrence(c);
    default: break;
  }
  return fail(c, std::string(opName(c.node.op())) + " is not a composite op");
}

}  // namespace kiln::interp
