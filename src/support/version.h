// The version of Kiln, as artifacts and compile-cache keys record it (CMake's project version).
#pragma once

namespace kiln {

inline constexpr const char* kKilnVersion = "0.2.0";

}  // namespace kiln
