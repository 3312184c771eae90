// Held constants: the constants only library kernels read, each holding its own copy (private to
// the CPU program, cpu_program.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "codegen/cpu/cpu_program.h"

namespace kiln::codegen::cpu {

// The constants whose every reader is a library kernel holding its own copy of them
// (LibraryKernel::holdsWeights) and reading them as its weights: their data can be freed
// (CompileOptions::dropHeldConstants), and an artifact stores them only in the kernels' layouts.
// Told of each library call once it is prepared (from any thread), it finds such a constant as
// soon as its last reader holds it. With `drop` it frees the data right then (the constant
// becomes ConstantData::held), so that a compile does not keep every constant and every held
// copy at once.
class CpuProgram::HeldConstants {
 public:
  HeldConstants(Impl& impl, const Function& f, bool drop);
  ~HeldConstants();
  // Called once `call` is prepared (from any thread).
  void prepared(const LibraryCall& call);
  // The constant nodes found held so far.
  const std::set<const Node*>& found() const { return found_; }

 private:
  // Returns the heap's free memory to the system (glibc; elsewhere nothing).
  void trim();

  struct Entry {
    int readers = 0;   // reading kernels not yet prepared
    bool held = true;  // every reader so far holds it as its weights
  };
  const bool drop_;
  std::mutex mu_;
  std::map<const Value*, Entry> values_;
  std::map<const LibraryCall*, const Value*> weightsOf_;  // the constant a call reads as weights
  std::set<const Node*> found_;
  int64_t& dropped_;
  int64_t untrimmed_ = 0;  // bytes freed since the heap was last trimmed
};

// A constant without data (an artifact stores it only in its readers' layouts) must be held by
// every reader: an error naming the first that does not.
Status checkHeldConstants(CpuProgram::Impl& impl);

}  // namespace kiln::codegen::cpu
