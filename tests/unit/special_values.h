// A test helper: outputs compared with the interpreter's where NaN and the sign of zero count.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

// Each element of `got` equals `want`'s, a NaN where it has a NaN and a zero of the same sign.
inline void expectSpecialValuesEqual(const std::vector<Tensor>& got,
                                     const std::vector<Tensor>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t k = 0; k < got.size(); ++k)
    for (int64_t i = 0; i < want[k].numElements(); ++i) {
      const double g = got[k].getDouble(i), w = want[k].getDouble(i);
      const std::string at =
          where + " output " + std::to_string(k) + " element " + std::to_string(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << at;
      } else {
        EXPECT_EQ(g, w) << at;
        EXPECT_EQ(std::signbit(g), std::signbit(w)) << at;
      }
    }
}

}  // namespace kiln
