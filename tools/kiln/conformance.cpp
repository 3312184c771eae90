// `kiln conformance`: command-line parsing, the run over every data folder, the console summary,
// the reports, and the check against a list of tests expected to pass.
#include "conformance.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "conformance_isolate.h"
#include "conformance_report.h"
#include "conformance_runner.h"

namespace kiln {

namespace {

using namespace conformance;
namespace fs = std::filesystem;

constexpr int kExitUsage = 2;
constexpr int kExitSkip = 77;

const char* kUsage =
    "usage: kiln conformance [options] DIR...\n"
    "\n"
    "Runs every ONNX backend test (a folder with model.onnx and test_data_set_*/) found in each\n"
    "DIR, such as /usr/share/libonnx-testdata/data/node, and prints passed / failed / unsupported\n"
    "/ error counts per DIR. Each test runs in its own process with a time limit.\n"
    "\n"
    "options:\n"
    "  --backend NAME        backend to run on: interp (the default) or cpu\n"
    "  --report FILE.json    write every test's outcome and reason as JSON\n"
    "  --markdown FILE.md    write a Markdown page of the results (docs/conformance.md)\n"
    "  --expected FILE       tests expected to pass, one name per line ('#' comments); exit 1\n"
    "                        if one of them does not pass, and list new passes\n"
    "  --write-expected FILE write the names of the tests that passed (a new --expected list)\n"
    "  --filter SUBSTR       run only tests whose name contains SUBSTR (A|B: A or B)\n"
    "  --no-library-calls    cpu: matrix products and convolutions as Kiln's own loops\n"
    "  -O0, -O1              run the imported IR as is (-O0, default) or after the default\n"
    "                        optimisation pipeline, specialised to each data set's shapes (-O1)\n"
    "  --jobs N              run N tests at a time (default 1)\n"
    "  --timeout SECONDS     time limit of one test (default 60)\n"
    "  --memory-limit-mb N   address-space limit of one test process (default 8192; 0: none)\n"
    "  -v, --verbose         print every test that does not pass, with its reason\n"
    "\n"
    "exit status: 0 done, 1 an expected test did not pass (or a file could not be written),\n"
    "2 usage error, 77 a DIR does not exist (the run is skipped).\n";

struct Args {
  RunOptions run;
  std::string report, markdown, expected, writeExpected, filter;
  bool verbose = false;
  std::vector<std::string> dirs;
};

int usageError(const std::string& msg) {
  std::fprintf(stderr, "kiln: error: conformance: %s\n(see kiln conformance --help)\n",
               msg.c_str());
  return kExitUsage;
}

bool parseInt(const std::string& s, long lo, long hi, long& out) {
  if (s.empty() || s.size() > 12) return false;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

// Applies one option that takes a value; returns an error message or "".
std::string applyOption(const std::string& name, const std::string& value, Args& a) {
  long n = 0;
  if (name == "--backend") {
    if (!isKnownBackend(value)) return "unknown backend '" + value + "' (known: cpu, cuda, interp)";
    a.run.backend = value;
  } else if (name == "--report") a.report = value;
  else if (name == "--markdown") a.markdown = value;
  else if (name == "--expected") a.expected = value;
  else if (name == "--write-expected") a.writeExpected = value;
  else if (name == "--filter") a.filter = value;
  else if (name == "--jobs") {
    if (!parseInt(value, 1, 256, n))
      return "--jobs needs a number from 1 to 256, got '" + value + "'";
    a.run.jobs = static_cast<int>(n);
  } else if (name == "--timeout") {
    if (!parseInt(value, 1, 86400, n))
      return "--timeout needs seconds from 1 to 86400, got '" + value + "'";
    a.run.timeoutSeconds = static_cast<int>(n);
  } else if (name == "--memory-limit-mb") {
    if (!parseInt(value, 0, 1L << 30, n))
      return "--memory-limit-mb needs a number, got '" + value + "'";
    a.run.memoryLimitMb = n;
  } else {
    return "unknown option '" + name + "'";
  }
  return "";
}

// Parses `args`; returns -1 to go on, or an exit status.
int parseArgs(const std::vector<std::string>& args, Args& a) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "-v" || arg == "--verbose") {
      a.verbose = true;
    } else if (arg == "-O0" || arg == "-O1") {
      a.run.optLevel = arg[2] - '0';
    } else if (arg == "--no-library-calls") {
      a.run.libraryCalls = false;
    } else if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      std::string name = arg.substr(0, eq), value;
      if (eq != std::string::npos) value = arg.substr(eq + 1);
      else if (i + 1 < args.size()) value = args[++i];
      else return usageError("option '" + name + "' needs a value");
      std::string err = applyOption(name, value, a);
      if (!err.empty()) return usageError(err);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else {
      a.dirs.push_back(arg);
    }
  }
  if (a.dirs.empty()) return usageError("no test folder given");
  return -1;
}

// The names in an --expected file: one per line, '#' starts a comment.
bool readExpected(const std::string& path, std::vector<std::string>& names) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) names.push_back(line.substr(b, e - b + 1));
  }
  return true;
}

// Compares the run with the expected list: prints regressions and new passes. Returns false when
// an expected test did not pass (or was not found when no filter narrows the run).
bool checkExpected(const std::vector<std::string>& expected, const std::vector<TestResult>& results,
                   bool filtered) {
  std::set<std::string> listed(expected.begin(), expected.end());
  std::set<std::string> seen;
  bool ok = true;
  for (const auto& r : results) {
    std::string qualified = r.test.folder + "/" + r.test.name;
    bool isListed = listed.count(r.test.name) || listed.count(qualified);
    if (isListed) seen.insert(listed.count(r.test.name) ? r.test.name : qualified);
    if (isListed && r.outcome != Outcome::Passed) {
      std::printf("REGRESSION %s: %s: %s\n", qualified.c_str(), outcomeName(r.outcome),
                  r.reason.c_str());
      ok = false;
    }
  }
  std::string newPasses;
  for (const auto& r : results)
    if (r.outcome == Outcome::Passed && !listed.count(r.test.name) &&
        !listed.count(r.test.folder + "/" + r.test.name))
      newPasses += (newPasses.empty() ? "" : " ") + r.test.name;
  if (!newPasses.empty()) std::printf("new passes: %s\n", newPasses.c_str());
  for (const auto& name : listed) {
    if (filtered || seen.count(name)) continue;
    std::printf("MISSING %s: listed in the expected file but not found\n", name.c_str());
    ok = false;
  }
  return ok;
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (out) return true;
  std::fprintf(stderr, "kiln: error: conformance: cannot write '%s'\n", path.c_str());
  return false;
}

std::string commandLine(const std::vector<std::string>& args) {
  std::string s = "kiln conformance";
  for (const auto& a : args) s += " " + a;
  return s;
}

std::string passList(const std::vector<TestResult>& results, const std::vector<std::string>& args) {
  std::string s = "# Tests expected to pass; written by `" + commandLine(args) + "`.\n";
  for (const auto& r : results)
    if (r.outcome == Outcome::Passed) s += r.test.name + "\n";
  return s;
}

}  // namespace

int conformanceCommand(const std::vector<std::string>& args) {
  Args a;
  if (int rc = parseArgs(args, a); rc >= 0) return rc;
  std::vector<std::string> expected;
  if (!a.expected.empty() && !readExpected(a.expected, expected))
    return usageError("cannot read the expected-pass list '" + a.expected + "'");
  std::vector<TestCase> tests;
  std::vector<std::string> folders;
  for (const auto& dir : a.dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      std::printf("kiln conformance: test folder '%s' does not exist; skipping\n", dir.c_str());
      return kExitSkip;
    }
    auto found = discoverTests(dir, a.filter);
    folders.push_back(fs::path(dir).lexically_normal().filename().string());
    if (folders.back().empty())
      folders.back() = fs::path(dir).lexically_normal().parent_path().filename().string();
    tests.insert(tests.end(), found.begin(), found.end());
  }
  auto results = runIsolated(tests, a.run, [&](const TestResult& r) {
    if (a.verbose && r.outcome != Outcome::Passed)
      std::printf("%s %s/%s: %s\n", outcomeName(r.outcome), r.test.folder.c_str(),
                  r.test.name.c_str(), r.reason.c_str());
  });
  auto summaries = summarize(results, folders, a.dirs);
  for (const auto& s : summaries) std::printf("%s\n", summaryLine(s).c_str());
  bool ok = true;
  if (!a.report.empty()) ok &= writeFile(a.report, toJson(summaries, results, a.run));
  if (!a.markdown.empty())
    ok &= writeFile(a.markdown, toMarkdown(summaries, results, a.run, commandLine(args)));
  if (!a.writeExpected.empty()) ok &= writeFile(a.writeExpected, passList(results, args));
  if (!a.expected.empty()) ok &= checkExpected(expected, results, !a.filter.empty());
  return ok ? 0 : 1;
}

}  // namespace kiln
