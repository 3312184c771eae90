// The .kir text format: printer and parser. print(parse(s)) == s for printer output.
//
//   func @main(%x: f32[N,4], %w: f32[4,8]) -> (f32[N,8]) {
//     %0 = f32[N,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
//     %y = f32[N,8] tanh(%0) loc("Tanh_3")
//     return %y
//   }
//   data @w0 = f32[64,3,7,7] 0x0000803f...   (out-of-line constant data, little-endian hex)
//
// docs/kir.md describes the grammar.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace kiln {

// The out-of-line data of a module printed for a binary container: each tensor's bytes at an
// offset that is a multiple of 64, zero bytes between them. It refers to the tensors' bytes (no
// copy): they must outlive it.
struct Blob {
  std::vector<std::string_view> pieces;  // the padding and the tensors' bytes, in order
  uint64_t size = 0;
  // Appends t's bytes; returns their offset.
  uint64_t add(const Tensor& t);
};

struct PrintOptions {
  // Constants with more elements than this print out of line (as @name, data at the end).
  int64_t inlineConstantLimit = 16;
  // When set, out-of-line data goes into *blob (each entry at a 64-byte aligned offset) and its
  // entry reads `data @w0 = f32[64,3,7,7] blob 4096`: for binary containers (the .kiln
  // artifact), read back by parseModule with the same blob.
  Blob* blob = nullptr;
  // Constants printed as held (`data @w = f32[64,3,7,7] held`, no data; ConstantData::held)
  // although their data is here: an artifact stores them only in its kernels' layouts.
  const std::set<const Node*>* held = nullptr;
  // Data entries of more bytes than this print as `data @w = f32[64,3,7,7] elided`: IR dumps
  // stay readable and small (a pass's dump of resnet18 is 90 MB of hex otherwise). The parser
  // refuses such entries, since their values are gone.
  uint64_t elideDataOver = UINT64_MAX;
};

std::string printModule(const Module& m, const PrintOptions& opts = {});
// One function, without the module's data section (for messages and debugging).
std::string printFunction(const Function& f, const PrintOptions& opts = {});

// The names the printer gives the values of `f` ("%x", "%0", "%\"onnx::Add_3\""), for tools that
// refer to values the way the .kir dump of the function does.
std::map<const Value*, std::string> printedValueNames(const Function& f);

// The attributes of an `op` node as the printer writes them after its operands: "{dims = [1],
// kind = sum}", in the op's schema order ("" for none). Tensor values (constants) print as
// "<tensor>", which does not parse: they belong in a module's data entries.
std::string printAttributes(OpCode op, const AttrMap& attrs);
// Reads what printAttributes writes, checking each name and value against the op's schema.
// `line` and `col` place `text` in `filename` for error messages.
StatusOr<AttrMap> parseAttributes(OpCode op, std::string_view text, const std::string& filename,
                                  int line, int col);

// Parses and verifies a module. Errors are "file:line:col: error: message".
StatusOr<std::unique_ptr<Module>> parseModule(std::string_view text, const std::string& filename);
// Same, resolving `data ... blob OFFSET` entries in `blob` (see PrintOptions::blob). With
// `blobOwner`, which keeps `blob` valid and unchanged (a mapped artifact), the constants borrow
// their bytes (Tensor::borrowed) where they are aligned as the printer aligns them; otherwise,
// and without an owner, they are copied.
StatusOr<std::unique_ptr<Module>> parseModule(std::string_view text, const std::string& filename,
                                              std::string_view blob,
                                              std::shared_ptr<const void> blobOwner = nullptr);

}  // namespace kiln
