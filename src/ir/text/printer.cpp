// The .kir printer: modules and functions as text that parseModule reads back to the same IR.
//
// Names: values keep their source names; unnamed values get %0, %1, ... (skipping numbers used as
// names), and a repeated name gets a .1, .2 suffix. An output whose name is not the name its
// value prints with is returned as `%x as "y"`. Constants print inline when small, as
// splat(v) when large and uniform, and otherwise as @name with the bytes in a `data` entry at the
// end of the module. An element whose text would not read back to the same bits (a NaN with a
// payload, a bool byte other than 0 or 1) forces the out-of-line form, so printing never loses
// information.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "ir/text/lexer.h"
#include "ir/text/text.h"

namespace kiln {
namespace {

using text::formatDouble;
using text::formatFloat;
using text::quoteString;

static_assert(std::endian::native == std::endian::little,
              "data entries hold little-endian bytes, copied as is");

std::string nameText(char sigil, const std::string& name) {
  return sigil + (text::isBareName(name) ? name : quoteString(name));
}

// The bits the parser produces for `nan` in each float dtype.
bool isCanonicalNaN(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F16:
      return t.data<uint16_t>()[i] == floatToHalf(std::numeric_limits<float>::quiet_NaN());
    case DType::BF16:
      return t.data<uint16_t>()[i] == floatToBf16(std::numeric_limits<float>::quiet_NaN());
    case DType::F32:
      return std::bit_cast<uint32_t>(t.data<float>()[i]) ==
             std::bit_cast<uint32_t>(std::numeric_limits<float>::quiet_NaN());
    case DType::F64:
      return std::bit_cast<uint64_t>(t.data<double>()[i]) ==
             std::bit_cast<uint64_t>(std::numeric_limits<double>::quiet_NaN());
    default: return false;
  }
}

// True if the text of element i reads back to the same bytes.
bool elementExact(const Tensor& t, int64_t i) {
  if (isString(t.dtype())) return true;
  if (t.dtype() == DType::Bool) return t.data<uint8_t>()[i] <= 1;
  if (!isFloat(t.dtype())) return true;
  return !std::isnan(t.getDouble(i)) || isCanonicalNaN(t, i);
}

std::string elementText(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Str: return text::quoteString(t.str(i));
    case DType::Bool: return t.data<uint8_t>()[i] ? "true" : "false";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return formatFloat(static_cast<float>(t.getDouble(i)));
    case DType::F64: return formatDouble(t.data<double>()[i]);
    case DType::U64: return std::to_string(t.getUInt(i));  // may exceed INT64_MAX
    default: return std::to_string(t.getInt(i));
  }
}

enum class ConstForm { Inline, Splat, OutOfLine };

ConstForm constantForm(const Tensor& t, const PrintOptions& opts) {
  int64_t n = t.numElements();
  if (n == 0 || isString(t.dtype())) return ConstForm::Inline;  // strings have no byte form
  if (n <= opts.inlineConstantLimit) {
    for (int64_t i = 0; i < n; ++i)
      if (!elementExact(t, i)) return ConstForm::OutOfLine;
    return ConstForm::Inline;
  }
  size_t es = dtypeSize(t.dtype());
  const std::byte* b = t.bytes();
  for (int64_t i = 1; i < n; ++i)
    if (std::memcmp(b, b + i * es, es) != 0) return ConstForm::OutOfLine;
  return elementExact(t, 0) ? ConstForm::Splat : ConstForm::OutOfLine;
}

// Names of the out-of-line constants of a module (or of one function): those with data, and
// the held ones (ConstantData::held, or named in PrintOptions::held), whose entry has no data.
class DataNames {
 public:
  struct Entry {
    std::string name;
    const Tensor* tensor = nullptr;  // null: held (`type` says what it is)
    TensorType type;
  };

  DataNames(const std::vector<const Function*>& fns, const PrintOptions& opts) {
    struct Found {
      const ConstantData* data;
      const Node* node;
      bool held;
    };
    std::vector<Found> outOfLine;
    for (const Function* f : fns)
      for (const auto& n : f->nodes())
        for (const auto& [name, value] : n->attrs()) {
          if (attrKind(value) != AttrKind::Tensor) continue;
          const ConstantData& c = std::get<static_cast<size_t>(AttrKind::Tensor)>(value);
          bool held = c.held || (opts.held && opts.held->count(n.get()));
          if (held || (c.tensor.defined() && constantForm(c.tensor, opts) == ConstForm::OutOfLine))
            outOfLine.push_back({&c, n.get(), held});
        }
    std::set<std::string> reserved;
    for (const Found& c : outOfLine)
      if (!c.data->poolName.empty()) reserved.insert(c.data->poolName);
    std::set<std::string> taken;
    int next = 0;
    std::map<Key, std::string> byKey;
    for (const Found& c : outOfLine) {
      if (!c.held) {
        auto it = byKey.find(key(c.data->tensor));
        if (it != byKey.end()) {
          byData_[c.data] = it->second;
          continue;
        }
      }
      std::string name = c.data->poolName;
      if (name.empty() || taken.count(name)) {
        do name = "cst" + std::to_string(next++);
        while (reserved.count(name) || taken.count(name));
      }
      taken.insert(name);
      byData_[c.data] = name;
      if (c.held) {
        entries_.push_back({name, nullptr, c.node->result(0)->type()});
      } else {
        byKey[key(c.data->tensor)] = name;
        entries_.push_back({name, &c.data->tensor, c.data->tensor.type()});
      }
    }
  }

  // The data name of an out-of-line constant, "" for one printed inline.
  std::string nameOf(const ConstantData& c) const {
    auto it = byData_.find(&c);
    return it == byData_.end() ? "" : it->second;
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  // Constants sharing their bytes share one entry.
  using Key = std::tuple<const std::byte*, DType, int64_t>;
  static Key key(const Tensor& t) { return {t.bytes(), t.dtype(), t.numElements()}; }

  std::map<const ConstantData*, std::string> byData_;
  std::vector<Entry> entries_;
};

}  // namespace

namespace {

// The names the printer gives the values of `f`, without the '%' and quotes.
std::map<const Value*, std::string> rawValueNames(const Function& f) {
  std::map<const Value*, std::string> names;
  std::set<std::string> used;
  std::vector<const Value*> values;
  for (const auto& n : f.nodes())
    for (size_t i = 0; i < n->numResults(); ++i) {
      values.push_back(n->result(i));
      if (!n->result(i)->name().empty()) used.insert(n->result(i)->name());
    }
  std::set<std::string> assigned;
  int64_t counter = 0;
  for (const Value* v : values) {
    std::string name = v->name();
    if (name.empty()) {
      while (used.count(std::to_string(counter))) ++counter;
      name = std::to_string(counter++);
    } else if (assigned.count(name)) {
      int suffix = 1;
      while (used.count(name + "." + std::to_string(suffix))) ++suffix;
      name += "." + std::to_string(suffix);
    }
    used.insert(name);
    assigned.insert(name);
    names[v] = name;
  }
  return names;
}

}  // namespace

std::map<const Value*, std::string> printedValueNames(const Function& f) {
  std::map<const Value*, std::string> names = rawValueNames(f);
  for (auto& [v, name] : names) name = nameText('%', name);
  return names;
}

namespace {

// An attribute value other than a tensor, as the .kir text spells it.
void printPlainAttrValue(const AttrValue& v, std::string& out) {
  switch (attrKind(v)) {
    case AttrKind::Int: out += std::to_string(std::get<0>(v)); return;
    case AttrKind::Float: out += formatDouble(std::get<1>(v)); return;
    case AttrKind::Bool: out += std::get<2>(v) ? "true" : "false"; return;
    case AttrKind::Enum: out += std::get<3>(v); return;
    case AttrKind::Ints: {
      out += "[";
      const auto& xs = std::get<4>(v);
      for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + std::to_string(xs[i]);
      out += "]";
      return;
    }
    case AttrKind::Floats: {
      out += "[";
      const auto& xs = std::get<5>(v);
      for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + formatDouble(xs[i]);
      out += "]";
      return;
    }
    case AttrKind::DType: out += dtypeName(std::get<6>(v)); return;
    case AttrKind::String: out += quoteString(std::get<7>(v)); return;
    case AttrKind::Tensor: out += "<tensor>"; return;  // the printer's own (data entries)
  }
}

class FunctionPrinter {
 public:
  FunctionPrinter(const Function& f, const DataNames& data, const PrintOptions& opts)
      : f_(f), data_(data), opts_(opts) {
    assignNames();
  }

  void print(std::string& out) {
    printSignature(out);
    for (const auto& n : f_.nodes())
      if (n->op() != OpCode::Parameter) printNode(*n, out);
    out += "  return ";
    for (size_t i = 0; i < f_.outputs().size(); ++i) {
      if (i) out += ", ";
      out += valueRef(f_.outputs()[i]);
      if (!outputNamedAfterValue(i)) out += " as " + quoteString(f_.outputName(i));
    }
    out += "\n}\n";
  }

 private:
  void assignNames() {
    rawNames_ = rawValueNames(f_);
    for (const auto& [v, name] : rawNames_) names_[v] = nameText('%', name);
  }

  // An output without `as` takes the name its value prints with (parseReturn); an unnamed
  // value's output is unnamed too.
  bool outputNamedAfterValue(size_t i) const {
    const Value* v = f_.outputs()[i];
    const std::string& name = f_.outputName(i);
    auto it = rawNames_.find(v);
    if (it == rawNames_.end()) return false;
    return name == it->second || (name.empty() && v->name().empty());
  }

  std::string valueRef(const Value* v) const {
    auto it = names_.find(v);
    return it == names_.end() ? "%\"<value of another function>\"" : it->second;
  }

  static std::string locText(const Node& n) {
    return n.origin().empty() ? "" : " loc(" + quoteString(n.origin()) + ")";
  }

  void printSignature(std::string& out) const {
    out += "func " + nameText('@', f_.name()) + "(";
    for (size_t i = 0; i < f_.numParameters(); ++i) {
      const Node* p = f_.parameterNodes()[i];
      if (i) out += ", ";
      out += valueRef(p->result()) + ": " + p->result()->type().str() + locText(*p);
    }
    out += ") -> (";
    for (size_t i = 0; i < f_.outputs().size(); ++i) {
      if (i) out += ", ";
      out += f_.outputs()[i]->type().str();
    }
    out += ") {\n";
  }

  void printNode(const Node& n, std::string& out) const {
    out += "  ";
    for (size_t i = 0; i < n.numResults(); ++i) out += (i ? ", " : "") + valueRef(n.result(i));
    out += " = ";
    if (n.numResults() == 1) {
      out += n.result(0)->type().str();
    } else {
      out += "(";
      for (size_t i = 0; i < n.numResults(); ++i)
        out += (i ? ", " : "") + n.result(i)->type().str();
      out += ")";
    }
    out += " ";
    out += opName(n.op());
    out += "(";
    for (size_t i = 0; i < n.numOperands(); ++i) out += (i ? ", " : "") + valueRef(n.operand(i));
    out += ")";
    printAttrs(n, out);
    out += locText(n);
    out += "\n";
  }

  // Schema order first; attributes the schema does not know (invalid IR) after them.
  void printAttrs(const Node& n, std::string& out) const {
    std::vector<const std::pair<const std::string, AttrValue>*> ordered;
    for (const AttrSpec& s : n.info().attrs) {
      auto it = n.attrs().find(s.name);
      if (it != n.attrs().end()) ordered.push_back(&*it);
    }
    for (const auto& kv : n.attrs())
      if (!findAttrSpec(n.op(), kv.first)) ordered.push_back(&kv);
    if (ordered.empty()) return;
    out += " {";
    for (size_t i = 0; i < ordered.size(); ++i) {
      if (i) out += ", ";
      out += ordered[i]->first + " = ";
      printAttrValue(ordered[i]->second, out);
    }
    out += "}";
  }

  void printAttrValue(const AttrValue& v, std::string& out) const {
    if (attrKind(v) == AttrKind::Tensor) return printConstant(std::get<8>(v), out);
    printPlainAttrValue(v, out);
  }

  void printConstant(const ConstantData& c, std::string& out) const {
    std::string name = data_.nameOf(c);
    if (!name.empty()) {
      out += nameText('@', name);
      return;
    }
    const Tensor& t = c.tensor;
    if (!t.defined()) {
      out += "[]";
      return;
    }
    switch (constantForm(t, opts_)) {
      case ConstForm::OutOfLine: break;  // named above
      case ConstForm::Splat: out += "splat(" + elementText(t, 0) + ")"; return;
      case ConstForm::Inline:
        out += "[";
        for (int64_t i = 0; i < t.numElements(); ++i) out += (i ? ", " : "") + elementText(t, i);
        out += "]";
        return;
    }
  }

  const Function& f_;
  const DataNames& data_;
  const PrintOptions& opts_;
  std::map<const Value*, std::string> names_;     // as printed: %x, %"a b"
  std::map<const Value*, std::string> rawNames_;  // without the sigil and quotes
};

}  // namespace

uint64_t Blob::add(const Tensor& t) {
  static const char kZeros[64] = {};
  uint64_t offset = (size + 63) / 64 * 64;
  if (offset > size) pieces.emplace_back(kZeros, offset - size);
  pieces.emplace_back(reinterpret_cast<const char*>(t.bytes()), t.byteSize());
  size = offset + t.byteSize();
  return offset;
}

namespace {

void printDataEntry(const DataNames::Entry& e, std::string& out, const PrintOptions& opts) {
  static const char* kHex = "0123456789abcdef";
  const std::string& name = e.name;
  if (!e.tensor) {
    out += "data " + nameText('@', name) + " = " + e.type.str() + " held\n";
    return;
  }
  const Tensor& t = *e.tensor;
  if (Blob* blob = opts.blob) {
    out += "data " + nameText('@', name) + " = " + t.type().str() + " blob " +
           std::to_string(blob->add(t)) + "\n";
    return;
  }
  if (t.byteSize() > opts.elideDataOver) {
    out += "data " + nameText('@', name) + " = " + t.type().str() + " elided\n";
    return;
  }
  out += "data " + nameText('@', name) + " = " + t.type().str() + " 0x";
  size_t n = t.byteSize();
  size_t at = out.size();
  out.resize(at + 2 * n);
  const auto* b = reinterpret_cast<const unsigned char*>(t.bytes());
  for (size_t i = 0; i < n; ++i) {
    out[at + 2 * i] = kHex[b[i] >> 4];
    out[at + 2 * i + 1] = kHex[b[i] & 15];
  }
  out += "\n";
}

}  // namespace

std::string printModule(const Module& m, const PrintOptions& opts) {
  std::vector<const Function*> fns;
  for (const auto& f : m.functions()) fns.push_back(f.get());
  DataNames data(fns, opts);
  std::string out;
  for (size_t i = 0; i < fns.size(); ++i) {
    if (i) out += "\n";
    FunctionPrinter(*fns[i], data, opts).print(out);
  }
  if (!data.entries().empty()) out += "\n";
  for (const DataNames::Entry& e : data.entries()) printDataEntry(e, out, opts);
  return out;
}

std::string printFunction(const Function& f, const PrintOptions& opts) {
  DataNames data({&f}, opts);
  std::string out;
  FunctionPrinter(f, data, opts).print(out);
  return out;
}

std::string printAttributes(OpCode op, const AttrMap& attrs) {
  std::vector<const std::pair<const std::string, AttrValue>*> ordered;
  for (const AttrSpec& s : opInfo(op).attrs) {
    auto it = attrs.find(s.name);
    if (it != attrs.end()) ordered.push_back(&*it);
  }
  for (const auto& kv : attrs)
    if (!findAttrSpec(op, kv.first)) ordered.push_back(&kv);
  if (ordered.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < ordered.size(); ++i) {
    out += (i ? ", " : "") + ordered[i]->first + " = ";
    printPlainAttrValue(ordered[i]->second, out);
  }
  return out + "}";
}

}  // namespace kiln
