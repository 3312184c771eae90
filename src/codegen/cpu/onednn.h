// Library kernels: oneDNN (Debian libdnnl-dev, 2.6) primitives for the contractions of the graph
// IR, prepared once per node at compile time and run by the runtime for a kernel IR Call.
//
// createOneDnnKernel maps a node onto one oneDNN primitive whose memory descriptors carry the
// IR's dense row-major strides, so operands and results are used in place (no copies, no
// reorders at run time):
//  - f32 dot_general -> matmul. The batch dim pairs become oneDNN batch dims; the lhs free dims
//    become M (runs of lhs free dims that cannot be merged into one strided dim become further
//    batch dims over which the rhs is broadcast); the rhs free dims must merge into one N, and
//    the contracting dims into one K. Transposed operands (contracting dim first or last) are
//    strided descriptors.
//  - f32 convolution of rank 3, 4 or 5 (1-D, 2-D, 3-D) with any dimension_numbers, strides,
//    non-negative padding, rhs_dilation and feature_group_count -> convolution_forward
//    (inference). batch_group_count other than 1 is refused.
//  - f32 convolution with lhs_dilation (a transposed convolution) and constant weights ->
//    deconvolution_forward, the kernel flipped back once when the kernel is created.
// Everything else (other dtypes, symbolic or zero extents, negative padding, ...) is an error
// that says why, and so is a primitive for which oneDNN has only a reference implementation
// (slowImplementation): the caller then takes another formulation.
//
// Post-ops (kernel_ir.h, PostOp) become oneDNN post-ops: add and mul are binary post-ops whose
// operand is described over the dst's axes (broadcast axes have extent 1), clamp is relu or
// clip, sigmoid, tanh and gelu are eltwise post-ops. An add of a per-channel operand (per column
// of a matmul) with only adds before it is the primitive's bias argument instead. buffers of run()
// then continue with the add/mul operands' data. Post-ops that oneDNN would run only in its
// reference implementation are an error (the caller then applies them itself after the kernel
// without post-ops).
//
// A 2-D convolution of one group with a window larger than 1x1 whose channel counts are multiples
// of the channel block (16 where oneDNN runs AVX-512 code, else 8) computes in oneDNN's blocked
// nChw16c or nChw8c layout (docs/codegen.md): its source, result and residual-shaped post-op
// operands are reordered into and out of scratch on each run unless the runtime stores them
// blocked (storeBlocked). So does a 1x1 convolution whose source comes from such a layer through
// elementwise ops (and other such 1x1 layers). Other convolutions (depthwise ones and the 1x1
// layers among them, whose kernels run faster on nhwc) and matmuls use the IR's buffers in place. A
// blocked 3x3 convolution of stride 1 with constant weights is a Winograd convolution where oneDNN
// has one (oneDnnWinograd()) and its post-ops fit (a per-channel add as the bias, one residual add,
// relu last).
//
// When the weights operand (operand 1) is a `constant`, the primitive may pick the weights
// layout it prefers; the constant is then reordered into that layout once, here, unless the
// caller brings the weights already in that layout (PackedWeights, from an artifact). Otherwise
// the weights are read as they are.
//
// Threads: this oneDNN uses the OpenMP runtime (libgomp). A kernel sets the calling thread's
// OpenMP thread count (omp_set_num_threads, which in libgomp is a per-thread setting for
// threads not created by OpenMP) to `threads` while it creates its primitive and while it runs,
// and restores it afterwards. See docs/codegen.md, "Library kernels (oneDNN)".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Constant weights in the layout a library kernel chose for them, as an artifact stores them
// (LibraryKernel::packedWeights): a kernel created with them uses them in place instead of
// reordering its constant.
struct PackedWeights {
  // The layout, as text that names every field of oneDNN's memory descriptor: the weights are
  // used only when the new kernel's layout has the same text.
  std::string layout;
  std::string_view bytes;
  std::shared_ptr<const void> owner;  // keeps `bytes` valid (a mapped artifact)
};

// A library kernel prepared once at compile time for one node with static shapes; run() is
// thread-safe (may be called from several threads at once, each with its own buffers).
class LibraryKernel {
 public:
  virtual ~LibraryKernel() = default;
  // buffers: the node's operands' data, its result's data, then the data of the operands of
  // its add/mul post-ops; dense row-major as in the IR.
  virtual Status run(void* const* buffers) const = 0;
  // e.g. "oneDNN convolution (nhwc, 3x3, groups 32, jit:avx2)"
  virtual std::string describe() const = 0;

  // A kernel that computes in a blocked layout of its own (convolutions in nChw8c) reorders
  // some of its buffers into and out of that layout on every run. These are their positions in
  // run()'s array; the runtime may store a value in the blocked layout when every kernel that
  // writes or reads it lists it here, and then says so with storeBlocked().
  virtual std::vector<size_t> blockableBuffers() const { return {}; }
  // The buffers (positions in run()'s array, among blockableBuffers()) that hold their data in
  // the blocked layout: run() reads and writes them directly; the others are reordered, and the
  // kernel prepares their reorders here. Called before the first run (the runtime calls it on
  // every kernel with blockable buffers, with no positions when none is stored); a kernel never
  // told reorders every such buffer and prepares the reorders on its first run.
  virtual void storeBlocked(const std::vector<size_t>& positions) { (void)positions; }
  // The blocked layout's name ("nChw8c"), for the runtime's reports.
  virtual std::string blockedLayout() const { return ""; }
  // Whether it is Kiln's own kernel (the panel product, grouped convolutions, recurrences) rather
  // than a library's, for the run report.
  virtual bool kilnsOwn() const { return false; }
  // Whether the kernel holds its constant weights in a layout of its own (reordered once when
  // it was created) and never reads its weights buffer (run()'s buffers[1]).
  virtual bool holdsWeights() const { return false; }
  // The weights it holds in a layout of its own, if any (the bytes live as long as the kernel).
  virtual std::optional<PackedWeights> packedWeights() const { return std::nullopt; }
};

// Whether oneDNN runs its AVX-512 kernels on this machine: blocked convolutions then use nChw16c
// and a matrix product's constant weights oneDNN's own packed layout (without AVX-512: rows
// padded against cache-set conflicts, docs/codegen.md "Weights").
bool oneDnnAvx512();

// Whether oneDNN has Winograd kernels on this machine (they need AVX-512): a blocked 3x3
// convolution of stride 1 then runs as one (about 1.5-3x faster than the direct kernel on
// resnet's layers, docs/codegen.md "Winograd convolutions").
bool oneDnnWinograd();

// The flops of convolution `n` (as a direct convolution counts them) when oneDNN runs it as a
// Winograd convolution here (constant weights, the shape oneDNN's Winograd kernels take), else 0.
double winogradConvolutionFlops(const Node& n);

// How a call is made, beyond its node and post-ops.
struct CallForm {
  // The constant weights in the layout an earlier compile of the same call chose; used in place
  // when the primitive chooses the same layout, else ignored (the constant is reordered).
  const PackedWeights* prepacked = nullptr;
  // The result's element strides where its buffer is not row-major (a slice of a concatenation
  // written in place; resultStrides), empty where it is.
  std::vector<int64_t> dstStrides;
  // The blocked layout a convolution computes in (kernel::Stmt::layout, which
  // blockedConvolutionLayout chose when the target scheduled the call); empty: the IR's layout;
  // nullopt: blockedConvolutionLayout of the node and its source in the node's graph.
  std::optional<std::string> layout;
};

// The oneDNN kernel for `n` (a convolution or dot_general whose shapes and layout oneDNN can
// take directly) followed by `postOps`, or an error saying why not (the caller then takes
// another formulation). threads <= 0: the OpenMP default (one per CPU).
StatusOr<std::unique_ptr<LibraryKernel>>
createOneDnnKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                   const CallForm& form = {});

// What createOneDnnKernel would make of `n` with `postOps`, found without making it (the
// primitive descriptors only: no code generated, no weights reordered), or why there is none. A
// slow implementation (a reference one, onednn_internal.h slowImplementation) is an error, as in
// createOneDnnKernel: the CPU target's schedule asks this for every call and takes another
// formulation then.
struct ProbedKernel {
  std::string description;  // LibraryKernel::describe(): names oneDNN's implementation
  // LibraryKernel's functions of these names: none for a kernel on the IR's layout.
  std::vector<size_t> blockable;
  std::string layout;
};
StatusOr<ProbedKernel> probeOneDnnKernel(const Node& n, const std::vector<kernel::PostOp>& postOps,
                                         int threads, const CallForm& form = {});

// The blocked layout ("nChw16c", "nChw8c") convolution `n` computes in, or "" for the IR's: a
// 2-D convolution of one group with channel counts in whole blocks and a window larger than 1x1,
// or a 1x1 window whose source (`source`, a value of the program's graph; null when unknown)
// comes through elementwise ops from a layer that computes blocked. The CPU schedule records it
// on the call (choose_library_calls.h).
std::string blockedConvolutionLayout(const Node& n, const Value* source);

// The element strides of the result buffer of `call` (a Call of `k`) when it is a strided slice
// (kernel::Buffer::view: the rows of its dims from the concatenated axis on lie `pitch` apart);
// empty when it is row-major.
std::vector<int64_t> resultStrides(const kernel::Kernel& k, const kernel::Stmt& call);

}  // namespace kiln::codegen::cpu
