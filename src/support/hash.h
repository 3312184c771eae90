// A fast 64-bit non-cryptographic hash (four multiply-rotate lanes over 8-byte words, in the
// style of xxHash64), for fingerprints (compile-cache keys) and checksums (artifacts). Stable
// across runs and machines of the same byte order; not for security.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

uint64_t hash64(std::string_view data, uint64_t seed = 0);
// 16 lowercase hex digits.
std::string hex64(uint64_t v);

}  // namespace kiln
