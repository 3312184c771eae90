// A test module for concurrent kernels (runtime/concurrency.h), shared by the planner's tests
// and the CPU program's.
#pragma once

namespace kiln::runtime {

// An inception module: three branches from %x (a 1x1 then a 3x3 convolution; a 3x3 convolution
// and tanh; a 1x1 convolution), concatenated, then a 1x1 convolution over the concatenation. The
// weights are parameters (read by several kernels, written by none).
constexpr const char* kModule = R"(
func @main(%x: f32[1,14,14,32], %k3: f32[3,3,32,32], %k1: f32[1,1,32,32], %kc: f32[1,1,32,32], %ko: f32[1,1,96,16]) -> (f32[1,14,14,16]) {
  %a1 = f32[1,14,14,32] convolution(%x, %k1) {dimension_numbers = "b01f_01io->b01f"}
  %a2 = f32[1,14,14,32] convolution(%a1, %k3) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %b1 = f32[1,14,14,32] convolution(%x, %k3) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %b2 = f32[1,14,14,32] tanh(%b1)
  %c1 = f32[1,14,14,32] convolution(%x, %kc) {dimension_numbers = "b01f_01io->b01f"}
  %cat = f32[1,14,14,96] concatenate(%a2, %b2, %c1) {dimension = 3}
  %out = f32[1,14,14,16] convolution(%cat, %ko) {dimension_numbers = "b01f_01io->b01f"}
  return %out
})";

}  // namespace kiln::runtime
