#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (docs/gpu.md): builds the core and the cuda target without
# LLVM (-DKILN_CPU=OFF), then runs the GPU unit tests, the Python range tests (where pybind11 is
# there), `kiln conformance --backend cuda` on the
# ONNX backend test folders against the lists the CPU backend passes
# (tests/conformance/expected-*.txt), and the real models of tools/export_models.py on
# `--backend cuda` against torch in f32, f16 and bf16. Exits non-zero when anything fails.
#   KILN_GPU_BUILD_DIR   the build tree (default build-gpu)
#   KILN_ONNX_TESTDATA   the folder with node/, simple/, pytorch-*/ (default Debian's)
#   KILN_GPU_MODELS      comma-separated models to export and check (default: all of
#                        tools/export_models.py, the benchmark's too)
#   KILN_GPU_LOG         where each step's output goes (default $BUILD_DIR/gpu-logs)
#   KILN_GPU_ZOO         also the models of bench/zoo.py: "all" or a comma-separated list
#   KILN_ENCODER_ONNX    tests/python/test_ranges_cuda.py's encoder exported by torch 1.13
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_GPU_BUILD_DIR:-build-gpu}
DATA=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
LOG=${KILN_GPU_LOG:-$BUILD_DIR/gpu-logs}
JOBS=${KILN_JOBS:-$(nproc)}
PYTHON=${KILN_PYTHON:-python3}
mkdir -p "$BUILD_DIR" "$LOG"
failed=()
step() {  # step NAME COMMAND...: runs it, logs it, records a failure (exit 77: a skip)
  local name=$1 rc=0
  shift
  echo "== $name"
  "$@" >"$LOG/$name.log" 2>&1 || rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then tail -n 3 "$LOG/$name.log"; else
    echo "FAILED: $name (log: $LOG/$name.log)"
    tail -n 20 "$LOG/$name.log"
    failed+=("$name")
  fi
}
# The Python module too where pybind11 is importable (its CMake files come with it).
PYBIND=$("$PYTHON" -m pybind11 --cmakedir 2>/dev/null || true)
python_module=(-DKILN_PYTHON=OFF)
[ -n "$PYBIND" ] && python_module=(-DKILN_PYTHON=ON "-Dpybind11_DIR=$PYBIND")
step configure cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CPU=OFF \
  -DKILN_CUDA=ON "${python_module[@]}"
step build cmake --build "$BUILD_DIR" -j "$JOBS"
KILN="$BUILD_DIR/bin/kiln"
step unit "$BUILD_DIR/bin/kiln_unit_tests" --gtest_filter='Cuda*:GpuSchedule*'
# Ranges of sizes from Python: the BERT-style encoder (KILN_ENCODER_ONNX: an export by a torch
# that keeps its sequence dim, tests/python/test_ranges_cuda.py) and ResNet-18
# (test_ranges_resnet.py; its cpu case skips in this build).
if [ -n "$PYBIND" ]; then
  step python-ranges env PYTHONPATH="$BUILD_DIR/python" "$PYTHON" -m pytest -q -p no:warnings \
    tests/python/test_ranges_cuda.py tests/python/test_ranges_resnet.py
fi
for folder in node simple pytorch-converted pytorch-operator; do
  [ -d "$DATA/$folder" ] || { echo "== conformance $folder: no $DATA/$folder, skipped"; continue; }
  step "conformance-$folder" "$KILN" conformance --backend cuda -O1 --jobs "$JOBS" \
    --expected "tests/conformance/expected-$folder.txt" \
    --report "$LOG/conformance-$folder.json" "$DATA/$folder"
done
MODELS_DIR="$BUILD_DIR/models"
all=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tools"); import export_models as m; print(",".join(m.MODELS))' 2>/dev/null)
step export "$PYTHON" tools/export_models.py "$MODELS_DIR" --models "${KILN_GPU_MODELS:-$all}"
# check_models DIR KIND: every model folder in DIR against torch, f32 at 1e-4, f16 and bf16 at
# docs/gpu.md's tolerances (for the zoo's models, at least 1.25 times torch's own error in that
# precision: check_model.py).
check_models() {
  local dir m p
  for dir in "$1"/*/; do
    [ -f "$dir/model.onnx" ] || continue
    m=$(basename "$dir")
    for p in f32:1e-4 f16:1e-2 bf16:5e-2; do
      step "$2-$m-${p%%:*}" "$PYTHON" tests/models/check_model.py --kiln "$KILN" \
        --backend cuda --precision "${p%%:*}" --tolerance "${p##*:}" --model-dir "$dir" \
        --work-dir "$BUILD_DIR/$2-out/$m-${p%%:*}"
    done
  done
}
check_models "$MODELS_DIR" model
# The zoo of bench/zoo.py (opt-in: KILN_GPU_ZOO=all or a comma-separated list), at the same
# tolerances: every output of each model against torch's.
if [ -n "${KILN_GPU_ZOO:-}" ]; then
  ZOO_DIR="$BUILD_DIR/zoo"
  zoo=${KILN_GPU_ZOO/#all/}
  step zoo-export "$PYTHON" bench/zoo.py "$ZOO_DIR" ${zoo:+--models "$zoo"}
  check_models "$ZOO_DIR" zoo
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-gpu: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "test-gpu: all passed"
