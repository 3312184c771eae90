#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln needs to build, test and lint. Idempotent: when every
# package is already installed it only asks dpkg (a fraction of a second) and changes nothing;
# otherwise it runs `apt-get update` once and installs just the missing packages.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

# Every package the project needs, in one place.
PACKAGES=(
  # Build: compilers (g++ is the default; clang++-14 builds the sanitizer tree) and build tools.
  cmake ninja-build g++ clang-14
  # Compile cache, shared by the build trees of one checkout (CMake uses it when found).
  ccache
  # Sanitizer runtimes for clang++-14 (scripts/sanitize.sh).
  libclang-rt-14-dev
  # Format and lint (scripts/check-format.sh, scripts/tidy.sh call the -14 binaries by name).
  clang-format-14 clang-tidy-14
  # Tests: GoogleTest; LLVM lit and FileCheck (/usr/lib/llvm-19/build/utils/lit/lit.py and
  # /usr/lib/llvm-19/bin/FileCheck both come with llvm-19-tools); numpy for checks in lit tests.
  googletest libgtest-dev llvm-19-tools python3-numpy
  # ONNX frontend: protobuf, the ONNX protos and checker, the ONNX backend test data, and the
  # Python onnx package that writes test models.
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata python3-onnx
  # CPU backend (src/codegen/cpu): LLVM 19 headers, CMake config and the shared libLLVM-19 for
  # the ORC JIT (find_package(LLVM 19.1 CONFIG)).
  llvm-19-dev
  # Real-model tests (tests/models): tools/export_models.py exports architectures from torch and
  # torchvision with random weights.
  python3-torch python3-torchvision
  # CPU library kernels (src/codegen/cpu/onednn.cpp): oneDNN 2.6 for convolution and matmul.
  # Debian's oneDNN is built with its OpenCL GPU runtime, so its CMake config runs
  # find_package(OpenCL REQUIRED): the OpenCL headers and loader library (only recommended by
  # libdnnl-dev, so not installed by --no-install-recommends) are needed to configure.
  libdnnl-dev ocl-icd-opencl-dev
  # The Python module (python/, docs/python.md): pybind11 and the Python 3 headers to build it,
  # pytest to test it (tests/python).
  pybind11-dev python3-dev python3-pytest
)

# One dpkg-query for all packages; unknown packages print nothing and count as missing.
installed=" $(dpkg-query -W -f='${Package}:${db:Status-Status} ' "${PACKAGES[@]}" 2>/dev/null || true) "
missing=()
for pkg in "${PACKAGES[@]}"; do
  [[ "$installed" == *" $pkg:installed "* ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: error: these packages are missing and neither root nor sudo is available:" \
    "${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
