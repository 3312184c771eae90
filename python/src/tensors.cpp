// Tensors between Python and Kiln. See tensors.h.
#include "tensors.h"

#include <cstring>
#include <map>
#include <optional>
#include <pybind11/numpy.h>

namespace kiln::python {
namespace {

// numpy's PyArray_FromAny flags: copy only when the array is not already C-contiguous, aligned
// and in the machine's byte order (the layout Kiln's kernels read).
constexpr int kNpyCContiguous = 0x0001, kNpyAligned = 0x0100, kNpyNotSwapped = 0x0200,
              kNpyEnsureArray = 0x0040;

// The owner of borrowed input tensors: the RunInputs keeps the Python objects alive, so this
// owns nothing. It makes every borrowed input shared (never Tensor::isUnique), which is how
// outputsToPython finds outputs that alias an input.
const std::shared_ptr<const void>& inputOwner() {
  static const std::shared_ptr<const void> owner = std::make_shared<int>(0);
  return owner;
}

std::optional<DType> fromNumpy(const py::dtype& dt) {
  const size_t n = static_cast<size_t>(dt.itemsize());
  switch (dt.kind()) {
    case 'b': return DType::Bool;
    case 'i':
      if (n == 1) return DType::I8;
      if (n == 2) return DType::I16;
      if (n == 4) return DType::I32;
      if (n == 8) return DType::I64;
      break;
    case 'u':
      if (n == 1) return DType::U8;
      if (n == 2) return DType::U16;
      if (n == 4) return DType::U32;
      if (n == 8) return DType::U64;
      break;
    case 'f':
      if (n == 2) return DType::F16;
      if (n == 4) return DType::F32;
      if (n == 8) return DType::F64;
      break;
    case 'U':                     // str
    case 'S':                     // bytes, read as UTF-8
    case 'O': return DType::Str;  // objects: each must be a str (checked as it is read)
    default: break;
  }
  return std::nullopt;
}

std::optional<DType> fromDLPack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLBool && t.bits == 8) return DType::Bool;
  if (t.code == kDLBfloat && t.bits == 16) return DType::BF16;
  for (DType d : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32,
                  DType::U64, DType::F16, DType::F32, DType::F64}) {
    uint8_t code = isFloat(d) ? kDLFloat : isSignedInteger(d) ? kDLInt : kDLUInt;
    if (t.code == code && t.bits == 8 * dtypeSize(d)) return d;
  }
  return std::nullopt;
}

DLDataType toDLPack(DType d) {
  uint8_t bits = static_cast<uint8_t>(8 * dtypeSize(d));
  if (isBool(d)) return {kDLBool, 8, 1};
  if (d == DType::BF16) return {kDLBfloat, 16, 1};
  return {isFloat(d)           ? uint8_t(kDLFloat)
          : isSignedInteger(d) ? uint8_t(kDLInt)
                               : uint8_t(kDLUInt),
          bits, 1};
}

py::dtype numpyDType(DType d) {
  switch (d) {
    case DType::Bool: return py::dtype::of<bool>();
    case DType::I8: return py::dtype::of<int8_t>();
    case DType::U8: return py::dtype::of<uint8_t>();
    case DType::I16: return py::dtype::of<int16_t>();
    case DType::U16: return py::dtype::of<uint16_t>();
    case DType::I32: return py::dtype::of<int32_t>();
    case DType::U32: return py::dtype::of<uint32_t>();
    case DType::I64: return py::dtype::of<int64_t>();
    case DType::U64: return py::dtype::of<uint64_t>();
    case DType::F16: return py::dtype("e");
    case DType::BF16:  // numpy has none: bf16 values come back widened to float32 (exact)
    case DType::F32: return py::dtype::of<float>();
    case DType::F64: return py::dtype::of<double>();
    case DType::Str: return py::dtype("O");  // Python str objects
  }
  return py::dtype::of<float>();
}

// (2, 3) as Python prints a shape; (3,) for one dimension.
std::string shapeText(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

[[noreturn]] void badInput(const InputSlot& param, size_t index, const std::string& got) {
  const TensorType& t = param.type();
  std::string want = t.str();
  if (t.isStatic()) {
    want += " (" + numpyName(t.dtype()) + ", shape " + shapeText(t.staticDims()) + ")";
  }
  throw Error{Error::Kind::InvalidInput,
              "input '" + param.name() + "' (#" + std::to_string(index) + "): expected " + want +
                  ", got " + got,
              {}};
}

// Checks an input's element type and dims against the parameter's. what() describes the input;
// it is called only for the error, so that a run builds no text.
template <typename What>
void checkType(const InputSlot& param, size_t index, std::optional<DType> dtype,
               const std::vector<int64_t>& dims, What what, bool acceptF32) {
  const TensorType& want = param.type();
  bool dtypeOk = dtype && (*dtype == want.dtype() ||
                           (acceptF32 && *dtype == DType::F32 && want.dtype() == DType::BF16));
  bool dimsOk = want.rank() == static_cast<int64_t>(dims.size());
  for (size_t i = 0; dimsOk && i < dims.size(); ++i)
    dimsOk = want.dim(i).isSymbolic() || want.dim(i).value() == dims[i];
  if (!dtypeOk || !dimsOk) badInput(param, index, what() + " of shape " + shapeText(dims));
}

std::string typeName(py::handle obj) {
  return py::str(py::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__name__"));
}

// bf16 parameters take numpy float32 arrays, rounded to nearest even (numpy has no bfloat16).
Tensor bf16FromF32(const float* src, const std::vector<int64_t>& dims) {
  Tensor t(DType::BF16, dims);
  auto* dst = t.mutableData<uint16_t>();
  for (int64_t i = 0; i < t.numElements(); ++i) dst[i] = floatToBf16(src[i]);
  return t;
}

// A numpy array of str (or bytes, or str objects) as a string tensor.
Tensor stringsFromNumpy(const py::array& a, const std::vector<int64_t>& dims,
                        const InputSlot& param, size_t index) {
  Tensor t(DType::Str, dims);
  py::list items = a.attr("ravel")().attr("tolist")();
  for (size_t i = 0; i < items.size(); ++i) {
    py::object item = items[i];
    if (py::isinstance<py::bytes>(item)) item = item.attr("decode")("utf-8");
    if (!py::isinstance<py::str>(item))
      badInput(param, index,
               "a numpy array holding a " + typeName(item) + " at element " + std::to_string(i) +
                   " (strings are str or bytes)");
    t.setStr(static_cast<int64_t>(i), item.cast<std::string>());
  }
  return t;
}

void addNumpy(py::array a, const InputSlot& param, size_t index, RunInputs& in) {
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  std::optional<DType> dtype = fromNumpy(a.dtype());
  auto what = [&] { return "numpy " + std::string(py::str(a.dtype())) + " array"; };
  checkType(param, index, dtype, dims, what, true);
  if (isString(*dtype)) {
    in.tensors.push_back(stringsFromNumpy(a, dims, param, index));
    return;
  }
  // The dtype is asked for explicitly: numpy swaps a big-endian array's bytes only then.
  PyObject* fixed = py::detail::npy_api::get().PyArray_FromAny_(
      a.ptr(), numpyDType(*dtype).release().ptr(), 0, 0,
      kNpyEnsureArray | kNpyCContiguous | kNpyAligned | kNpyNotSwapped, nullptr);
  if (!fixed) throw py::error_already_set();
  a = py::reinterpret_steal<py::array>(fixed);
  if (param.type().dtype() == DType::BF16 && *dtype == DType::F32) {
    in.tensors.push_back(bf16FromF32(static_cast<const float*>(a.data()), dims));
    return;
  }
  if (a.size() == 0) {
    in.tensors.emplace_back(*dtype, dims);
    return;
  }
  in.tensors.push_back(Tensor::borrowed(*dtype, std::move(dims), inputOwner(),
                                        static_cast<const std::byte*>(a.data())));
  in.keep.push_back(std::move(a));
}

// Copies a strided DLPack tensor into a row-major one.
void copyStrided(const std::byte* src, const int64_t* shape, const int64_t* strides, int ndim,
                 size_t elem, std::byte*& dst) {
  if (ndim == 0) {
    std::memcpy(dst, src, elem);
    dst += elem;
    return;
  }
  if (ndim == 1 && strides[0] == 1) {
    std::memcpy(dst, src, elem * static_cast<size_t>(shape[0]));
    dst += elem * static_cast<size_t>(shape[0]);
    return;
  }
  for (int64_t i = 0; i < shape[0]; ++i)
    copyStrided(src + i * strides[0] * static_cast<int64_t>(elem), shape + 1, strides + 1, ndim - 1,
                elem, dst);
}

bool rowMajor(const DLTensor& t) {
  if (!t.strides) return true;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// from_dlpack of the module that defines `obj`'s type (torch for a torch.Tensor), or None.
std::pair<py::object, py::object> frameworkOf(py::handle obj) {
  // Never destroyed: its objects must not be released after the interpreter has finalized.
  static auto& cache = *new std::map<PyTypeObject*, std::pair<py::object, py::object>>();
  PyTypeObject* type = Py_TYPE(obj.ptr());
  if (auto it = cache.find(type); it != cache.end()) return it->second;
  std::string module = py::str(py::handle(reinterpret_cast<PyObject*>(type)).attr("__module__"));
  module = module.substr(0, module.find('.'));
  py::object mod = py::module_::import("sys").attr("modules").attr("get")(module);
  py::object convert =
      mod.is_none() ? py::object(py::none()) : py::getattr(mod, "from_dlpack", py::none());
  Py_INCREF(type);  // the cache holds the type
  return cache[type] = {convert, convert.is_none() ? py::object(py::none()) : mod};
}

// The tensor of a DLPack capsule, which `in` now owns (released with it).
const DLTensor& consume(const py::object& capsule, py::handle obj, const InputSlot& param,
                        size_t index, RunInputs& in) {
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!m) {
    PyErr_Clear();
    badInput(param, index, "a " + typeName(obj) + " whose __dlpack__() is not a DLPack capsule");
  }
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  in.managed.push_back(m);
  return m->dl_tensor;
}

void addDLPack(py::handle obj, const InputSlot& param, size_t index, RunInputs& in) {
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    // torch 1.x cannot export bool tensors through DLPack; its __array__ gives a numpy view.
    py::object array = py::reinterpret_steal<py::object>(
        py::detail::npy_api::get().PyArray_FromAny_(obj.ptr(), nullptr, 0, 0, 0, nullptr));
    if (!array) {
      PyErr_Clear();
      badInput(param, index,
               "a " + typeName(obj) + " that cannot be exported (" +
                   std::string(py::str(e.value())) + ")");
    }
    addNumpy(py::reinterpret_borrow<py::array>(array), param, index, in);
    return;
  }
  const DLTensor& t = consume(capsule, obj, param, index, in);
  std::vector<int64_t> dims(t.shape, t.shape + t.ndim);
  std::optional<DType> dtype = fromDLPack(t.dtype);
  auto what = [&] {
    return "a " + typeName(obj) + (dtype ? " of " + std::string(dtypeName(*dtype)) : "");
  };
  checkType(param, index, dtype, dims, what, false);
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
    badInput(param, index,
             "a " + typeName(obj) + " on DLPack device type " +
                 std::to_string(t.device.device_type) +
                 (t.device.device_type == kDLCUDA
                      ? " among host inputs (give every input on the GPU, or every input on the "
                        "host)"
                      : " (Kiln reads host and CUDA memory; move it with .cpu())"));
  const std::byte* data = static_cast<const std::byte*>(t.data) + t.byte_offset;
  size_t elem = dtypeSize(*dtype);
  bool aligned = reinterpret_cast<uintptr_t>(data) % elem == 0;
  Tensor tensor;
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count == 0) {
    tensor = Tensor(*dtype, dims);
  } else if (rowMajor(t) && aligned) {
    tensor = Tensor::borrowed(*dtype, dims, inputOwner(), data);
  } else {
    tensor = Tensor(*dtype, dims);
    std::byte* dst = tensor.mutableBytes();
    std::vector<int64_t> strides(t.ndim, 1);
    if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
    else
      for (int d = t.ndim - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
    copyStrided(data, t.shape, strides.data(), t.ndim, elem, dst);
  }
  in.tensors.push_back(std::move(tensor));
  if (in.fromDlpack.is_none()) std::tie(in.fromDlpack, in.framework) = frameworkOf(obj);
}

// The owner of a Kiln tensor lent to a DLPack consumer.
struct Lent {
  DLManagedTensor managed;
  Tensor tensor;
  std::vector<int64_t> shape;
};

py::capsule dlpackCapsule(const Tensor& t) {
  auto* lent = new Lent{{}, t, t.dims()};
  DLTensor& d = lent->managed.dl_tensor;
  d.data = const_cast<std::byte*>(lent->tensor.bytes());
  d.device = {kDLCPU, 0};
  d.ndim = static_cast<int32_t>(lent->shape.size());
  d.dtype = toDLPack(t.dtype());
  d.shape = lent->shape.data();
  d.strides = nullptr;
  d.byte_offset = 0;
  lent->managed.manager_ctx = lent;
  lent->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<Lent*>(self->manager_ctx);
  };
  // A capsule that no consumer renamed to "used_dltensor" still owns the tensor.
  PyObject* capsule = PyCapsule_New(&lent->managed, "dltensor", [](PyObject* c) {
    if (!PyCapsule_IsValid(c, "dltensor")) return;
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    m->deleter(m);
  });
  if (!capsule) {
    delete lent;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// Kiln's output as a numpy array over its bytes (the array owns a reference to them).
py::array toNumpy(Tensor t) {
  if (isString(t.dtype())) {  // an object array of str
    py::list items(static_cast<size_t>(t.numElements()));
    for (int64_t i = 0; i < t.numElements(); ++i)
      items[static_cast<size_t>(i)] = py::str(t.str(i));  // UTF-8, checked by Python
    py::tuple shape(t.dims().size());
    for (size_t d = 0; d < t.dims().size(); ++d) shape[d] = py::int_(t.dims()[d]);
    py::array flat = py::module_::import("numpy").attr("array")(items, py::dtype("O"));
    return flat.attr("reshape")(shape);
  }
  if (t.dtype() == DType::BF16) {
    Tensor f(DType::F32, t.dims());
    for (int64_t i = 0; i < t.numElements(); ++i)
      f.mutableData<float>()[i] = bf16ToFloat(t.data<uint16_t>()[i]);
    t = std::move(f);
  }
  auto* holder = new Tensor(std::move(t));
  py::capsule base(holder, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(holder->dims().begin(), holder->dims().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : holder->strides())
    strides.push_back(
        static_cast<py::ssize_t>(s * static_cast<int64_t>(dtypeSize(holder->dtype()))));
  return py::array(numpyDType(holder->dtype()), shape, strides, holder->bytes(), base);
}

}  // namespace

std::string numpyName(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::Str: return "str";
    default: break;
  }
  return (isSignedInteger(t) ? "int" : "uint") + std::to_string(8 * dtypeSize(t));
}

RunInputs::~RunInputs() {
  for (DLManagedTensor* m : managed)
    if (m->deleter) m->deleter(m);
}

void addInput(py::handle obj, const InputSlot& param, size_t index, RunInputs& in) {
  if (py::isinstance<py::array>(obj)) {
    addNumpy(py::reinterpret_borrow<py::array>(obj), param, index, in);
  } else if (py::hasattr(obj, "__dlpack__")) {
    addDLPack(obj, param, index, in);
  } else {
    badInput(param, index, "a " + typeName(obj) + " (pass a numpy array or a DLPack tensor)");
  }
}

py::list outputsToPython(std::vector<Tensor>& outputs, const RunInputs& in) {
  py::list result(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& t = outputs[i];
    if (!t.isUnique()) t = t.clone();  // shared with an input, a constant or another output
    if (in.fromDlpack.is_none() || isString(t.dtype())) {  // frameworks hold no strings
      result[i] = toNumpy(std::move(t));
      continue;
    }
    try {
      result[i] = in.fromDlpack(py::cast(t));
    } catch (py::error_already_set&) {
      // torch 1.x reads no bool tensors through DLPack; its from_numpy shares the array's bytes.
      if (!isBool(outputs[i].dtype()) || !py::hasattr(in.framework, "from_numpy")) throw;
      result[i] = in.framework.attr("from_numpy")(toNumpy(outputs[i]));
    }
  }
  return result;
}

void bindDLPackTensor(py::module_& m) {
  py::class_<Tensor>(m, "DLPackTensor",
                     "An output of Kiln lent through DLPack (any framework's from_dlpack).")
      .def(
          "__dlpack__", [](const Tensor& t, py::object) { return dlpackCapsule(t); },
          py::arg("stream") = py::none())
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(int(kDLCPU), 0); })
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.dims())); })
      .def_property_readonly("dtype",
                             [](const Tensor& t) { return std::string(dtypeName(t.dtype())); })
      .def("numpy", [](const Tensor& t) { return toNumpy(t); });
}

// ---- CUDA tensors (a cuda executable reads and writes them in place) ----

bool onCudaDevice(py::handle obj) {
  if (!py::hasattr(obj, "__dlpack_device__")) return false;
  py::tuple d = obj.attr("__dlpack_device__")();
  return d.size() >= 1 && d[0].cast<int>() == kDLCUDA;
}

namespace {

// The device address and type of a CUDA tensor for input `param`, which `keep` keeps valid.
runtime::DeviceTensor cudaInput(py::handle obj, const InputSlot& param, size_t index,
                                RunInputs& keep) {
  if (!onCudaDevice(obj))
    badInput(param, index,
             "a " + typeName(obj) +
                 " that is not in CUDA memory (give every input on the GPU, "
                 "or every input on the host)");
  keep.keep.push_back(py::reinterpret_borrow<py::object>(obj));
  const DLTensor& t = consume(obj.attr("__dlpack__")(), obj, param, index, keep);
  std::vector<int64_t> dims(t.shape, t.shape + t.ndim);
  std::optional<DType> dtype = fromDLPack(t.dtype);
  auto what = [&] {
    return "a CUDA " + typeName(obj) + (dtype ? " of " + std::string(dtypeName(*dtype)) : "");
  };
  checkType(param, index, dtype, dims, what, false);
  if (t.device.device_id != 0)
    badInput(param, index,
             what() + " on GPU " + std::to_string(t.device.device_id) + " (Kiln runs on GPU 0)");
  if (!rowMajor(t))
    badInput(param, index, what() + " that is not contiguous (call .contiguous() first)");
  const auto* data = static_cast<const std::byte*>(t.data) + t.byte_offset;
  return {reinterpret_cast<uintptr_t>(data), TensorType::of(*dtype, dims)};
}

// The stream the inputs' framework issues its work on now: torch's current stream, else the
// default stream.
uintptr_t frameworkStream(const py::object& framework, py::handle first) {
  if (framework.is_none() || !py::hasattr(framework, "cuda")) return 0;
  py::object cuda = framework.attr("cuda");
  if (!py::hasattr(cuda, "current_stream")) return 0;
  return cuda.attr("current_stream")(first.attr("device")).attr("cuda_stream").cast<uintptr_t>();
}

}  // namespace

py::list runOnCuda(const runtime::Executable& exe, const std::vector<InputSlot>& slots,
                   const std::vector<py::handle>& objs) {
  RunInputs keep;
  std::vector<runtime::DeviceTensor> in;
  for (size_t i = 0; i < objs.size(); ++i) in.push_back(cudaInput(objs[i], slots[i], i, keep));
  py::object framework = objs.empty() ? py::object(py::none()) : frameworkOf(objs[0]).second;
  if (framework.is_none() || !py::hasattr(framework, "empty"))
    throw Error{Error::Kind::InvalidInput,
                "CUDA inputs need a framework with empty(shape, dtype=, device=) for the "
                "outputs (torch); move the inputs to the host instead",
                {}};
  std::vector<TensorType> types;
  for (const runtime::DeviceTensor& t : in) types.push_back(t.type);
  StatusOr<std::shared_ptr<const runtime::Executable>> spec = [&] {
    py::gil_scoped_release release;  // may compile
    return exe.specializationFor(types);
  }();
  if (!spec) throw Error{Error::Kind::InvalidInput, spec.status().str(), {}};
  py::list results;
  std::vector<runtime::DeviceTensor> out;
  for (const Value* v : (*spec)->function().outputs()) {
    const TensorType& t = v->type();
    const std::vector<int64_t> dims = t.staticDims();
    py::tuple shape(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) shape[d] = py::int_(dims[d]);
    py::object o = framework.attr("empty")(
        shape, py::arg("dtype") = framework.attr(numpyName(t.dtype()).c_str()),
        py::arg("device") = objs[0].attr("device"));
    out.push_back({o.attr("data_ptr")().cast<uintptr_t>(), t});
    results.append(o);
  }
  const uintptr_t stream = frameworkStream(framework, objs[0]);
  Status s;
  {
    py::gil_scoped_release release;
    s = (*spec)->runOnDevice(in, out, stream);
  }
  if (!s) throw Error{Error::Kind::Run, s.str(), {}};
  return results;
}

}  // namespace kiln::python
