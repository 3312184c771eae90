#include "support/mapped_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace kiln {

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const char* why = errno == ENOENT ? "no such file" : std::strerror(errno);
    return Status::error(why, Location{path, 0, 0});
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return Status::error(dir ? "is a directory" : "cannot read file", Location{path, 0, 0});
  }
  MappedFile f;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::error(std::string("cannot map file: ") + std::strerror(errno),
                           Location{path, 0, 0});
    }
    f.data_ = p;
  }
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

void MappedFile::release(std::string_view range) const {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()), end = begin + range.size();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Status MappedFile::read(std::string_view range,
                        const std::function<void(std::string_view)>& piece) const {
  const char* base = static_cast<const char*>(data_);
  KILN_CHECK(range.empty() || (range.data() >= base && range.data() + range.size() <= base + size_),
             "MappedFile::read: the range is not part of the file");
  std::vector<char> buffer(std::min(kReadPieceBytes, range.size()));
  off_t at = range.empty() ? 0 : static_cast<off_t>(range.data() - base);
  for (size_t done = 0; done < range.size();) {
    size_t want = std::min(buffer.size(), range.size() - done);
    ssize_t n = ::pread(fd_, buffer.data(), want, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::error(n < 0 ? std::string("cannot read file: ") + std::strerror(errno)
                                 : std::string("the file is shorter than when it was mapped"),
                           Location{path_, 0, 0});
    piece(std::string_view(buffer.data(), static_cast<size_t>(n)));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status MappedFile::copyTo(std::string_view range, void* out) const {
  const char* base = static_cast<const char*>(data_);
  KILN_CHECK(range.empty() || (range.data() >= base && range.data() + range.size() <= base + size_),
             "MappedFile::copyTo: the range is not part of the file");
  off_t at = range.empty() ? 0 : static_cast<off_t>(range.data() - base);
  for (size_t done = 0; done < range.size();) {
    ssize_t n = ::pread(fd_, static_cast<char*>(out) + done, range.size() - done,
                        at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::error(n < 0 ? std::string("cannot read file: ") + std::strerror(errno)
                                 : std::string("the file is shorter than when it was mapped"),
                           Location{path_, 0, 0});
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kiln
