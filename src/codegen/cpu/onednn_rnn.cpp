// lstm and gru as one oneDNN recurrent primitive each (lstm_forward, gru_forward, lbr_gru_forward
// for linear_before_reset): the whole sequence in one call, the input projection of all steps as
// one matrix product and each step's recurrent product on weights packed once. See onednn.h.
//
// Layouts: x [S, B, I] is oneDNN's tnc source; y [S, B, D*H] its tnc destination (bidirectional:
// the directions concatenated along channels); h0, c0, y_h, y_c [D, B, H] its ldnc states with one
// layer. The weights w [D, G*H, I] and r [D, G*H, H] are ldgoi with ONNX's gate order; oneDNN's is
// i f c o for the LSTM (ONNX: i o f c) and u r o for the GRU (ONNX's z r h), so the LSTM's gates
// are permuted while the constant weights are packed. The biases: b_x + b_h per gate, and for
// linear_before_reset a fourth gate holding the candidate's recurrent bias (oneDNN's b_u').
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/cpu/onednn_internal.h"

namespace kiln::codegen::cpu::onednn {
namespace {

using tag = memory::format_tag;

struct RnnShape {
  bool lstm = false, lbr = false;
  int64_t steps = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 0;
  dnnl::rnn_direction direction = dnnl::rnn_direction::unidirectional_left2right;
  std::string directionName;
};

StatusOr<RnnShape> rnnShape(const Node& n) {
  RnnShape s;
  s.lstm = n.op() == OpCode::Lstm;
  s.lbr = !s.lstm && n.attrBool("linear_before_reset");
  s.gates = s.lstm ? 4 : 3;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> x, f32Dims(n.operand(0), "x"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> r, f32Dims(n.operand(2), "r"));
  for (size_t i = 1; i < n.numOperands(); ++i)
    KILN_RETURN_IF_ERROR(f32Dims(n.operand(i), "an operand").status());
  s.steps = x[0];
  s.batch = x[1];
  s.input = x[2];
  s.hidden = r[2];
  s.directionName = n.attrEnum("direction");
  s.dirs = s.directionName == "bidirectional" ? 2 : 1;
  s.direction = s.dirs == 2                    ? dnnl::rnn_direction::bidirectional_concat
                : s.directionName == "reverse" ? dnnl::rnn_direction::unidirectional_right2left
                                               : dnnl::rnn_direction::unidirectional_left2right;
  for (size_t i = 1; i <= 3; ++i)
    KILN_RETURN_IF_ERROR(constantOperand(n, i, i == 1 ? "w" : i == 2 ? "r" : "b").status());
  return s;
}

// The ONNX gate that oneDNN's gate g reads.
int64_t onnxGate(const RnnShape& s, int64_t g) {
  static const int64_t kLstm[] = {0, 2, 3, 1};  // i f c o <- i o f c
  return s.lstm ? kLstm[g] : g;
}

// w or r [D, G*H, K] with the gates in oneDNN's order (still ldgoi).
std::vector<float> permutedWeights(const RnnShape& s, const Tensor& t, int64_t k) {
  const float* src = t.data<float>();
  const int64_t H = s.hidden, G = s.gates;
  std::vector<float> out(static_cast<size_t>(s.dirs * G * H * k));
  for (int64_t d = 0; d < s.dirs; ++d)
    for (int64_t g = 0; g < G; ++g)
      std::memcpy(out.data() + (d * G + g) * H * k, src + (d * G + onnxGate(s, g)) * H * k,
                  static_cast<size_t>(H * k) * sizeof(float));
  return out;
}

// oneDNN's bias [1, D, G (+1 for linear_before_reset), H] from ONNX's b [D, 2*G*H].
std::vector<float> bias(const RnnShape& s, const Tensor& t) {
  const float* b = t.data<float>();
  const int64_t H = s.hidden, G = s.gates, out = G + (s.lbr ? 1 : 0);
  std::vector<float> v(static_cast<size_t>(s.dirs * out * H));
  for (int64_t d = 0; d < s.dirs; ++d) {
    const float* wb = b + d * 2 * G * H;
    const float* rb = wb + G * H;
    float* o = v.data() + d * out * H;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t src = onnxGate(s, g) * H;
      // linear_before_reset: the candidate's recurrent bias is added inside the reset product.
      const bool inside = s.lbr && g == 2;
      for (int64_t h = 0; h < H; ++h) o[g * H + h] = wb[src + h] + (inside ? 0.f : rb[src + h]);
    }
    if (s.lbr)
      for (int64_t h = 0; h < H; ++h) o[3 * H + h] = rb[2 * H + h];
  }
  return v;
}

memory::desc f32(const Dims& dims, tag t) { return memory::desc(dims, memory::data_type::f32, t); }

struct Descs {
  memory::desc srcLayer, state, weightsLayer, weightsIter, bias, dstLayer;
};

Descs descs(const RnnShape& s, bool anyWeights) {
  const int64_t G = s.gates, H = s.hidden;
  const tag w = anyWeights ? tag::any : tag::ldgoi;
  return Descs{f32({s.steps, s.batch, s.input}, tag::tnc),
               f32({1, s.dirs, s.batch, H}, tag::ldnc),
               f32({1, s.dirs, s.input, G, H}, w),
               f32({1, s.dirs, H, G, H}, w),
               f32({1, s.dirs, G + (s.lbr ? 1 : 0), H}, tag::ldgo),
               f32({s.steps, s.batch, s.dirs * H}, tag::tnc)};
}

dnnl::primitive_desc primitiveDesc(const RnnShape& s, const Descs& d) {
  const dnnl::engine& eng = cpuEngine();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto prop = dnnl::prop_kind::forward_inference;
  if (s.lstm)
    return dnnl::lstm_forward::primitive_desc(
        dnnl::lstm_forward::desc(prop, s.direction, d.srcLayer, d.state, d.state, d.weightsLayer,
                                 d.weightsIter, d.bias, d.dstLayer, d.state, d.state),
        attr, eng);
  if (s.lbr)
    return dnnl::lbr_gru_forward::primitive_desc(
        dnnl::lbr_gru_forward::desc(prop, s.direction, d.srcLayer, d.state, d.weightsLayer,
                                    d.weightsIter, d.bias, d.dstLayer, d.state),
        attr, eng);
  return dnnl::gru_forward::primitive_desc(
      dnnl::gru_forward::desc(prop, s.direction, d.srcLayer, d.state, d.weightsLayer, d.weightsIter,
                              d.bias, d.dstLayer, d.state),
      attr, eng);
}

class RnnKernel final : public LibraryKernel {
 public:
  RnnKernel(const RnnShape& s, Descs d, dnnl::primitive_desc pd, memory weightsLayer,
            memory weightsIter, memory bias, int threads, std::string description)
      : s_(s), d_(std::move(d)), prim_(pd), scratch_(pd.scratchpad_desc()),
        weightsLayer_(std::move(weightsLayer)), weightsIter_(std::move(weightsIter)),
        bias_(std::move(bias)), threads_(threads), description_(std::move(description)) {}

  // buffers: x, w, r, b, h0, (c0), y, y_h, (y_c); w, r and b are read from the packed copies.
  Status run(void* const* buffers) const override {
    try {
      OmpThreadsScope scope(threads_);
      const dnnl::engine& eng = cpuEngine();
      const size_t out = s_.lstm ? 6 : 5;
      memory scratch(scratch_, eng, threadScratch(scratch_.get_size()));
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC_LAYER, memory(d_.srcLayer, eng, buffers[0])},
          {DNNL_ARG_SRC_ITER, memory(d_.state, eng, buffers[4])},
          {DNNL_ARG_WEIGHTS_LAYER, weightsLayer_},
          {DNNL_ARG_WEIGHTS_ITER, weightsIter_},
          {DNNL_ARG_BIAS, bias_},
          {DNNL_ARG_DST_LAYER, memory(d_.dstLayer, eng, buffers[out])},
          {DNNL_ARG_DST_ITER, memory(d_.state, eng, buffers[out + 1])},
          {DNNL_ARG_SCRATCHPAD, scratch}};
      if (s_.lstm) {
        args.emplace(DNNL_ARG_SRC_ITER_C, memory(d_.state, eng, buffers[5]));
        args.emplace(DNNL_ARG_DST_ITER_C, memory(d_.state, eng, buffers[out + 2]));
      }
      dnnl::stream& stream = threadStream();
      prim_.execute(stream, args);
      stream.wait();
      return Status::ok();
    } catch (const dnnl::error& e) {
      return Status::error(description_ + ": oneDNN error: " + e.what());
    }
  }
  std::string describe() const override { return description_; }

 private:
  RnnShape s_;
  Descs d_;
  dnnl::primitive prim_;
  memory::desc scratch_;
  memory weightsLayer_, weightsIter_, bias_;
  int threads_;
  std::string description_;
};

// `data` (ldgoi / ldgo, plain) in the layout `want` (oneDNN's packed choice), owned.
memory pack(const memory::desc& plain, std::vector<float> data, const memory::desc& want) {
  const dnnl::engine& eng = cpuEngine();
  memory from(plain, eng, data.data());
  memory to(want, eng);
  dnnl::stream& stream = threadStream();
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  return to;
}

}  // namespace

StatusOr<const Tensor*> constantOperand(const Node& n, size_t i, const char* what) {
  const Node* def = n.operand(i)->def();
  if (!def || def->op() != OpCode::Constant || def->constantData().held ||
      !def->constantData().tensor.defined())
    return Status::error(std::string(what) + " is not a constant (packed once, when created)");
  return &def->constantData().tensor;
}

StatusOr<std::unique_ptr<LibraryKernel>> createRecurrence(const Node& n, int threads, bool probe) {
  KILN_ASSIGN_OR_RETURN(RnnShape s, rnnShape(n));
  Descs any = descs(s, /*anyWeights=*/true);
  dnnl::primitive_desc pd = primitiveDesc(s, any);
  // oneDNN names its RNN implementation "ref:any" but runs each step's products on its packed
  // sgemm: not one of the reference loops slowImplementation guards against.
  const std::string description = "oneDNN " +
                                  std::string(s.lstm  ? "lstm"
                                              : s.lbr ? "lbr_gru"
                                                      : "gru") +
                                  " (" + s.directionName + ", " + std::to_string(s.steps) +
                                  " steps, batch " + std::to_string(s.batch) + ", hidden " +
                                  std::to_string(s.hidden) + ", " + pd.impl_info_str() + ")";
  if (probe) return makeProbedKernel(description);
  Descs plain = descs(s, /*anyWeights=*/false);
  KILN_ASSIGN_OR_RETURN(const Tensor* w, constantOperand(n, 1, "w"));
  KILN_ASSIGN_OR_RETURN(const Tensor* r, constantOperand(n, 2, "r"));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, constantOperand(n, 3, "b"));
  memory wl = pack(plain.weightsLayer, permutedWeights(s, *w, s.input),
                   pd.query_md(dnnl::query::weights_md, 0));
  memory wi = pack(plain.weightsIter, permutedWeights(s, *r, s.hidden),
                   pd.query_md(dnnl::query::weights_md, 1));
  memory bm(plain.bias, cpuEngine());
  std::vector<float> bv = bias(s, *b);
  std::memcpy(bm.get_data_handle(), bv.data(), bv.size() * sizeof(float));
  return std::unique_ptr<LibraryKernel>(std::make_unique<RnnKernel>(
      s, any, pd, std::move(wl), std::move(wi), std::move(bm), threads, description));
}

}  // namespace kiln::codegen::cpu::onednn
