// The .kir lexer: turns source text into tokens with 1-based line:column positions, one token
// per call; also the spelling of floats shared by the printer and the parser.
#include "ir/text/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace kiln::text {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isAlpha(c) || isDigit(c); }
bool isBareNameChar(char c) { return isIdentChar(c) || c == '.' || c == '$' || c == '-'; }
int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decimal exponent of the leading significant digit of a number's text (value ~ 10^e), used to
// tell underflow from overflow when from_chars reports a value out of range.
int64_t decimalMagnitude(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  size_t e = s.find_first_of("eE");
  std::string_view mant = s.substr(0, e);
  size_t dot = mant.find('.');
  std::string_view intPart = mant.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : mant.substr(dot + 1);
  int64_t mag = 0;
  size_t nz = intPart.find_first_not_of('0');
  if (nz != std::string_view::npos) {
    mag = static_cast<int64_t>(intPart.size() - nz);  // "123" = 0.123e3
  } else {
    size_t fz = frac.find_first_not_of('0');
    if (fz != std::string_view::npos) mag = -static_cast<int64_t>(fz);  // "0.001" = 0.1e-2
  }
  if (e != std::string_view::npos && e + 1 < s.size()) {
    std::string_view exp = s.substr(e + 1);
    if (exp[0] == '+') exp.remove_prefix(1);
    int64_t x = 0;
    auto r = std::from_chars(exp.data(), exp.data() + exp.size(), x);
    // An exponent too long for int64 is far beyond any float's range either way.
    if (r.ec == std::errc::result_out_of_range) x = exp[0] == '-' ? -1000000 : 1000000;
    mag += std::clamp<int64_t>(x, -1000000, 1000000);
  }
  return mag;
}

template <typename T>
bool parseFloatImpl(std::string_view s, T& out) {
  bool neg = !s.empty() && s[0] == '-';
  std::string_view body = neg ? s.substr(1) : s;
  if (body == "inf" || body == "nan") {
    T v = body == "inf" ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
    out = neg ? -v : v;
    return true;
  }
  T v{};
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ptr != s.data() + s.size()) return false;
  if (r.ec == std::errc()) {
    out = v;
    return true;
  }
  if (r.ec != std::errc::result_out_of_range || decimalMagnitude(s) > 0) return false;
  out = neg ? -T(0) : T(0);  // underflow
  return true;
}

template <typename T>
std::string formatImpl(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  size_t e = s.find('e');
  if (e == std::string::npos) {
    if (s.find('.') == std::string::npos) s += ".0";
  } else if (s.find('.') == std::string::npos) {
    s.insert(e, ".0");
  }
  return s;
}

}  // namespace

// The lexer's state; declared in lexer.h so that the parser only sees next().
struct Lexer::Impl {
  Impl(std::string_view src, std::string file) : src_(src), file_(std::move(file)) {}

  Token next() {
    if (failed_.kind == Tok::Error) return failed_;
    skipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= src_.size()) return t;  // Eof
    Status s = lexOne(t);
    if (s) return t;
    // Errors are sticky: every later call returns the same error token.
    failed_.kind = Tok::Error;
    failed_.str = s.message();
    failed_.line = s.location().line;
    failed_.col = s.location().column;
    return failed_;
  }

 private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  Status errorAt(int line, int col, std::string msg) const {
    return Status::error(std::move(msg), Location{file_, line, col});
  }

  void skipSpaceAndComments() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  Status lexOne(Token& t) {
    size_t start = pos_;
    char c = src_[pos_];
    auto single = [&](Tok k) {
      advance();
      t.kind = k;
      t.text = src_.substr(start, 1);
      return Status::ok();
    };
    switch (c) {
      case '(': return single(Tok::LParen);
      case ')': return single(Tok::RParen);
      case '[': return single(Tok::LBracket);
      case ']': return single(Tok::RBracket);
      case '{': return single(Tok::LBrace);
      case '}': return single(Tok::RBrace);
      case ',': return single(Tok::Comma);
      case '=': return single(Tok::Equal);
      case ':': return single(Tok::Colon);
      case '*': return single(Tok::Star);
      case '%': return lexName(t, Tok::ValueName);
      case '@': return lexName(t, Tok::GlobalName);
      case '"': {
        t.kind = Tok::String;
        KILN_RETURN_IF_ERROR(lexQuoted(t.str));
        t.text = src_.substr(start, pos_ - start);
        return Status::ok();
      }
      default: break;
    }
    if (c == '-' && peek(1) == '>') {
      advance();
      advance();
      t.kind = Tok::Arrow;
      t.text = src_.substr(start, 2);
      return Status::ok();
    }
    if (c == '0' && (peek(1) == 'x' || peek(1) == 'X')) return lexHex(t);
    if (isDigit(c) || c == '-') return lexNumber(t);
    if (isAlpha(c)) {
      while (pos_ < src_.size() && isIdentChar(src_[pos_])) advance();
      t.kind = Tok::Ident;
      t.text = src_.substr(start, pos_ - start);
      return Status::ok();
    }
    return errorAt(line_, col_, "unexpected character " + describeChar(c));
  }

  static std::string describeChar(char c) {
    static const char* kHex = "0123456789abcdef";
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
  }

  // '%' or '@' followed by bare name characters or a quoted string.
  Status lexName(Token& t, Tok kind) {
    size_t start = pos_;
    int line = line_, col = col_;
    advance();
    t.kind = kind;
    if (peek() == '"') {
      KILN_RETURN_IF_ERROR(lexQuoted(t.str));
      if (t.str.empty()) return errorAt(line, col, "empty quoted name");
    } else {
      size_t nameStart = pos_;
      while (pos_ < src_.size() && isBareNameChar(src_[pos_])) advance();
      if (pos_ == nameStart)
        return errorAt(line, col, std::string("expected a name after '") + src_[start] + "'");
      t.str = std::string(src_.substr(nameStart, pos_ - nameStart));
    }
    t.text = src_.substr(start, pos_ - start);
    return Status::ok();
  }

  // A double-quoted string with C escapes; decoded into `out`.
  Status lexQuoted(std::string& out) {
    int line = line_, col = col_;
    advance();  // opening quote
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n')
        return errorAt(line, col, "unterminated string");
      char c = src_[pos_];
      if (c == '"') {
        advance();
        return Status::ok();
      }
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      int escLine = line_, escCol = col_;
      advance();
      char e = peek();
      if (pos_ >= src_.size()) return errorAt(line, col, "unterminated string");
      switch (e) {
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int hi = hexValue(peek(1)), lo = hexValue(peek(2));
          if (hi < 0 || lo < 0) return errorAt(escLine, escCol, "\\x needs two hex digits");
          out += static_cast<char>(hi * 16 + lo);
          advance();
          advance();
          break;
        }
        default: return errorAt(escLine, escCol, "unknown escape sequence in string");
      }
      advance();
    }
  }

  Status lexHex(Token& t) {
    advance();
    advance();
    size_t digits = pos_;
    while (pos_ < src_.size() && hexValue(src_[pos_]) >= 0) advance();
    if (pos_ < src_.size() && isBareNameChar(src_[pos_]))
      return errorAt(line_, col_, "bad hex digit " + describeChar(src_[pos_]) + " in data");
    t.kind = Tok::Hex;
    t.text = src_.substr(digits, pos_ - digits);
    return Status::ok();
  }

  // -?digits(.digits*)?([eE][+-]?digits)? ; also -inf and -nan.
  Status lexNumber(Token& t) {
    size_t start = pos_;
    int line = line_, col = col_;
    if (peek() == '-') {
      advance();
      if (isAlpha(peek())) {
        size_t wordStart = pos_;
        while (pos_ < src_.size() && isIdentChar(src_[pos_])) advance();
        std::string_view word = src_.substr(wordStart, pos_ - wordStart);
        if (word != "inf" && word != "nan") return errorAt(line, col, "unexpected '-'");
        t.kind = Tok::Float;
        t.text = src_.substr(start, pos_ - start);
        return Status::ok();
      }
      if (!isDigit(peek())) return errorAt(line, col, "unexpected '-'");
    }
    bool isFloat = false;
    while (isDigit(peek())) advance();
    if (peek() == '.') {
      isFloat = true;
      advance();
      while (isDigit(peek())) advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      isFloat = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!isDigit(peek())) return errorAt(line, col, "malformed number: exponent without digits");
      while (isDigit(peek())) advance();
    }
    if (isBareNameChar(peek()) || peek() == '.')
      return errorAt(line, col,
                     "malformed number '" + std::string(src_.substr(start, pos_ - start + 1)) +
                         "'");
    t.kind = isFloat ? Tok::Float : Tok::Integer;
    t.text = src_.substr(start, pos_ - start);
    return Status::ok();
  }

  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  Token failed_;
};

Lexer::Lexer(std::string_view src, std::string file)
    : impl_(std::make_unique<Impl>(src, std::move(file))) {}
Lexer::~Lexer() = default;
Token Lexer::next() { return impl_->next(); }

std::string describeToken(const Token& t) {
  switch (t.kind) {
    case Tok::Eof: return "end of file";
    case Tok::Integer: return "integer " + std::string(t.text);
    case Tok::Float: return "number " + std::string(t.text);
    case Tok::String: return "string " + quoteString(t.str);
    case Tok::Hex: return "hex data";
    case Tok::Error: return "an invalid token";
    default: {
      std::string s(t.text.substr(0, 40));
      return "'" + s + (t.text.size() > 40 ? "...'" : "'");
    }
  }
}

std::string formatDouble(double v) { return formatImpl(v); }
std::string formatFloat(float v) { return formatImpl(v); }
bool parseFloatText(std::string_view s, double& out) { return parseFloatImpl(s, out); }
bool parseFloatText(std::string_view s, float& out) { return parseFloatImpl(s, out); }

bool isBareName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isBareNameChar(c)) return false;
  return true;
}

std::string quoteString(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace kiln::text
