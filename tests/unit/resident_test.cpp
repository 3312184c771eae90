// releaseLibraryCode: the code pages of a loaded library leave the resident set and come back
// when the code runs again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "support/resident.h"

namespace kiln {
namespace {

TEST(Resident, ReleasesLibraryCodeThatRunsAgainAfterwards) {
  // No mapping has this name: nothing released.
  EXPECT_EQ(releaseLibraryCode("no-such-library-name.so"), 0);
#if defined(__linux__)
  // libm is loaded (the test links it) and its code is clean: some of it is resident after a
  // call, released, and runs again with the same results.
  volatile double x = 0.5;
  double before = std::erf(x) + std::cbrt(x);
  EXPECT_GT(releaseLibraryCode("libm.so"), 0);
  EXPECT_EQ(std::erf(x) + std::cbrt(x), before);
  EXPECT_GT(releaseLibraryCode("libm.so"), 0);  // resident again: the code ran from the file
#endif
}

}  // namespace
}  // namespace kiln
