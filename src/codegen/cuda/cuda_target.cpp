// The cuda target: its graph passes, schedule, and building and loading its programs. See
// cuda_target.h.
#include "codegen/cuda/cuda_target.h"

#include <algorithm>
#include <cstdlib>

#include "codegen/cuda/cuda_program.h"
#include "codegen/cuda/library_call.h"
#include "compiler/compile.h"
#include "kernel/expand_calls.h"
#include "kernel/gpu_schedule.h"
#include "kernel/post_op_loops.h"
#include "kernel/schedule.h"
#include "kernel/simplify.h"
#include "passes/pipeline.h"

namespace kiln::codegen::cuda {
namespace {

// Threads per block of a launch: 8 warps, enough to hide memory latency with a few blocks per
// multiprocessor and small enough for any kernel's registers.
constexpr int64_t kThreadsPerBlock = 256;
// The widest load and store of a thread: 128 bits.
constexpr int64_t kAccessBytes = 16;

// The architecture code is compiled for when no --cuda-arch is given: the GPU's, else the
// H100/H200's (NVRTC needs no GPU).
std::string defaultArch() {
  StatusOr<const Driver*> d = Driver::get();
  return d ? (*d)->device().arch : "sm_90";
}

// `k` with its calls on a library where one takes them all (library_call.h;
// CompileOptions::libraryCalls), else as Kiln's loops (kernel/expand_calls.h); the choice and its
// reason go into the kernel's notes.
StatusOr<kernel::Kernel> libraryCallsOrLoops(kernel::Kernel k, const CompileOptions& options) {
  std::vector<const kernel::Stmt*> calls = kernel::callsOf(k);
  if (calls.empty()) return k;
  std::vector<std::string> notes;
  bool library = options.libraryCalls;
  for (const kernel::Stmt* c : calls) {
    std::string why = "--no-library-calls";
    std::optional<std::string> lib = options.libraryCalls ? libraryFor(k, *c, &why) : std::nullopt;
    notes.push_back(c->callee() + (lib ? " on " + *lib : " as Kiln's loops: " + why));
    library = library && lib.has_value();
  }
  if (!library) {
    KILN_ASSIGN_OR_RETURN(k, kernel::expandCalls(k));
    k.notes.insert(k.notes.end(), notes.begin(), notes.end());
    return k;
  }
  k.notes.insert(k.notes.end(), notes.begin(), notes.end());
  // The post-ops each library applies stay on its call, the others run as a loop nest after it.
  for (size_t i = 0; i < kernel::callsOf(k).size(); ++i) {
    const kernel::Stmt* c = kernel::callsOf(k)[i];
    if (c->postOps.empty()) continue;
    std::string what, why;
    const size_t keep = libraryEpilogue(k, *c, &what, &why);
    if (keep) k.notes.push_back(c->callee() + ": epilogue " + what + " in the library call");
    if (keep == c->postOps.size()) continue;
    k.notes.push_back(c->callee() + ": post-ops from " + kernel::postOpName(c->postOps[keep].kind) +
                      " on as a loop nest (" + why + ")");
    KILN_ASSIGN_OR_RETURN(kernel::PostOpLoops split, kernel::postOpsAsLoops(k, *c, keep));
    k = kernel::replaceStmt(k, c, kernel::block({split.call, split.loops}));
  }
  return k;
}

class CudaTarget final : public runtime::Target {
 public:
  std::string name() const override { return "cuda"; }
  std::string machine() const override { return defaultArch(); }
  std::string describeMachine() const override {
    StatusOr<const Driver*> d = Driver::get();
    if (!d) return "no GPU (" + d.status().message() + "); " + nvrtcVersionString();
    const DeviceInfo& i = (*d)->device();
    return i.name + " (" + i.arch + ", " + std::to_string(i.sms) + " SMs, " +
           std::to_string(i.memory >> 30) + " GiB), " + nvrtcVersionString();
  }

  // Attention runs as two matrix products around a softmax kernel until a fused kernel lands,
  // f16/bf16 scores stored in that type (cuBLASLt accumulates in f32, the softmax kernel computes
  // in f32); lstm and gru unroll over their steps (no whole-sequence recurrence kernel here yet).
  Status graphPasses(Module& module, PassManager& pm, const CompileOptions&) const override {
    KILN_ASSIGN_OR_RETURN(bool unrolled, pm.runPass("decompose-recurrences", module));
    // The steps' slices, reshapes and transposes simplify as the importer's unrolling did.
    if (unrolled) KILN_RETURN_IF_ERROR(runCleanup(module, pm).status());
    return pm.runPass("split-attention-stored-low", module).status();
  }
  // The products' and convolutions' epilogues in every precision: the libraries take what they
  // can (libraryEpilogue), the rest runs as a loop nest after the call.
  fusion::EpiloguePolicy epiloguePolicy() const override {
    fusion::EpiloguePolicy p;
    p.types = {DType::F32, DType::F16, DType::BF16};
    return p;
  }
  // cuDNN's tensor-core convolutions want NHWC (OHWI kernels); f32 ones on FMA units run as
  // fast or faster in NCHW, which also needs no transposes around ONNX's NCHW graphs.
  LayoutTarget layoutTarget(const CompileOptions& options) const override {
    return LayoutTarget{options.precision == "f32" ? ConvLayout::ChannelsFirst
                                                   : ConvLayout::ChannelsLastOhwi};
  }

  // Matrix products cuBLASLt takes and convolutions cuDNN takes stay library calls (their
  // post-ops a loop nest after them), other calls run as Kiln's loops; transposes go through a
  // tile in shared memory; rows of accumulators
  // become a reduction per output element, the innermost loop of a nest of stores runs a group
  // of consecutive elements per thread (16-byte accesses), the outer loops of every nest map to the
  // grid, rows of a warp or more to a block each (gpu_schedule.h), and the reductions left run
  // serially in their thread; then the indices are simplified again, since the grid's flat index
  // split into a nest's dims mostly recombines (a thread per element of a dense tensor indexes it
  // directly), and the lanes' aligned groups become wide copies (wideAccesses).
  Status schedule(std::vector<kernel::Kernel>& kernels,
                  const CompileOptions& options) const override {
    for (kernel::Kernel& k : kernels) {
      KILN_ASSIGN_OR_RETURN(k, libraryCallsOrLoops(k, options));
      k = kernel::tileTransposes(k, kThreadsPerBlock);
      k = kernel::vectorizeLanes(kernel::reductionsPerOutput(k, kAccessBytes), kAccessBytes);
      k = kernel::mapToGpu(k, kThreadsPerBlock, options.reassociate, kAccessBytes);
      k = kernel::wideAccesses(kernel::simplifyIndices(kernel::lowerReductions(k)));
    }
    return Status::ok();
  }

  StatusOr<std::unique_ptr<runtime::Program>> build(std::unique_ptr<Module> module,
                                                    fusion::FusionPlan plan,
                                                    std::vector<kernel::Kernel> kernels,
                                                    const CompileOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CudaProgram> p,
                          CudaProgram::build(std::move(module), std::move(plan), std::move(kernels),
                                             options, defaultArch()));
    return std::unique_ptr<runtime::Program>(std::move(p));
  }

  // The artifact's module and cubin; the driver's fusion, lowering and schedule run again and
  // must print the source the cubin was compiled from.
  StatusOr<std::unique_ptr<runtime::Program>>
  load(const runtime::DecodedArtifact& s, const std::string& source, const CompileOptions& options,
       std::shared_ptr<const MappedFile> mapping) const override {
    if (!s.has("cuda.cubin") || !s.has("cuda.arch") || !s.has("cuda.source") ||
        !s.has("cuda.version"))
      return Status::error(source + ": the artifact has no CUDA code");
    CompiledModule code;
    code.cubin = std::string(s["cuda.cubin"]);
    code.arch = std::string(s["cuda.arch"]);
    code.cudaVersion = std::atoi(std::string(s["cuda.version"]).c_str());
    const std::string hash(s["cuda.source"]);
    KILN_ASSIGN_OR_RETURN(compiler::Reloaded r, compiler::reload(*this, s, source, mapping));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CudaProgram> p,
                          CudaProgram::build(std::move(r.module), std::move(r.plan),
                                             std::move(r.kernels), options, code.arch, &code));
    if (p->sourceHash() != hash)
      return Status::error(source + ": its CUDA code (" + hash +
                           ") is not what this Kiln prints for its kernel IR (" + p->sourceHash() +
                           "): compile the model again");
    p->times() = r.times;
    KILN_RETURN_IF_ERROR(compiler::planProgramBuffers(*p));
    return std::unique_ptr<runtime::Program>(std::move(p));
  }

  bool isWeightSection(const std::string& name) const override { return name == "blob"; }
};

}  // namespace

std::unique_ptr<runtime::Target> makeCudaTarget() { return std::make_unique<CudaTarget>(); }

}  // namespace kiln::codegen::cuda
