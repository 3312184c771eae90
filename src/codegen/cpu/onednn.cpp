// oneDNN library kernels: dot_general -> matmul, convolution -> convolution_forward. See
// onednn.h for what is covered and docs/codegen.md ("Library kernels (oneDNN)") for the design.
//
// Every operand and result is described to oneDNN by its logical dims and the strides it has in
// Kiln's dense row-major buffer, so a primitive reads and writes the runtime's buffers in place.
// Only constant weights may be reordered, once, into the layout the primitive prefers.
//
// This file: the entry point (createOneDnnKernel), the engine and the descriptor helpers; the
// rest is split by responsibility (onednn_internal.h lists the files).
#include "codegen/cpu/onednn.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "codegen/cpu/grouped_conv_kernel.h"
#include "codegen/cpu/onednn_internal.h"
#include "codegen/cpu/panel_product.h"
#include "codegen/cpu/pointwise_conv_kernel.h"
#include "codegen/cpu/rnn_kernel.h"
#include "ir/op.h"
#include "ir/types.h"

namespace kiln::codegen::cpu {
namespace onednn {

const dnnl::engine& cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool avx512() {
  static const bool yes = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & core) == core;
  }();
  return yes;
}

memory::desc stridedDesc(std::vector<Axis> axes, bool denseUnitDims) {
  for (size_t i = axes.size(); i-- > 0;) {
    if (axes[i].ext != 1 || !denseUnitDims) continue;
    int64_t span = 1;
    for (size_t j = i + 1; j < axes.size(); ++j)
      span = std::max(span, axes[j].ext * axes[j].stride);
    axes[i].stride = span;
  }
  Dims dims, strides;
  for (const Axis& a : axes) {
    dims.push_back(a.ext);
    strides.push_back(a.stride);
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

bool slowImplementation(const std::string& impl) {
  // The implementation's name is what precedes the ISA ("ref:any", "jit:avx512_core").
  const std::string name = impl.substr(0, impl.find(':'));
  return name == "ref" || name.rfind("ref_", 0) == 0 || name == "simple" ||
         name.rfind("simple_", 0) == 0;
}

Status slowImplementationError(const std::string& what, const std::string& impl) {
  return Status::error("oneDNN has only its reference implementation (" + impl + ") for " + what);
}

std::vector<int64_t> rowMajor(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::string joinDims(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// The static, non-empty dims of an f32 value, or why not.
StatusOr<std::vector<int64_t>> f32Dims(const Value* v, const char* what) {
  const TensorType& t = v->type();
  if (t.dtype() != DType::F32)
    return Status::error(std::string(what) + " is " + t.str() + "; only f32 is supported");
  if (!t.isStatic()) return Status::error(std::string(what) + " has symbolic dims");
  std::vector<int64_t> d = t.staticDims();
  for (int64_t e : d)
    if (e == 0) return Status::error(std::string(what) + " is empty");
  return d;
}

}  // namespace onednn

bool oneDnnAvx512() { return onednn::avx512(); }
bool oneDnnWinograd() { return onednn::avx512(); }

namespace {

StatusOr<std::unique_ptr<LibraryKernel>> create(const Node& n,
                                                const std::vector<kernel::PostOp>& postOps,
                                                int threads, const CallForm& form, bool probe) {
  const PackedWeights* prepacked = form.prepacked;
  const std::vector<int64_t>& dstStrides = form.dstStrides;
  const bool recurrence = n.op() == OpCode::Lstm || n.op() == OpCode::Gru;
  if (!recurrence && (n.numOperands() != 2 || n.numResults() != 1))
    return Status::error(n.describe() + ": expected two operands and one result");
  if (recurrence && (!postOps.empty() || !dstStrides.empty()))
    return Status::error(n.describe() + ": no oneDNN kernel: a recurrence takes no post-ops and "
                                        "writes dense results");
  try {
    // Primitives read the thread count when they are created (jit kernels size their work
    // split by it), so creation runs under the same limit as run().
    onednn::OmpThreadsScope scope(threads);
    StatusOr<std::unique_ptr<LibraryKernel>> k =
        Status::error("not a dot_general, convolution, lstm or gru");
    if (n.op() == OpCode::DotGeneral && dstStrides.empty() && panelProductTakes(n, threads)) {
      // Kiln's panel product where it takes the call (panel_product.h says why); its post-ops
      // then run as loops after it.
      if (!postOps.empty())
        return Status::error(n.describe() +
                             ": Kiln's panel product takes it without its post-ops, which run as "
                             "loops after it (panel_product.h)");
      k = createPanelProduct(n, threads, prepacked, probe);
    } else if (n.op() == OpCode::DotGeneral) {
      k = onednn::createMatmul(n, postOps, threads, prepacked, probe, dstStrides);
    } else if (n.op() == OpCode::Convolution) {
      // Kiln's 1x1 or grouped kernel where it takes the call on the IR's layout
      // (pointwise_conv_kernel.h and grouped_conv_kernel.h say why), else oneDNN's.
      const bool blocked =
          form.layout ? !form.layout->empty() : !blockedConvolutionLayout(n, n.operand(0)).empty();
      if (groupedConvKernelRuns() && dstStrides.empty() && !blocked) {
        k = createPointwiseConvKernel(n, postOps, threads, probe);
        if (!k) k = createGroupedConvKernel(n, postOps, threads, probe);
      }
      if (!k)
        k = onednn::createConvolution(n, postOps, threads, prepacked, probe, dstStrides, blocked);
    } else if (recurrence) {
      // lstm and gru: Kiln's kernel where it takes them (rnn_kernel.h says why), else oneDNN's.
      if (rnnKernelRuns()) k = createRnnKernel(n, threads, probe);
      if (!k) k = onednn::createRecurrence(n, threads, probe);
    }
    if (!k) return Status(k.status()).prefix(n.describe() + ": no oneDNN kernel");
    return k;
  } catch (const dnnl::error& e) {
    return Status::error(n.describe() + ": no oneDNN kernel: oneDNN error: " + e.what());
  } catch (const std::exception& e) {
    return Status::error(n.describe() + ": no oneDNN kernel: " + e.what());
  }
}

}  // namespace

StatusOr<std::unique_ptr<LibraryKernel>>
createOneDnnKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                   const CallForm& form) {
  return create(n, postOps, threads, form, /*probe=*/false);
}

StatusOr<ProbedKernel> probeOneDnnKernel(const Node& n, const std::vector<kernel::PostOp>& postOps,
                                         int threads, const CallForm& form) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LibraryKernel> k,
                        create(n, postOps, threads, form, /*probe=*/true));
  return ProbedKernel{k->describe(), k->blockableBuffers(), k->blockedLayout()};
}

std::vector<int64_t> resultStrides(const kernel::Kernel& k, const kernel::Stmt& call) {
  const size_t operands = kernel::callOperands(call);
  if (call.args.size() <= operands) return {};
  const kernel::Buffer* b = k.find(call.args[operands]);
  if (!b || !b->view || b->view->rowLength == b->view->pitch) return {};
  // Dims before the concatenated axis step over whole rows: a row is `pitch` elements apart.
  std::vector<int64_t> s = onednn::rowMajor(b->shape);
  for (int64_t& v : s)
    if (v >= b->view->rowLength) v = v / b->view->rowLength * b->view->pitch;
  return s;
}

}  // namespace kiln::codegen::cpu
