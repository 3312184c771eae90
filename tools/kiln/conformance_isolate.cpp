// Process isolation for `kiln conformance`: one forked child per test, results sent back through
// a pipe, the child's stderr captured through another (so a crash report names its cause), and a
// small poll() loop in the parent that keeps `jobs` children running.
#include "conformance_isolate.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance_runner.h"

// AddressSanitizer reserves terabytes of address space, so RLIMIT_AS cannot be used under it.
#if defined(__SANITIZE_ADDRESS__)
#define KILN_CONFORMANCE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_CONFORMANCE_ASAN 1
#endif
#endif

namespace kiln::conformance {

namespace {

using Clock = std::chrono::steady_clock;

// A child's stderr beyond this is dropped (its first lines say what went wrong).
constexpr size_t kMaxStderr = 2000;
// The parent's backstop after the child's own alarm.
constexpr int kKillGraceSeconds = 5;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

bool writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int resultFd = -1, errFd = -1;
  std::string result, err;
  Clock::time_point start;
  bool killed = false;
};

[[noreturn]] void childMain(const TestCase& test, const RunOptions& opts, int resultFd, int errFd) {
  ::dup2(errFd, STDERR_FILENO);
  ::close(errFd);
#ifndef KILN_CONFORMANCE_ASAN
  // The CUDA driver reserves address space for the device's memory at cuInit, far past any
  // host limit: a cuda child runs without one (device allocations fail with their own error).
  if (opts.memoryLimitMb > 0 && opts.backend != "cuda") {
    rlim_t bytes = static_cast<rlim_t>(opts.memoryLimitMb) << 20;
    struct rlimit lim = {bytes, bytes};
    ::setrlimit(RLIMIT_AS, &lim);
  }
#endif
  ::alarm(static_cast<unsigned>(opts.timeoutSeconds));
  TestResult r = runTest(test, opts);
  bool ok = writeAll(resultFd, serializeResult(r));
  ::_exit(ok ? 0 : 3);
}

// Starts a child for `test`; on failure returns a Child with pid -1.
Child startChild(size_t index, const TestCase& test, const RunOptions& opts) {
  Child c;
  c.index = index;
  int rp[2], ep[2];
  if (::pipe(rp) != 0) return c;
  if (::pipe(ep) != 0) {
    ::close(rp[0]);
    ::close(rp[1]);
    return c;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(rp[0]);
    ::close(ep[0]);
    childMain(test, opts, rp[1], ep[1]);
  }
  ::close(rp[1]);
  ::close(ep[1]);
  if (pid < 0) {
    ::close(rp[0]);
    ::close(ep[0]);
    return c;
  }
  c.pid = pid;
  c.resultFd = rp[0];
  c.errFd = ep[0];
  c.start = Clock::now();
  return c;
}

// Reads what is available on `fd` into `buf` (up to `cap` bytes kept); closes it at EOF.
void drain(int& fd, std::string& buf, size_t cap) {
  char tmp[65536];
  ssize_t n = ::read(fd, tmp, sizeof tmp);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    ::close(fd);
    fd = -1;
    return;
  }
  size_t room = buf.size() < cap ? cap - buf.size() : 0;
  buf.append(tmp, std::min(room, static_cast<size_t>(n)));
}

std::string firstLines(const std::string& err) {
  std::string s = err;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s.empty() ? "" : ": " + s;
}

TestResult finishChild(const Child& c, const TestCase& test, const RunOptions& opts, int status) {
  TestResult r;
  r.test = test;
  r.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && deserializeResult(c.result, r)) {
    r.test = test;
    return r;
  }
  r.outcome = Outcome::Error;
  if (c.killed || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)) {
    r.reason = "timed out after " + std::to_string(opts.timeoutSeconds) + " s";
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    r.reason = "crashed with signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
               firstLines(c.err);
  } else {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.reason = "the test process exited with status " + std::to_string(code) + firstLines(c.err);
  }
  return r;
}

// One poll() round over the running children: reads their pipes, kills overdue ones, and reaps
// those whose pipes have closed (appending them to `done`).
void pollChildren(std::vector<Child>& running, const RunOptions& opts, std::vector<Child>& done,
                  std::vector<int>& statuses) {
  std::vector<pollfd> fds;
  for (auto& c : running)
    for (int fd : {c.resultFd, c.errFd})
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  if (!fds.empty()) ::poll(fds.data(), fds.size(), 500);
  for (auto& c : running) {
    for (auto& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (p.fd == c.resultFd) drain(c.resultFd, c.result, std::string::npos);
      else if (p.fd == c.errFd) drain(c.errFd, c.err, kMaxStderr);
    }
    double elapsed = std::chrono::duration<double>(Clock::now() - c.start).count();
    if (!c.killed && elapsed > opts.timeoutSeconds + kKillGraceSeconds) {
      ::kill(c.pid, SIGKILL);
      c.killed = true;
    }
  }
  for (size_t i = 0; i < running.size();) {
    Child& c = running[i];
    if (c.resultFd >= 0 || c.errFd >= 0) {
      ++i;
      continue;
    }
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
    done.push_back(std::move(c));
    statuses.push_back(status);
    running.erase(running.begin() + static_cast<long>(i));
  }
}

}  // namespace

std::string serializeResult(const TestResult& r) {
  std::ostringstream s;
  s.precision(17);  // doubles round-trip exactly
  s << "outcome\t" << outcomeName(r.outcome) << "\n";
  s << "reason\t" << escape(r.reason) << "\n";
  s << "in_scope\t" << (r.inScope ? 1 : 0) << "\n";
  s << "scope_reason\t" << escape(r.scopeReason) << "\n";
  s << "max_abs_error\t" << r.maxAbsError << "\n";
  s << "seconds\t" << r.seconds << "\n";
  for (const auto& op : r.unsupportedOps) s << "unsupported_op\t" << escape(op) << "\n";
  s << "end\t\n";
  return s.str();
}

bool deserializeResult(const std::string& text, TestResult& r) {
  std::istringstream in(text);
  std::string line;
  bool complete = false;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) return false;
    std::string key = line.substr(0, tab), value = unescape(line.substr(tab + 1));
    if (key == "outcome") {
      bool known = false;
      for (Outcome o : {Outcome::Passed, Outcome::Failed, Outcome::Unsupported, Outcome::Error})
        if (value == outcomeName(o)) {
          r.outcome = o;
          known = true;
        }
      if (!known) return false;
    } else if (key == "reason") r.reason = value;
    else if (key == "in_scope") r.inScope = value == "1";
    else if (key == "scope_reason") r.scopeReason = value;
    else if (key == "max_abs_error") r.maxAbsError = std::strtod(value.c_str(), nullptr);
    else if (key == "seconds") r.seconds = std::strtod(value.c_str(), nullptr);
    else if (key == "unsupported_op") r.unsupportedOps.push_back(value);
    else if (key == "end") complete = true;
  }
  return complete;
}

std::vector<TestResult> runIsolated(const std::vector<TestCase>& tests, const RunOptions& opts,
                                    const std::function<void(const TestResult&)>& onDone) {
  std::vector<TestResult> results(tests.size());
  std::vector<Child> running;
  size_t next = 0;
  size_t jobs = static_cast<size_t>(std::max(1, opts.jobs));
  while (next < tests.size() || !running.empty()) {
    while (running.size() < jobs && next < tests.size()) {
      Child c = startChild(next, tests[next], opts);
      if (c.pid < 0) {
        TestResult& r = results[next];
        r.test = tests[next];
        r.reason = std::string("could not start a test process: ") + std::strerror(errno);
        if (onDone) onDone(r);
      } else {
        running.push_back(std::move(c));
      }
      ++next;
    }
    std::vector<Child> done;
    std::vector<int> statuses;
    pollChildren(running, opts, done, statuses);
    for (size_t i = 0; i < done.size(); ++i) {
      results[done[i].index] = finishChild(done[i], tests[done[i].index], opts, statuses[i]);
      if (onDone) onDone(results[done[i].index]);
    }
  }
  return results;
}

}  // namespace kiln::conformance
