// `kiln conformance`: runs folders of ONNX backend tests (model.onnx + test_data_set_*/) through a
// backend and classifies each test as passed, failed, unsupported or error.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// `args` are the words after "conformance". Returns the process exit status: 0 when the run
// completed (and every test in --expected passed), 1 when an expected test did not pass or a
// report could not be written, 2 for usage errors, 77 when a test folder does not exist (CTest's
// skip code).
int conformanceCommand(const std::vector<std::string>& args);

}  // namespace kiln
