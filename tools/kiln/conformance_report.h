// Internal to `kiln conformance`: per-folder summaries, the JSON report and the Markdown page
// (docs/conformance.md).
#pragma once

#include <string>
#include <vector>

#include "conformance_types.h"

namespace kiln::conformance {

struct FolderSummary {
  std::string folder;  // "node"
  std::string path;    // the folder given on the command line
  int total = 0, passed = 0, failed = 0, unsupported = 0, errors = 0;
  int inScope = 0, inScopePassed = 0;
};

// One summary per data folder, in the order of `folders` (names as TestCase::folder).
std::vector<FolderSummary> summarize(const std::vector<TestResult>& results,
                                     const std::vector<std::string>& folders,
                                     const std::vector<std::string>& paths);

// "node: 932 tests, 700 passed, 50 failed, 170 unsupported, 12 errors; in scope: 690/720 (95.8%)"
std::string summaryLine(const FolderSummary& s);

// Percentage with one decimal ("95.8%"), "n/a" for an empty category.
std::string percent(int part, int whole);

std::string toJson(const std::vector<FolderSummary>& summaries,
                   const std::vector<TestResult>& results, const RunOptions& opts);

// `command` is the command line that produced the page, shown at its top.
std::string toMarkdown(const std::vector<FolderSummary>& summaries,
                       const std::vector<TestResult>& results, const RunOptions& opts,
                       const std::string& command);

}  // namespace kiln::conformance
