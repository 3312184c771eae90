// The C API (include/kiln/kiln.h) over the C++ API. No exception or abort crosses it: every
// failure is a message for the caller.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln.hpp"

struct kiln_executable {
  std::unique_ptr<kiln::Executable> exe;
  std::vector<std::vector<int64_t>> inputDims;
  std::vector<std::string> inputNames;
  std::vector<std::vector<int64_t>> outputDims;
  std::vector<kiln::DType> outputDTypes;
  std::vector<std::string> outputNames;  // the source's names (Executable::outputNames)
};

namespace {

void setError(char** error, const std::string& message) {
  if (!error) return;
  *error = static_cast<char*>(std::malloc(message.size() + 1));
  if (*error) std::memcpy(*error, message.c_str(), message.size() + 1);
}

}  // namespace

extern "C" {

kiln_options kiln_default_options(void) {
  kiln_options o;
  o.backend = "cpu";
  o.threads = 0;
  o.opt_level = 1;
  o.num_dims = 0;
  o.dim_names = nullptr;
  o.dim_values = nullptr;
  o.cache_dir = nullptr;
  o.recompile = 1;
  o.precision = nullptr;
  o.cuda_arch = nullptr;
  o.num_ranges = 0;
  o.range_names = nullptr;
  o.range_lo = nullptr;
  o.range_hi = nullptr;
  o.range_pow2 = nullptr;
  return o;
}

namespace {

kiln_executable* wrap(std::unique_ptr<kiln::Executable> exe) {
  auto* h = new kiln_executable;
  h->exe = std::move(exe);
  const kiln::Function& f = h->exe->function();
  auto dimsOf = [](const kiln::TensorType& t) {
    std::vector<int64_t> dims;  // -1 for a dim compiled over a range
    for (const kiln::Dim& d : t.dims()) dims.push_back(d.isStatic() ? d.value() : -1);
    return dims;
  };
  for (size_t i = 0; i < f.numParameters(); ++i) {
    h->inputDims.push_back(dimsOf(f.parameter(i)->type()));
    h->inputNames.push_back(f.parameter(i)->name());
  }
  // What kiln_run returns: the source's outputs, -1 for a dim whose size is known at run time.
  for (const kiln::TensorType& t : h->exe->outputTypes()) {
    h->outputDims.push_back(dimsOf(t));
    h->outputDTypes.push_back(t.dtype());
  }
  for (const kiln::DynamicDim& d : h->exe->runTimeSizes())
    h->outputDims[d.output][static_cast<size_t>(d.dim)] = -1;
  h->outputNames = h->exe->outputNames();
  return h;
}

}  // namespace

kiln_executable* kiln_load_artifact(const char* path, const kiln_options* options, char** error) {
  try {
    if (!path) {
      setError(error, "kiln_load_artifact: path is NULL");
      return nullptr;
    }
    kiln::CompileOptions co;
    co.threads = options ? options->threads : 0;
    co.recompile = options ? options->recompile != 0 : true;
    if (options && options->cache_dir) co.cacheDir = options->cache_dir;
    co.dropHeldConstants = true;  // the C API does not serialize
    auto exe = kiln::loadArtifact(path, co);
    if (!exe) {
      setError(error, exe.status().str());
      return nullptr;
    }
    const std::string& precision = (*exe)->compileOptions().precision;
    if (options && options->precision && precision != options->precision) {
      setError(error, std::string(path) + ": compiled for precision " + precision +
                          ", the options ask for " + options->precision +
                          ": compile the model again with it");
      return nullptr;
    }
    return wrap(std::move(*exe));
  } catch (const std::exception& e) {
    setError(error, std::string("kiln_load_artifact: ") + e.what());
    return nullptr;
  }
}

kiln_executable* kiln_compile_onnx(const char* path, const kiln_options* options, char** error) {
  try {
    if (!path) {
      setError(error, "kiln_compile_onnx: path is NULL");
      return nullptr;
    }
    kiln_options o = options ? *options : kiln_default_options();
    kiln::CompileOptions co;
    co.backend = o.backend ? o.backend : "cpu";
    co.threads = o.threads;
    co.optLevel = o.opt_level;
    co.recompile = o.recompile != 0;
    co.dropHeldConstants = true;  // the C API does not serialize
    if (o.cache_dir) co.cacheDir = o.cache_dir;
    if (o.precision) co.precision = o.precision;
    if (o.cuda_arch) co.cudaArch = o.cuda_arch;
    for (int32_t i = 0; i < o.num_dims; ++i) {
      if (!o.dim_names || !o.dim_values || !o.dim_names[i]) {
        setError(error, "kiln_compile_onnx: dim_names/dim_values missing");
        return nullptr;
      }
      co.dims[o.dim_names[i]] = o.dim_values[i];
    }
    for (int32_t i = 0; i < o.num_ranges; ++i) {
      if (!o.range_names || !o.range_lo || !o.range_hi || !o.range_names[i] || o.range_lo[i] < 0 ||
          o.range_hi[i] < o.range_lo[i]) {
        setError(error, "kiln_compile_onnx: range_names/range_lo/range_hi missing, or range " +
                            std::to_string(i) + " empty or negative");
        return nullptr;
      }
      co.ranges[o.range_names[i]] = {o.range_lo[i], o.range_hi[i],
                                     o.range_pow2 != nullptr && o.range_pow2[i] != 0};
    }
    auto exe = kiln::compileOnnxFile(path, co);
    if (!exe) {
      setError(error, exe.status().str());
      return nullptr;
    }
    return wrap(std::move(*exe));
  } catch (const std::exception& e) {
    setError(error, std::string("kiln_compile_onnx: ") + e.what());
    return nullptr;
  }
}

int32_t kiln_num_inputs(const kiln_executable* exe) {
  return exe ? static_cast<int32_t>(exe->inputDims.size()) : -1;
}

int32_t kiln_num_outputs(const kiln_executable* exe) {
  return exe ? static_cast<int32_t>(exe->outputDims.size()) : -1;
}

int32_t kiln_input_info(const kiln_executable* exe, int32_t index, const char** name,
                        kiln_dtype* dtype, int32_t* rank, const int64_t** dims) {
  if (!exe || index < 0 || index >= kiln_num_inputs(exe)) return -1;
  const kiln::Value* p = exe->exe->function().parameter(static_cast<size_t>(index));
  if (kiln::isString(p->type().dtype())) return -1;  // no kiln_dtype: text has no C form here
  const auto& d = exe->inputDims[static_cast<size_t>(index)];
  if (name) *name = exe->inputNames[static_cast<size_t>(index)].c_str();
  if (dtype) *dtype = static_cast<kiln_dtype>(p->type().dtype());
  if (rank) *rank = static_cast<int32_t>(d.size());
  if (dims) *dims = d.data();
  return 0;
}

int32_t kiln_output_info(const kiln_executable* exe, int32_t index, const char** name,
                         kiln_dtype* dtype, int32_t* rank, const int64_t** dims) {
  if (!exe || index < 0 || index >= kiln_num_outputs(exe)) return -1;
  if (kiln::isString(exe->outputDTypes[static_cast<size_t>(index)])) return -1;
  const auto& d = exe->outputDims[static_cast<size_t>(index)];
  if (name) *name = exe->outputNames[static_cast<size_t>(index)].c_str();
  if (dtype) *dtype = static_cast<kiln_dtype>(exe->outputDTypes[static_cast<size_t>(index)]);
  if (rank) *rank = static_cast<int32_t>(d.size());
  if (dims) *dims = d.data();
  return 0;
}

namespace {

// A kiln_dtype value: the numbers and bool (strings have no C form: their elements are objects).
bool isCDType(int t) { return t >= 0 && t <= static_cast<int>(KILN_F64); }

// The C tensors as device tensors, or why not ("input 1 has no dims").
kiln::StatusOr<std::vector<kiln::runtime::DeviceTensor>>
deviceTensors(const kiln_tensor* t, int32_t n, const char* what) {
  std::vector<kiln::runtime::DeviceTensor> out;
  for (int32_t i = 0; i < n; ++i) {
    const std::string where = std::string(what) + " " + std::to_string(i);
    if (t[i].rank < 0 || (t[i].rank > 0 && !t[i].dims))
      return kiln::Status::error(where + " has no dims");
    if (!isCDType(static_cast<int>(t[i].dtype)))
      return kiln::Status::error(where + " has an unknown dtype");
    std::vector<int64_t> dims(t[i].dims, t[i].dims + t[i].rank);
    for (int64_t d : dims)
      if (d < 0) return kiln::Status::error(where + " has a negative dim");
    out.push_back({reinterpret_cast<uintptr_t>(t[i].data),
                   kiln::TensorType::of(static_cast<kiln::DType>(t[i].dtype), dims)});
  }
  return out;
}

}  // namespace

int32_t kiln_run_device(const kiln_executable* exe, const kiln_tensor* inputs, int32_t num_inputs,
                        const kiln_tensor* outputs, int32_t num_outputs, void* stream,
                        char** error) {
  try {
    if (!exe || (num_inputs > 0 && !inputs) || (num_outputs > 0 && !outputs)) {
      setError(error, "kiln_run_device: NULL argument");
      return 1;
    }
    auto in = deviceTensors(inputs, num_inputs, "input");
    auto out = in ? deviceTensors(outputs, num_outputs, "output") : in;
    kiln::Status s = !in ? in.status() : !out ? out.status() : kiln::Status::ok();
    if (s.isOk()) s = exe->exe->runOnDevice(*in, *out, reinterpret_cast<uintptr_t>(stream));
    if (!s.isOk()) {
      setError(error, "kiln_run_device: " + s.str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    setError(error, std::string("kiln_run_device: ") + e.what());
    return 1;
  }
}

int32_t kiln_run(const kiln_executable* exe, const kiln_tensor* inputs, int32_t num_inputs,
                 kiln_tensor** outputs, int32_t* num_outputs, char** error) {
  try {
    if (!exe || !outputs || !num_outputs || (num_inputs > 0 && !inputs)) {
      setError(error, "kiln_run: NULL argument");
      return 1;
    }
    std::vector<kiln::Tensor> in;
    for (int32_t i = 0; i < num_inputs; ++i) {
      const kiln_tensor& t = inputs[i];
      if (t.rank < 0 || (t.rank > 0 && !t.dims)) {
        setError(error, "kiln_run: input " + std::to_string(i) + " has no dims");
        return 1;
      }
      if (!isCDType(static_cast<int>(t.dtype))) {
        setError(error, "kiln_run: input " + std::to_string(i) + " has an unknown dtype");
        return 1;
      }
      std::vector<int64_t> dims(t.dims, t.dims + t.rank);
      auto x = kiln::Tensor::create(static_cast<kiln::DType>(t.dtype), dims);
      if (!x) {
        setError(error, "kiln_run: input " + std::to_string(i) + ": " + x.status().message());
        return 1;
      }
      if (x->byteSize() && !t.data) {
        setError(error, "kiln_run: input " + std::to_string(i) + " has no data");
        return 1;
      }
      if (x->byteSize()) std::memcpy(x->mutableBytes(), t.data, x->byteSize());
      in.push_back(std::move(*x));
    }
    auto out = exe->exe->run(in);
    if (!out) {
      setError(error, out.status().str());
      return 1;
    }
    for (const kiln::Tensor& t : *out)
      if (kiln::isString(t.dtype())) {
        setError(error, "kiln_run: an output is a string tensor; the C API carries numbers only");
        return 1;
      }
    auto* result = static_cast<kiln_tensor*>(std::calloc(out->size() + 1, sizeof(kiln_tensor)));
    if (!result) throw std::bad_alloc();
    for (size_t i = 0; i < out->size(); ++i) {
      const kiln::Tensor& t = (*out)[i];
      auto* dims = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (t.dims().size() + 1)));
      void* data = std::malloc(t.byteSize() + 1);
      if (!dims || !data) throw std::bad_alloc();
      std::copy(t.dims().begin(), t.dims().end(), dims);
      if (t.byteSize()) std::memcpy(data, t.bytes(), t.byteSize());
      result[i] = kiln_tensor{static_cast<kiln_dtype>(t.dtype()), static_cast<int32_t>(t.rank()),
                              dims, data};
    }
    *outputs = result;
    *num_outputs = static_cast<int32_t>(out->size());
    return 0;
  } catch (const std::exception& e) {
    setError(error, std::string("kiln_run: ") + e.what());
    return 1;
  }
}

void kiln_free_outputs(kiln_tensor* outputs, int32_t num_outputs) {
  if (!outputs) return;
  for (int32_t i = 0; i < num_outputs; ++i) {
    std::free(const_cast<int64_t*>(outputs[i].dims));
    std::free(outputs[i].data);
  }
  std::free(outputs);
}

void kiln_free_error(char* error) { std::free(error); }

void kiln_destroy(kiln_executable* exe) { delete exe; }

}  // extern "C"
