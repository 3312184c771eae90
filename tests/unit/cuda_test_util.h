// Shared by the cuda target's unit tests: a test that needs a GPU skips, saying why, without one.
#pragma once

#include <gtest/gtest.h>

#include "codegen/cuda/driver.h"

#define KILN_REQUIRE_GPU()                                                     \
  do {                                                                         \
    auto driver = ::kiln::codegen::cuda::Driver::get();                        \
    if (!driver) GTEST_SKIP() << "no GPU here: " << driver.status().message(); \
  } while (0)
