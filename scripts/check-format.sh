#!/usr/bin/env bash
# Checks that every C++ file under src/, tools/, tests/ and python/ is formatted as .clang-format says.
# Exits 1 and names the files that drift. `scripts/check-format.sh --fix` reformats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
fix=0
if [[ "${1:-}" == "--fix" ]]; then fix=1; fi

mapfile -t files < <(find src tools tests python -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
if [[ $fix -eq 1 ]]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi

drift=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1 || drift+=("$f")
done
if [[ ${#drift[@]} -gt 0 ]]; then
  echo "check-format: ${#drift[@]} of ${#files[@]} files are not formatted:" >&2
  printf '  %s\n' "${drift[@]}" >&2
  echo "check-format: see the changes with '$CLANG_FORMAT <file> | diff <file> -'," \
    "apply them with 'bash scripts/check-format.sh --fix'" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
