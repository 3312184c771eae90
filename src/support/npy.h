// Reading and writing numpy .npy files (format versions 1.0-3.0, little-endian, C order).
#pragma once

#include <string>

#include "ir/tensor.h"

namespace kiln {

// Errors name the file and the cause (bad magic, unsupported dtype, Fortran order, truncated
// data, too many elements, ...). Never allocates more than the file can hold.
StatusOr<Tensor> readNpy(const std::string& path);
Status writeNpy(const std::string& path, const Tensor& t);

}  // namespace kiln
