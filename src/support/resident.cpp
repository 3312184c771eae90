#include "support/resident.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln {

int64_t releaseLibraryCode(std::string_view library) {
#if defined(__linux__)
  struct Range {
    uintptr_t begin = 0, end = 0;
    int64_t rss = 0, dirty = 0;
  };
  std::vector<Range> ranges;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;  // the current mapping is executable code of `library`
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    char perms[8] = {};
    // A mapping's header: "begin-end perms offset dev inode path".
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &begin, &end, perms) == 3) {
      inside = std::strcmp(perms, "r-xp") == 0 && line.find(library) != std::string::npos;
      if (inside) ranges.push_back({begin, end, 0, 0});
      continue;
    }
    if (!inside) continue;
    long kib = 0;
    if (std::sscanf(line.c_str(), "Rss: %ld kB", &kib) == 1) ranges.back().rss = kib;
    if (std::sscanf(line.c_str(), "Private_Dirty: %ld kB", &kib) == 1) ranges.back().dirty = kib;
  }
  int64_t released = 0;
  for (const Range& r : ranges) {
    if (r.dirty != 0) continue;  // relocated code: dropping it would lose the relocations
    if (::madvise(reinterpret_cast<void*>(r.begin), r.end - r.begin, MADV_DONTNEED) == 0)
      released += r.rss * 1024;
  }
  return released;
#else
  (void)library;
  return 0;
#endif
}

}  // namespace kiln
