#!/usr/bin/env bash
# Builds Kiln and runs every test: installs dependencies, configures (Release, warnings are
# errors), builds, checks formatting, builds and tests the build without the CPU target
# (scripts/test-no-cpu.sh), then runs CTest (unit tests and lit tests). The last lines printed are
# CTest's summary. KILN_BUILD_DIR picks the build tree (default: build), KILN_JOBS
# the build's parallelism (default: 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}

bash scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON
cmake --build "$BUILD_DIR" -j "${KILN_JOBS:-2}"
bash scripts/check-format.sh
bash scripts/test-no-cpu.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j 2
