// oneDNN library kernels: convolution -> convolution_forward, on the IR's layout or, for 2-D
// convolutions of one group whose channels come in whole blocks, in nChw8c or nChw16c
// (BlockedConvolution), Winograd where oneDNN has it (onednn.h, docs/codegen.md).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/thread_pool.h"
#include "ir/op.h"
#include "ir/types.h"
#include "passes/convolution_to_matmul.h"

namespace kiln::codegen::cpu::onednn {
namespace {

// The layout letters of a convolution operand: `batch`/`feature` letters at their dims, the
// spatial letters (w; h, w; d, h, w) at the spatial dims.
std::string layoutName(size_t rank, int64_t b, char bl, int64_t f, char fl,
                       const std::vector<int64_t>& spatial) {
  static const char* kSpatial[] = {"w", "hw", "dhw"};
  std::string s(rank, '?');
  s[static_cast<size_t>(b)] = bl;
  s[static_cast<size_t>(f)] = fl;
  const char* letters = kSpatial[spatial.size() - 1];
  for (size_t i = 0; i < spatial.size(); ++i) s[static_cast<size_t>(spatial[i])] = letters[i];
  return s;
}

// The channel block of blocked convolutions: one vector register of floats, 16 where oneDNN
// runs AVX-512 code (its avx512_core kernels compute in nChw16c; on nChw8c it falls back to its
// avx2 ones), 8 otherwise.
int64_t channelBlock() { return avx512() ? 16 : 8; }

// A per-channel bias over a convolution's dst axes (extent 1 but on axis 1) as the 1-D
// descriptor oneDNN's convolutions take.
memory::desc channelVector(const memory::desc& d) {
  return memory::desc({d.dims()[1]}, memory::data_type::f32,
                      Dims{d.data.format_desc.blocking.strides[1]});
}

// Whether `c` may compute in the blocked layout (nChw8c or nChw16c, channelBlock()): 2-D, one
// group, channels in whole blocks.
bool blockedShape(const ConvAxes& c) {
  const int64_t block = channelBlock();
  return c.ns == 2 && c.groups == 1 && c.inC % block == 0 && c.kO % block == 0;
}

// Whether `c` has the shape oneDNN's Winograd kernels take (F(2x2,3x3) and F(4x4,3x3), AVX-512
// only): blocked, a 3x3 window of stride 1, no dilation; and an output they gain on
// (winogradPays, passes/convolution_to_matmul.h).
bool winogradShape(const ConvAxes& c) {
  return blockedShape(c) && c.window == std::vector<int64_t>{3, 3} && c.dStrides == Dims{1, 1} &&
         c.dDilation == Dims{0, 0} &&
         std::all_of(c.lhsDil.begin(), c.lhsDil.end(), [](int64_t d) { return d == 1; }) &&
         winogradPays(c.dst[0].ext, c.dst[2].ext, c.dst[3].ext, c.kO);
}

// Convolutions of at most this many flops (direct count) per thread are timed both as Winograd
// and as direct kernels when created: about 4 ms of direct kernel on one core. Above it
// Winograd was 1.8-3x faster on every 3x3 layer of the zoo, and timing would cost compile time.
constexpr double kTimedWinogradFlops = 1e9;
// The direct kernel replaces the Winograd one only when that one's best run is this much slower:
// the margin keeps a choice between near-equal kernels from following the machine's noise.
constexpr double kWinogradLosesBy = 1.2;

// Whether the direct kernel replaces Winograd kernel `wino`, and why (`why`). An artifact's
// weights decide by their layout (they are in one kernel's). Else a convolution of `flops`
// (winogradConvolutionFlops) up to kTimedWinogradFlops a thread is timed both ways
// (timeConvolutions, no post-ops) with the run's threads: this oneDNN's Winograd kernel at batch 1
// is 1.2-2.5x slower than its direct one on some channel counts over 13x13 and 14x14 outputs
// (alexnet's 384 -> 256: 2.05 against 1.25 ms at 1 thread, 0.60 against 0.63 at 2; googlenet's 96
// -> 208: 0.41 against 0.29), which no rule of shape foretold.
template <typename MakePd>
StatusOr<bool> directBeatsWinograd(const dnnl::convolution_forward::primitive_desc& wino,
                                   MakePd makePd, const memory::desc& src,
                                   const memory::desc& weights, const memory::desc& dst,
                                   const memory::desc* bias, double flops, int threads,
                                   const PackedWeights* prepacked, std::string& why) {
  if (prepacked) {
    const bool direct = prepacked->layout != layoutText(wino.weights_desc());
    if (direct) why = ", direct: the artifact's weights are in the direct kernel's layout";
    return direct;
  }
  threads = threadsFor(threads);  // 0: every hardware thread, as the run will have
  if (flops > kTimedWinogradFlops * threads) return false;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto winoPd = makePd(src, weights, dst, attr, dnnl::algorithm::convolution_winograd, bias);
  auto directPd = makePd(src, weights, dst, attr, dnnl::algorithm::convolution_direct, bias);
  const std::string key = layoutText(src) + " " + layoutText(winoPd.weights_desc()) + " " +
                          layoutText(dst) + (bias ? " bias " : " ") + std::to_string(threads);
  KILN_ASSIGN_OR_RETURN(ConvolutionTimes t,
                        timeConvolutions(winoPd, directPd, threads, /*rounds=*/3, key));
  char text[160];
  const bool direct = t.first > kWinogradLosesBy * t.second;
  std::snprintf(text, sizeof text, ", %s: timed at %d thread%s, Winograd %.4g ms, direct %.4g ms",
                direct ? "direct" : "Winograd", threads, threads == 1 ? "" : "s", t.first,
                t.second);
  why = text;
  return direct;
}

// The convolution as a BlockedConvolution over nChw8c or nChw16c (channelBlock()), or why not
// (the caller then uses the IR layout): src, weights and dst are the IR-layout descriptors in
// oneDNN's logical order. With `winograd` (a 3x3 window of stride 1) and constant weights it
// first asks oneDNN for a Winograd kernel (docs/codegen.md, "Winograd convolutions").
template <typename MakePd>
StatusOr<std::unique_ptr<LibraryKernel>>
createBlockedConvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                         const memory::desc& src, const memory::desc& weights,
                         const memory::desc& dst, MakePd makePd, bool winograd,
                         const std::string& what, const std::vector<std::vector<int64_t>>& axisDims,
                         const PackedWeights* prepacked, bool probe) {
  using Tag = memory::format_tag;
  const bool b16 = channelBlock() == 16;
  const std::string layout = b16 ? "nChw16c" : "nChw8c";
  memory::desc srcB(src.dims(), memory::data_type::f32, b16 ? Tag::nChw16c : Tag::nChw8c);
  memory::desc dstB(dst.dims(), memory::data_type::f32, b16 ? Tag::nChw16c : Tag::nChw8c);
  std::vector<BlockedOperand> operands(2);
  operands[0].position = 0;
  operands[0].arg = DNNL_ARG_SRC;
  operands[0].plain = src;
  operands[0].blocked = srcB;
  operands[1].position = 2;
  operands[1].arg = DNNL_ARG_DST;
  operands[1].plain = dst;
  operands[1].blocked = dstB;
  // A post-op operand of the result's shape (a residual) is blocked too; a per-channel one (a
  // bias) is broadcast and keeps its descriptor; any other broadcast is refused.
  auto remap = [&](size_t position, const memory::desc& d) -> StatusOr<memory::desc> {
    if (d.dims() == dst.dims()) {
      BlockedOperand o;
      o.position = position;
      o.plain = d;
      o.blocked = dstB;
      operands.push_back(o);
      return dstB;
    }
    Dims dims = d.dims();
    for (size_t i = 0; i < dims.size(); ++i)
      if (i != 1 && dims[i] != 1)
        return Status::error("a post-op operand is broadcast along a non-channel dim");
    return d;
  };
  KILN_ASSIGN_OR_RETURN(PostOpsPlan post,
                        planPostOps(postOps, n.result(0)->type().staticDims(), axisDims, remap,
                                    /*biasAxis=*/1));
  for (BlockedOperand& o : operands)
    for (const PostOpsPlan::Binary& b : post.binaries)
      if (o.position == b.position)
        o.arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.index) | DNNL_ARG_SRC_1;
  PrimitiveInputs in = primitiveInputs(n, weights, post, post.ops.len() > 0);
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  std::optional<PostOpsPlan::Binary> bias = post.bias;
  if (bias) bias->desc = channelVector(bias->desc);
  const memory::desc* biasDesc = bias ? &bias->desc : nullptr;
  std::vector<PostOpsPlan::Binary> binaries = post.binaries;
  std::optional<WinogradPostOps> wino;
  if (winograd && (in.constant || in.held)) wino = winogradPostOps(postOps, post, dst.dims());
  std::string timed;  // how the Winograd kernel fared against the direct one, if asked
  if (wino) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(wino->ops);
    try {
      pd = makePd(srcB, in.weights, dstB, attr, dnnl::algorithm::convolution_winograd, biasDesc);
    } catch (const dnnl::error&) {
      // oneDNN has no Winograd kernel for this shape or machine: the direct one is used.
    }
    if (pd && !probe) {
      KILN_ASSIGN_OR_RETURN(bool direct, directBeatsWinograd(*pd, makePd, srcB, in.weights, dstB,
                                                             biasDesc, winogradConvolutionFlops(n),
                                                             threads, prepacked, timed));
      if (direct) pd.reset();
    }
    if (pd) {
      binaries.clear();
      for (BlockedOperand& o : operands) o.sum = o.position == wino->sumPosition;
    }
  }
  if (!pd)
    pd = makePd(srcB, in.weights, dstB, in.attr, dnnl::algorithm::convolution_direct, biasDesc);
  const std::string impl = pd->impl_info_str();
  if (slowImplementation(impl)) return slowImplementationError(what + " in " + layout, impl);
  if (probe) {
    std::vector<size_t> blockable;
    for (const BlockedOperand& o : operands) blockable.push_back(o.position);
    return makeProbedKernel(kernelDescription(what, impl, in, HeldWeights{}, post) + ", " + layout +
                                ")",
                            blockable, layout);
  }
  KILN_ASSIGN_OR_RETURN(HeldWeights held,
                        packWeights(in.constant, in.held, weights, pd->weights_desc(), prepacked));
  std::string desc = kernelDescription(what, impl, in, held, post) + timed;
  return makeBlockedConvolution(dnnl::convolution_forward(*pd), weights, pd->scratchpad_desc(),
                                std::move(held), std::move(operands), std::move(binaries),
                                std::move(bias), threads, std::move(desc), layout);
}

// Whether convolution `c` may compute blocked (2-D, one group, f32, constant weights, channel
// counts in whole blocks), and if so whether its window is larger than 1x1 (such a one does
// where oneDNN takes it).
std::optional<bool> blockableWindow(const Node& c) {
  if (c.op() != OpCode::Convolution || c.numOperands() != 2 ||
      c.attrInt("feature_group_count") != 1 || !c.operand(1)->def() ||
      c.operand(1)->def()->op() != OpCode::Constant)
    return std::nullopt;
  auto xd = f32Dims(c.operand(0), "input"), kd = f32Dims(c.operand(1), "kernel");
  if (!xd || !kd || xd->size() != 4 || kd->size() != 4) return std::nullopt;
  auto dn = convDimensionNumbers(c.attrs(), 4);
  if (!dn) return std::nullopt;
  const int64_t block = channelBlock();
  if ((*xd)[static_cast<size_t>(dn->inputFeature)] % block != 0 ||
      (*kd)[static_cast<size_t>(dn->kernelOutput)] % block != 0)
    return std::nullopt;
  return (*kd)[static_cast<size_t>(dn->kernelSpatial[0])] != 1 ||
         (*kd)[static_cast<size_t>(dn->kernelSpatial[1])] != 1;
}

// Whether a 1x1 convolution of source `source` computes blocked: when the source comes, through
// elementwise ops (a residual add, a relu), from a blocked convolution with a larger window or
// from a 1x1 one that computes blocked by this rule. Such a layer then reads the blocked layout its
// producer keeps, and its result stays blocked for the layers after it (resnet's bottlenecks stay
// blocked from end to end: resnet50 at 2 threads 24.9-25.0 -> 23.5-23.9 ms, level at 1 thread),
// while 1x1 layers among depthwise ones (mobilenet_v2), whose kernels run faster on nhwc, stay on
// nhwc.
bool blockedSource(const Value* source) {
  std::vector<const Node*> work;
  std::set<const Node*> seen;
  auto up = [&](const Node& m) {
    const bool conv = m.op() == OpCode::Convolution;
    for (size_t i = 0; i < (conv ? 1 : m.numOperands()); ++i) {
      const Node* def = m.operand(i)->def();
      // A convolution's source; an elementwise op's operands of its result's shape (not a
      // broadcast bias).
      if (def && (conv || m.operand(i)->type() == m.result(0)->type()) && seen.size() < 4096 &&
          seen.insert(def).second)
        work.push_back(def);
    }
  };
  if (const Node* def = source->def(); def && seen.insert(def).second) work.push_back(def);
  while (!work.empty()) {
    const Node* m = work.back();
    work.pop_back();
    OpClass cls = opInfo(m->op()).opClass;
    if (m->op() == OpCode::Convolution) {
      std::optional<bool> larger = blockableWindow(*m);
      if (larger && *larger) return true;
      if (larger) up(*m);
    } else if (cls == OpClass::ElementwiseUnary || cls == OpClass::ElementwiseBinary ||
               cls == OpClass::ElementwiseTernary) {
      up(*m);
    }
  }
  return false;
}

// A convolution's description ("convolution (nhwc, ohwi -> nhwc, 3x3, stride 2x2").
std::string convolutionName(const ConvDimensionNumbers& dn, size_t rank,
                            const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                            const std::vector<int64_t>& rhsDil, int64_t groups) {
  std::string what =
      "convolution (" +
      layoutName(rank, dn.inputBatch, 'n', dn.inputFeature, 'c', dn.inputSpatial) + ", " +
      layoutName(rank, dn.kernelOutput, 'o', dn.kernelInput, 'i', dn.kernelSpatial) + " -> " +
      layoutName(rank, dn.outputBatch, 'n', dn.outputFeature, 'c', dn.outputSpatial) + ", " +
      joinDims(window, "x");
  if (std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v != 1; }))
    what += ", stride " + joinDims(strides, "x");
  if (std::any_of(rhsDil.begin(), rhsDil.end(), [](int64_t v) { return v != 1; }))
    what += ", dilation " + joinDims(rhsDil, "x");
  if (groups > 1) what += ", groups " + std::to_string(groups);
  return what;
}

}  // namespace

StatusOr<ConvAxes> convAxes(const Node& n, bool transposed,
                            const std::vector<int64_t>& dstStrides) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> xd, f32Dims(n.operand(0), "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kd, f32Dims(n.operand(1), "kernel"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> od, f32Dims(n.result(0), "result"));
  size_t rank = xd.size();
  if (rank < 3 || rank > 5 || kd.size() != rank || od.size() != rank)
    return Status::error("only 1-D, 2-D and 3-D convolutions (rank 3 to 5) are supported");
  size_t ns = rank - 2;
  auto dnOr = convDimensionNumbers(n.attrs(), static_cast<int64_t>(rank));
  if (!dnOr) return dnOr.status();
  const ConvDimensionNumbers& dn = *dnOr;
  const auto [strides, lo, hi, lhsDil, rhsDil] = convWindow(n.attrs(), ns);
  for (const auto* l : {&strides, &lo, &hi, &lhsDil, &rhsDil})
    if (l->size() != ns) return Status::error("window attributes need one entry per spatial dim");
  for (size_t s = 0; s < ns; ++s) {
    if (lhsDil[s] != 1 && !transposed) return Status::error("lhs_dilation is not supported");
    if (lhsDil[s] < 1) return Status::error("lhs_dilation must be >= 1");
    if (strides[s] < 1 || rhsDil[s] < 1) return Status::error("strides and dilations must be >= 1");
    if (lo[s] < 0 || hi[s] < 0) return Status::error("negative padding is not supported");
  }
  if (n.attrInt("batch_group_count") != 1)
    return Status::error("batch_group_count other than 1 is not supported");
  int64_t groups = n.attrInt("feature_group_count");
  auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  int64_t inC = at(xd, dn.inputFeature), kO = at(kd, dn.kernelOutput), kI = at(kd, dn.kernelInput);
  if (groups < 1 || kI * groups != inC || kO % groups != 0)
    return Status::error("feature_group_count does not fit the feature extents");
  if (at(od, dn.outputBatch) != at(xd, dn.inputBatch) || at(od, dn.outputFeature) != kO)
    return Status::error("result batch or feature extent does not match the operands");

  ConvAxes c;
  c.groups = groups, c.inC = inC, c.kO = kO, c.ns = ns, c.strides = strides;
  c.lhsDil = lhsDil, c.rhsDil = rhsDil, c.lo = lo, c.hi = hi;
  std::vector<int64_t> xs = rowMajor(xd), ks = rowMajor(kd);
  std::vector<int64_t> os = dstStrides.empty() ? rowMajor(od) : dstStrides;
  c.src = {{at(xd, dn.inputBatch), at(xs, dn.inputBatch)}, {inC, at(xs, dn.inputFeature)}};
  c.dst = {{at(od, dn.outputBatch), at(os, dn.outputBatch)}, {kO, at(os, dn.outputFeature)}};
  if (groups > 1) c.wei.push_back({groups, (kO / groups) * at(ks, dn.kernelOutput)});
  c.wei.push_back({kO / groups, at(ks, dn.kernelOutput)});
  c.wei.push_back({kI, at(ks, dn.kernelInput)});
  c.dstDims = {{dn.outputBatch}, {dn.outputFeature}};
  for (size_t s = 0; s < ns; ++s) {
    c.dstDims.push_back({dn.outputSpatial[s]});
    c.src.push_back({at(xd, dn.inputSpatial[s]), at(xs, dn.inputSpatial[s])});
    c.wei.push_back({at(kd, dn.kernelSpatial[s]), at(ks, dn.kernelSpatial[s])});
    c.dst.push_back({at(od, dn.outputSpatial[s]), at(os, dn.outputSpatial[s])});
    c.window.push_back(at(kd, dn.kernelSpatial[s]));
    c.kernelSpatial.push_back(dn.kernelSpatial[s]);
    c.dStrides.push_back(strides[s]);
    c.dDilation.push_back(rhsDil[s] - 1);  // oneDNN counts the holes: 0 is dense
    c.dLo.push_back(lo[s]);
    c.dHi.push_back(hi[s]);
  }
  c.what = convolutionName(dn, rank, c.window, strides, rhsDil, groups);
  return c;
}

namespace {

// The convolution on the IR layout, its unit dims described dense (a stride that spans the dims
// inside them); where oneDNN has only its reference implementation so, with the unit dims' own
// strides (a one-channel nhwc operand is then nhwc to oneDNN, not nchw: brgconv instead of
// ref:any for a spectrogram's or a waveform's first layer).
template <typename MakeAnyPd>
StatusOr<std::unique_ptr<LibraryKernel>>
onIrLayout(const Node& n, const ConvAxes& conv, const std::vector<kernel::PostOp>& postOps,
           int threads, const PackedWeights* prepacked, bool probe, MakeAnyPd makeAnyPd) {
  auto onLayout = [&](const memory::desc& src, const memory::desc& wei, const memory::desc& dst,
                      const std::string& what) {
    auto makePd = [&](const memory::desc& w, const dnnl::primitive_attr& attr,
                      const memory::desc* bias) {
      std::optional<memory::desc> vector;
      if (bias) vector = channelVector(*bias);
      return makeAnyPd(src, w, dst, attr, dnnl::algorithm::convolution_direct,
                       vector ? &*vector : nullptr);
    };
    return finish<dnnl::convolution_forward>(n, threads, src, wei, dst, makePd, what, postOps,
                                             conv.dstDims, prepacked, /*biasAxis=*/1, probe);
  };
  auto k = onLayout(stridedDesc(conv.src), stridedDesc(conv.wei), stridedDesc(conv.dst), conv.what);
  // (memory::desc's == ignores the strides of unit dims; oneDNN's layout checks do not.)
  auto unit = [](const std::vector<Axis>& axes) {
    return std::any_of(axes.begin(), axes.end(), [](const Axis& a) { return a.ext == 1; });
  };
  if (k || !(unit(conv.src) || unit(conv.wei) || unit(conv.dst))) return k;
  // Why not dense unit strides (the error's own words unless it is the reference kernel).
  std::string why = k.status().message();
  if (why.find("reference implementation") != std::string::npos)
    why = "on dense ones oneDNN has only its reference kernel";
  auto u = onLayout(stridedDesc(conv.src, false), stridedDesc(conv.wei, false),
                    stridedDesc(conv.dst, false),
                    conv.what + ", unit dims on the IR's strides (" + why + ")");
  return u ? std::move(u) : std::move(k);
}

}  // namespace

StatusOr<std::unique_ptr<LibraryKernel>>
createConvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                  const PackedWeights* prepacked, bool probe,
                  const std::vector<int64_t>& dstStrides, bool blocked) {
  const std::vector<int64_t> lhs = n.attrInts("lhs_dilation");
  if (std::any_of(lhs.begin(), lhs.end(), [](int64_t d) { return d != 1; }))
    return createDeconvolution(n, postOps, threads, prepacked, probe, dstStrides);
  KILN_ASSIGN_OR_RETURN(const ConvAxes conv, convAxes(n, /*transposed=*/false, dstStrides));
  const Dims &dStrides = conv.dStrides, &dDilation = conv.dDilation, &dLo = conv.dLo,
             &dHi = conv.dHi;
  const int64_t groups = conv.groups, inC = conv.inC, kO = conv.kO;
  memory::desc srcMd = stridedDesc(conv.src), weiMd = stridedDesc(conv.wei),
               dstMd = stridedDesc(conv.dst);
  const bool depthwise = groups > 1 && groups == inC && kO == inC;
  const bool stride1 =
      std::all_of(conv.strides.begin(), conv.strides.end(), [](int64_t v) { return v == 1; });
  auto makeAnyPd = [&](const memory::desc& s, const memory::desc& w, const memory::desc& d,
                       const dnnl::primitive_attr& attr, dnnl::algorithm algorithm,
                       const memory::desc* bias) {
    const auto prop = dnnl::prop_kind::forward_inference;
    auto c = bias ? dnnl::convolution_forward::desc(prop, algorithm, s, w, *bias, d, dStrides,
                                                    dDilation, dLo, dHi)
                  : dnnl::convolution_forward::desc(prop, algorithm, s, w, d, dStrides, dDilation,
                                                    dLo, dHi);
    // A depthwise convolution of stride 1 (always direct, on the IR layout: only one-group ones
    // compute blocked) takes oneDNN's AVX-512 jit_dw kernel where oneDNN has it, not its first
    // choice brdgmm_dw: mobilenet_v2 3.2-3.6% faster at 1 thread and level at 2 (both compiled
    // in one process, runs alternating; docs/codegen.md, "Depthwise convolutions"). The
    // descriptor's implementations can only be walked where it is constructed (a copy keeps the
    // one it shows).
    if (depthwise && stride1) {
      dnnl::convolution_forward::primitive_desc candidate(c, attr, cpuEngine());
      do {
        if (std::string(candidate.impl_info_str()).rfind("jit_dw:avx512", 0) == 0) return candidate;
      } while (candidate.next_impl());
    }
    return dnnl::convolution_forward::primitive_desc(c, attr, cpuEngine());
  };
  // In nChw8c or nChw16c where the schedule chose it (blockedConvolutionLayout).
  if (blocked && blockedShape(conv)) {
    auto blocked =
        createBlockedConvolution(n, postOps, threads, srcMd, weiMd, dstMd, makeAnyPd,
                                 winogradShape(conv), conv.what, conv.dstDims, prepacked, probe);
    if (blocked) return blocked;
  }
  return onIrLayout(n, conv, postOps, threads, prepacked, probe, makeAnyPd);
}

}  // namespace kiln::codegen::cpu::onednn

namespace kiln::codegen::cpu {

std::string blockedConvolutionLayout(const Node& n, const Value* source) {
  if (n.op() != OpCode::Convolution) return "";
  const std::vector<int64_t> lhs = n.attrInts("lhs_dilation");
  if (std::any_of(lhs.begin(), lhs.end(), [](int64_t d) { return d != 1; })) return "";
  StatusOr<onednn::ConvAxes> conv = onednn::convAxes(n);
  if (!conv || !onednn::blockedShape(*conv)) return "";
  const bool oneByOne =
      std::all_of(conv->window.begin(), conv->window.end(), [](int64_t w) { return w == 1; });
  if (oneByOne && !(source && onednn::blockedSource(source))) return "";
  return onednn::channelBlock() == 16 ? "nChw16c" : "nChw8c";
}

double winogradConvolutionFlops(const Node& n) {
  if (!oneDnnWinograd() || n.op() != OpCode::Convolution || n.numOperands() != 2) return 0;
  const Node* weights = n.operand(1)->def();
  if (!weights || weights->op() != OpCode::Constant) return 0;
  StatusOr<onednn::ConvAxes> conv = onednn::convAxes(n);
  if (!conv || !onednn::winogradShape(*conv)) return 0;
  return 2.0 * double(n.result(0)->type().numElements().value_or(0)) * double(conv->inC) * 9.0;
}

}  // namespace kiln::codegen::cpu
