// Internal to the oneDNN library kernels (onednn*.cpp): what the files share. onednn.cpp holds
// the entry point and the descriptor helpers, onednn_post_ops.cpp the post-op planning,
// onednn_weights.cpp the constant weights' layouts, onednn_kernels.cpp the kernels that run
// primitives, onednn_matmul.cpp and onednn_convolution.cpp the primitives of each node.
// The public interface is onednn.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "ir/op.h"
#include "ir/tensor.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
// From libgomp, which libdnnl is linked against (declared here so that no OpenMP compile flags
// are needed: nothing in Kiln uses OpenMP pragmas).
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int n);
}
#endif

namespace kiln::codegen::cpu::onednn {

using dnnl::memory;
using Dims = memory::dims;

// Sets the OpenMP thread count of the calling thread for the scope's lifetime. libgomp keeps
// nthreads-var per thread for threads it did not create (an OpenMP "data environment" ICV), so
// this does not change what other threads' oneDNN calls use.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    if (threads > 0) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(threads);
    }
#else
    (void)threads;
#endif
  }
  ~OmpThreadsScope() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    if (saved_ > 0) omp_set_num_threads(saved_);
#endif
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_ = 0;
};

// ---- onednn.cpp: engine, descriptors, operand checks ----

// The CPU engine, created on first use and shared by all kernels (engines are thread-safe).
const dnnl::engine& cpuEngine();

// Whether oneDNN runs its AVX-512 kernels here (get_effective_cpu_isa includes avx512_core).
bool avx512();

// One dim of a oneDNN memory descriptor: extent and stride in elements.
struct Axis {
  int64_t ext = 1, stride = 1;
};

// A plain f32 descriptor with explicit strides. A unit dim's stride is irrelevant to addressing;
// with `denseUnitDims` it is set to the span of the dims inside it (in oneDNN's logical order) so
// that the descriptor looks dense to oneDNN's implementation checks (which compare strides with
// extents); without, it keeps the stride given (the IR buffer's own row-major stride), which is
// what makes a one-channel nhwc operand look like nhwc rather than nchw.
memory::desc stridedDesc(std::vector<Axis> axes, bool denseUnitDims = true);

// Whether oneDNN implementation `impl` (primitive_desc::impl_info_str()) is one Kiln never runs:
// a reference implementation, plain C loops written for correctness ("ref:any", "ref_*",
// "simple:*"), measured at 0.1-6 GFLOP/s where the jit kernels run at 50-150 (docs/codegen.md,
// "No slow library kernels"). gemm-based convolutions (im2col + sgemm, "gemm:jit") are not such:
// they are blocked and vectorised.
bool slowImplementation(const std::string& impl);

// The error a kernel creation returns for a slow implementation (the caller then takes another
// formulation; CpuTarget's schedule turns the call into Kiln's loops when none is left).
Status slowImplementationError(const std::string& what, const std::string& impl);

std::vector<int64_t> rowMajor(const std::vector<int64_t>& dims);

std::string joinDims(const std::vector<int64_t>& v, const char* sep);

// The static, non-empty dims of an f32 value, or why not.
StatusOr<std::vector<int64_t>> f32Dims(const Value* v, const char* what);

// ---- onednn_post_ops.cpp: post-op planning ----

// The post-ops of a call as oneDNN post-ops, with the descriptors of their operands.
struct PostOpsPlan {
  dnnl::post_ops ops;
  // An add/mul post-op operand: its index in `ops`, its descriptor, and its buffer's position in
  // run()'s array (3 + its ordinal among the call's add/mul operands).
  struct Binary {
    int index = 0;
    memory::desc desc;
    size_t position = 0;
  };
  std::vector<Binary> binaries;
  // An add of a per-channel operand (a bias) that only adds come before, taken as the primitive's
  // bias argument instead of a binary post-op (planPostOps's `biasAxis`; adds commute, and
  // oneDNN adds the bias first). Its descriptor covers the dst's axes like a binary operand's
  // (extent 1 but on the bias axis) until a kernel takes the form its primitive wants (a
  // convolution's is 1-D); `index` is unused.
  std::optional<Binary> bias;
  std::string text;  // ", post-ops add+relu"
  // Some add/mul operand varies along a dst axis other than axis 1 (a convolution's channels).
  bool nonChannelOperand = false;
};

// `resultDims` are the dims of the node's result; `axisDims[i]` the result dims (outer to inner)
// that axis i of the primitive's dst descriptor covers. An add/mul operand is described over the
// same axes: an axis where the operand is broadcast has extent 1.
// `remap`, when given, may replace an operand's descriptor (a blocked layout) or refuse it; it is
// given the operand's position in run()'s buffers.
// `biasAxis` >= 0: the first add of an operand varying along that dst axis only (or along none),
// with only adds before it, becomes the plan's bias. oneDNN adds a bias to its accumulators
// before its post-ops, where a binary post-op is one more pass in the kernel's epilogue:
// mobilenet_v2 ran 9-12% faster, resnet50 5-7% (docs/codegen.md, "Post-ops").
using DescRemap = std::function<StatusOr<memory::desc>(size_t position, const memory::desc&)>;
StatusOr<PostOpsPlan> planPostOps(const std::vector<kernel::PostOp>& postOps,
                                  const std::vector<int64_t>& resultDims,
                                  const std::vector<std::vector<int64_t>>& axisDims,
                                  const DescRemap& remap = nullptr, int biasAxis = -1);

// The post-ops of a Winograd convolution, which takes no binary post-ops, from the plan of its
// post-ops: the per-channel add the plan took as the bias stays the bias, an add of a
// result-shaped operand (a residual) is its `sum` post-op (the residual is put in the result
// first), and a relu (clamp to [0, inf)) its activation, last. Any other post-op, or two of a
// kind, gives nullopt.
struct WinogradPostOps {
  dnnl::post_ops ops;
  std::optional<size_t> sumPosition;  // the residual's position in run()'s buffers
};
std::optional<WinogradPostOps> winogradPostOps(const std::vector<kernel::PostOp>& postOps,
                                               const PostOpsPlan& plan, const Dims& dstDims);

// ---- onednn_weights.cpp: constant weights and their layouts ----

// Every field of a blocked or Winograd memory descriptor as text ("" for other formats): two
// descriptors with the same text describe the same bytes.
std::string layoutText(const memory::desc& d);

// Constant weights a kernel holds in its primitive's layout: reordered from the constant when
// the kernel was created, or an artifact's bytes used in place (kept alive by `owner`).
struct HeldWeights {
  std::optional<memory> packed;
  std::string layout;                 // layoutText of the packed descriptor
  std::shared_ptr<const void> owner;  // of prepacked bytes
  bool prepacked = false;

  std::optional<PackedWeights> exported() const {
    if (!packed || layout.empty()) return std::nullopt;
    PackedWeights w;
    w.layout = layout;
    w.bytes = std::string_view(static_cast<const char*>(packed->get_data_handle()),
                               packed->get_desc().get_size());
    return w;
  }
};

// Whether the weights operand (operand 1) is a constant whose data is not here
// (ConstantData::held: an artifact stores it only in the layout its library kernel chose).
bool heldWeights(const Node& n);

// Whether a reorder into `d` writes every byte of its get_size(): a blocked layout whose elements,
// padding included, tile the buffer exactly (a reorder zero-pads its output).
bool reorderWritesEveryByte(const memory::desc& d);

// The constant data of the weights operand (operand 1) when it is an f32 `constant` that
// `weights` describes, else null.
const Tensor* constantWeights(const Node& n, const memory::desc& weights);

// The constant weights in the layout the primitive chose: reordered once, here, or the caller's
// prepacked weights when they are in that layout (none when the primitive reads the constant as
// it is). Weights whose data is held elsewhere (`held`) must come prepacked in that layout.
StatusOr<HeldWeights> packWeights(const Tensor* constant, bool heldData,
                                  const memory::desc& weights, const memory::desc& chosen,
                                  const PackedWeights* prepacked);

// What a primitive is created with: its attributes (user scratchpad, the post-ops) and its
// weights descriptor, format `any` for constant weights so that the primitive picks their layout.
struct PrimitiveInputs {
  const Tensor* constant = nullptr;  // the weights' data when they are a constant
  bool held = false;                 // constant weights whose data is held elsewhere
  dnnl::primitive_attr attr;
  memory::desc weights;
};

PrimitiveInputs primitiveInputs(const Node& n, const memory::desc& weights, const PostOpsPlan& post,
                                bool hasPostOps, const memory::desc* constantLayout = nullptr);

// "oneDNN <what>, <impl>, constant weights reordered, post-ops ..." (without the closing ")").
std::string kernelDescription(const std::string& what, const std::string& impl,
                              const PrimitiveInputs& in, const HeldWeights& held,
                              const PostOpsPlan& post);

// ---- onednn_kernels.cpp: the kernels that run primitives ----

// The calling thread's stream, made on its first call.
dnnl::stream& threadStream();
// Per-thread scratch of at least `bytes` for a library call (64-byte aligned, no contents kept):
// a call runs on one thread and does not nest.
std::byte* threadScratch(size_t bytes);

// A kernel that only says what createOneDnnKernel would make (probeOneDnnKernel): its run() is an
// error.
std::unique_ptr<LibraryKernel> makeProbedKernel(std::string description,
                                                std::vector<size_t> blockable = {},
                                                std::string layout = "");

// A oneDNN primitive with its memory descriptors, ready to run on Kiln's buffers.
std::unique_ptr<LibraryKernel>
makeOneDnnKernel(dnnl::primitive prim, memory::desc src, memory::desc weights, memory::desc dst,
                 memory::desc scratch, HeldWeights held, std::optional<PostOpsPlan::Binary> bias,
                 std::vector<PostOpsPlan::Binary> binaries, int threads, std::string description);

// An operand of a blocked convolution (one of its blockable buffers).
struct BlockedOperand {
  size_t position = 0;          // in run()'s buffers
  int arg = DNNL_ARG_SRC;       // the primitive's argument
  memory::desc plain, blocked;  // the IR layout and the blocked one
  bool stored = false;          // the buffer holds the blocked layout already
  // A residual that a Winograd convolution adds through its `sum` post-op: it is copied (or
  // reordered) into the result before the primitive runs, instead of being an argument.
  bool sum = false;
};

// A convolution computing in nChw8c or nChw16c (`layout`): operands[0] is the source, operands[1]
// the result, then the residual-shaped post-op operands.
std::unique_ptr<LibraryKernel> makeBlockedConvolution(dnnl::primitive prim, memory::desc weights,
                                                      memory::desc scratch, HeldWeights held,
                                                      std::vector<BlockedOperand> operands,
                                                      std::vector<PostOpsPlan::Binary> binaries,
                                                      std::optional<PostOpsPlan::Binary> bias,
                                                      int threads, std::string description,
                                                      std::string layout);

// ---- onednn_measure.cpp: timing kernels against each other ----

// The best run time (ms) of each of two primitives of one convolution.
struct ConvolutionTimes {
  double first = 0, second = 0;
};

// Times the primitives of `a` and `b` on zeroed scratch operands with `threads` OpenMP threads:
// one warm-up run each, then `rounds` runs each, taking turns. Timings run one at a time in a
// process, and each `key` (what sets the kernels: shapes, layouts, threads) is timed once in it:
// resnet50's sixteen 3x3 layers have four shapes.
StatusOr<ConvolutionTimes> timeConvolutions(const dnnl::convolution_forward::primitive_desc& a,
                                            const dnnl::convolution_forward::primitive_desc& b,
                                            int threads, int rounds, const std::string& key);

// ---- the primitives of each node ----

// Builds the primitive from `makePd(weightsDesc, attr, bias)` (bias: the plan's bias descriptor
// or null; planPostOps takes one along dst axis `biasAxis`, if >= 0). With constant weights the
// primitive may choose their layout (format `any`); when it differs from the constant's own, the
// constant is reordered into it once, here.
template <typename Primitive, typename MakePd>
StatusOr<std::unique_ptr<LibraryKernel>>
finish(const Node& n, int threads, const memory::desc& src, const memory::desc& weights,
       const memory::desc& dst, MakePd makePd, const std::string& what,
       const std::vector<kernel::PostOp>& postOps,
       const std::vector<std::vector<int64_t>>& axisDims, const PackedWeights* prepacked,
       int biasAxis, bool probe, const memory::desc* constantLayout = nullptr) {
  KILN_ASSIGN_OR_RETURN(PostOpsPlan post, planPostOps(postOps, n.result(0)->type().staticDims(),
                                                      axisDims, nullptr, biasAxis));
  PrimitiveInputs in = primitiveInputs(n, weights, post, !postOps.empty(), constantLayout);
  auto pd = makePd(in.weights, in.attr, post.bias ? &post.bias->desc : nullptr);
  // The bias memory as the primitive takes it (a convolution's is 1-D, makePd's conversion).
  if (post.bias) post.bias->desc = pd.bias_desc();
  // A reference implementation is never used: the caller takes another formulation (with
  // post-ops: the kernel without them and a pass over the result).
  const std::string impl = pd.impl_info_str();
  if (slowImplementation(impl))
    return slowImplementationError(postOps.empty() ? what : what + " with these post-ops", impl);
  // oneDNN 2.6's gemm-based convolution addresses a binary post-op operand that is not
  // per-channel (a residual) wrongly: measured against the interpreter, see docs/codegen.md.
  if (n.op() == OpCode::Convolution && post.nonChannelOperand &&
      impl.find("gemm") != std::string::npos)
    return Status::error("oneDNN's " + impl +
                         " convolution mis-addresses post-op operands that are not per-channel");
  if (probe) return makeProbedKernel(kernelDescription(what, impl, in, HeldWeights{}, post) + ")");
  KILN_ASSIGN_OR_RETURN(HeldWeights held,
                        packWeights(in.constant, in.held, weights, pd.weights_desc(), prepacked));
  std::string desc = kernelDescription(what, impl, in, held, post) + ")";
  return makeOneDnnKernel(Primitive(pd), src, weights, dst, pd.scratchpad_desc(), std::move(held),
                          std::move(post.bias), std::move(post.binaries), threads, std::move(desc));
}

// The primitives of each node: `probe` stops once the implementation is known (no primitive,
// no weights reordered) and returns makeProbedKernel's stand-in.

// onednn_matmul.cpp: dot_general -> matmul.
// `dstStrides`: the result's strides where it is a strided slice (empty: row-major).
StatusOr<std::unique_ptr<LibraryKernel>> createMatmul(const Node& n,
                                                      const std::vector<kernel::PostOp>& postOps,
                                                      int threads, const PackedWeights* prepacked,
                                                      bool probe,
                                                      const std::vector<int64_t>& dstStrides = {});

// onednn_rnn.cpp: lstm -> lstm_forward, gru -> gru_forward or lbr_gru_forward, the constant
// weights packed once. No post-ops; the states and sequences as the IR stores them.
StatusOr<std::unique_ptr<LibraryKernel>> createRecurrence(const Node& n, int threads, bool probe);
// The data of constant operand i of a recurrence, or why not (its weights are packed once).
StatusOr<const Tensor*> constantOperand(const Node& n, size_t i, const char* what);

// onednn_convolution.cpp: convolution -> convolution_forward; one with lhs_dilation (a transposed
// convolution) -> createDeconvolution. `blocked`: compute in the blocked layout where oneDNN
// takes it (CallForm::layout).
StatusOr<std::unique_ptr<LibraryKernel>>
createConvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                  const PackedWeights* prepacked, bool probe,
                  const std::vector<int64_t>& dstStrides, bool blocked);

// A convolution's operands and result as oneDNN axes (batch, feature, spatial...: src and dst
// over the IR's strides, weights (groups,) out, in, spatial...), with its window parameters as
// oneDNN counts them. lhs_dilation is refused unless `transposed` (then in `lhsDil`). `dstStrides`
// replaces the result's row-major strides (a strided slice; empty: row-major).
struct ConvAxes {
  std::vector<Axis> src, wei, dst;
  std::vector<std::vector<int64_t>> dstDims;  // the result dims each dst axis covers
  std::string what;                           // "convolution (nhwc, ohwi -> nhwc, 3x3, ..."
  std::vector<int64_t> window;                // the kernel's spatial extents
  std::vector<int64_t> strides, lhsDil, rhsDil, lo, hi;
  std::vector<int64_t> kernelSpatial;  // the kernel operand's spatial dims (IR order)
  Dims dStrides, dDilation, dLo, dHi;
  int64_t groups = 1, inC = 0, kO = 0;
  size_t ns = 0;  // spatial dims
};
StatusOr<ConvAxes> convAxes(const Node& n, bool transposed = false,
                            const std::vector<int64_t>& dstStrides = {});

// onednn_deconvolution.cpp: a convolution with lhs_dilation (the transposed convolution ONNX's
// ConvTranspose imports as) -> deconvolution_forward with the constant kernel flipped back.
StatusOr<std::unique_ptr<LibraryKernel>>
createDeconvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                    const PackedWeights* prepacked, bool probe,
                    const std::vector<int64_t>& dstStrides = {});

}  // namespace kiln::codegen::cpu::onednn
