// Tensors between Python and Kiln: numpy arrays and DLPack objects in, numpy arrays or the
// input's framework's tensors out. Contiguous, aligned inputs are read in place (no copy);
// outputs hand Kiln's buffers to Python (no copy).
#pragma once

#include <pybind11/pybind11.h>
#include <string>
#include <vector>

#include "dlpack.h"
#include "errors.h"
#include "ir/ir.h"
#include "ir/tensor.h"
#include "runtime/executable.h"

namespace kiln::python {

namespace py = pybind11;

// The inputs of one run, converted from Python objects, and what keeps their bytes valid until
// the run ends: the objects themselves and the DLPack tensors consumed from them (released when
// this is destroyed, which must happen with the GIL held).
class RunInputs {
 public:
  RunInputs() = default;
  RunInputs(const RunInputs&) = delete;
  RunInputs& operator=(const RunInputs&) = delete;
  ~RunInputs();

  std::vector<Tensor> tensors;
  std::vector<py::object> keep;
  std::vector<DLManagedTensor*> managed;
  // from_dlpack of the module whose tensor came in through DLPack first (torch.from_dlpack),
  // and that module: outputs become its tensors. None: numpy outputs.
  py::object fromDlpack = py::none();
  py::object framework = py::none();
};

// An input as a run takes it: its name and the type it accepts, in which a symbolic dim (one the
// executable recompiles for, Executable::inputTypes) takes any size.
struct InputSlot {
  std::string name_;
  TensorType type_;
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
};

// Converts `obj` for input `param` (number `index`) and appends it to `in`. Throws
// Error(InvalidInput) naming the input and the type it expects when `obj` does not fit.
void addInput(py::handle obj, const InputSlot& param, size_t index, RunInputs& in);

// The outputs as numpy arrays, or as tensors of in.framework when an input came through DLPack.
// Outputs that share bytes with an input or a constant are copied first (Python may write to
// what it gets back).
py::list outputsToPython(std::vector<Tensor>& outputs, const RunInputs& in);

// A Kiln output as a DLPack producer: `__dlpack__()` and `__dlpack_device__()`, for any
// framework's from_dlpack. Registered on the module as _kiln.DLPackTensor.
void bindDLPackTensor(py::module_& m);

// Whether `obj` is a DLPack tensor in a CUDA device's memory.
bool onCudaDevice(py::handle obj);

// A run of a cuda executable on CUDA tensors (DLPack, dense), read and written in place: the
// outputs are new tensors of the inputs' framework (torch.empty) on the same device, and the run
// is ordered on the framework's current stream (torch's; else the default stream). Throws
// Error(InvalidInput) for a host input among them, a non-contiguous one, or wrong types.
py::list runOnCuda(const runtime::Executable& exe, const std::vector<InputSlot>& slots,
                   const std::vector<py::handle>& objs);

// "float32" for F32; numpy has no bfloat16 ("bfloat16").
std::string numpyName(DType t);

}  // namespace kiln::python
