// Names for a module's nodes and values in the text sections of an artifact: a node by its
// position in the function (which the module's text keeps), a value as "NODE:RESULT", a
// missing one as "-"; and the words and numbers those lines are read with.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln::compiler {

class ModuleIndex {
 public:
  explicit ModuleIndex(const Function& f);
  std::string id(const Node* n) const;   // "12", or "-" for null
  std::string id(const Value* v) const;  // "12:0", or "-" for null
  // The node or value a name gives; an error for a malformed or unknown one, and for "-"
  // unless `optional`.
  StatusOr<const Node*> node(const std::string& id, bool optional = false) const;
  StatusOr<const Value*> value(const std::string& id, bool optional = false) const;

 private:
  std::vector<const Node*> nodes_;
  std::map<const Node*, size_t> positions_;
};

std::vector<std::string> words(const std::string& line);
std::optional<int64_t> number(const std::string& s);  // a whole non-negative number, all of s
// A text field of a line: its newlines become spaces (one would end the line).
std::string oneLine(std::string s);
// The text of `line` after its first `n` words and the space that ends them ("" when none).
std::string textAfter(const std::string& line, size_t n);

}  // namespace kiln::compiler
