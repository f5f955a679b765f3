#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++ file is not as clang-format writes it with the
# repository's .clang-format. Run by ctest (exit 77: skipped, without clang-format 14 or git).
set -euo pipefail
cd "$(dirname "$0")/.."
format=""
# The files are formatted with clang-format 14 (Debian 12's); other versions break lines a
# little differently, so they are not asked.
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" --version | grep -q 'version 14\.'; then
    format=$candidate
    break
  fi
done
if [ -z "$format" ]; then echo "check_format: clang-format 14 is not installed; skipped"; exit 77; fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_format: not a git checkout (the tracked files are unknown); skipped"
  exit 77
fi
mapfile -t files < <(git ls-files -- '*.cpp' '*.h')
# One run over every file (a process per file took 9 s of the suite); it names each file that
# differs in lines "FILE:LINE:COLUMN: error: code should be clang-formatted".
status=0
report=$("$format" --dry-run --Werror "${files[@]}" 2>&1) || status=$?
mapfile -t unformatted < <(printf '%s\n' "$report" |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ "$status" -ne 0 ] && [ ${#unformatted[@]} -eq 0 ]; then
  echo "check_format: $format failed:"
  printf '%s\n' "$report"
  exit 1
fi
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format: ${#unformatted[@]} of ${#files[@]} files differ from $format's output;" \
       "format them with: $format -i FILE"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
