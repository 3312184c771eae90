// The process's resident memory: taking pages it no longer needs out of it.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

// Takes the code pages of the shared libraries whose path contains `library` out of this
// process's resident memory (madvise MADV_DONTNEED on their executable mappings) and returns how
// many bytes were resident there. Only mappings with no private dirty page are touched: their
// pages are the file's own bytes, so code that runs again is read back from the page cache,
// unchanged. Linux only (elsewhere nothing, 0).
//
// Why: loading libLLVM runs its static constructors (command-line option registration and the
// like), which fault in about 40 MiB of code spread over the library that a compile never runs
// again (measured on the transformer models: 59 MiB of libLLVM resident after a compile, 41 MiB
// in a process that only loads a cached model).
int64_t releaseLibraryCode(std::string_view library);

}  // namespace kiln
