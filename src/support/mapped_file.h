// A file mapped read-only into memory: its bytes without reading them into a buffer. Loading a
// cached or ahead-of-time compiled model reads tens of megabytes (the source to hash, the
// artifact); a copy costs a page fault per 4 KiB of a fresh buffer, which the mapping (with its
// pages populated at once) avoids, and the pages stay shared with the page cache.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln {

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

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
