// Tokens of the .kir text format (private to src/ir/text).
//
// Tokens are made one at a time as the parser asks for them, so memory does not grow with the
// number of tokens. Token text points into the source (which must outlive the tokens), except for
// the decoded spellings of quoted names and string literals, which the token owns.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln::text {

enum class Tok {
  Eof,
  Ident,       // func, f32, add, N, true, nan, ... ([A-Za-z_][A-Za-z0-9_]*)
  ValueName,   // %x, %0, %"any text"          (str: the name without '%')
  GlobalName,  // @main, @w0, @"any text"      (str: the name without '@')
  Integer,     // 42, -7
  Float,       // 1.0, -2.5e-03, 1e9, -inf, -nan
  String,      // "text"                       (str: the decoded text)
  Hex,         // 0x0a1B...                    (text: the digits without "0x")
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Equal,
  Colon,
  Star,   // * (in a product of dims: 4*N)
  Arrow,  // ->
  Error,  // a lexical error: str is the message, line:col its place
};

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // the spelling in the source
  std::string str;        // decoded name or string (ValueName, GlobalName, String)
  int line = 0;
  int col = 0;
};

class Lexer {
 public:
  Lexer(std::string_view src, std::string file);
  ~Lexer();
  Lexer(const Lexer&) = delete;
  Lexer& operator=(const Lexer&) = delete;

  // The next token: Eof at the end (and ever after); after a lexical error, an Error token (and
  // the same one ever after).
  Token next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "'foo'", "integer 42", "end of file", ... for "expected X, got Y" messages.
std::string describeToken(const Token& t);

// True if `s` can be written without quotes after '%' or '@'.
bool isBareName(std::string_view s);

// `s` as a double-quoted literal with C escapes (\" \\ \n \t \r \xHH for other bytes).
std::string quoteString(std::string_view s);

// Shortest spelling that reads back as the same value and always shows it is a float: it
// contains '.' or 'e' ("1.0", "2.5e-08"), or is nan, inf or -inf.
std::string formatDouble(double v);
std::string formatFloat(float v);

// Reads a Float or Integer token's text ("1.5", "-2e3", "42", "-inf", "nan") as the nearest
// value of the type. A value too small for the type becomes a zero of its sign; false when the
// value is too large or the text is not a number.
bool parseFloatText(std::string_view s, double& out);
bool parseFloatText(std::string_view s, float& out);

}  // namespace kiln::text
