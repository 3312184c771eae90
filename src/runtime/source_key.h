// What identifies a source file for the compile cache: "KIND HASH", HASH a fingerprint of the
// file's bytes.
//
// Hashing a large model costs ~10 ms per 100 MB, a fifth of a cached compile's budget, so the
// fingerprint of a file is recorded in the cache directory ("sources/", one small file per
// path) with the file's identity and timestamps (device, inode, size, mtime and ctime in ns). A
// later call whose file has the same identity and timestamps reuses it without reading the file.
// A write changes mtime and ctime, a replacement (rename) changes the inode, and no user can set
// ctime; but a filesystem's clock ticks coarsely, so a write within the same tick as an earlier
// one could leave both unchanged. A fingerprint is therefore recorded only when the file has not
// changed for `minAgeSeconds` (as build tools do against "racy" timestamps).
#pragma once

#include <string>

#include "support/status.h"

namespace kiln::runtime {

// The key of the file at `path` ("onnx 0123456789abcdef" for kind "onnx"). Without a cache
// directory nothing is recorded or reused.
StatusOr<std::string> sourceFileKey(const std::string& kind, const std::string& path,
                                    const std::string& cacheDir, double minAgeSeconds = 2.0);

// The fingerprint of the file's bytes (ChunkedHash), read through a buffer (no mapping, no copy
// of the whole file).
StatusOr<std::string> hashFile(const std::string& path);

// What identifies this build of Kiln ("kiln HASH"): the key of the file that holds Kiln's code
// (the executable or shared library dladdr names for this function), recorded in `cacheDir` like
// a source's. Compile-cache keys include it, so that a rebuild never loads an entry an earlier
// build wrote: the version number stays the same across builds of changed code. When the file
// cannot be found or read it is "kiln VERSION", and the reason is in `why`.
std::string buildKey(const std::string& cacheDir, std::string* why = nullptr);

}  // namespace kiln::runtime
