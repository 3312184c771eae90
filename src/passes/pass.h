// Graph passes. A pass transforms a module and says whether it changed anything.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

class Pass {
 public:
  virtual ~Pass() = default;
  // The flag name, also the file name: "decompose-composites" <-> decompose_composites.cpp.
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Returns whether the module changed; an error for input the pass cannot handle.
  virtual StatusOr<bool> run(Module& m) = 0;
};

// A pass from its flag name, description and function; a pass with options (a pass spec's
// "name=options") binds them in `run`.
std::unique_ptr<Pass> makePass(std::string name, std::string description,
                               std::function<StatusOr<bool>(Module&)> run);

// Every registered pass, by flag name.
std::vector<std::string> passNames();
std::unique_ptr<Pass> createPass(const std::string& name);  // nullptr if unknown

// Runs passes in order, verifying after each one when `verifyEach`.
Status runPasses(Module& m, const std::vector<std::string>& names, bool verifyEach);

}  // namespace kiln
