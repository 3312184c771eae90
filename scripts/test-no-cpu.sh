#!/usr/bin/env bash
# Builds Kiln without the CPU target (-DKILN_CPU=OFF: no LLVM, no oneDNN; what a machine without
# them, such as the GPU machine, builds) and runs the tests that need no CPU target: the unit
# tests of the core, the runtime and the registry, and the lit tests (those that compile for the
# CPU say REQUIRES: cpu-target; cli/no-cpu-target.test checks that `kiln run --backend interp`
# works and that `--backend cpu` says why it cannot). The ONNX conformance and model tests run in
# the full build. KILN_NO_CPU_BUILD_DIR picks the build tree (default: build-nocpu).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_NO_CPU_BUILD_DIR:-build-nocpu}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON -DKILN_CPU=OFF
cmake --build "$BUILD_DIR" -j "${KILN_JOBS:-2}"
cd "$BUILD_DIR"
ctest --output-on-failure -j 2 -E "^(conformance|model)"
