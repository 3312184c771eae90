#!/usr/bin/env bash
# Runs clang-tidy-14 (checks in .clang-tidy) over the sources under src/ and tools/, using the
# compile_commands.json of a build tree. Not part of scripts/test.sh: it takes minutes on two
# cores. Usage: bash scripts/tidy.sh [FILE...]   (default: every .cpp under src/ and tools/)
# KILN_BUILD_DIR picks the build tree (default: build); it is configured when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}

if [[ ! -f "$BUILD_DIR/compile_commands.json" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(find src tools -type f -name '*.cpp' | sort)
fi
# Only the project's own headers are checked (not gtest's or the standard library's).
# -Wno-unknown-warning-option: the build's g++ flags (-Wno-restrict) are unknown to clang.
run-clang-tidy-14 -quiet -p "$BUILD_DIR" -j "$(nproc)" -header-filter="$PWD/(src|tools)/" \
  -extra-arg=-Wno-unknown-warning-option "${files[@]}"
