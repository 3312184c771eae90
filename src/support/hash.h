// A fast 64-bit non-cryptographic hash (four multiply-rotate lanes over 8-byte words, in the
// style of xxHash64), for fingerprints (compile-cache keys) and checksums (artifacts). Stable
// across runs and machines of the same byte order; not for security.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

uint64_t hash64(std::string_view data, uint64_t seed = 0);

// hash64 of a byte stream given in pieces of any sizes: the same value as hash64 of the pieces
// put together, without putting them together.
class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0);
  void update(std::string_view piece);
  uint64_t finish() const;

 private:
  uint64_t seed_, lanes_[4];
  uint64_t total_ = 0;
  char carry_[32];  // the start of a 32-byte stripe that came in several pieces
  size_t carried_ = 0;
};

// A hash of a byte stream given in pieces, the same however it is split: the stream is cut into
// chunks of 4 MiB, chunk i is hashed (hash64) with seed i, and the chunks' hashes are hashed
// together with the stream's length as seed. Cutting lets a reader check a large section while
// it reads it piece by piece (artifact sections, source files); no piece is copied.
class ChunkedHash {
 public:
  static constexpr size_t kChunk = size_t(4) << 20;
  void update(std::string_view piece);
  uint64_t finish();

 private:
  Hash64 current_{0};
  size_t inChunk_ = 0;  // bytes of the current chunk seen
  std::string hashes_;
  uint64_t total_ = 0, index_ = 0;
};
// ChunkedHash of one piece.
uint64_t chunkedHash64(std::string_view data);
// 16 lowercase hex digits.
std::string hex64(uint64_t v);

}  // namespace kiln
