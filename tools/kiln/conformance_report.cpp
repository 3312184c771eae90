// Reports of `kiln conformance`: a console line per folder, a JSON file with every test, and a
// Markdown page listing every test that does not pass with its reason.
#include "conformance_report.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace kiln::conformance {

namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no inf/NaN
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A table cell: one line, no pipes, at most `limit` characters.
std::string cell(const std::string& s, size_t limit = 400) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r') out += ' ';
    else if (c == '|') out += "\\|";
    else out += c;
  }
  if (out.size() > limit) out = out.substr(0, limit) + " ...";
  return out;
}

void jsonFolder(std::ostringstream& o, const FolderSummary& s) {
  o << "    {\"folder\": " << jsonString(s.folder) << ", \"path\": " << jsonString(s.path)
    << ", \"total\": " << s.total << ", \"passed\": " << s.passed << ", \"failed\": " << s.failed
    << ", \"unsupported\": " << s.unsupported << ", \"errors\": " << s.errors
    << ", \"in_scope\": " << s.inScope << ", \"in_scope_passed\": " << s.inScopePassed << "}";
}

void jsonTest(std::ostringstream& o, const TestResult& r) {
  o << "    {\"folder\": " << jsonString(r.test.folder) << ", \"name\": " << jsonString(r.test.name)
    << ", \"outcome\": " << jsonString(outcomeName(r.outcome))
    << ", \"reason\": " << jsonString(r.reason)
    << ", \"in_scope\": " << (r.inScope ? "true" : "false")
    << ", \"scope_reason\": " << jsonString(r.scopeReason)
    << ", \"max_abs_error\": " << jsonNumber(r.maxAbsError)
    << ", \"seconds\": " << jsonNumber(r.seconds) << ", \"unsupported_ops\": [";
  for (size_t i = 0; i < r.unsupportedOps.size(); ++i)
    o << (i ? ", " : "") << jsonString(r.unsupportedOps[i]);
  o << "]}";
}

void markdownSummary(std::ostringstream& o, const std::vector<FolderSummary>& summaries) {
  o << "| folder | tests | passed | failed | unsupported | errors | pass rate | in scope | "
       "in scope passed |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& s : summaries)
    o << "| " << s.folder << " | " << s.total << " | " << s.passed << " | " << s.failed << " | "
      << s.unsupported << " | " << s.errors << " | " << percent(s.passed, s.total) << " | "
      << s.inScope << " | " << s.inScopePassed << " (" << percent(s.inScopePassed, s.inScope)
      << ") |\n";
}

// Ops the importer named as unsupported, with the number of tests each one blocks.
void markdownUnsupportedOps(std::ostringstream& o, const std::vector<TestResult>& results) {
  std::map<std::string, int> counts;
  for (const auto& r : results)
    if (r.outcome == Outcome::Unsupported)
      for (const auto& op : r.unsupportedOps) ++counts[op];
  if (counts.empty()) return;
  std::multimap<int, std::string, std::greater<int>> byCount;
  for (const auto& [op, n] : counts) byCount.emplace(n, op);
  o << "\n## Unsupported ops\n\nOps the importer reports as unsupported, with the number of tests "
       "each appears in.\n\n| op | tests |\n| --- | ---: |\n";
  for (const auto& [n, op] : byCount) o << "| `" << cell(op) << "` | " << n << " |\n";
}

void markdownList(std::ostringstream& o, const std::vector<TestResult>& results,
                  const std::string& folder, Outcome outcome, const char* title) {
  std::ostringstream rows;
  int n = 0;
  for (const auto& r : results) {
    if (r.test.folder != folder || r.outcome != outcome) continue;
    rows << "| " << r.test.name << " | " << (r.inScope ? "yes" : "no") << " | " << cell(r.reason)
         << " |\n";
    ++n;
  }
  if (n == 0) return;
  o << "\n### " << folder << ": " << title << " (" << n << ")\n\n| test | in scope | reason |\n"
    << "| --- | --- | --- |\n"
    << rows.str();
}

void markdownOutOfScope(std::ostringstream& o, const std::vector<TestResult>& results,
                        const std::string& folder) {
  std::ostringstream rows;
  int n = 0;
  for (const auto& r : results) {
    if (r.test.folder != folder || r.inScope) continue;
    rows << "| " << r.test.name << " | " << outcomeName(r.outcome) << " | " << cell(r.scopeReason)
         << " |\n";
    ++n;
  }
  if (n == 0) return;
  o << "\n### " << folder << ": out of scope (" << n << ")\n\n| test | outcome | why out of "
    << "scope |\n| --- | --- | --- |\n"
    << rows.str();
}

}  // namespace

std::string percent(int part, int whole) {
  if (whole == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

std::vector<FolderSummary> summarize(const std::vector<TestResult>& results,
                                     const std::vector<std::string>& folders,
                                     const std::vector<std::string>& paths) {
  std::vector<FolderSummary> out;
  for (size_t i = 0; i < folders.size(); ++i) {
    FolderSummary s;
    s.folder = folders[i];
    s.path = i < paths.size() ? paths[i] : "";
    for (const auto& r : results) {
      if (r.test.folder != s.folder) continue;
      ++s.total;
      bool passed = r.outcome == Outcome::Passed;
      s.passed += passed;
      s.failed += r.outcome == Outcome::Failed;
      s.unsupported += r.outcome == Outcome::Unsupported;
      s.errors += r.outcome == Outcome::Error;
      s.inScope += r.inScope;
      s.inScopePassed += r.inScope && passed;
    }
    out.push_back(s);
  }
  return out;
}

std::string summaryLine(const FolderSummary& s) {
  return s.folder + ": " + std::to_string(s.total) + " tests, " + std::to_string(s.passed) +
         " passed, " + std::to_string(s.failed) + " failed, " + std::to_string(s.unsupported) +
         " unsupported, " + std::to_string(s.errors) +
         " errors; in scope: " + std::to_string(s.inScopePassed) + "/" + std::to_string(s.inScope) +
         " passed (" + percent(s.inScopePassed, s.inScope) + ")";
}

std::string toJson(const std::vector<FolderSummary>& summaries,
                   const std::vector<TestResult>& results, const RunOptions& opts) {
  std::ostringstream o;
  o << "{\n  \"backend\": " << jsonString(opts.backend)
    << ",\n  \"rtol\": " << jsonNumber(opts.rtol) << ",\n  \"atol\": " << jsonNumber(opts.atol)
    << ",\n  \"folders\": [\n";
  for (size_t i = 0; i < summaries.size(); ++i) {
    jsonFolder(o, summaries[i]);
    o << (i + 1 < summaries.size() ? ",\n" : "\n");
  }
  o << "  ],\n  \"tests\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    jsonTest(o, results[i]);
    o << (i + 1 < results.size() ? ",\n" : "\n");
  }
  o << "  ]\n}\n";
  return o.str();
}

std::string toMarkdown(const std::vector<FolderSummary>& summaries,
                       const std::vector<TestResult>& results, const RunOptions& opts,
                       const std::string& command) {
  std::ostringstream o;
  o << "# ONNX conformance\n\nThis page is generated by `kiln conformance`; do not edit it by "
       "hand. It was produced by\n\n```\n"
    << command << "\n```\n\n"
    << "Backend: `" << opts.backend << "`. Each test's outputs are compared with the test data "
    << "with ONNX's backend-test tolerances (|actual - expected| <= " << jsonNumber(opts.atol)
    << " + " << jsonNumber(opts.rtol) << " * |expected|, NaN equals NaN; integers, bools "
    << "and strings exact; dtype and shape must match).\n\n"
    << "**In scope** are the tests that use no strings (which only the interpreter runs), "
       "sequences, optionals, maps or training-domain ops and whose expected outputs are not "
       "random draws (random ops, Dropout "
       "in training mode); this is decided from each model, not from a list of names.\n\n"
       "The project's targets are at least 95% of the in-scope tests of node/ and every test of "
       "simple/.\n\n## Summary\n\n";
  markdownSummary(o, summaries);
  markdownUnsupportedOps(o, results);
  for (const auto& s : summaries) {
    o << "\n## " << s.folder << "\n\n" << summaryLine(s) << ".\n";
    markdownList(o, results, s.folder, Outcome::Failed, "failed");
    markdownList(o, results, s.folder, Outcome::Error, "errors");
    markdownList(o, results, s.folder, Outcome::Unsupported, "unsupported");
    markdownOutOfScope(o, results, s.folder);
  }
  return o.str();
}

}  // namespace kiln::conformance
