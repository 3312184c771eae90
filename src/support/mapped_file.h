// A file mapped read-only into memory: its bytes without reading them into a buffer. Loading a
// cached or ahead-of-time compiled model reads tens of megabytes; a copy costs a page fault per
// 4 KiB of a fresh buffer and a second copy of the data, which the mapping avoids (its pages
// are the page cache's, shared between processes, and the weights are used in place).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln {

// The buffer for reading a large file in pieces (MappedFile::read, hashing a source file): a
// size that stays in the CPU's L2 cache. Copying out of the page cache into it ran at 12-16 GB/s,
// against 4-5 GB/s through first touches of a mapping and 7-9 GB/s into a 4 MiB buffer
// (resnet50's 132 MB cache entry on the Zen 5 machine, bench/results/cpu-history.md).
inline constexpr size_t kReadPieceBytes = size_t(256) << 10;

class MappedFile {
 public:
  // The file at `path` mapped; an error says why not ("no such file", "is a directory", ...).
  static StatusOr<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  // Takes the pages that lie wholly inside `range` (a part of bytes()) out of this process's
  // memory: they stop counting as its resident memory, and are read again from the file (the
  // page cache) if touched. The contents do not change.
  void release(std::string_view range) const;
  // Reads the bytes of `range` (a part of bytes()) from the file, through a buffer that stays in
  // the CPU's cache, and calls `piece` with each part in order (views into that buffer, valid
  // during the call). For a pass over large data that does not need it mapped (checking a
  // checksum): the first touch of a mapped page costs far more than copying it out of the page
  // cache, several times more on virtual machines, and leaves the page resident.
  Status read(std::string_view range, const std::function<void(std::string_view)>& piece) const;
  // Reads the bytes of `range` (a part of bytes()) from the file straight into `out`: one copy
  // out of the page cache and no first touches of the mapping's pages, for data that is kept.
  Status copyTo(std::string_view range, void* out) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // the file, open while it is mapped (for read)
  std::string path_;
};

}  // namespace kiln
