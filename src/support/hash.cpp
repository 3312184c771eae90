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

Hash64::Hash64(uint64_t seed)
    : seed_(seed), lanes_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1} {}

void Hash64::update(std::string_view piece) {
  const char* p = piece.data();
  size_t n = piece.size();
  total_ += n;
  if (carried_ > 0) {  // complete the stripe started by earlier pieces
    size_t take = std::min(n, sizeof carry_ - carried_);
    std::memcpy(carry_ + carried_, p, take);
    carried_ += take;
    p += take;
    n -= take;
    if (carried_ < sizeof carry_) return;
    for (int l = 0; l < 4; ++l) lanes_[l] = round(lanes_[l], word(carry_ + 8 * l));
    carried_ = 0;
  }
  uint64_t v1 = lanes_[0], v2 = lanes_[1], v3 = lanes_[2], v4 = lanes_[3];
  for (; n >= 32; p += 32, n -= 32) {
    v1 = round(v1, word(p));
    v2 = round(v2, word(p + 8));
    v3 = round(v3, word(p + 16));
    v4 = round(v4, word(p + 24));
  }
  lanes_[0] = v1, lanes_[1] = v2, lanes_[2] = v3, lanes_[3] = v4;
  std::memcpy(carry_, p, n);
  carried_ = n;
}

uint64_t Hash64::finish() const {
  uint64_t h;
  if (total_ >= 32) {
    const uint64_t v1 = lanes_[0], v2 = lanes_[1], v3 = lanes_[2], v4 = lanes_[3];
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    for (uint64_t v : {v1, v2, v3, v4}) h = (h ^ round(0, v)) * kP1 + kP4;
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  // The tail: the bytes after the last whole stripe.
  const char* p = carry_;
  size_t n = carried_;
  for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round(0, word(p)), 27) * kP1 + kP4;
  for (; n > 0; ++p, --n) h = rotl(h ^ (static_cast<unsigned char>(*p) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t hash64(std::string_view data, uint64_t seed) {
  Hash64 h(seed);
  h.update(data);
  return h.finish();
}

void ChunkedHash::update(std::string_view piece) {
  total_ += piece.size();
  while (!piece.empty()) {
    size_t take = std::min(kChunk - inChunk_, piece.size());
    current_.update(piece.substr(0, take));
    piece.remove_prefix(take);
    inChunk_ += take;
    if (inChunk_ == kChunk) {
      uint64_t h = current_.finish();
      hashes_.append(reinterpret_cast<const char*>(&h), sizeof h);
      current_ = Hash64(++index_);
      inChunk_ = 0;
    }
  }
}

uint64_t ChunkedHash::finish() {
  if (inChunk_ > 0 || index_ == 0) {  // the last, partial chunk (or the empty stream's one)
    uint64_t h = current_.finish();
    hashes_.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  return hash64(hashes_, total_);
}

uint64_t chunkedHash64(std::string_view data) {
  ChunkedHash h;
  h.update(data);
  return h.finish();
}

std::string hex64(uint64_t v) {
  static const char* kHex = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15];
  return s;
}

}  // namespace kiln
