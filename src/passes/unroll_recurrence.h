// Unrolling of recurrent layers (ONNX's RNN, GRU and LSTM cells) into core ops over a static
// sequence: the input projection of all steps is one dot_general, then each step is a small graph
// of dot_general and elementwise ops. The ONNX importer uses it for the variants the lstm and gru
// ops do not cover (other activations, clip, peepholes, the plain RNN cell); decompose-composites
// uses it for lstm and gru on targets that keep no recurrence whole.
#pragma once

#include <string>
#include <vector>

#include "ir/builder.h"
#include "support/status.h"

namespace kiln {

enum class RecurrentCell { Rnn, Gru, Lstm };

// An activation function as ONNX names it ("Sigmoid", "Tanh", "Relu", "LeakyRelu", ...).
struct RecurrentActivation {
  std::string name;
  double alpha = 1, beta = 0;
};

struct RecurrenceSpec {
  RecurrentCell cell = RecurrentCell::Lstm;
  int64_t hidden = 0;
  bool reverse = false;        // one direction, run from the last step to the first
  bool bidirectional = false;  // forward, then reverse
  double clip = 0;             // > 0: pre-activations clamped to [-clip, clip]
  bool linearBeforeReset = false;
  // Per direction, in ONNX's order: f (rnn), f g (gru), f g h (lstm).
  std::vector<RecurrentActivation> activations;
};

// The ONNX defaults: Tanh (rnn); Sigmoid, Tanh (gru); Sigmoid, Tanh, Tanh (lstm); per direction.
std::vector<RecurrentActivation> defaultActivations(RecurrentCell cell, int64_t dirs);

// x [S, B, I]; w [D, G*H, I], r [D, G*H, H] with ONNX's gate order (gru z r h, lstm i o f c);
// b [D, 2*G*H], h0 and c0 [D, B, H] and the lstm peepholes p [D, 3*H] may be null.
struct RecurrenceOperands {
  Value *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr;
  Value *h0 = nullptr, *c0 = nullptr, *p = nullptr;
};

// y [S, D, B, H] (ONNX's layout), y_h and (lstm) y_c [D, B, H].
struct RecurrenceResults {
  Value *y = nullptr, *yh = nullptr, *yc = nullptr;
};

// Builds the unrolled recurrence with `b`. x's first two extents and w's must be static.
StatusOr<RecurrenceResults> unrollRecurrence(Builder& b, const RecurrenceSpec& spec,
                                             const RecurrenceOperands& in);

}  // namespace kiln
