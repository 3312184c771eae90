// kiln._kiln: the Python module's native part. It binds a narrow facade over the public C++ API
// (include/kiln/kiln.hpp): compile a source into an executable, run it on numpy arrays or DLPack
// tensors, describe its inputs and outputs, explain what the compiler did, save it as an
// artifact. The package around it (python/kiln/) adds the torch frontends; docs/python.md is the
// user's guide.
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <string>
#include <vector>

#include "errors.h"
#include "explain.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"
#include "kiln/kiln.hpp"
#include "support/hash.h"
#include "support/large_buffer.h"
#include "tensors.h"

namespace kiln::python {
namespace {

namespace py = pybind11;

// One compiled model as Python sees it.
struct PyExecutable {
  std::unique_ptr<Executable> exe;
  std::vector<InputSlot> inputs;             // what each input takes (a symbolic dim: any size)
  std::vector<std::string> outputNames;      // the source's names; "output<i>" for unnamed ones
  std::map<std::string, size_t> inputIndex;  // parameter name -> position
};

[[noreturn]] void fail(Error::Kind kind, const Status& s) { throw Error{kind, s.str(), {}}; }

CompileOptions makeOptions(const std::string& backend, int threads,
                           const std::map<std::string, int64_t>& dims,
                           const std::map<std::string, std::tuple<int64_t, int64_t, bool>>& ranges,
                           int optLevel, const std::string& cacheDir, const std::string& dumpDir,
                           const std::string& precision, bool recompile) {
  CompileOptions o;
  o.backend = backend;
  o.recompile = recompile;
  o.precision = precision;
  o.threads = threads;
  o.optLevel = optLevel;
  o.cacheDir = cacheDir;
  for (const auto& [name, size] : dims) o.dims[name] = size;
  for (const auto& [name, range] : ranges) {
    auto [lo, hi, pow2] = range;
    if (lo < 0 || hi < lo)
      throw py::value_error("dims['" + name + "']: the range (" + std::to_string(lo) + ", " +
                            std::to_string(hi) + ") is empty or negative");
    o.ranges[name] = {lo, hi, pow2};
  }
  o.instrumentation.dumpDir = dumpDir;
  o.instrumentation.inputLabel = "import";
  return o;
}

std::unique_ptr<PyExecutable> wrap(std::unique_ptr<Executable> exe) {
  auto p = std::make_unique<PyExecutable>();
  const Function& f = exe->function();
  std::vector<TensorType> types = exe->inputTypes();
  for (size_t i = 0; i < f.numParameters(); ++i) {
    p->inputIndex[f.parameter(i)->name()] = i;
    p->inputs.push_back({f.parameter(i)->name(), types[i]});
  }
  p->outputNames = exe->outputNames();
  p->outputNames.resize(exe->outputTypes().size());
  for (size_t i = 0; i < p->outputNames.size(); ++i)
    if (p->outputNames[i].empty()) p->outputNames[i] = "output" + std::to_string(i);
  p->exe = std::move(exe);
  return p;
}

std::unique_ptr<PyExecutable> compileOnnx(const std::string& path, const CompileOptions& o) {
  StatusOr<std::unique_ptr<Executable>> exe = [&] {
    py::gil_scoped_release release;
    return compileOnnxFile(path, o);
  }();
  if (exe) return wrap(std::move(*exe));
  // An import failure may be ops Kiln lacks: list every one of them, as `kiln check` does.
  StatusOr<std::vector<onnx::Unsupported>> unsupported = onnx::checkModelFile(path);
  if (unsupported && !unsupported->empty()) {
    Error e{Error::Kind::UnsupportedOp, "", {}};
    e.message = path + ": " + std::to_string(unsupported->size()) +
                " unsupported item(s); first: " + exe.status().str();
    for (const onnx::Unsupported& u : *unsupported)
      e.unsupported.push_back({u.node, u.opType, u.reason});
    throw e;
  }
  fail(Error::Kind::Compile, exe.status());
}

// A .kir module (text) whose `data @w = T blob OFFSET` entries lie in `blob`: the form the torch
// frontend emits, so that weights cross into C++ as one buffer instead of hex text.
std::unique_ptr<PyExecutable> compileKir(const std::string& text, const std::string& filename,
                                         const py::buffer& blob, CompileOptions o) {
  py::buffer_info info = blob.request();
  size_t size = static_cast<size_t>(info.size * info.itemsize);
  StatusOr<std::unique_ptr<Executable>> exe = [&]() -> StatusOr<std::unique_ptr<Executable>> {
    py::gil_scoped_release release;
    std::string_view bytes(static_cast<const char*>(info.ptr), size);
    // The constants borrow from a 64-byte aligned copy (Tensor::borrowed), not from Python's
    // buffer, whose owner cannot be released without the GIL. The copy and the text are also
    // the source a recompile (inputs of other sizes in a symbolic dim) parses again.
    auto source = [&] {
      std::shared_ptr<std::byte> copy = allocateLarge(std::max<size_t>(size, 1));
      if (size) std::memcpy(copy.get(), info.ptr, size);
      auto kept = std::make_shared<const std::string>(text);
      ModuleSource s;
      s.name = filename;
      s.load = [kept, copy, size, filename]() -> StatusOr<std::unique_ptr<Module>> {
        std::string_view owned(reinterpret_cast<const char*>(copy.get()), size);
        return parseModule(*kept, filename, owned, copy);
      };
      return s;
    };
    if (!o.cacheDir.empty()) {
      o.sourceKey = "kir-text " + hex64(chunkedHash64(bytes) ^ hash64(text, size));
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> cached, Executable::fromCache(o));
      if (cached) {
        if (!cached->guards().empty()) cached->setSource(source());
        return cached;
      }
    }
    ModuleSource s = source();
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, s.load());
    return compileModule(std::move(m), o, std::move(s));
  }();
  if (!exe) fail(Error::Kind::Compile, exe.status());
  return wrap(std::move(*exe));
}

std::unique_ptr<PyExecutable> loadKiln(const std::string& path, const CompileOptions& o) {
  StatusOr<std::unique_ptr<Executable>> exe = [&] {
    py::gil_scoped_release release;
    return loadArtifact(path, o);
  }();
  if (!exe) fail(Error::Kind::Compile, exe.status());
  return wrap(std::move(*exe));
}

std::string inputList(const Function& f) {
  std::string s;
  for (size_t i = 0; i < f.numParameters(); ++i)
    s += (i ? ", " : "") + f.parameter(i)->name() + ": " + f.parameter(i)->type().str();
  return s;
}

// Runs with the inputs in parameter order; returns every output.
py::list runOrdered(const PyExecutable& self, const std::vector<py::handle>& slots) {
  if (!slots.empty() && onCudaDevice(slots[0])) return runOnCuda(*self.exe, self.inputs, slots);
  RunInputs in;
  in.tensors.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) addInput(slots[i], self.inputs[i], i, in);
  std::vector<Tensor> outputs;
  Status s;
  {
    py::gil_scoped_release release;
    s = self.exe->runInto(in.tensors, outputs);
  }
  if (!s) fail(Error::Kind::Run, s);
  return outputsToPython(outputs, in);
}

// Parameter order from positional and named inputs; every input exactly once.
std::vector<py::handle> orderInputs(const PyExecutable& self, const py::args& args,
                                    const py::dict& named) {
  const Function& f = self.exe->function();
  const size_t n = f.numParameters();
  if (args.size() > n)
    throw Error{Error::Kind::InvalidInput,
                "expected " + std::to_string(n) + " inputs (" + inputList(f) + "), got " +
                    std::to_string(args.size()) + " positional ones",
                {}};
  std::vector<py::handle> slots(n);
  for (size_t i = 0; i < args.size(); ++i) slots[i] = args[i];
  for (const auto& [key, value] : named) {
    std::string name = py::str(key);
    auto it = self.inputIndex.find(name);
    if (it == self.inputIndex.end())
      throw Error{Error::Kind::InvalidInput,
                  "no input named '" + name + "' (inputs: " + inputList(f) + ")",
                  {}};
    if (slots[it->second])
      throw Error{Error::Kind::InvalidInput, "input '" + name + "' given twice", {}};
    slots[it->second] = value;
  }
  for (size_t i = 0; i < n; ++i)
    if (!slots[i])
      throw Error{Error::Kind::InvalidInput,
                  "input '" + f.parameter(i)->name() + "' (#" + std::to_string(i) +
                      ") is missing: expected " + f.parameter(i)->type().str(),
                  {}};
  return slots;
}

py::object call(const PyExecutable& self, const py::args& args, const py::kwargs& kwargs) {
  py::list outs = runOrdered(self, orderInputs(self, args, kwargs));
  if (outs.size() == 1) return outs[0];
  return py::tuple(outs);
}

// ONNX Runtime's InferenceSession.run: the outputs named (all for None), from named inputs.
py::list runNamed(const PyExecutable& self, const py::object& outputNames, const py::dict& feeds) {
  py::list all = runOrdered(self, orderInputs(self, py::args(), feeds));
  if (outputNames.is_none()) return all;
  py::list picked;
  for (py::handle h : outputNames) {
    std::string name = py::str(h);
    auto it = std::find(self.outputNames.begin(), self.outputNames.end(), name);
    if (it == self.outputNames.end()) {
      std::string known;
      for (const std::string& o : self.outputNames) known += (known.empty() ? "" : ", ") + o;
      throw Error{
          Error::Kind::InvalidInput, "no output named '" + name + "' (outputs: " + known + ")", {}};
    }
    picked.append(all[static_cast<size_t>(it - self.outputNames.begin())]);
  }
  return picked;
}

// The mean seconds of `iterations` runs through the C++ API alone (Executable::runInto, outputs
// reused as a C++ caller would), for bench/python_overhead.py to measure what Python adds.
double timeNative(const PyExecutable& self, const py::list& inputs, int iterations) {
  std::vector<py::handle> slots(inputs.begin(), inputs.end());
  const Function& f = self.exe->function();
  if (slots.size() != f.numParameters())
    throw Error{Error::Kind::InvalidInput, "expected inputs: " + inputList(f), {}};
  RunInputs in;
  for (size_t i = 0; i < slots.size(); ++i) addInput(slots[i], self.inputs[i], i, in);
  std::vector<Tensor> outputs;
  py::gil_scoped_release release;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    Status s = self.exe->runInto(in.tensors, outputs);
    if (!s) {
      py::gil_scoped_acquire acquire;
      fail(Error::Kind::Run, s);
    }
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / std::max(iterations, 1);
}

py::tuple tensorInfo(const std::string& name, const TensorType& t) {
  py::list shape;
  for (const Dim& d : t.dims())
    shape.append(d.isStatic() ? py::object(py::int_(d.value())) : py::object(py::str(d.str())));
  return py::make_tuple(name, numpyName(t.dtype()), py::tuple(shape), t.str());
}

py::list inputInfos(const PyExecutable& self) {
  py::list l;
  const Function& f = self.exe->function();
  for (size_t i = 0; i < f.numParameters(); ++i)
    l.append(tensorInfo(f.parameter(i)->name(), f.parameter(i)->type()));
  return l;
}

// What a run returns: a dim whose size the data decides (ONNX NonZero, Unique, ...) is None.
py::list outputInfos(const PyExecutable& self) {
  py::list l;
  const std::vector<TensorType> types = self.exe->outputTypes();
  for (size_t i = 0; i < types.size(); ++i) {
    py::tuple info = tensorInfo(self.outputNames[i], types[i]);
    py::list shape(info[2]);
    for (const DynamicDim& d : self.exe->runTimeSizes())
      if (d.output == i) shape[static_cast<size_t>(d.dim)] = py::none();
    l.append(py::make_tuple(info[0], info[1], py::tuple(shape), info[3]));
  }
  return l;
}

py::dict compileTimes(const PyExecutable& self) {
  const runtime::CompileTimes& t = self.exe->times();
  py::dict d;
  d["passes"] = t.passes;
  d["fusion"] = t.fusion;
  d["lowering"] = t.lowering;
  d["codegen"] = t.codegen;
  d["buffers"] = t.buffers;
  d["cache_load"] = t.cacheLoad;
  d["total"] = t.total();
  return d;
}

void bindExecutable(py::module_& m) {
  py::class_<PyExecutable>(m, "Executable")
      .def("__call__", &call)
      .def("run", &runNamed, py::arg("output_names"), py::arg("feeds"))
      .def_property_readonly("inputs", &inputInfos)
      .def_property_readonly("outputs", &outputInfos)
      .def("explain", [](const PyExecutable& s) { return explain(*s.exe); })
      .def("save",
           [](const PyExecutable& s, const std::string& path) {
             StatusOr<uint64_t> n = s.exe->writeArtifact(path);
             if (!n) fail(Error::Kind::Kiln, n.status());
             return *n;
           })
      .def_property_readonly("backend",
                             [](const PyExecutable& s) { return s.exe->target().name(); })
      .def_property_readonly("threads", [](const PyExecutable& s) { return s.exe->threads(); })
      .def_property_readonly("cache_report",
                             [](const PyExecutable& s) { return s.exe->cacheReport(); })
      .def_property_readonly("compile_ms", &compileTimes)
      .def_property_readonly("library_calls",
                             [](const PyExecutable& s) { return s.exe->libraryCalls(); })
      .def_property_readonly("guards", [](const PyExecutable& s) { return guards(*s.exe); })
      .def_property_readonly("specializations",
                             [](const PyExecutable& s) {
                               py::list l;
                               for (const SymbolBindings& b : s.exe->specializations())
                                 l.append(py::cast(b));
                               return l;
                             })
      .def_property_readonly("recompiles",
                             [](const PyExecutable& s) { return s.exe->recompiles(); })
      .def("ir", [](const PyExecutable& s) { return printFunction(s.exe->function()); })
      .def("_time_native", &timeNative, py::arg("inputs"), py::arg("iterations"));
}

// Creates kiln.KilnError and its subclasses, and raises them for Error.
void bindErrors(py::module_& m) {
  auto make = [&](const char* name, PyObject* bases, const char* doc) {
    PyObject* type =
        PyErr_NewExceptionWithDoc((std::string("kiln.") + name).c_str(), doc, bases, nullptr);
    if (!type) throw py::error_already_set();
    m.add_object(name, py::handle(type));
    return type;
  };
  static PyObject* base = make("KilnError", PyExc_Exception, "An error from Kiln.");
  static PyObject* compile = make("CompileError", base, "A source Kiln cannot read or compile.");
  static PyObject* unsupported = make(
      "UnsupportedOpError", compile,
      "A source with ops Kiln does not support; .unsupported lists every one (node, op, reason).");
  static PyObject* input =
      make("InvalidInputError",
           py::make_tuple(py::handle(base), py::handle(PyExc_ValueError)).release().ptr(),
           "Inputs that do not match the executable's.");
  static PyObject* run = make("RunError", base, "A run that failed.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = e.kind == Error::Kind::Compile         ? compile
                       : e.kind == Error::Kind::UnsupportedOp ? unsupported
                       : e.kind == Error::Kind::InvalidInput  ? input
                       : e.kind == Error::Kind::Run           ? run
                                                              : base;
      py::object exc = py::reinterpret_borrow<py::object>(type)(e.message);
      py::list items;
      for (const UnsupportedItem& u : e.unsupported)
        items.append(py::make_tuple(u.node, u.op, u.reason));
      exc.attr("unsupported") = items;
      PyErr_SetObject(type, exc.ptr());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's native module; use the kiln package (docs/python.md).";
  m.attr("__version__") = KILN_VERSION;
  bindErrors(m);
  bindDLPackTensor(m);
  bindExecutable(m);
  m.def("backends", [] {
    runtime::registerBuiltinTargets();
    return runtime::targetNames();
  });
  m.def("options", &makeOptions, py::arg("backend"), py::arg("threads"), py::arg("dims"),
        py::arg("ranges"), py::arg("opt_level"), py::arg("cache_dir"), py::arg("dump_dir"),
        py::arg("precision"), py::arg("recompile"));
  py::class_<CompileOptions>(m, "CompileOptions");
  m.def("compile_onnx", &compileOnnx, py::arg("path"), py::arg("options"));
  m.def("compile_kir", &compileKir, py::arg("text"), py::arg("filename"), py::arg("blob"),
        py::arg("options"));
  m.def("load_artifact", &loadKiln, py::arg("path"), py::arg("options"));
}

}  // namespace kiln::python
