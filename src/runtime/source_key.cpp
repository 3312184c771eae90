#include "runtime/source_key.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "runtime/artifact.h"
#include "support/hash.h"
#include "support/mapped_file.h"
#include "support/version.h"

namespace kiln::runtime {
namespace {

int64_t nanoseconds(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// The identity and timestamps a recorded fingerprint is valid for.
// Formatted without iostreams: loaded into the H200 image's Python (torch 2.11), ostream's
// number formatting crashed here, inside libstdc++'s locale code; to_string uses no locale.
std::string statLine(const struct stat& st) {
  return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_size) + " " + std::to_string(nanoseconds(st.st_mtim)) + " " +
         std::to_string(nanoseconds(st.st_ctim));
}

}  // namespace

StatusOr<std::string> hashFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(errno == ENOENT ? "no such file" : std::strerror(errno),
                         Location{path, 0, 0});
  // Read through one buffer that stays in the CPU's cache.
  std::vector<char> buffer(kReadPieceBytes);
  ChunkedHash hash;
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return Status::error("cannot read file: " + why, Location{path, 0, 0});
    }
    if (n == 0) break;
    hash.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  return hex64(hash.finish());
}

StatusOr<std::string> sourceFileKey(const std::string& kind, const std::string& path,
                                    const std::string& cacheDir, double minAgeSeconds) {
  struct stat st {};
  if (cacheDir.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    KILN_ASSIGN_OR_RETURN(std::string h, hashFile(path));
    return kind + " " + h;
  }
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  std::filesystem::path dir = std::filesystem::path(cacheDir) / "sources";
  std::string record = (dir / hex64(hash64(absolute.string()))).string();
  std::string identity = statLine(st);
  // A record: the path, the identity line, the key.
  {
    std::ifstream in(record);
    std::string recordedPath, recordedIdentity, key;
    if (std::getline(in, recordedPath) && std::getline(in, recordedIdentity) &&
        std::getline(in, key) && recordedPath == absolute.string() &&
        recordedIdentity == identity && key.rfind(kind + " ", 0) == 0)
      return key;
  }
  KILN_ASSIGN_OR_RETURN(std::string h, hashFile(path));
  std::string key = kind + " " + h;
  // Recorded only if the file is as it was when read, and old enough (see source_key.h).
  struct stat after {};
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  int64_t changed = std::max(nanoseconds(st.st_mtim), nanoseconds(st.st_ctim));
  if (::stat(path.c_str(), &after) == 0 && statLine(after) == identity &&
      static_cast<double>(now - changed) >= minAgeSeconds * 1e9) {
    std::filesystem::create_directories(dir, ec);
    // Best effort: without a record the next call hashes again.
    (void)writeFileAtomically(record, absolute.string() + "\n" + identity + "\n" + key + "\n");
  }
  return key;
}

std::string buildKey(const std::string& cacheDir, std::string* why) {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&buildKey), &info) == 0 || !info.dli_fname ||
      !*info.dli_fname) {
    if (why) *why = "dladdr found no file for Kiln's code";
    return std::string("kiln ") + kKilnVersion;
  }
  // The main executable may be named as invoked (no directory): /proc/self/exe is its file.
  std::string path = info.dli_fname;
  if (path.find('/') == std::string::npos) path = "/proc/self/exe";
  StatusOr<std::string> key = sourceFileKey("kiln", path, cacheDir);
  if (!key) {
    if (why) *why = key.status().str();
    return std::string("kiln ") + kKilnVersion;
  }
  return *key;
}

}  // namespace kiln::runtime
