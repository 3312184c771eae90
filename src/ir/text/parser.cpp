// The .kir parser: builds a Module from text and verifies it.
//
// Tokens come from the lexer one at a time, and the parser reads them in one pass with no
// recursion, so no input can exhaust the stack or make memory grow with its token count. Attribute
// values are parsed by the kind the op's schema gives them. Each node is checked against its type
// rule as soon as it is built, so a type error points at the op that causes it. `data` entries may
// come after the constants that name them: those constants are completed and checked once the whole
// module has been read. Sizes are checked before anything is allocated, so a huge type in a small
// file is an error, not an allocation.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "ir/text/lexer.h"
#include "ir/text/text.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

using text::Tok;
using text::Token;

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are little-endian and copied as is");

// Splat constants are expanded in memory, so a few bytes of text can ask for a huge allocation.
// The splats of one module may take this many bytes in all; beyond that they are refused.
constexpr int64_t kMaxSplatBytes = int64_t(1) << 30;

const char* tokKindName(Tok k) {
  switch (k) {
    case Tok::Eof: return "end of file";
    case Tok::Ident: return "a word";
    case Tok::ValueName: return "a value name (%name)";
    case Tok::GlobalName: return "a name (@name)";
    case Tok::Integer: return "an integer";
    case Tok::Float: return "a number";
    case Tok::String: return "a string";
    case Tok::Hex: return "hex data (0x...)";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Equal: return "'='";
    case Tok::Colon: return "':'";
    case Tok::Star: return "'*'";
    case Tok::Arrow: return "'->'";
    case Tok::Error: return "a valid token";
  }
  return "?";
}

// A constant whose `value` names a data entry; completed after the whole module is read.
struct PendingData {
  Node* node;
  std::string attr;
  std::string name;
  Location loc;
};

struct DataEntry {
  Tensor tensor;
  Location loc;
  std::optional<TensorType> held;  // `data @w = T held`: no data here (ConstantData::held)
};

struct DefinedValue {
  Value* value;
  Location loc;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, std::string_view blob = {},
         std::shared_ptr<const void> blobOwner = nullptr, bool container = false)
      : lexer_(text, file), file_(file), blob_(blob), blobOwner_(std::move(blobOwner)),
        container_(container), module_(std::make_unique<Module>()) {
    cur_ = lexer_.next();
  }

  StatusOr<std::unique_ptr<Module>> run();

  // The attributes of an `op` node: the whole text is "{...}".
  StatusOr<AttrMap> runAttributes(OpCode op) {
    AttrMap attrs;
    std::vector<PendingData> pending;
    KILN_RETURN_IF_ERROR(parseAttrs(op, {}, attrs, pending));
    if (!at(Tok::Eof)) return expected("the end of the attributes");
    if (!pending.empty()) return errorAt(cur(), "an attribute names a data entry");
    return attrs;
  }

 private:
  // --- tokens ---
  const Token& cur() const { return cur_; }
  // Returns the current token and moves to the next; Eof and Error tokens stay current.
  Token take() {
    Token t = cur_;
    if (t.kind != Tok::Eof && t.kind != Tok::Error) cur_ = lexer_.next();
    return t;
  }
  bool at(Tok k) const { return cur().kind == k; }
  bool atWord(std::string_view w) const { return at(Tok::Ident) && cur().text == w; }
  Location locOf(const Token& t) const { return Location{file_, t.line, t.col}; }
  // An error at `t`; at a lexical error token, that error is the one to report.
  Status errorAt(const Token& t, std::string msg) const {
    if (t.kind == Tok::Error) return Status::error(t.str, locOf(t));
    return Status::error(std::move(msg), locOf(t));
  }
  Status expected(const std::string& what) const {
    return errorAt(cur(), "expected " + what + ", got " + text::describeToken(cur()));
  }
  Status expect(Tok k) {
    if (!at(k)) return expected(tokKindName(k));
    take();
    return Status::ok();
  }

  // --- grammar ---
  Status parseFunction();
  Status parseSignature(Function* f, std::vector<TensorType>& resultTypes);
  Status parseParameter(Function* f);
  Status parseStatement(Function* f);
  Status parseResultNames(std::vector<Token>& names);
  Status parseOperands(std::vector<Value*>& operands);
  Status parseReturn(Function* f, const std::vector<TensorType>& resultTypes);
  Status parseTypeList(std::vector<TensorType>& types);
  StatusOr<TensorType> parseType();
  StatusOr<Dim> parseDim();
  Status parseLoc(std::string& origin);
  Status parseAttrs(OpCode op, const std::vector<TensorType>& declared, AttrMap& attrs,
                    std::vector<PendingData>& pending);
  StatusOr<AttrValue> parseAttrValue(OpCode op, const AttrSpec& spec,
                                     const std::vector<TensorType>& declared,
                                     std::vector<PendingData>& pending);
  StatusOr<AttrValue> parseEnum(OpCode op, const AttrSpec& spec);
  StatusOr<AttrValue> parseList(AttrKind kind, const std::string& what);
  StatusOr<AttrValue> parseTensorValue(const AttrSpec& spec,
                                       const std::vector<TensorType>& declared,
                                       std::vector<PendingData>& pending);
  StatusOr<Tensor> parseInlineTensor(const TensorType& type, int64_t count);
  StatusOr<Tensor> parseSplat(const TensorType& type, int64_t count);
  StatusOr<Tensor> parseInlineStrings(const TensorType& type, int64_t count);
  Status parseDataEntry();
  Status resolveData();

  // --- values and numbers ---
  StatusOr<int64_t> intValue(const Token& t) const;
  StatusOr<double> floatValue(const Token& t) const;
  StatusOr<uint64_t> elementBits(DType dt, const Token& tok) const;
  StatusOr<Value*> useValue(const Token& t) const;
  Status checkNewName(const Token& t) const;
  void define(const Token& t, Value* v) { values_[t.str] = DefinedValue{v, locOf(t)}; }

  text::Lexer lexer_;
  Token cur_;
  std::string file_;
  std::string_view blob_;                  // the bytes `data ... blob OFFSET` entries refer to
  std::shared_ptr<const void> blobOwner_;  // keeps blob_ valid: constants may borrow from it
  bool container_ = false;  // the module of an artifact: `held` data entries are allowed
  std::unique_ptr<Module> module_;
  std::map<std::string, Location> functionLocs_;
  std::unordered_map<std::string, DefinedValue> values_;  // of the function being parsed
  std::vector<PendingData> pending_;
  std::map<std::string, DataEntry> data_;
  int64_t splatBytes_ = 0;  // expanded bytes of the splats read so far
};

StatusOr<std::unique_ptr<Module>> Parser::run() {
  while (!at(Tok::Eof)) {
    if (atWord("func")) {
      KILN_RETURN_IF_ERROR(parseFunction());
    } else if (atWord("data")) {
      KILN_RETURN_IF_ERROR(parseDataEntry());
    } else {
      return expected("'func' or 'data'");
    }
  }
  if (module_->functions().empty()) return errorAt(cur(), "module has no functions");
  KILN_RETURN_IF_ERROR(resolveData());
  Status s = verify(*module_);
  if (!s) return s.at(Location{file_, 0, 0});
  return std::move(module_);
}

// --- functions --------------------------------------------------------------------------------

Status Parser::parseFunction() {
  take();  // func
  if (!at(Tok::GlobalName)) return expected("a function name (@name)");
  Token nameTok = take();
  auto prev = functionLocs_.find(nameTok.str);
  if (prev != functionLocs_.end())
    return errorAt(nameTok, "function @" + nameTok.str + " is defined twice (first at " +
                                prev->second.str() + ")");
  functionLocs_[nameTok.str] = locOf(nameTok);
  Function* f = module_->addFunction(nameTok.str);
  values_.clear();
  std::vector<TensorType> resultTypes;
  KILN_RETURN_IF_ERROR(parseSignature(f, resultTypes));
  KILN_RETURN_IF_ERROR(expect(Tok::LBrace));
  while (true) {
    if (atWord("return")) {
      KILN_RETURN_IF_ERROR(parseReturn(f, resultTypes));
      return expect(Tok::RBrace);
    }
    if (at(Tok::RBrace)) return errorAt(cur(), "function @" + f->name() + " has no return");
    if (!at(Tok::ValueName)) return expected("a statement (%name = ...) or 'return'");
    KILN_RETURN_IF_ERROR(parseStatement(f));
  }
}

Status Parser::parseSignature(Function* f, std::vector<TensorType>& resultTypes) {
  KILN_RETURN_IF_ERROR(expect(Tok::LParen));
  if (!at(Tok::RParen)) {
    while (true) {
      KILN_RETURN_IF_ERROR(parseParameter(f));
      if (!at(Tok::Comma)) break;
      take();
    }
  }
  KILN_RETURN_IF_ERROR(expect(Tok::RParen));
  KILN_RETURN_IF_ERROR(expect(Tok::Arrow));
  if (!at(Tok::LParen)) return expected("'(' before the result types");
  return parseTypeList(resultTypes);
}

Status Parser::parseParameter(Function* f) {
  if (!at(Tok::ValueName)) return expected("a parameter name (%name)");
  Token nameTok = take();
  KILN_RETURN_IF_ERROR(checkNewName(nameTok));
  KILN_RETURN_IF_ERROR(expect(Tok::Colon));
  KILN_ASSIGN_OR_RETURN(TensorType type, parseType());
  std::string origin;
  KILN_RETURN_IF_ERROR(parseLoc(origin));
  Value* v = f->addParameter(std::move(type), nameTok.str);
  v->def()->setLoc(locOf(nameTok));
  v->def()->setOrigin(std::move(origin));
  define(nameTok, v);
  return verifyNode(*v->def());
}

// `%a, %b =`: names not defined before, each once.
Status Parser::parseResultNames(std::vector<Token>& names) {
  while (true) {
    if (!at(Tok::ValueName)) return expected("a value name (%name)");
    Token t = take();
    KILN_RETURN_IF_ERROR(checkNewName(t));
    for (const Token& other : names)
      if (other.str == t.str) return errorAt(t, "value %" + t.str + " is named twice");
    names.push_back(std::move(t));
    if (!at(Tok::Comma)) break;
    take();
  }
  return expect(Tok::Equal);
}

// `(%a, %b)`: values defined earlier in the function.
Status Parser::parseOperands(std::vector<Value*>& operands) {
  KILN_RETURN_IF_ERROR(expect(Tok::LParen));
  while (!at(Tok::RParen)) {
    if (!operands.empty()) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    if (!at(Tok::ValueName)) return expected("an operand (%name) or ')'");
    KILN_ASSIGN_OR_RETURN(Value * v, useValue(take()));
    operands.push_back(v);
  }
  take();
  return Status::ok();
}

Status Parser::parseStatement(Function* f) {
  std::vector<Token> names;
  KILN_RETURN_IF_ERROR(parseResultNames(names));
  std::vector<TensorType> types;
  Token typesTok = cur();
  KILN_RETURN_IF_ERROR(parseTypeList(types));
  if (types.size() != names.size())
    return errorAt(typesTok, std::to_string(names.size()) + " names but " +
                                 std::to_string(types.size()) + " result types");
  if (!at(Tok::Ident)) return expected("an op name");
  Token opTok = take();
  auto op = opFromName(opTok.text);
  if (!op) return errorAt(opTok, "unknown op '" + std::string(opTok.text) + "'");
  if (*op == OpCode::Parameter)
    return errorAt(opTok, "parameters are declared in the function signature");
  std::vector<Value*> operands;
  KILN_RETURN_IF_ERROR(parseOperands(operands));
  AttrMap attrs;
  std::vector<PendingData> pending;
  KILN_RETURN_IF_ERROR(parseAttrs(*op, types, attrs, pending));
  std::string origin;
  KILN_RETURN_IF_ERROR(parseLoc(origin));

  Node* n = f->createNode(*op, std::move(operands), std::move(types), std::move(attrs));
  n->setLoc(locOf(opTok));
  n->setOrigin(std::move(origin));
  for (size_t i = 0; i < names.size(); ++i) {
    n->result(i)->setName(names[i].str);
    define(names[i], n->result(i));
  }
  // A constant naming a data entry is checked once the data is known (resolveData).
  if (!pending.empty()) {
    for (PendingData& p : pending) {
      p.node = n;
      pending_.push_back(std::move(p));
    }
    return Status::ok();
  }
  return verifyNode(*n);
}

Status Parser::parseReturn(Function* f, const std::vector<TensorType>& resultTypes) {
  Token retTok = take();
  std::vector<Value*> outs;
  std::vector<std::string> names;
  std::vector<Token> outToks;
  if (!at(Tok::ValueName)) return expected("a value to return (%name)");
  while (true) {
    if (!at(Tok::ValueName)) return expected("a value name (%name)");
    Token t = take();
    KILN_ASSIGN_OR_RETURN(Value * v, useValue(t));
    outs.push_back(v);
    // `%x as "y"`: an output named apart from its value; else it takes the value's name.
    names.push_back(v->name());
    if (atWord("as")) {
      take();
      if (!at(Tok::String)) return expected("the output's name as a string (\"name\")");
      names.back() = take().str;
    }
    outToks.push_back(std::move(t));
    if (!at(Tok::Comma)) break;
    take();
  }
  if (outs.size() != resultTypes.size())
    return errorAt(retTok, "return has " + std::to_string(outs.size()) + " values but @" +
                               f->name() + " declares " + std::to_string(resultTypes.size()) +
                               " results");
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i]->type() != resultTypes[i])
      return errorAt(outToks[i], "returned value %" + outToks[i].str + " has type " +
                                     outs[i]->type().str() + " but @" + f->name() +
                                     " declares result " + std::to_string(i) + " as " +
                                     resultTypes[i].str());
  f->setOutputs(std::move(outs), std::move(names));
  return Status::ok();
}

// `T` or `(T, T, ...)`.
Status Parser::parseTypeList(std::vector<TensorType>& types) {
  if (!at(Tok::LParen)) {
    KILN_ASSIGN_OR_RETURN(TensorType t, parseType());
    types.push_back(std::move(t));
    return Status::ok();
  }
  take();
  while (!at(Tok::RParen)) {
    if (!types.empty()) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    KILN_ASSIGN_OR_RETURN(TensorType t, parseType());
    types.push_back(std::move(t));
  }
  take();
  return Status::ok();
}

StatusOr<TensorType> Parser::parseType() {
  if (!at(Tok::Ident)) return expected("a type (such as f32[2,3])");
  Token dtTok = take();
  auto dt = parseDType(dtTok.text);
  if (!dt) return errorAt(dtTok, "unknown dtype '" + std::string(dtTok.text) + "'");
  KILN_RETURN_IF_ERROR(expect(Tok::LBracket));
  Shape dims;
  while (!at(Tok::RBracket)) {
    if (!dims.empty()) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    KILN_ASSIGN_OR_RETURN(Dim d, parseDim());
    dims.push_back(std::move(d));
  }
  take();
  return TensorType(*dt, std::move(dims));
}

// An extent, a symbol, or a product of them: 4*N*S.
StatusOr<Dim> Parser::parseDim() {
  Dim d(1);
  for (;;) {
    Dim f;
    if (at(Tok::Ident)) {
      f = Dim::symbol(std::string(take().text));
    } else if (at(Tok::Integer)) {
      Token t = take();
      KILN_ASSIGN_OR_RETURN(int64_t v, intValue(t));
      if (v < 0) return errorAt(t, "negative dimension " + std::to_string(v));
      if (v > kMaxElements) return errorAt(t, "dimension " + std::to_string(v) + " is too large");
      f = Dim(v);
    } else {
      return expected("a dimension (an extent or a symbol)");
    }
    std::optional<Dim> p = d * f;
    if (!p) return expected("a dimension of at most 2^40");
    d = *p;
    if (!at(Tok::Star)) return d;
    take();
  }
}

Status Parser::parseLoc(std::string& origin) {
  if (!atWord("loc")) return Status::ok();
  take();
  KILN_RETURN_IF_ERROR(expect(Tok::LParen));
  if (!at(Tok::String)) return expected("a string");
  origin = take().str;
  return expect(Tok::RParen);
}

// --- attributes -------------------------------------------------------------------------------

Status Parser::parseAttrs(OpCode op, const std::vector<TensorType>& declared, AttrMap& attrs,
                          std::vector<PendingData>& pending) {
  if (!at(Tok::LBrace)) return Status::ok();
  take();
  while (!at(Tok::RBrace)) {
    if (!attrs.empty()) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    if (!at(Tok::Ident)) return expected("an attribute name");
    Token nameTok = take();
    std::string name(nameTok.text);
    const AttrSpec* spec = findAttrSpec(op, name);
    if (!spec)
      return errorAt(nameTok, std::string(opName(op)) + " has no attribute '" + name + "'");
    if (attrs.count(name)) return errorAt(nameTok, "attribute '" + name + "' given twice");
    KILN_RETURN_IF_ERROR(expect(Tok::Equal));
    KILN_ASSIGN_OR_RETURN(AttrValue v, parseAttrValue(op, *spec, declared, pending));
    attrs.emplace(std::move(name), std::move(v));
  }
  take();
  return Status::ok();
}

StatusOr<AttrValue> Parser::parseAttrValue(OpCode op, const AttrSpec& spec,
                                           const std::vector<TensorType>& declared,
                                           std::vector<PendingData>& pending) {
  const char* kind = attrKindName(spec.kind);
  std::string what = std::string(opName(op)) + " attribute '" + spec.name + "' expects " +
                     (std::strchr("aeiou", kind[0]) ? "an " : "a ") + kind;
  auto wrong = [&]() { return errorAt(cur(), what + ", got " + text::describeToken(cur())); };
  Token t = cur();
  switch (spec.kind) {
    case AttrKind::Int: {
      if (!at(Tok::Integer)) return wrong();
      KILN_ASSIGN_OR_RETURN(int64_t v, intValue(take()));
      return intAttr(v);
    }
    case AttrKind::Float: {
      if (!at(Tok::Integer) && !at(Tok::Float) && !atWord("inf") && !atWord("nan")) return wrong();
      KILN_ASSIGN_OR_RETURN(double v, floatValue(take()));
      return floatAttr(v);
    }
    case AttrKind::Bool:
      if (!atWord("true") && !atWord("false")) return wrong();
      return boolAttr(take().text == "true");
    case AttrKind::Enum: return parseEnum(op, spec);
    case AttrKind::Ints:
    case AttrKind::Floats:
      if (!at(Tok::LBracket)) return wrong();
      return parseList(spec.kind, what);
    case AttrKind::DType: {
      if (!at(Tok::Ident)) return wrong();
      auto dt = parseDType(t.text);
      if (!dt) return errorAt(t, "unknown dtype '" + std::string(t.text) + "'");
      take();
      return dtypeAttr(*dt);
    }
    case AttrKind::String:
      if (!at(Tok::String)) return wrong();
      return stringAttr(take().str);
    case AttrKind::Tensor: return parseTensorValue(spec, declared, pending);
  }
  return wrong();
}

StatusOr<AttrValue> Parser::parseEnum(OpCode op, const AttrSpec& spec) {
  std::string allowed;
  for (const char* w : spec.enumValues) allowed += (allowed.empty() ? "" : ", ") + std::string(w);
  std::string head = std::string(opName(op)) + " attribute '" + spec.name + "'";
  if (!at(Tok::Ident))
    return errorAt(cur(),
                   head + " expects one of " + allowed + ", got " + text::describeToken(cur()));
  Token t = take();
  for (const char* w : spec.enumValues)
    if (t.text == w) return enumAttr(std::string(t.text));
  return errorAt(t, head + " is '" + std::string(t.text) + "', expected one of " + allowed);
}

// `[v, v, ...]` of integers (Ints) or numbers (Floats).
StatusOr<AttrValue> Parser::parseList(AttrKind kind, const std::string& what) {
  take();  // '['
  std::vector<int64_t> ints;
  std::vector<double> floats;
  size_t count = 0;
  while (!at(Tok::RBracket)) {
    if (count++) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    bool isNumber = at(Tok::Integer) || at(Tok::Float) || atWord("inf") || atWord("nan");
    if (kind == AttrKind::Ints ? !at(Tok::Integer) : !isNumber)
      return errorAt(cur(), what + ", got " + text::describeToken(cur()) + " in the list");
    if (kind == AttrKind::Ints) {
      KILN_ASSIGN_OR_RETURN(int64_t v, intValue(take()));
      ints.push_back(v);
    } else {
      KILN_ASSIGN_OR_RETURN(double v, floatValue(take()));
      floats.push_back(v);
    }
  }
  take();
  return kind == AttrKind::Ints ? intsAttr(std::move(ints)) : floatsAttr(std::move(floats));
}

// A tensor attribute: `[elements]`, `splat(v)` or `@data`, shaped by the op's result type.
StatusOr<AttrValue> Parser::parseTensorValue(const AttrSpec& spec,
                                             const std::vector<TensorType>& declared,
                                             std::vector<PendingData>& pending) {
  Token t = cur();
  if (!at(Tok::LBracket) && !atWord("splat") && !at(Tok::GlobalName))
    return expected("a tensor ([...], splat(v) or @data)");
  if (declared.size() != 1) return errorAt(t, "a tensor attribute needs exactly one result type");
  const TensorType& type = declared[0];
  if (!type.isStatic()) return errorAt(t, "a constant needs a static type, not " + type.str());
  auto count = checkedNumElements(type.staticDims());
  if (!count) return errorAt(t, type.str() + ": " + count.status().message());
  if (at(Tok::GlobalName)) {
    take();
    pending.push_back(PendingData{nullptr, spec.name, t.str, locOf(t)});
    return tensorAttr(Tensor(), t.str);  // completed by resolveData
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, at(Tok::LBracket) ? parseInlineTensor(type, *count)
                                                         : parseSplat(type, *count));
  return tensorAttr(std::move(tensor));
}

StatusOr<Tensor> Parser::parseInlineTensor(const TensorType& type, int64_t count) {
  if (isString(type.dtype())) return parseInlineStrings(type, count);
  Token open = take();
  // Element bits are kept only up to the type's count, so a long list cannot outgrow the type
  // and a huge type cannot outgrow the list.
  std::vector<uint64_t> bits;
  int64_t seen = 0;
  while (!at(Tok::RBracket)) {
    if (seen) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    if (!at(Tok::Integer) && !at(Tok::Float) && !at(Tok::Ident)) return expected("an element");
    KILN_ASSIGN_OR_RETURN(uint64_t b, elementBits(type.dtype(), take()));
    if (seen++ < count) bits.push_back(b);
  }
  take();
  if (seen != count)
    return errorAt(open, "constant of type " + type.str() + " needs " + std::to_string(count) +
                             " elements, got " + std::to_string(seen));
  Tensor tensor(type.dtype(), type.staticDims());
  size_t es = dtypeSize(type.dtype());
  for (size_t i = 0; i < bits.size(); ++i)
    std::memcpy(tensor.mutableBytes() + i * es, &bits[i], es);
  return tensor;
}

// A string constant: `["a", "b"]`, element by element.
StatusOr<Tensor> Parser::parseInlineStrings(const TensorType& type, int64_t count) {
  Token open = take();
  std::vector<std::string> elements;
  while (!at(Tok::RBracket)) {
    if (!elements.empty()) KILN_RETURN_IF_ERROR(expect(Tok::Comma));
    if (!at(Tok::String)) return expected("a quoted string for a string element");
    elements.push_back(take().str);
    if (static_cast<int64_t>(elements.size()) > count) break;
  }
  if (static_cast<int64_t>(elements.size()) != count)
    return errorAt(open, "constant of type " + type.str() + " needs " + std::to_string(count) +
                             " elements, got " +
                             (static_cast<int64_t>(elements.size()) > count
                                  ? "more"
                                  : std::to_string(elements.size())));
  take();
  Tensor tensor(type.dtype(), type.staticDims());
  for (int64_t i = 0; i < count; ++i) tensor.setStr(i, std::move(elements[i]));
  return tensor;
}

StatusOr<Tensor> Parser::parseSplat(const TensorType& type, int64_t count) {
  if (isString(type.dtype())) return errorAt(cur(), "string constants are written [\"...\", ...]");
  Token splatTok = take();
  KILN_RETURN_IF_ERROR(expect(Tok::LParen));
  if (!at(Tok::Integer) && !at(Tok::Float) && !at(Tok::Ident)) return expected("an element");
  KILN_ASSIGN_OR_RETURN(uint64_t b, elementBits(type.dtype(), take()));
  KILN_RETURN_IF_ERROR(expect(Tok::RParen));
  size_t es = dtypeSize(type.dtype());
  int64_t bytes = count * static_cast<int64_t>(es);
  if (bytes > kMaxSplatBytes - splatBytes_)
    return errorAt(splatTok, "splat constant of type " + type.str() + " would take " +
                                 std::to_string(bytes) +
                                 " bytes; the splats of a module may take 2^30 bytes in all");
  splatBytes_ += bytes;
  Tensor tensor(type.dtype(), type.staticDims());
  for (int64_t i = 0; i < count; ++i) std::memcpy(tensor.mutableBytes() + i * es, &b, es);
  return tensor;
}

// --- data entries -------------------------------------------------------------------------------

Status Parser::parseDataEntry() {
  take();  // data
  if (!at(Tok::GlobalName)) return expected("a data name (@name)");
  Token nameTok = take();
  auto prev = data_.find(nameTok.str);
  if (prev != data_.end())
    return errorAt(nameTok, "data @" + nameTok.str + " is defined twice (first at " +
                                prev->second.loc.str() + ")");
  KILN_RETURN_IF_ERROR(expect(Tok::Equal));
  Token typeTok = cur();
  KILN_ASSIGN_OR_RETURN(TensorType type, parseType());
  if (!type.isStatic()) return errorAt(typeTok, "data needs a static type, not " + type.str());
  auto count = checkedNumElements(type.staticDims());
  if (!count) return errorAt(typeTok, type.str() + ": " + count.status().message());
  if (isString(type.dtype()))
    return errorAt(typeTok, "string data has no byte form: write the constant inline");
  uint64_t need = static_cast<uint64_t>(*count) * dtypeSize(type.dtype());
  if (atWord("held")) {  // data @w = f32[...] held: the data is in library kernels' layouts
    Token heldTok = take();
    if (!container_)
      return errorAt(heldTok, "data @" + nameTok.str +
                                  " is held (its bytes are only in an artifact's packed weights): "
                                  "such data exists only in .kiln artifacts");
    data_[nameTok.str] = DataEntry{Tensor(), locOf(nameTok), type};
    return Status::ok();
  }
  if (atWord("elided"))  // data @w = f32[...] elided: an IR dump left the values out
    return errorAt(cur(), "data @" + nameTok.str +
                              " was elided when this module was printed (IR dumps leave out "
                              "data over 4 KiB; --dump-constants writes it)");
  if (atWord("blob")) {  // data @w = f32[...] blob OFFSET: bytes in the container's blob
    take();
    if (!at(Tok::Integer)) return expected("a blob offset");
    Token off = take();
    uint64_t at = 0;
    auto [end, ec] = std::from_chars(off.text.data(), off.text.data() + off.text.size(), at);
    if (ec != std::errc() || end != off.text.data() + off.text.size() || at > blob_.size() ||
        need > blob_.size() - at)
      return errorAt(off, "data @" + nameTok.str + ": " + std::to_string(need) +
                              " bytes at blob offset " + std::string(off.text) +
                              " lie outside the blob (" + std::to_string(blob_.size()) + " bytes)");
    const std::byte* bytes = reinterpret_cast<const std::byte*>(blob_.data() + at);
    Tensor t;
    if (blobOwner_ && need && reinterpret_cast<uintptr_t>(bytes) % 64 == 0) {
      t = Tensor::borrowed(type.dtype(), type.staticDims(), blobOwner_, bytes);
    } else {
      // Every byte is copied in: no zero fill first (it would touch every page twice).
      t = Tensor::uninitialized(type.dtype(), type.staticDims());
      if (need) std::memcpy(t.mutableBytes(), bytes, need);
    }
    data_[nameTok.str] = DataEntry{std::move(t), locOf(nameTok), std::nullopt};
    return Status::ok();
  }
  if (!at(Tok::Hex)) return expected("hex data (0x...)");
  Token hex = take();
  // Compare sizes before allocating: the allocation is then bounded by the file's length.
  if (hex.text.size() % 2 != 0 || hex.text.size() / 2 != need)
    return errorAt(hex, "data @" + nameTok.str + " has " + std::to_string(hex.text.size()) +
                            " hex digits, its type " + type.str() + " needs " +
                            std::to_string(2 * need));
  Tensor t(type.dtype(), type.staticDims());
  auto* out = reinterpret_cast<unsigned char*>(t.mutableBytes());
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i < need; ++i)
    out[i] = static_cast<unsigned char>(nibble(hex.text[2 * i]) * 16 + nibble(hex.text[2 * i + 1]));
  data_[nameTok.str] = DataEntry{std::move(t), locOf(nameTok), std::nullopt};
  return Status::ok();
}

Status Parser::resolveData() {
  for (const PendingData& p : pending_) {
    auto it = data_.find(p.name);
    if (it == data_.end()) return Status::error("unknown data @" + p.name, p.loc);
    const Tensor& data = it->second.tensor;
    const TensorType& want = p.node->result(0)->type();
    if (it->second.held) {
      if (*it->second.held != want)
        return Status::error("constant of type " + want.str() + " refers to held data @" + p.name +
                                 " of type " + it->second.held->str(),
                             p.loc);
      ConstantData held;
      held.poolName = p.name;
      held.held = true;
      p.node->setAttr(p.attr, AttrValue(std::in_place_index<8>, std::move(held)));
      KILN_RETURN_IF_ERROR(verifyNode(*p.node));
      continue;
    }
    if (data.dtype() != want.dtype() || data.numElements() != *want.numElements())
      return Status::error("constant of type " + want.str() + " refers to data @" + p.name +
                               " of type " + data.type().str(),
                           p.loc);
    std::vector<int64_t> dims = want.staticDims();
    Tensor t = dims == data.dims() ? data : data.reshaped(dims);
    p.node->setAttr(p.attr, tensorAttr(std::move(t), p.name));
    KILN_RETURN_IF_ERROR(verifyNode(*p.node));
  }
  return Status::ok();
}

// --- values and numbers ------------------------------------------------------------------------

StatusOr<int64_t> Parser::intValue(const Token& t) const {
  int64_t v = 0;
  auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
    return errorAt(t, "integer " + std::string(t.text) + " is out of range for i64");
  return v;
}

StatusOr<double> Parser::floatValue(const Token& t) const {
  double v = 0;
  if (!text::parseFloatText(t.text, v))
    return errorAt(t, "number " + std::string(t.text) + " is out of range for f64");
  return v;
}

// The bits of one element of dtype `dt`, in the low bytes (the tensor's bytes are little-endian).
StatusOr<uint64_t> Parser::elementBits(DType dt, const Token& tok) const {
  std::string name(dtypeName(dt));
  if (dt == DType::Bool) {
    if (tok.kind != Tok::Ident || (tok.text != "true" && tok.text != "false"))
      return errorAt(tok,
                     "expected true or false for a bool element, got " + text::describeToken(tok));
    return uint64_t(tok.text == "true");
  }
  if (isInteger(dt)) {
    if (tok.kind != Tok::Integer)
      return errorAt(tok, "expected an integer for an " + name + " element, got " +
                              text::describeToken(tok));
    int bits = static_cast<int>(dtypeSize(dt) * 8);
    if (isUnsignedInteger(dt) && !tok.text.starts_with('-')) {
      // Read as uint64 so that u64 values above INT64_MAX are accepted.
      uint64_t u = 0;
      auto r = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), u);
      if (r.ec != std::errc() || r.ptr != tok.text.data() + tok.text.size())
        return errorAt(tok, "integer " + std::string(tok.text) + " is out of range for " + name);
      uint64_t max = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
      if (u > max)
        return errorAt(tok, "value " + std::to_string(u) + " is out of range for " + name);
      return u;
    }
    KILN_ASSIGN_OR_RETURN(int64_t v, intValue(tok));
    bool ok = true;                          // every i64 fits
    if (isUnsignedInteger(dt)) ok = v == 0;  // only negative literals get here; -0 is in range
    else if (dt != DType::I64)
      ok = v >= -(int64_t(1) << (bits - 1)) && v < (int64_t(1) << (bits - 1));
    if (!ok) return errorAt(tok, "value " + std::to_string(v) + " is out of range for " + name);
    return static_cast<uint64_t>(v);  // two's complement; the low bytes are the element
  }
  bool number = tok.kind == Tok::Integer || tok.kind == Tok::Float ||
                (tok.kind == Tok::Ident && (tok.text == "inf" || tok.text == "nan"));
  if (!number)
    return errorAt(tok, "expected a number for an " + name + " element, got " +
                            text::describeToken(tok));
  auto outOfRange = [&]() {
    return errorAt(tok, "number " + std::string(tok.text) + " is out of range for " + name);
  };
  if (dt == DType::F64) {
    double v = 0;
    if (!text::parseFloatText(tok.text, v)) return outOfRange();
    return std::bit_cast<uint64_t>(v);
  }
  float f = 0;
  if (!text::parseFloatText(tok.text, f)) return outOfRange();
  if (dt == DType::F32) return uint64_t(std::bit_cast<uint32_t>(f));
  uint16_t h = dt == DType::F16 ? floatToHalf(f) : floatToBf16(f);
  float back = dt == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
  // A finite value that rounds to infinity does not fit the type.
  if (std::isfinite(f) && std::isinf(back)) return outOfRange();
  return uint64_t(h);
}

StatusOr<Value*> Parser::useValue(const Token& t) const {
  auto it = values_.find(t.str);
  if (it == values_.end()) return errorAt(t, "unknown value %" + t.str);
  return it->second.value;
}

Status Parser::checkNewName(const Token& t) const {
  auto it = values_.find(t.str);
  if (it != values_.end())
    return errorAt(t, "redefinition of value %" + t.str + " (first defined at " +
                          it->second.loc.str() + ")");
  return Status::ok();
}

}  // namespace

StatusOr<AttrMap> parseAttributes(OpCode op, std::string_view text, const std::string& filename,
                                  int line, int col) {
  // Blank lines and columns before the text keep the lexer's positions those of the file.
  std::string placed(static_cast<size_t>(std::max(0, line - 1)), '\n');
  placed += std::string(static_cast<size_t>(std::max(0, col - 1)), ' ');
  placed += text;
  return Parser(placed, filename).runAttributes(op);
}

StatusOr<std::unique_ptr<Module>> parseModule(std::string_view text, const std::string& filename) {
  return Parser(text, filename).run();
}

StatusOr<std::unique_ptr<Module>> parseModule(std::string_view text, const std::string& filename,
                                              std::string_view blob,
                                              std::shared_ptr<const void> blobOwner) {
  return Parser(text, filename, blob, std::move(blobOwner), /*container=*/true).run();
}

}  // namespace kiln
