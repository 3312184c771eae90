#!/usr/bin/env bash
# Installs the CPU peer of the benchmark, onnxruntime-node 1.30.0, into bench/node_modules. The
# package carries its CPU binary (ONNXRUNTIME_NODE_INSTALL=skip skips the optional GPU download).
set -euo pipefail
cd "$(dirname "$0")"
if [[ -f node_modules/onnxruntime-node/package.json ]] &&
   grep -q '"version": "1.30.0"' node_modules/onnxruntime-node/package.json; then
  echo "bench/setup.sh: onnxruntime-node 1.30.0 is installed"
  exit 0
fi

ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund
