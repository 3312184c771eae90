#!/usr/bin/env bash
# Builds Kiln's libFuzzer targets with clang++-14 (AddressSanitizer + UndefinedBehaviorSanitizer)
# in build-fuzz/ and runs each for a given number of seconds. Not part of the default test path.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 60 seconds, every target)
#
# Targets: fuzz_kir_parse (the .kir parser and printer round trip), fuzz_onnx_import (the ONNX
# importer). Each run starts from the committed seed corpus (tests/fuzz/corpus/) and keeps what it
# learns in build-fuzz/corpus/TARGET; crash reproducers go to build-fuzz/artifacts/TARGET/.
# Exit status 1 when any target found a crash. docs/fuzzing.md has more.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(fuzz_kir_parse fuzz_onnx_import); fi
build="${KILN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${KILN_FUZZ_BUILD_JOBS:-2}"

command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 is needed (apt-get install clang-14)"; exit 1; }
cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
ninja -C "$build" -j "$jobs" "${targets[@]}"

found=0
for t in "${targets[@]}"; do
  case "$t" in
    fuzz_kir_parse) seeds="$root/tests/fuzz/corpus/kir"; extra=(-dict="$root/tests/fuzz/kir.dict") ;;
    fuzz_onnx_import) seeds="$root/tests/fuzz/corpus/onnx"; extra=() ;;
    *) echo "fuzz.sh: unknown target '$t'"; exit 2 ;;
  esac
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*  # report only what this run finds
  echo "== $t: $seconds s (corpus $corpus, reproducers in $artifacts)"
  # -rss_limit_mb: an input that makes Kiln allocate this much is a finding (it should refuse it).
  if ! "$build/bin/$t" "$corpus" "$seeds" "${extra[@]}" -max_total_time="$seconds" \
      -timeout=20 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" 2>&1 | tail -n 40; then
    found=1
  fi
  if compgen -G "$artifacts/*" >/dev/null; then
    echo "== $t: reproducers:"
    ls -la "$artifacts"
    found=1
  fi
done
exit $found
