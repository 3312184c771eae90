// `kiln import` and `kiln check`: the ONNX frontend from the command line.
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"

namespace kiln::cli {

int importCommand(const std::vector<std::string>& args) {
  std::string model, out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help") {
      std::puts("usage: kiln import MODEL.onnx [-o OUT.kir]\n\nImports an ONNX model and prints "
                "its graph IR (to OUT, or to stdout).");
      return 0;
    }
    if (args[i] == "-o" && i + 1 < args.size()) out = args[++i];
    else if (!args[i].empty() && args[i][0] == '-')
      return reportError(Status::error("unknown option '" + args[i] + "' (see kiln import --help)"),
                         kExitUsage);
    else if (model.empty()) model = args[i];
    else return reportError(Status::error("more than one model given"), kExitUsage);
  }
  if (model.empty())
    return reportError(Status::error("no model given (see kiln import --help)"), kExitUsage);
  auto m = onnx::importModelFile(model);
  if (!m) return reportError(m.status(), kExitError);
  std::string text = printModule(**m);
  if (out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(out, std::ios::binary);
  f << text;
  if (!f) return reportError(Status::error("cannot write " + out), kExitError);
  return 0;
}

int checkCommand(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0] == "--help") {
    std::puts("usage: kiln check MODEL.onnx\n\nLists every op, attribute value and dtype of the "
              "model that Kiln cannot handle; exit 0 when everything is supported.");
    return args.size() == 1 ? 0 : kExitUsage;
  }
  auto list = onnx::checkModelFile(args[0]);
  if (!list) return reportError(list.status(), kExitError);
  for (const auto& u : *list)
    std::printf("%s: %s%s%s\n", u.node.c_str(), u.opType.c_str(), u.opType.empty() ? "" : ": ",
                u.reason.c_str());
  if (list->empty()) {
    std::printf("%s: every part of the model is supported\n", args[0].c_str());
    return 0;
  }
  std::printf("%zu unsupported item(s)\n", list->size());
  return kExitError;
}

}  // namespace kiln::cli
