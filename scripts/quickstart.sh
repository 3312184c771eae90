#!/usr/bin/env bash
# From a fresh checkout to a running model: installs dependencies, builds the kiln tool, runs the
# example MLP (examples/mlp/mlp.kir) on random inputs, and prints what the compiler did, the
# outputs' statistics and the output arrays themselves. KILN_BUILD_DIR picks the build tree
# (default: build), KILN_JOBS the build's parallelism (default: 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
OUT_DIR=${KILN_QUICKSTART_OUT:-/tmp/kiln-quickstart}

bash scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "quickstart: building kiln in $BUILD_DIR/"
cmake --build "$BUILD_DIR" -j "${KILN_JOBS:-2}" --target kiln

echo
rm -f "$OUT_DIR"/*.npy
echo "\$ kiln run examples/mlp/mlp.kir --random-inputs --dim N=4 --output-dir $OUT_DIR"
"$BUILD_DIR/bin/kiln" run examples/mlp/mlp.kir --random-inputs --dim N=4 --output-dir "$OUT_DIR"

echo
for f in "$OUT_DIR"/*.npy; do
  echo "$f:"
  /usr/bin/python3 -c "import sys, numpy as np
np.set_printoptions(precision=4, suppress=True, linewidth=100)
print(np.load(sys.argv[1]))" "$f"
done
