#!/usr/bin/env bash
# Builds the unit tests with ThreadSanitizer (clang++-14, -DKILN_SANITIZE_THREAD=ON) in
# build-tsan/ and runs the tests that use threads: the thread pool and compiled kernels run from
# several threads (CpuCodegen), one Executable run from two threads at once and the
# inverted-residual kernel's rows split over two threads (CpuBackend), the C
# API from two threads (CApi) and oneDNN kernels from two threads (OneDnn). Any race report fails
# the run. Generated code (linked by Kiln) and the prebuilt libraries (libLLVM, oneDNN, libgomp) are not
# instrumented: TSan sees Kiln's own code (runtime, pool, API) and its synchronisation.
# KILN_TSAN_BUILD_DIR picks the build tree, KILN_JOBS the parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_TSAN_BUILD_DIR:-build-tsan}
bash scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE_THREAD=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
cmake --build "$BUILD_DIR" -j "${KILN_JOBS:-2}" --target kiln_unit_tests
# OpenMP's own threads synchronise in uninstrumented libgomp; passive waiting keeps them quiet.
export OMP_WAIT_POLICY=passive
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
"$BUILD_DIR/bin/kiln_unit_tests" \
  --gtest_filter='ThreadPool*:CpuCodegen*Thread*:CpuCodegen*Parallel*:CpuBackend.OneExecutableRunsOnTwoThreadsAtOnce:CpuBackend.InvertedResidualBlocks:CApi.*:OneDnn*Thread*:Artifact.MappedArtifactsAreUsedInPlace:Artifact.HeldConstantsAreFreedWhileCallsArePrepared:Artifact.CompileCache*' \
  --gtest_repeat=5
