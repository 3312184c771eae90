// UTF-8 text as code points and back: what string tensors need to change case and to write
// numpy's UTF-32 text.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln {

// A Unicode scalar value: at most 0x10FFFF and not a surrogate (0xD800-0xDFFF).
inline bool isScalarValue(char32_t c) { return c <= 0x10ffff && (c < 0xd800 || c > 0xdfff); }

// The code points of `s`; an error ("malformed UTF-8") for a bad lead or continuation byte, a
// sequence cut short, or a value that is not a scalar value.
StatusOr<std::u32string> decodeUtf8(std::string_view s);

// Appends scalar value c to `out` as UTF-8; encodeUtf8 encodes a whole string.
void appendUtf8(std::string& out, char32_t c);
std::string encodeUtf8(std::u32string_view s);

}  // namespace kiln
