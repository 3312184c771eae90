// UTF-8 text as code points and back: what string tensors need to change case and to write
// numpy's UTF-32 text.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln {

// The code points of `s`; an error ("malformed UTF-8") for a bad lead or continuation byte or a
// sequence cut short.
StatusOr<std::u32string> decodeUtf8(std::string_view s);

// Appends code point c (at most 0x10FFFF) to `out` as UTF-8.
void appendUtf8(std::string& out, char32_t c);

}  // namespace kiln
