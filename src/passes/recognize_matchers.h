// The matchers of recognize-patterns (internal to src/passes), one file per pattern. Each looks at
// `root` as the final node of its chain and, on a match, builds the composite before root and
// returns its value (of root's type); otherwise it returns nullptr and builds nothing.
#pragma once

#include "ir/ir.h"

namespace kiln::recognize {

Value* recognizeGelu(Node& root);       // recognize_gelu.cpp
Value* recognizeSoftmax(Node& root);    // recognize_softmax.cpp
Value* recognizeLayerNorm(Node& root);  // recognize_layer_norm.cpp
Value* recognizeAttention(Node& root);  // recognize_attention.cpp (needs softmax recognised)

}  // namespace kiln::recognize
