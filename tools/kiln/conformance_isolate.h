// Internal to `kiln conformance`: runs each test in its own child process, so that a crash, a
// hang or a runaway allocation in one test is recorded as that test's error instead of ending
// the run.
#pragma once

#include <functional>
#include <vector>

#include "conformance_types.h"

namespace kiln::conformance {

// Runs `tests` with at most opts.jobs children at a time. Each child has an alarm of
// opts.timeoutSeconds (the parent also kills it a little later, should the alarm not end it) and
// an address-space limit of opts.memoryLimitMb. Results come back in the order of `tests`;
// `onDone` is called in this process as each test finishes.
std::vector<TestResult> runIsolated(const std::vector<TestCase>& tests, const RunOptions& opts,
                                    const std::function<void(const TestResult&)>& onDone);

// The wire format between child and parent (exposed for tests): one "key<TAB>value" line per
// field, with backslash, tab and newline escaped.
std::string serializeResult(const TestResult& r);
bool deserializeResult(const std::string& text, TestResult& r);

}  // namespace kiln::conformance
