// Internal to `kiln conformance`: what a test is, how it ended, and the run's options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::conformance {

enum class Outcome { Passed, Failed, Unsupported, Error };
const char* outcomeName(Outcome o);  // "passed", "failed", "unsupported", "error"

// One ONNX backend test: a folder holding model.onnx and test_data_set_*/.
struct TestCase {
  std::string folder;  // the name of the data folder it came from ("node")
  std::string name;    // the test's folder name ("test_abs")
  std::string path;    // the test's folder
};

struct TestResult {
  TestCase test;
  Outcome outcome = Outcome::Error;
  std::string reason;  // empty when passed
  // In scope: the test uses no strings, sequences, optionals, maps or training-domain ops, and its
  // expected outputs are not random draws. Decided from the model (and its inputs), not by name.
  bool inScope = true;
  std::string scopeReason;  // why it is out of scope
  double maxAbsError = 0;   // failed tests: the largest |actual - expected|
  double seconds = 0;
  std::vector<std::string> unsupportedOps;  // "domain::OpType" of each unsupported op (sorted)
};

struct RunOptions {
  std::string backend = "interp";
  int timeoutSeconds = 60;       // per test, in its own process
  int64_t memoryLimitMb = 8192;  // address-space limit of each test process; 0 = none
  int jobs = 1;
  int optLevel = 0;  // 0: the imported IR as is; 1: specialised and optimised (default pipeline)
  bool libraryCalls = true;  // false: the cpu backend runs contractions as Kiln's loops
  double rtol = 1e-3;        // ONNX backend test tolerances
  double atol = 1e-7;
};

}  // namespace kiln::conformance
