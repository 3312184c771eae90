// Internal to `kiln conformance`: finding the tests of a folder and running one test.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "conformance_types.h"
#include "ir/ir.h"

namespace kiln::conformance {

// The tests of a data folder: its sub-folders, sorted by name, whose name contains `filter` (or
// one of its parts separated by '|': "matmul|gemm").
// A sub-folder without model.onnx is still a test (reported unsupported), never skipped silently.
std::vector<TestCase> discoverTests(const std::string& dir, const std::string& filter);

bool isKnownBackend(const std::string& backend);  // "interp"

// Runs one test in this process: scope decision, import, each test_data_set_*, comparison.
TestResult runTest(const TestCase& test, const RunOptions& opts);

}  // namespace kiln::conformance
