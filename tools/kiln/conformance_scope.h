// Internal to `kiln conformance`: decides whether a test is "in scope", from the model itself.
//
// Out of scope are tests that use strings, sequences, optionals or maps (in any graph input,
// output, value_info, initializer or constant, subgraphs included), ops of the training domain
// (ai.onnx.preview.training), and tests whose expected outputs are random draws: the random ops
// (Bernoulli, RandomNormal[Like], RandomUniform[Like], Multinomial) and Dropout in training mode
// with a ratio that is not known to be 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace kiln::conformance {

struct ScopeDecision {
  bool inScope = true;
  std::string reason;  // why not, when !inScope
};

// `inputs` are the first data set's inputs, in the order of the graph inputs that are not
// initializers (nullopt where an input could not be read); they give the value of Dropout's
// training_mode and ratio when those are graph inputs. A model that cannot be parsed is in scope
// (the run itself reports the problem).
ScopeDecision decideScope(const std::string& modelPath,
                          const std::vector<std::optional<Tensor>>& inputs);

}  // namespace kiln::conformance
