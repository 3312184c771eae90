// Names of nodes and values in artifact sections. See module_index.h.
#include "compiler/module_index.h"

#include <charconv>
#include <sstream>

namespace kiln::compiler {

ModuleIndex::ModuleIndex(const Function& f) {
  for (const auto& n : f.nodes()) {
    positions_[n.get()] = nodes_.size();
    nodes_.push_back(n.get());
  }
}

std::string ModuleIndex::id(const Node* n) const {
  auto it = n ? positions_.find(n) : positions_.end();
  return it == positions_.end() ? "-" : std::to_string(it->second);
}

std::string ModuleIndex::id(const Value* v) const {
  if (!v || !v->def() || !positions_.count(v->def())) return "-";
  return id(v->def()) + ":" + std::to_string(v->index());
}

StatusOr<const Node*> ModuleIndex::node(const std::string& id, bool optional) const {
  if (optional && id == "-") return static_cast<const Node*>(nullptr);
  std::optional<int64_t> n = number(id);
  if (!n || static_cast<size_t>(*n) >= nodes_.size())
    return Status::error("no node " + id + " in the module");
  return nodes_[static_cast<size_t>(*n)];
}

StatusOr<const Value*> ModuleIndex::value(const std::string& id, bool optional) const {
  if (optional && id == "-") return static_cast<const Value*>(nullptr);
  const size_t colon = id.find(':');
  std::optional<int64_t> n = number(id.substr(0, colon)), r;
  if (colon != std::string::npos) r = number(id.substr(colon + 1));
  if (!n || !r || static_cast<size_t>(*n) >= nodes_.size() ||
      static_cast<size_t>(*r) >= nodes_[static_cast<size_t>(*n)]->numResults())
    return Status::error("no value " + id + " in the module");
  return nodes_[static_cast<size_t>(*n)]->result(static_cast<size_t>(*r));
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

std::optional<int64_t> number(const std::string& s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

std::string textAfter(const std::string& line, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < n && at != std::string::npos; ++i) {
    at = line.find_first_not_of(' ', at);
    at = at == std::string::npos ? at : line.find(' ', at);
  }
  return at == std::string::npos ? "" : line.substr(at + 1);
}

}  // namespace kiln::compiler
