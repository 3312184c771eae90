// Library calls of cuda programs. See library_call.h.
#include "codegen/cuda/library_call.h"

#include "codegen/cuda/conv.h"
#include "codegen/cuda/cublaslt.h"
#include "codegen/cuda/gemm.h"
#ifdef KILN_HAVE_CUDNN
#include "codegen/cuda/cudnn.h"
#endif

namespace kiln::codegen::cuda {

std::optional<std::string> libraryFor(const kernel::Kernel& k, const kernel::Stmt& call,
                                      std::string* why) {
  std::string reason;
  if (call.op == OpCode::DotGeneral) {
    if (gemmShape(k, call, &reason)) return "cuBLASLt";
    if (why) *why = "cuBLASLt does not take " + reason;
  } else if (call.op == OpCode::Convolution) {
#ifndef KILN_HAVE_CUDNN
    if (why) *why = "this build has no cuDNN";
    return std::nullopt;
#endif
    if (convShape(k, call, &reason)) return "cuDNN";
    if (why) *why = "cuDNN does not take " + reason;
  } else if (why) {
    *why = "no GPU library takes " + std::string(opName(call.op));
  }
  return std::nullopt;
}

StatusOr<std::unique_ptr<LibraryCall>> makeLibraryCall(const kernel::Kernel& k,
                                                       const kernel::Stmt& call, bool tf32) {
  std::string why;
  if (!call.postOps.empty()) why = "post-ops";
  if (why.empty() && call.op == OpCode::DotGeneral) {
    if (std::optional<GemmShape> g = gemmShape(k, call, &why)) {
      g->tf32 = tf32 && g->type == DType::F32;
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Gemm> gemm, Gemm::create(*g));
      return std::unique_ptr<LibraryCall>(std::move(gemm));
    }
  }
#ifdef KILN_HAVE_CUDNN
  if (why.empty() && call.op == OpCode::Convolution) {
    if (std::optional<ConvShape> c = convShape(k, call, &why)) {
      c->tf32 = tf32 && c->type == DType::F32;
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Conv> conv, Conv::create(*c));
      return std::unique_ptr<LibraryCall>(std::move(conv));
    }
  }
#endif
  if (why.empty()) libraryFor(k, call, &why);
  return Status::error("kernel " + k.name + ": library call " + call.callee +
                       " has no GPU kernel (" + why + ")");
}

}  // namespace kiln::codegen::cuda
