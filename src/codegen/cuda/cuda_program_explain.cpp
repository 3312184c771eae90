// What the cuda program tells `kiln explain` and an artifact: its launches and library calls,
// and its code. See cuda_program.h.
#include <map>
#include <set>
#include <string>

#include "codegen/cuda/cuda_program_device.h"
#include "ir/text/text.h"
#include "kernel/kernel_ir.h"
#include "support/hash.h"

namespace kiln::codegen::cuda {

// Distinct generated functions (launches that print the same share one, cuda_source.h).
int CudaProgram::uniqueKernels() const {
  std::set<std::string> functions;
  for (const auto& ls : impl_->source.launches)
    for (const Launch& l : ls)
      if (!l.call) functions.insert(l.function);
  return static_cast<int>(functions.size());
}

std::string CudaProgram::libraryCalls() const {
  std::map<std::string, int> count;  // "cuDNN convolution" -> 20
  for (size_t i = 0; i < impl_->kernels.size(); ++i)
    for (const Launch& l : impl_->source.launches[i])
      if (l.call)
        ++count[libraryFor(impl_->kernels[i], *l.call, nullptr).value_or("?") + " " +
                std::string(opName(l.call->op))];
  if (count.empty()) return "none (Kiln's own CUDA kernels)";
  std::string text;
  for (const auto& [what, n] : count)
    text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  return text;
}

std::string CudaProgram::uncapturedReason() const {
  StatusOr<std::shared_ptr<Device>> d = device();
  if (!d) return "";
  std::lock_guard<std::mutex> lock((*d)->mu);
  return (*d)->graphs ? "" : "CUDA graphs off: " + (*d)->graphsOff;
}

// A line per launch: its function with grid and block, or its library call. With a GPU the
// module is loaded: each function's registers and shared memory, each call's algorithm.
std::string CudaProgram::libraryCallDetails() const {
  const Impl& m = *impl_;
  StatusOr<std::shared_ptr<Device>> d = device();
  std::string text = d ? "" : "  (" + d.status().message() + ": no registers or algorithms)\n";
  if (d) {
    const std::string off = uncapturedReason();
    text += off.empty() ? "  (a run memory's second run at a size captures these launches into a "
                          "CUDA graph; later runs at that size replay it)\n"
                        : "  (" + off + ")\n";
  }
  for (size_t i = 0; i < m.kernels.size(); ++i)
    for (size_t j = 0; j < m.source.launches[i].size(); ++j) {
      const Launch& l = m.source.launches[i][j];
      text += "  " + m.kernels[i].name + "  ";
      if (l.call && d && (*d)->calls[i][j]) {
        text += (*d)->calls[i][j]->describe() + "\n";
      } else if (l.call) {
        text +=
            libraryFor(m.kernels[i], *l.call, nullptr).value_or("?") + " " + l.call->callee() +
            (kernel::isSymbolicCall(m.kernels[i], *l.call) ? ", made for each run's sizes" : "") +
            "\n";
      } else {
        const std::string grid = l.gridExtent ? kernel::printExpr(l.gridExtent) + " (at most " +
                                                    std::to_string(l.grid) + ")"
                                              : std::to_string(l.grid);
        text += l.function + " grid " + grid + " block " + std::to_string(l.block);
        if (d) text += ", " + (*d)->driver->describeFunction((*d)->functions[i][j]);
        text += "\n";
      }
    }
  return text;
}

std::string CudaProgram::sourceHash() const { return hex64(hash64(impl_->source.source)); }

void CudaProgram::artifactParts(runtime::ArtifactParts& parts) const {
  const Impl& m = *impl_;
  PrintOptions po;
  po.blob = &parts.blob;
  parts.add("module", printModule(*m.module, po));
  parts.sections["blob"] = parts.blob.pieces;
  parts.add("cuda.arch", m.code.arch);
  parts.add("cuda.version", std::to_string(m.code.cudaVersion));
  parts.add("cuda.source", sourceHash());
  parts.sections["cuda.cubin"].push_back(m.code.cubin);
}

}  // namespace kiln::codegen::cuda
