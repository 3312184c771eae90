// The kernel IR parser. See parse.h; the grammar is printKernel's (kernel_ir.cpp).
#include "kernel/parse.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "ir/text/text.h"

namespace kiln::kernel {
namespace {

enum class Tok { Eof, Ident, Buffer, Number, Punct };

struct Token {
  Tok kind = Tok::Eof;
  std::string text;  // Buffer: the name without '%'
  int line = 1, col = 1;
  size_t offset = 0;
};

// An expression before its types are known: constants take the type their context gives.
struct Ast {
  enum class Kind { Number, Bool, Var, Load, Apply, Infix } kind = Kind::Number;
  std::string text;  // the number, variable, buffer or applied name
  BinaryOp op = BinaryOp::Add;
  std::vector<std::unique_ptr<Ast>> args;
  Token at;
};
using AstRef = std::unique_ptr<Ast>;

std::optional<UnaryOp> unaryNamed(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(UnaryOp::WarpMin); ++i)
    if (s == unaryOpName(static_cast<UnaryOp>(i))) return static_cast<UnaryOp>(i);
  return std::nullopt;
}

std::optional<BinaryOp> binaryNamed(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(BinaryOp::Ne); ++i)
    if (s == binaryOpName(static_cast<BinaryOp>(i))) return static_cast<BinaryOp>(i);
  return std::nullopt;
}

bool isComparison(BinaryOp op) { return op >= BinaryOp::Lt; }

class Parser {
 public:
  Parser(std::string_view src, std::string file) : src_(src), file_(std::move(file)) { advance(); }

  StatusOr<std::vector<Kernel>> run() {
    std::vector<Kernel> out;
    while (cur_.kind != Tok::Eof) {
      KILN_ASSIGN_OR_RETURN(Kernel k, kernel());
      out.push_back(std::move(k));
    }
    return out;
  }

 private:
  // ---- tokens ----------------------------------------------------------------------------
  char peekChar(size_t i = 0) const { return pos_ + i < src_.size() ? src_[pos_ + i] : '\0'; }
  void bump() {
    if (src_[pos_] == '\n') ++line_, col_ = 1;
    else ++col_;
    ++pos_;
  }
  static bool word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

  // Skips white space and comments ("//" to the end of the line).
  void advance() {
    while (pos_ < src_.size()) {
      if (std::isspace(static_cast<unsigned char>(src_[pos_]))) {
        bump();
      } else if (src_[pos_] == '/' && peekChar(1) == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') bump();
      } else {
        break;
      }
    }
    cur_ = Token{};
    cur_.line = line_, cur_.col = col_, cur_.offset = pos_;
    if (pos_ >= src_.size()) return;
    char c = peekChar();
    size_t start = pos_;
    if (c == '%' && word(peekChar(1))) {
      bump();
      while (pos_ < src_.size() && word(peekChar())) bump();
      cur_.kind = Tok::Buffer;
      cur_.text = std::string(src_.substr(start + 1, pos_ - start - 1));
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      while (std::isdigit(static_cast<unsigned char>(peekChar())) || peekChar() == '.') bump();
      if (peekChar() == 'e' || peekChar() == 'E') {
        bump();
        if (peekChar() == '+' || peekChar() == '-') bump();
        while (std::isdigit(static_cast<unsigned char>(peekChar()))) bump();
      }
      cur_.kind = Tok::Number;
    } else if (word(c)) {
      while (pos_ < src_.size() && word(peekChar())) bump();
      cur_.kind = Tok::Ident;
    } else {
      bump();
      if ((c == '<' || c == '>' || c == '=' || c == '!') && peekChar() == '=') bump();
      cur_.kind = Tok::Punct;
    }
    cur_.text = std::string(src_.substr(start, pos_ - start));
  }

  Token take() {
    Token t = cur_;
    advance();
    return t;
  }
  bool atPunct(std::string_view p) const { return cur_.kind == Tok::Punct && cur_.text == p; }
  bool atWord(std::string_view w) const { return cur_.kind == Tok::Ident && cur_.text == w; }
  Status errorAt(const Token& t, const std::string& msg) const {
    return Status::error(msg, Location{file_, t.line, t.col});
  }
  std::string describe(const Token& t) const {
    if (t.kind == Tok::Eof) return "the end of the text";
    return "'" + (t.kind == Tok::Buffer ? "%" + t.text : t.text) + "'";
  }
  Status expected(const std::string& what) const {
    return errorAt(cur_, "expected " + what + ", got " + describe(cur_));
  }
  Status expectPunct(std::string_view p) {
    if (!atPunct(p)) return expected("'" + std::string(p) + "'");
    take();
    return Status::ok();
  }
  Status expectWord(std::string_view w) {
    if (!atWord(w)) return expected("'" + std::string(w) + "'");
    take();
    return Status::ok();
  }
  StatusOr<std::string> ident(const char* what) {
    if (cur_.kind != Tok::Ident) return expected(what);
    return take().text;
  }
  StatusOr<std::string> bufferName() {
    if (cur_.kind != Tok::Buffer) return expected("a buffer (%name)");
    return take().text;
  }
  StatusOr<int64_t> integer(const char* what) {
    bool negative = atPunct("-");
    if (negative) take();
    if (cur_.kind != Tok::Number || cur_.text.find_first_of(".eE") != std::string::npos)
      return expected(what);
    Token t = take();
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return errorAt(t, "integer " + t.text + " is out of range");
    return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  }
  StatusOr<DType> dtype() {
    Token t = cur_;
    KILN_ASSIGN_OR_RETURN(std::string name, ident("an element type"));
    std::optional<DType> d = parseDType(name);
    if (!d) return errorAt(t, "unknown element type '" + name + "'");
    return *d;
  }

  // ---- kernels and statements ------------------------------------------------------------
  StatusOr<Kernel> kernel() {
    KILN_RETURN_IF_ERROR(expectWord("kernel"));
    Kernel k;
    KILN_ASSIGN_OR_RETURN(k.name, ident("the kernel's name"));
    size_t underscore = k.name.find('_');
    if (underscore != std::string::npos) k.kind = k.name.substr(underscore + 1);
    KILN_RETURN_IF_ERROR(expectPunct("("));
    kernel_ = &k;
    while (!atPunct(")")) {
      if (!k.buffers.empty() || !k.symbols.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
      if (atWord("sym")) {
        if (!k.buffers.empty()) return errorAt(cur_, "symbols come before the buffers");
        KILN_ASSIGN_OR_RETURN(Symbol s, symbol());
        k.symbols.push_back(std::move(s));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Buffer b, parameter());
      k.buffers.push_back(std::move(b));
    }
    take();
    scope_.clear();
    for (const Buffer& b : k.buffers) scope_[b.name].push_back(b.type);
    KILN_ASSIGN_OR_RETURN(k.body, braced());
    return k;
  }

  StatusOr<Buffer> parameter() {
    Buffer b;
    Token roleTok = cur_;
    KILN_ASSIGN_OR_RETURN(std::string role, ident("in, out, temp or internal"));
    if (role == "in") b.role = BufferRole::Input;
    else if (role == "out") b.role = BufferRole::Output;
    else if (role == "temp") b.role = BufferRole::Temp;
    else if (role == "internal") b.role = BufferRole::Internal;
    else return errorAt(roleTok, "a buffer is in, out, temp or internal, not '" + role + "'");
    KILN_ASSIGN_OR_RETURN(b.name, bufferName());
    KILN_RETURN_IF_ERROR(expectPunct(":"));
    KILN_ASSIGN_OR_RETURN(b.type, dtype());
    KILN_RETURN_IF_ERROR(expectPunct("["));
    std::vector<ExprRef> dims;
    while (!atPunct("]")) {
      if (!dims.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
      Token at = cur_;
      KILN_ASSIGN_OR_RETURN(AstRef a, infix(0));
      KILN_ASSIGN_OR_RETURN(ExprRef d, build(*a, DType::I64));
      std::optional<int64_t> hi = upperBound(d, kernel_->symbols);
      if (!hi)
        return errorAt(at, "a dimension is a non-negative integer, a symbol declared before it " +
                               std::string("or their sum or product, not ") + printExpr(d));
      b.shape.push_back(*hi);
      dims.push_back(d);
    }
    take();
    for (const ExprRef& d : dims)
      if (d->kind != Expr::Kind::Const) b.dims = dims;
    if (atWord("layout")) {
      take();
      KILN_ASSIGN_OR_RETURN(b.layout, ident("a layout"));
    }
    return b;
  }

  // sym NAME in [LO, HI]
  StatusOr<Symbol> symbol() {
    KILN_RETURN_IF_ERROR(expectWord("sym"));
    Symbol s;
    Token at = cur_;
    KILN_ASSIGN_OR_RETURN(s.name, ident("the symbol's name"));
    if (kernel_->symbol(s.name)) return errorAt(at, "symbol " + s.name + " is declared twice");
    KILN_RETURN_IF_ERROR(expectWord("in"));
    KILN_RETURN_IF_ERROR(expectPunct("["));
    KILN_ASSIGN_OR_RETURN(s.lo, integer("the symbol's least value"));
    KILN_RETURN_IF_ERROR(expectPunct(","));
    KILN_ASSIGN_OR_RETURN(s.hi, integer("the symbol's largest value"));
    KILN_RETURN_IF_ERROR(expectPunct("]"));
    if (s.lo < 0 || s.hi < s.lo)
      return errorAt(at, "symbol " + s.name + " has the empty or negative range [" +
                             std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]");
    return s;
  }

  // "{" statements "}" as one statement.
  StatusOr<StmtRef> braced() {
    KILN_RETURN_IF_ERROR(expectPunct("{"));
    if (++depth_ > kMaxDepth) return errorAt(cur_, "statements nest too deeply");
    std::vector<StmtRef> body;
    while (!atPunct("}")) {
      if (cur_.kind == Tok::Eof) return expected("'}'");
      KILN_ASSIGN_OR_RETURN(StmtRef s, statement());
      body.push_back(std::move(s));
    }
    take();
    --depth_;
    return body.size() == 1 ? body[0] : block(std::move(body));
  }

  StatusOr<StmtRef> statement() {
    if (cur_.kind == Tok::Buffer) return storeOrReduce();
    Token t = cur_;
    KILN_ASSIGN_OR_RETURN(std::string w, ident("a statement"));
    for (int i = 0; i <= static_cast<int>(LoopKind::GpuThread); ++i)
      if (w == loopKindName(static_cast<LoopKind>(i))) return loop(static_cast<LoopKind>(i));
    if (w == "local" || w == "shared")
      return allocation(w == "local" ? MemoryScope::Local : MemoryScope::Shared);
    if (w == "if") return conditional();
    if (w == "barrier") return barrier();
    if (w == "call") return libraryCall();
    return errorAt(t, "unknown statement '" + w + "'");
  }

  StatusOr<StmtRef> loop(LoopKind kind) {
    KILN_RETURN_IF_ERROR(expectWord("for"));
    KILN_ASSIGN_OR_RETURN(std::string v, ident("a loop variable"));
    KILN_ASSIGN_OR_RETURN(ExprRef extent, range());
    KILN_ASSIGN_OR_RETURN(StmtRef body, braced());
    return forLoop(v, extent, kind, body);
  }

  // "in [0, extent)"
  StatusOr<ExprRef> range() {
    KILN_RETURN_IF_ERROR(expectWord("in"));
    KILN_RETURN_IF_ERROR(expectPunct("["));
    KILN_ASSIGN_OR_RETURN(int64_t zero, integer("0"));
    if (zero != 0) return errorAt(cur_, "a range starts at 0");
    KILN_RETURN_IF_ERROR(expectPunct(","));
    KILN_ASSIGN_OR_RETURN(ExprRef extent, typedExpr(DType::I64));
    KILN_RETURN_IF_ERROR(expectPunct(")"));
    return extent;
  }

  StatusOr<StmtRef> allocation(MemoryScope scope) {
    KILN_ASSIGN_OR_RETURN(std::string name, bufferName());
    KILN_RETURN_IF_ERROR(expectPunct(":"));
    KILN_ASSIGN_OR_RETURN(DType t, dtype());
    KILN_RETURN_IF_ERROR(expectPunct("["));
    KILN_ASSIGN_OR_RETURN(int64_t size, integer("a size"));
    KILN_RETURN_IF_ERROR(expectPunct("]"));
    scope_[name].push_back(t);
    StatusOr<StmtRef> body = braced();
    scope_[name].pop_back();
    if (!body) return body.status();
    return alloc(name, t, size, scope, *body);
  }

  StatusOr<StmtRef> conditional() {
    KILN_RETURN_IF_ERROR(expectPunct("("));
    KILN_ASSIGN_OR_RETURN(ExprRef cond, typedExpr(DType::Bool));
    KILN_RETURN_IF_ERROR(expectPunct(")"));
    KILN_ASSIGN_OR_RETURN(StmtRef then, braced());
    if (!atWord("else")) return ifThen(cond, then);
    take();
    KILN_ASSIGN_OR_RETURN(StmtRef otherwise, braced());
    return ifThen(cond, then, otherwise);
  }

  StatusOr<StmtRef> libraryCall() {
    Token calleeTok = cur_;
    KILN_ASSIGN_OR_RETURN(std::string callee, ident("the callee"));
    std::optional<OpCode> op = opFromName(callee);
    if (!op) return errorAt(calleeTok, "a call of unknown op '" + callee + "'");
    KILN_RETURN_IF_ERROR(expectPunct("("));
    std::vector<std::string> args;
    while (!atPunct(")")) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
      KILN_ASSIGN_OR_RETURN(std::string a, bufferName());
      args.push_back(std::move(a));
    }
    take();
    StmtRef s = call(*op, {}, std::move(args));
    if (atPunct("{")) {
      KILN_ASSIGN_OR_RETURN(s->attrs, attributes(*op));
    }
    if (atWord("layout")) {
      take();
      KILN_ASSIGN_OR_RETURN(s->layout, ident("a layout"));
    }
    if (atWord("then")) {
      take();
      do {
        if (!s->postOps.empty()) take();  // the ','
        KILN_ASSIGN_OR_RETURN(PostOp p, postOp());
        s->postOps.push_back(std::move(p));
      } while (atPunct(","));
    }
    return s;
  }

  // The attribute text "{...}" from the current '{' to its '}' (quoted text may hold braces).
  StatusOr<AttrMap> attributes(OpCode op) {
    Token open = cur_;
    size_t i = open.offset, depth = 0;
    bool quoted = false;
    for (; i < src_.size(); ++i) {
      char c = src_[i];
      if (quoted) {
        if (c == '\\') ++i;
        else if (c == '"') quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (i >= src_.size()) return errorAt(open, "the call's attributes have no closing '}'");
    std::string_view text = src_.substr(open.offset, i + 1 - open.offset);
    KILN_ASSIGN_OR_RETURN(AttrMap attrs, parseAttributes(op, text, file_, open.line, open.col));
    while (pos_ <= i) bump();
    advance();
    return attrs;
  }

  StatusOr<PostOp> postOp() {
    Token t = cur_;
    KILN_ASSIGN_OR_RETURN(std::string name, ident("a post-op"));
    PostOp p;
    for (int i = 0; i <= static_cast<int>(PostOp::Kind::Swish); ++i)
      if (name == postOpName(static_cast<PostOp::Kind>(i))) p.kind = static_cast<PostOp::Kind>(i);
    if (name != postOpName(p.kind)) return errorAt(t, "unknown post-op '" + name + "'");
    if (p.kind == PostOp::Kind::Add || p.kind == PostOp::Kind::Mul) {
      KILN_RETURN_IF_ERROR(expectPunct("("));
      Token operandTok = cur_;
      KILN_ASSIGN_OR_RETURN(p.operand, bufferName());
      const Buffer* b = kernel_->find(p.operand);
      if (!b) return errorAt(operandTok, "post-op operand %" + p.operand + " is no kernel buffer");
      p.operandShape = b->shape;
      KILN_RETURN_IF_ERROR(expectPunct(","));
      KILN_RETURN_IF_ERROR(expectWord("dims"));
      KILN_RETURN_IF_ERROR(expectPunct("["));
      while (!atPunct("]")) {
        if (!p.operandDims.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
        KILN_ASSIGN_OR_RETURN(int64_t d, integer("a dimension"));
        p.operandDims.push_back(d);
      }
      take();
      KILN_RETURN_IF_ERROR(expectPunct(")"));
    } else if (p.kind == PostOp::Kind::Clamp) {
      KILN_RETURN_IF_ERROR(expectPunct("("));
      KILN_ASSIGN_OR_RETURN(ExprRef lo, typedExpr(DType::F32));
      KILN_RETURN_IF_ERROR(expectPunct(","));
      KILN_ASSIGN_OR_RETURN(ExprRef hi, typedExpr(DType::F32));
      KILN_RETURN_IF_ERROR(expectPunct(")"));
      if (lo->kind != Expr::Kind::Const || hi->kind != Expr::Kind::Const)
        return errorAt(t, "clamp takes two numbers");
      p.lo = lo->f, p.hi = hi->f;
    }
    return p;
  }

  StatusOr<StmtRef> storeOrReduce() {
    Token at = cur_;
    std::string name = take().text;
    std::optional<DType> t = bufferType(name);
    if (!t) return errorAt(at, "%" + name + " is no buffer in scope");
    KILN_RETURN_IF_ERROR(expectPunct("["));
    KILN_ASSIGN_OR_RETURN(ExprRef index, typedExpr(DType::I64));
    if (atPunct(":")) return copyFrom(name, index);
    KILN_RETURN_IF_ERROR(expectPunct("]"));
    KILN_RETURN_IF_ERROR(expectPunct("="));
    if (!atWord("reduce")) {
      KILN_ASSIGN_OR_RETURN(ExprRef value, typedExpr(*t));
      return store(name, index, value);
    }
    take();
    KILN_RETURN_IF_ERROR(expectPunct("<"));
    Token kindTok = cur_;
    KILN_ASSIGN_OR_RETURN(std::string kindName, ident("a reduction kind"));
    std::optional<ReduceKind> kind;
    for (int i = 0; i <= static_cast<int>(ReduceKind::SelectMax); ++i)
      if (kindName == reduceKindName(static_cast<ReduceKind>(i))) kind = static_cast<ReduceKind>(i);
    if (!kind) return errorAt(kindTok, "unknown reduction '" + kindName + "'");
    KILN_RETURN_IF_ERROR(expectPunct(">"));
    KILN_RETURN_IF_ERROR(expectPunct("("));
    std::vector<std::string> vars;
    std::vector<ExprRef> extents;
    while (!atPunct(")")) {
      if (!vars.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
      KILN_ASSIGN_OR_RETURN(std::string v, ident("a reduction variable"));
      KILN_ASSIGN_OR_RETURN(ExprRef e, range());
      vars.push_back(std::move(v));
      extents.push_back(std::move(e));
    }
    take();
    KILN_ASSIGN_OR_RETURN(ExprRef value, typedExpr(*t));
    return reduceInto(name, index, *kind, std::move(vars), std::move(extents), value);
  }

  // The rest of `%dst[index : lanes] = %src[fromIndex : lanes]` after `%dst[index`.
  StatusOr<StmtRef> copyFrom(const std::string& name, ExprRef index) {
    take();
    KILN_ASSIGN_OR_RETURN(int64_t lanes, integer("the copy's element count"));
    KILN_RETURN_IF_ERROR(expectPunct("]"));
    KILN_RETURN_IF_ERROR(expectPunct("="));
    Token at = cur_;
    KILN_ASSIGN_OR_RETURN(std::string from, bufferName());
    if (!bufferType(from)) return errorAt(at, "%" + from + " is no buffer in scope");
    KILN_RETURN_IF_ERROR(expectPunct("["));
    KILN_ASSIGN_OR_RETURN(ExprRef fromIndex, typedExpr(DType::I64));
    KILN_RETURN_IF_ERROR(expectPunct(":"));
    Token count = cur_;
    KILN_ASSIGN_OR_RETURN(int64_t fromLanes, integer("the copy's element count"));
    if (fromLanes != lanes)
      return errorAt(count, "a copy of " + std::to_string(lanes) + " elements reads " +
                                std::to_string(fromLanes));
    KILN_RETURN_IF_ERROR(expectPunct("]"));
    return wideCopy(name, index, from, fromIndex, lanes);
  }

  std::optional<DType> bufferType(const std::string& name) const {
    auto it = scope_.find(name);
    if (it == scope_.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
  }

  // ---- expressions -----------------------------------------------------------------------
  // Precedence as the printer's: comparisons < + - < * / % < applications and atoms.
  StatusOr<ExprRef> typedExpr(std::optional<DType> expected) {
    KILN_ASSIGN_OR_RETURN(AstRef a, infix(0));
    return build(*a, expected);
  }

  static std::optional<BinaryOp> infixOp(const Token& t, int level) {
    if (t.kind != Tok::Punct) return std::nullopt;
    static const std::pair<const char*, BinaryOp> ops[3][6] = {
        {{"<", BinaryOp::Lt},
         {"<=", BinaryOp::Le},
         {">", BinaryOp::Gt},
         {">=", BinaryOp::Ge},
         {"==", BinaryOp::Eq},
         {"!=", BinaryOp::Ne}},
        {{"+", BinaryOp::Add}, {"-", BinaryOp::Sub}},
        {{"*", BinaryOp::Mul}, {"/", BinaryOp::Div}, {"%", BinaryOp::Rem}}};
    for (const auto& [text, op] : ops[level])
      if (text && t.text == text) return op;
    return std::nullopt;
  }

  StatusOr<AstRef> infix(int level) {
    if (level == 3) return atom();
    if (++depth_ > kMaxDepth) return errorAt(cur_, "the expression nests too deeply");
    KILN_ASSIGN_OR_RETURN(AstRef lhs, infix(level + 1));
    while (std::optional<BinaryOp> op = infixOp(cur_, level)) {
      auto node = std::make_unique<Ast>();
      node->kind = Ast::Kind::Infix;
      node->op = *op;
      node->at = take();
      KILN_ASSIGN_OR_RETURN(AstRef rhs, infix(level + 1));
      node->args.push_back(std::move(lhs));
      node->args.push_back(std::move(rhs));
      lhs = std::move(node);
    }
    --depth_;
    return lhs;
  }

  StatusOr<AstRef> atom() {
    auto a = std::make_unique<Ast>();
    a->at = cur_;
    if (atPunct("(")) {
      take();
      KILN_ASSIGN_OR_RETURN(AstRef inner, infix(0));
      KILN_RETURN_IF_ERROR(expectPunct(")"));
      return inner;
    }
    bool negative = atPunct("-");
    if (negative) take();
    if (cur_.kind == Tok::Number || (cur_.kind == Tok::Ident && (atWord("inf") || atWord("nan")))) {
      a->kind = Ast::Kind::Number;
      a->text = (negative ? "-" : "") + take().text;
      return a;
    }
    if (negative) return expected("a number after '-'");
    if (cur_.kind == Tok::Buffer) {
      a->kind = Ast::Kind::Load;
      a->text = take().text;
      KILN_RETURN_IF_ERROR(expectPunct("["));
      KILN_ASSIGN_OR_RETURN(AstRef index, infix(0));
      KILN_RETURN_IF_ERROR(expectPunct("]"));
      a->args.push_back(std::move(index));
      return a;
    }
    KILN_ASSIGN_OR_RETURN(a->text, ident("an expression"));
    if (a->text == "true" || a->text == "false") {
      a->kind = Ast::Kind::Bool;
      return a;
    }
    if (!atPunct("(")) {
      a->kind = Ast::Kind::Var;
      return a;
    }
    take();
    a->kind = Ast::Kind::Apply;
    while (!atPunct(")")) {
      if (!a->args.empty()) KILN_RETURN_IF_ERROR(expectPunct(","));
      KILN_ASSIGN_OR_RETURN(AstRef arg, infix(0));
      a->args.push_back(std::move(arg));
    }
    take();
    return a;
  }

  // The type an expression has whatever its context (none for a bare number).
  std::optional<DType> ownType(const Ast& a) const {
    switch (a.kind) {
      case Ast::Kind::Number: return std::nullopt;
      case Ast::Kind::Bool: return DType::Bool;
      case Ast::Kind::Var: return DType::I64;
      case Ast::Kind::Load: return bufferType(a.text);
      case Ast::Kind::Infix:
        if (isComparison(a.op)) return DType::Bool;
        return eitherType(a, 0);
      case Ast::Kind::Apply: break;
    }
    if (std::optional<DType> cast = parseDType(a.text)) return cast;
    if (a.text == "select") return eitherType(a, 1);
    if (std::optional<UnaryOp> u = unaryNamed(a.text))
      return *u >= UnaryOp::IsFinite ? DType::Bool : eitherType(a, 0);
    if (std::optional<BinaryOp> b = binaryNamed(a.text))
      return isComparison(*b) ? DType::Bool : eitherType(a, 0);
    return std::nullopt;
  }
  // The own type of a.args[from] or of a later argument.
  std::optional<DType> eitherType(const Ast& a, size_t from) const {
    for (size_t i = from; i < a.args.size(); ++i)
      if (std::optional<DType> t = ownType(*a.args[i])) return t;
    return std::nullopt;
  }

  StatusOr<ExprRef> build(const Ast& a, std::optional<DType> expected) {
    switch (a.kind) {
      case Ast::Kind::Number: return number(a, expected);
      case Ast::Kind::Bool: return intConst(a.text == "true" ? 1 : 0, DType::Bool);
      case Ast::Kind::Var: return var(a.text);
      case Ast::Kind::Load: {
        std::optional<DType> t = bufferType(a.text);
        if (!t) return errorAt(a.at, "%" + a.text + " is no buffer in scope");
        KILN_ASSIGN_OR_RETURN(ExprRef index, build(*a.args[0], DType::I64));
        return load(a.text, *t, index);
      }
      case Ast::Kind::Infix: return binaryOf(a, a.op, expected);
      case Ast::Kind::Apply: break;
    }
    auto arity = [&](size_t n) -> Status {
      if (a.args.size() == n) return Status::ok();
      return errorAt(a.at, a.text + " takes " + std::to_string(n) + " operand(s), not " +
                               std::to_string(a.args.size()));
    };
    if (std::optional<DType> to = parseDType(a.text)) {
      KILN_RETURN_IF_ERROR(arity(1));
      KILN_ASSIGN_OR_RETURN(ExprRef x, build(*a.args[0], ownType(*a.args[0])));
      return cast(x, *to);
    }
    if (a.text == "select") {
      KILN_RETURN_IF_ERROR(arity(3));
      std::optional<DType> t = expected ? expected : eitherType(a, 1);
      KILN_ASSIGN_OR_RETURN(ExprRef c, build(*a.args[0], DType::Bool));
      KILN_ASSIGN_OR_RETURN(ExprRef x, build(*a.args[1], t));
      KILN_ASSIGN_OR_RETURN(ExprRef y, build(*a.args[2], t));
      return select(c, x, y);
    }
    if (std::optional<UnaryOp> u = unaryNamed(a.text);
        u && *u >= UnaryOp::WarpSum && a.args.size() == 2) {
      const Ast& g = *a.args[1];
      std::optional<int64_t> lanes;
      if (g.kind == Ast::Kind::Number && g.text.size() <= 2 &&
          std::all_of(g.text.begin(), g.text.end(), [](char c) { return std::isdigit(c); }))
        lanes = std::stoll(g.text);
      if (!lanes || *lanes < 1 || *lanes > 32 || (*lanes & (*lanes - 1)))
        return errorAt(g.at, a.text + "'s group of lanes must be a power of two up to 32");
      KILN_ASSIGN_OR_RETURN(ExprRef x, build(*a.args[0], expected));
      return warpCombine(*u, x, *lanes);
    }
    if (std::optional<UnaryOp> u = unaryNamed(a.text)) {
      KILN_RETURN_IF_ERROR(arity(1));
      bool predicate = *u >= UnaryOp::IsFinite;
      KILN_ASSIGN_OR_RETURN(ExprRef x,
                            build(*a.args[0], predicate ? ownType(*a.args[0]) : expected));
      return unary(*u, x);
    }
    if (std::optional<BinaryOp> b = binaryNamed(a.text)) {
      KILN_RETURN_IF_ERROR(arity(2));
      return binaryOf(a, *b, expected);
    }
    return errorAt(a.at, "unknown function '" + a.text + "'");
  }

  StatusOr<ExprRef> binaryOf(const Ast& a, BinaryOp op, std::optional<DType> expected) {
    std::optional<DType> t = isComparison(op) || !expected ? eitherType(a, 0) : expected;
    KILN_ASSIGN_OR_RETURN(ExprRef x, build(*a.args[0], t));
    KILN_ASSIGN_OR_RETURN(ExprRef y, build(*a.args[1], t ? t : x->type));
    return binary(op, x, y);
  }

  StatusOr<ExprRef> number(const Ast& a, std::optional<DType> expected) {
    const std::string& s = a.text;
    bool isFloatText = s.find_first_of(".eEin") != std::string::npos;  // '.', exponent, inf, nan
    DType t = expected ? *expected : (isFloatText ? DType::F32 : DType::I64);
    if (isFloat(t)) {
      double v = 0;
      if (s == "nan" || s == "-nan") v = std::numeric_limits<double>::quiet_NaN();
      else if (s == "inf" || s == "-inf") v = s[0] == '-' ? -INFINITY : INFINITY;
      else v = std::strtod(s.c_str(), nullptr);
      return floatConst(v, t);
    }
    if (isFloatText)
      return errorAt(a.at,
                     "the " + std::string(dtypeName(t)) + " value " + s + " is not an integer");
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == ERANGE) {  // u64 values past INT64_MAX print as such
      unsigned long long u = std::strtoull(s.c_str(), &end, 10);
      if (errno == ERANGE || s[0] == '-') return errorAt(a.at, "integer " + s + " is out of range");
      v = static_cast<long long>(u);
    }
    return intConst(static_cast<int64_t>(v), t);
  }

  static constexpr int kMaxDepth = 2000;  // bounds the parser's recursion
  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1, depth_ = 0;
  Token cur_;
  std::map<std::string, std::vector<DType>> scope_;  // buffer name -> types, innermost last
  const Kernel* kernel_ = nullptr;
};

}  // namespace

StatusOr<std::vector<Kernel>> parseKernels(std::string_view text, const std::string& filename) {
  return Parser(text, filename).run();
}

}  // namespace kiln::kernel
