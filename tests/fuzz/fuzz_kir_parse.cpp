// libFuzzer target: the .kir parser on arbitrary text.
//
// Bad text must give a Status (never a crash, hang or huge allocation). Text that parses must
// also keep the text format's contract: printing the module, parsing the print and printing again
// gives the same text (print(parse(s)) == s for printer output); a violation aborts with both
// texts so the reproducer explains itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/text/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto module = kiln::parseModule(text, "fuzz.kir");
  if (!module) return 0;
  std::string printed = kiln::printModule(**module);
  auto again = kiln::parseModule(printed, "printed.kir");
  if (!again) {
    std::fprintf(stderr, "printer output does not parse: %s\n--- printed:\n%s\n",
                 again.status().str().c_str(), printed.c_str());
    std::abort();
  }
  std::string reprinted = kiln::printModule(**again);
  if (reprinted != printed) {
    std::fprintf(stderr, "print(parse(print(m))) != print(m)\n--- first:\n%s\n--- second:\n%s\n",
                 printed.c_str(), reprinted.c_str());
    std::abort();
  }
  return 0;
}
