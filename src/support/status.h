// Errors as values. A user error (bad .kir, bad model, bad input file) is a Status
// carrying a message and, where known, a location; it is returned, never thrown.
// Broken internal invariants use KILN_CHECK, which aborts with a message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

// A place in a source file (1-based line and column); file may be empty.
struct Location {
  std::string file;
  int line = 0;
  int column = 0;

  bool known() const { return line > 0; }
  // "file:line:col" / "line:col" / "" when unknown.
  std::string str() const;
};

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message, Location loc = {}) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    s.loc_ = std::move(loc);
    return s;
  }

  // An error saying that sizes known only at run time are not supported there (an op a program
  // compiled over ranges cannot compute): Executable::compile then compiles each size instead.
  static Status needsSizes(std::string message) {
    Status s = error(std::move(message));
    s.needsSizes_ = true;
    return s;
  }

  bool isOk() const { return !failed_; }
  bool needsSizes() const { return needsSizes_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  const Location& location() const { return loc_; }
  // "loc: error: message" on one line.
  std::string str() const;

  // Adds context in front of the message: "context: message".
  Status& prefix(const std::string& context) {
    message_ = context + ": " + message_;
    return *this;
  }
  Status& at(Location loc) {
    if (!loc_.known()) loc_ = std::move(loc);
    return *this;
  }

 private:
  bool failed_ = false;
  bool needsSizes_ = false;
  std::string message_;
  Location loc_;
};

// A value or an error.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).isOk()) {
      std::fprintf(stderr, "kiln: internal error: StatusOr built from an ok Status\n");
      std::abort();
    }
  }

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  const Status& status() const {
    static const Status okStatus;
    return isOk() ? okStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void checkFailed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace kiln

// Internal invariant: aborts with file:line and a message. Never for user errors.
#define KILN_CHECK(cond, msg)                                         \
  do {                                                                \
    if (!(cond)) ::kiln::checkFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

// Propagate an error Status from an expression returning Status.
#define KILN_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::kiln::Status kiln_status_ = (expr);   \
    if (!kiln_status_) return kiln_status_; \
  } while (0)

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
// KILN_ASSIGN_OR_RETURN(auto x, f()): binds x or returns f()'s error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_sor_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp) return tmp.status();                   \
  lhs = std::move(tmp).value()
