// Kiln's linker for its own object code: loads an x86-64 ELF relocatable object (what CpuCompiler
// emits: CpuCompiler::lastObject, an artifact's "object.N" section) into memory of this process,
// resolves its symbols and relocations, and returns its kernels' entry points.
//
// The code is generated with LLVM's large code model and static relocation model, so every
// reference (to a constant, to another function, to memcpy or kiln_cpu_parallel_for) is a 64-bit
// absolute address: the object holds only R_X86_64_64 relocations (and PC-relative ones between
// its own sections, which lie in one mapping). There is no GOT, no PLT and no lazy binding; a
// symbol the object does not define is kiln_cpu_parallel_for or what dlsym finds in the process.
//
// Loading needs no LLVM: a process that runs an artifact links its code in well under a
// millisecond, against 7-8 ms for creating an LLVM JIT and linking through it (most of that the
// first touch of LLVM's own code). Sections are laid out in one mapping, grouped by protection:
// code read+execute, constants read-only, writable data read+write.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cpu/cpu_codegen.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Loads `object` and returns the kernels whose entry symbols are `symbols`, in that order. The
// loaded code stays mapped while any of them lives. A malformed object, a relocation or section
// kind this loader does not handle, or a symbol that cannot be resolved is an error that names it.
StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
linkObject(std::string_view object, const std::vector<std::string>& symbols);

}  // namespace kiln::codegen::cpu
