// Convolution shapes for cuDNN. See conv.h.
#include "codegen/cuda/conv.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "codegen/cuda/library_call.h"

namespace kiln::codegen::cuda {
namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

bool allOnes(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

// The dimension numbers cuDNN reads: NCHW with OIHW kernels, or NHWC with OHWI kernels (the
// spatial dims in order either way). 1: channels first, 2: channels last, 0: neither.
int cudnnLayout(const ConvDimensionNumbers& dn, size_t rank) {
  std::vector<int64_t> first(rank - 2), last(rank - 2);
  std::iota(first.begin(), first.end(), 2);
  std::iota(last.begin(), last.end(), 1);
  const int64_t f = int64_t(rank) - 1;
  if (dn.inputBatch == 0 && dn.inputFeature == 1 && dn.inputSpatial == first &&
      dn.kernelOutput == 0 && dn.kernelInput == 1 && dn.kernelSpatial == first &&
      dn.outputBatch == 0 && dn.outputFeature == 1 && dn.outputSpatial == first)
    return 1;
  if (dn.inputBatch == 0 && dn.inputFeature == f && dn.inputSpatial == last &&
      dn.kernelOutput == 0 && dn.kernelInput == f && dn.kernelSpatial == last &&
      dn.outputBatch == 0 && dn.outputFeature == f && dn.outputSpatial == last)
    return 2;
  return 0;
}

}  // namespace

std::string ConvShape::str() const {
  std::vector<int64_t> x = {batch, inFeatures}, w = {outFeatures, inFeatures / groups};
  x.insert(x.end(), in.begin(), in.end());
  w.insert(w.end(), window.begin(), window.end());
  std::string s = std::string(tf32 ? "tf32" : dtypeName(type)) + (channelsLast ? " NHWC" : "") +
                  " [" + list(x) + "] * [" + list(w) + "]";
  if (!allOnes(stride)) s += " stride " + list(stride);
  if (std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p != 0; }))
    s += " pad " + list(pad);
  if (!allOnes(dilation)) s += " dilation " + list(dilation);
  if (groups > 1) s += " groups " + std::to_string(groups);
  return s;
}

std::optional<ConvShape> convShape(const kernel::Kernel& k, const kernel::Stmt& call,
                                   std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<ConvShape> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (call.op != OpCode::Convolution || call.args.size() < 3) return no("not a convolution");
  const kernel::Buffer* x = k.find(call.args[0]);
  const kernel::Buffer* w = k.find(call.args[1]);
  const kernel::Buffer* y = k.find(call.args[2]);
  if (!x || !w || !y) return no("its operands are not buffers of the kernel");
  const DType t = y->type;
  if (x->type != t || w->type != t || (t != DType::F32 && t != DType::F16 && t != DType::BF16))
    return no("operands of " + std::string(dtypeName(x->type)) + " and " +
              std::string(dtypeName(w->type)) + " (cuDNN here takes f32, f16 and bf16)");
  const size_t rank = x->shape.size();
  if (rank < 3 || rank > 5 || w->shape.size() != rank || y->shape.size() != rank)
    return no("a rank other than 3 to 5");
  StatusOr<ConvDimensionNumbers> dn = convDimensionNumbers(call.attrs, int64_t(rank));
  const int layout = dn ? cudnnLayout(*dn, rank) : 0;
  if (layout == 0) return no("dimension numbers other than bf01_oi01->bf01 and b01f_o01i->b01f");
  const ConvWindow win = convWindow(call.attrs, rank - 2);
  if (!allOnes(win.lhsDil)) return no("lhs dilation (a transposed convolution)");
  if (hasAttr(call.attrs, "batch_group_count") &&
      getInt(OpCode::Convolution, call.attrs, "batch_group_count") != 1)
    return no("batch groups");
  if (win.lo != win.hi) return no("padding that differs between the two sides of a dim");
  ConvShape c;
  c.type = t;
  c.channelsLast = layout == 2;
  // Feature dim and first spatial dim of each tensor in this layout.
  const size_t fd = c.channelsLast ? rank - 1 : 1, sd = c.channelsLast ? 1 : 2;
  auto spatial = [&](const std::vector<int64_t>& shape) {
    return std::vector<int64_t>(shape.begin() + long(sd), shape.begin() + long(sd + rank - 2));
  };
  c.batch = x->shape[0];
  c.inFeatures = x->shape[fd];
  c.outFeatures = w->shape[0];
  c.groups = hasAttr(call.attrs, "feature_group_count")
                 ? getInt(OpCode::Convolution, call.attrs, "feature_group_count")
                 : 1;
  if (c.groups < 1 || w->shape[fd] * c.groups != c.inFeatures || c.outFeatures % c.groups != 0 ||
      y->shape[fd] != c.outFeatures)
    return no("feature groups that do not divide the features");
  c.in = spatial(x->shape);
  c.window = spatial(w->shape);
  c.out = spatial(y->shape);
  c.stride = win.strides;
  c.pad = win.lo;
  c.dilation = win.rhsDil;
  if (rank == 3)  // cuDNN's convolutions are 2-D or 3-D: a 1-D one gets a height of 1
    for (std::vector<int64_t>* v : {&c.in, &c.window, &c.out, &c.stride, &c.dilation})
      v->insert(v->begin(), 1);
  if (rank == 3) c.pad.insert(c.pad.begin(), 0);
  for (size_t i = 0; i < c.in.size(); ++i) {
    const int64_t span = (c.window[i] - 1) * c.dilation[i] + 1;
    const int64_t padded = c.in[i] + 2 * c.pad[i];
    if (c.pad[i] < 0 || c.stride[i] < 1 || padded < span ||
        (padded - span) / c.stride[i] + 1 != c.out[i])
      return no("negative padding or a window larger than the padded input");
  }
  const int64_t limit = int64_t(1) << 31;  // cuDNN's dims and element counts are int
  for (const kernel::Buffer* b : {x, w, y}) {
    int64_t n = 1;
    for (int64_t d : b->shape) n *= d;
    if (n == 0 || n >= limit) return no("an empty tensor or one of 2^31 elements or more");
  }
  return c;
}

std::string ConvEpilogue::str() const {
  if (!taken) return "none";
  return std::string("bias") + (residual >= 0 ? " + residual" : "") + " + relu";
}

ConvEpilogue convEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, const ConvShape& c,
                          std::string* why) {
  ConvEpilogue e;
  auto stop = [&](const std::string& reason) {
    if (why) *why = reason;
    return ConvEpilogue{};
  };
  const kernel::Buffer* out = call.args.size() > 2 ? k.find(call.args[2]) : nullptr;
  if (!out) return stop("the call's result is no buffer of the kernel");
  if (c.type != DType::F32 && c.type != DType::F16)
    return stop("a bf16 convolution (cuDNN's fused call is taken in f32 and f16)");
  const int feature = c.channelsLast ? static_cast<int>(out->shape.size()) - 1 : 1;
  for (size_t i = 0; i < call.postOps.size(); ++i) {
    const kernel::PostOp& p = call.postOps[i];
    using Kind = kernel::PostOp::Kind;
    if (p.kind == Kind::Clamp && p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
      if (e.bias < 0) return stop("a relu with no bias before it (cuDNN's fused call adds one)");
      e.taken = i + 1;
      if (why && e.taken < call.postOps.size()) *why = "a post-op after the relu";
      return e;
    }
    const kernel::Buffer* operand = p.kind == Kind::Add ? k.find(p.operand) : nullptr;
    if (!operand || operand->type != out->type)
      return stop(std::string("a ") + kernel::postOpName(p.kind) +
                  " before a relu (cuDNN's fused call takes a bias, a residual, then a relu)");
    if (kernel::postOpReadsWhole(p, out->shape) && e.residual < 0) e.residual = static_cast<int>(i);
    else if (kernel::postOpVectorDim(p) == feature && e.bias < 0) e.bias = static_cast<int>(i);
    else return stop("an add that is neither one bias along the features nor one residual");
  }
  return stop("no relu (cuDNN fuses a bias without one only on one algorithm)");
}

}  // namespace kiln::codegen::cuda
