// Formatting of the `kiln run` report: aligned columns, short statistics of each tensor.
#include "summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "ir/text/lexer.h"

namespace kiln::cli {
namespace {

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string formatMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

// Rows of cells printed with each column padded to its widest cell, indented by two spaces.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += "  " + row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string tensorTable(const std::vector<TensorRow>& rows) {
  if (rows.empty()) return "  (none)\n";
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size());
  for (const TensorRow& r : rows)
    cells.push_back({r.name, r.value.type().str(), r.where, tensorStats(r.value)});
  return table(cells);
}

}  // namespace

std::string describeNodes(const Function& f) {
  std::map<std::string, int> counts;
  for (const auto& n : f.nodes()) ++counts[std::string(opName(n->op()))];
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = std::to_string(f.numNodes()) + (f.numNodes() == 1 ? " node" : " nodes");
  for (size_t i = 0; i < sorted.size(); ++i)
    s += (i ? ", " : ": ") + std::to_string(sorted[i].second) + " " + sorted[i].first;
  return s;
}

std::string tensorStats(const Tensor& t) {
  if (t.numElements() == 0) return "empty";
  if (isString(t.dtype())) {  // the first few, quoted
    std::string s;
    for (int64_t i = 0; i < std::min<int64_t>(t.numElements(), 3); ++i)
      s += (i ? " " : "") + text::quoteString(t.str(i));
    return t.numElements() > 3 ? s + " ..." : s;
  }
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.getDouble(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  int64_t counted = t.numElements() - nans;
  std::string s;
  if (counted > 0) {
    s = "min " + formatNumber(lo) + "  max " + formatNumber(hi) + "  mean " +
        formatNumber(sum / static_cast<double>(counted));
  }
  if (nans > 0) s += (s.empty() ? "" : "  ") + std::string("nan ") + std::to_string(nans);
  return s;
}

std::string formatSummary(const RunSummary& s) {
  std::string out = "program: " + s.program + ", function @" + s.function + "\n";
  out += "what the compiler did:\n";
  std::vector<std::vector<std::string>> stages;
  for (const StageLine& l : s.stages)
    stages.push_back({l.stage, l.ms >= 0 ? formatMs(l.ms) : "", l.detail});
  out += table(stages);
  out += "inputs:\n" + tensorTable(s.inputs);
  out += "outputs:\n" + tensorTable(s.outputs);
  for (const std::string& note : s.notes) out += "note: " + note + "\n";
  out += "run: " + s.backend + ", " + formatMs(s.runMs) + "\n";
  return out;
}

}  // namespace kiln::cli
