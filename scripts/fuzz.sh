#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan; scalar kernels only) in build-fuzz and runs
# each for SECONDS (default 60) on its corpus in fuzz/corpus/<target>/, printing executions and
# time per target.
# New inputs that add coverage go to build-fuzz/corpus/<target>/ (not into the repository); a
# crash leaves its input in build-fuzz/crashes/ and makes the script fail: turn it into a
# regression test under tests/ and commit the input.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(gguf tokenizer jinja chat_template request_json safetensors); fi

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DREPRISE_FUZZ=ON -DREPRISE_BUILD_TESTS=OFF -DREPRISE_WERROR=OFF \
  -DREPRISE_SIMD_KERNELS=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p build-fuzz/crashes

# One target: its run, then a one-line summary in build-fuzz/<target>.summary, and
# build-fuzz/<target>.failed when it found a crash.
fuzz_one() {
  local target=$1 log="build-fuzz/$1.log" summary="build-fuzz/$1.summary" start=$SECONDS status=0
  rm -f "build-fuzz/$target.failed" "$summary"
  mkdir -p "build-fuzz/corpus/$target"
  # -rss_limit_mb and -malloc_limit_mb turn a runaway allocation into a finding; -timeout a hang.
  "build-fuzz/fuzz_$target" "build-fuzz/corpus/$target" "fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$target-" \
    >"$log" 2>&1 || status=$?
  # A fixture it reads is absent (fuzz_support.h's Fixture): skipped, as the tests skip.
  if [ "$status" -eq 5 ] && grep -q '^fixture .* not found$' "$log"; then
    printf '%-14s skipped: %s\n' "$target" "$(grep -m1 'fixture' "$log")" >"$summary"
    return 0
  fi
  local runs
  runs=$(grep -a -m1 -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" || echo "?")
  printf '%-14s %10s executions in %4d s\n' "$target" "$runs" $((SECONDS - start)) >"$summary"
  if [ "$status" -ne 0 ]; then
    {
      echo "fuzz_$target FOUND A CRASH (see $log and build-fuzz/crashes/):"
      grep -m 5 -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" || tail -20 "$log"
    } >>"$summary"
    touch "build-fuzz/$target.failed"
  fi
}

# The targets run side by side, one per core: each is single-threaded, so a 2-core machine fuzzes
# every target for SECONDS in half the wall time.
jobs_max=$(nproc)
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  cat "build-fuzz/$target.summary"
  if [ -e "build-fuzz/$target.failed" ]; then failed=1; fi
done
exit "$failed"
