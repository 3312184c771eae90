#include "support/status.h"

namespace kiln {

std::string Location::str() const {
  if (!known()) return file;
  std::string s = file.empty() ? "" : file + ":";
  s += std::to_string(line);
  if (column > 0) s += ":" + std::to_string(column);
  return s;
}

std::string Status::str() const {
  if (!failed_) return "ok";
  std::string s;
  if (loc_.known() || !loc_.file.empty()) s = loc_.str() + ": ";
  return s + "error: " + message_;
}

void checkFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "kiln: internal error at %s:%d: check '%s' failed: %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace kiln
