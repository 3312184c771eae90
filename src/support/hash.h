// A fast 64-bit non-cryptographic hash (four multiply-rotate lanes over 8-byte words, in the
// style of xxHash64), for fingerprints (compile-cache keys) and checksums (artifacts). Stable
// across runs and machines of the same byte order; not for security.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kiln {

uint64_t hash64(std::string_view data, uint64_t seed = 0);

// A hash of a byte stream given in pieces, the same however it is split: the stream is cut into
// chunks of 4 MiB, chunk i is hashed with seed i, and the chunks' hashes are hashed together with
// the stream's length as seed. For large data written or read piece by piece (artifact sections,
// source files) without a contiguous copy.
class ChunkedHash {
 public:
  static constexpr size_t kChunk = size_t(4) << 20;
  void update(std::string_view piece);
  // The hash of the stream, `last` its last piece (hashed where it lies when nothing is
  // buffered: a stream given as whole chunks and a tail is never copied).
  uint64_t finish(std::string_view last = {});

 private:
  void chunk(std::string_view data);
  std::string buffer_;  // the start of a chunk that came in several pieces
  std::string hashes_;
  uint64_t total_ = 0, index_ = 0;
};
// ChunkedHash of one piece, hashed in place (no copy); `hashed`, when given, is called with each
// chunk once it has been hashed.
uint64_t chunkedHash64(std::string_view data,
                       const std::function<void(std::string_view)>& hashed = nullptr);
// 16 lowercase hex digits.
std::string hex64(uint64_t v);

}  // namespace kiln
