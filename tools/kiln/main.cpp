// The kiln tool for users. Each subcommand is one row of kCommands; `kiln --help` lists them.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "conformance.h"
#include "runtime/target.h"
#include "support/resident.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

namespace kiln::cli {
namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);  // the arguments after the command's name
};

const Command kCommands[] = {
    {"run", "run a program on inputs and show what the compiler did", runCommand},
    {"bench", "compile time by phase and run latency of a program", benchCommand},
    {"compile", "compile a program ahead of time into a .kiln artifact", compileCommand},
    {"explain", "show the kernels the compiler makes and why edges were not fused", explainCommand},
    {"import", "import an ONNX model and print its graph IR", importCommand},
    {"check", "list every part of an ONNX model that Kiln cannot handle", checkCommand},
    {"conformance", "run ONNX backend test folders and compare with their outputs",
     conformanceCommand},
};

void printUsage(std::FILE* out) {
  std::fputs("usage: kiln <command> [options]\n\nKiln is an ML compiler. Commands:\n", out);
  for (const Command& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
  std::fputs("\nOptions:\n"
             "  -h, --help     show this help\n"
             "  --version      print the version\n\n"
             "'kiln <command> --help' describes the options of a command.\n",
             out);
}

}  // namespace

int reportError(const Status& s, int exitCode) {
  const Location& loc = s.location();
  std::string where = loc.known() || !loc.file.empty() ? loc.str() + ": " : "";
  // One line, always: a multi-line message keeps its first line.
  std::string message = s.message().substr(0, s.message().find('\n'));
  std::fprintf(stderr, "kiln: error: %s%s\n", where.c_str(), message.c_str());
  return exitCode;
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  // Loading libLLVM ran its static constructors over some 40 MiB of its code, which a compile
  // does not run again: those pages leave this process's memory (support/resident.h).
  kiln::releaseLibraryCode("libLLVM");
  kiln::runtime::registerBuiltinTargets();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    printUsage(stderr);
    return kExitUsage;
  }
  const std::string& name = args[0];
  if (name == "-h" || name == "--help" || name == "help") {
    printUsage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("kiln %s\n", KILN_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run({args.begin() + 1, args.end()});
  }
  return reportError(kiln::Status::error("unknown command '" + name + "' (see kiln --help)"),
                     kExitUsage);
}
