// The report `kiln run` prints: what the compiler did, the inputs, the outputs and the run time.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"

namespace kiln::cli {

// One line of "what the compiler did": a stage, its time (negative: not timed) and what it did.
// Each stage of the pipeline adds its own line.
struct StageLine {
  std::string stage;
  double ms = -1;
  std::string detail;
};

// One input or output row: name, value, and where it came from or went ("random", a path).
struct TensorRow {
  std::string name;
  Tensor value;
  std::string where;
};

struct RunSummary {
  std::string program;
  std::string function;
  std::vector<StageLine> stages;
  std::vector<TensorRow> inputs;
  std::vector<TensorRow> outputs;
  std::string backend;
  double runMs = 0;
  std::vector<std::string> notes;
};

// "11 nodes: 4 constant, 2 dot_general, ..." (parameters included), most frequent op first.
std::string describeNodes(const Function& f);

// "min -0.98 max 0.99 mean 0.012" over the non-NaN elements, with "nan N" when there are NaNs;
// "empty" for a tensor without elements.
std::string tensorStats(const Tensor& t);

// The whole report, ready to print.
std::string formatSummary(const RunSummary& s);

}  // namespace kiln::cli
