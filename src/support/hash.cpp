#include "support/hash.h"

#include <algorithm>
#include <cstring>

namespace kiln {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL, kP2 = 0xC2B2AE3D27D4EB4FULL,
                   kP3 = 0x165667B19E3779F9ULL, kP4 = 0x85EBCA77C2B2AE63ULL,
                   kP5 = 0x27D4EB2F165667C5ULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t round(uint64_t acc, uint64_t in) { return rotl(acc + in * kP2, 31) * kP1; }
uint64_t word(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

uint64_t hash64(std::string_view data, uint64_t seed) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    while (n >= 32) {
      v1 = round(v1, word(p));
      v2 = round(v2, word(p + 8));
      v3 = round(v3, word(p + 16));
      v4 = round(v4, word(p + 24));
      p += 32;
      n -= 32;
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    for (uint64_t v : {v1, v2, v3, v4}) h = (h ^ round(0, v)) * kP1 + kP4;
  } else {
    h = seed + kP5;
  }
  h += data.size();
  for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round(0, word(p)), 27) * kP1 + kP4;
  for (; n > 0; ++p, --n) h = rotl(h ^ (static_cast<unsigned char>(*p) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

void ChunkedHash::chunk(std::string_view data) {
  uint64_t h = hash64(data, index_++);
  hashes_.append(reinterpret_cast<const char*>(&h), sizeof h);
}

void ChunkedHash::update(std::string_view piece) {
  total_ += piece.size();
  while (!piece.empty()) {
    if (buffer_.empty() && piece.size() >= kChunk) {  // a whole chunk in place
      chunk(piece.substr(0, kChunk));
      piece.remove_prefix(kChunk);
      continue;
    }
    size_t take = std::min(kChunk - buffer_.size(), piece.size());
    buffer_.append(piece.substr(0, take));
    piece.remove_prefix(take);
    if (buffer_.size() == kChunk) {
      chunk(buffer_);
      buffer_.clear();
    }
  }
}

uint64_t ChunkedHash::finish(std::string_view last) {
  if (buffer_.empty() && last.size() < kChunk) {
    // The last, partial chunk (or the empty stream's one) hashed where it lies.
    total_ += last.size();
    if (!last.empty() || index_ == 0) chunk(last);
  } else {
    update(last);
    if (!buffer_.empty() || index_ == 0) chunk(buffer_);  // the last, partial chunk
    buffer_.clear();
  }
  return hash64(hashes_, total_);
}

uint64_t chunkedHash64(std::string_view data, const std::function<void(std::string_view)>& hashed) {
  // Whole chunks go through update() in place; the last, partial one through finish(), which
  // hashes it in place too (update() would copy it into its buffer).
  ChunkedHash h;
  const size_t whole = data.size() / ChunkedHash::kChunk * ChunkedHash::kChunk;
  for (size_t at = 0; at < whole; at += ChunkedHash::kChunk) {
    std::string_view piece = data.substr(at, ChunkedHash::kChunk);
    h.update(piece);
    if (hashed) hashed(piece);
  }
  std::string_view tail = data.substr(whole);
  uint64_t result = h.finish(tail);
  if (hashed && (!tail.empty() || whole == 0)) hashed(tail);
  return result;
}

std::string hex64(uint64_t v) {
  static const char* kHex = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15];
  return s;
}

}  // namespace kiln
