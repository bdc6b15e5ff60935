#!/usr/bin/env bash
# Hardening suites, each from its CMake preset (CMakePresets.json):
#   asan   AddressSanitizer + UBSan + LeakSanitizer (gcc): build and run every C/C++ ctest
#   tsan   ThreadSanitizer (gcc): the threaded tests (hardening_load, _memory, _numerics, _threads, ...)
#   fuzz   libFuzzer + ASan + UBSan (clang): fuzz/fuzz_attn and fuzz/fuzz_run, each for
#          ATTN_FUZZ_SECONDS (default 60) on a copy of its corpus; prints executions and coverage;
#          any finding fails
#   leaks  valgrind memcheck: create/destroy/forward loops (hardening_memory) and the 8-thread
#          load test leak nothing and touch no uninitialised or unowned memory
# Usage: scripts/hardening.sh [asan] [tsan] [fuzz] [leaks]      (no argument: all four, in order)
# Exits nonzero if any suite fails; a summary with each suite's time comes last.
# Longer fuzzing: ATTN_FUZZ_SECONDS=3600 scripts/hardening.sh fuzz
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${ATTN_FUZZ_SECONDS:-60}
# A fixed seed keeps CI reproducible; ATTN_FUZZ_SEED=0 lets libFuzzer pick one (longer hunts).
FUZZ_SEED=${ATTN_FUZZ_SEED:-1}
JOBS=${ATTN_JOBS:-$(nproc)}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(asan tsan fuzz leaks)

need() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "hardening: '$tool' is missing (scripts/setup-deps.sh all installs it)" >&2
      return 1
    fi
  done
}

suite_asan() {
  need cmake ninja gcc g++ || return 1
  cmake --preset asan >/dev/null &&
    cmake --build --preset asan -j "$JOBS" &&
    ctest --preset asan
}

suite_tsan() {
  need cmake ninja gcc g++ || return 1
  cmake --preset tsan >/dev/null &&
    cmake --build --preset tsan -j "$JOBS" --target attn_load attn_memory attn_numerics \
      attn_guard_pages attn_guard_variants attn_guard_serving attn_oom attn_threads test_capi &&
    ctest --preset tsan
}

# One libFuzzer target for FUZZ_SECONDS on a work copy of its seed corpus.
fuzz_target() {
  local target=$1 corpus=$2
  local work=build-fuzz/$target-work art=build-fuzz/$target-artifacts log=build-fuzz/$target.log
  rm -rf "$art" && mkdir -p "$work" "$art"
  echo "fuzz: $target for ${FUZZ_SECONDS} s on $corpus ($(ls "$corpus" | wc -l) seeds)" \
       "+ $(ls "$work" | wc -l) units kept in $work"
  # New units go to the first directory (the work copy), never into the committed corpus.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-fuzz/fuzz/$target -seed="$FUZZ_SEED" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=3072 \
      -print_final_stats=1 -artifact_prefix="$art/" "$work" "$corpus" >"$log" 2>&1
  local rc=$?
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$log" | tail -2
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
    "$log"
  local done_line execs
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ] || [ -n "$(ls -A "$art")" ] || [ -z "$done_line" ]; then
    echo "fuzz: $target FINDING (exit $rc); the report:" >&2
    grep -E '==== |ERROR: |runtime error|SUMMARY|Test unit written|Base64' "$log" >&2
    echo "fuzz: full log $log, reproducer(s) in $art/: build-fuzz/fuzz/$target <file>" >&2
    return 1
  fi
  echo "fuzz: $target ${execs} executions, $(echo "$done_line" | grep -oE 'cov: [0-9]+ ft: [0-9]+')," \
       "no finding"
}

# fuzz_attn: the 0.1 calls; fuzz_run: attn_run with every parameter and operand, under injected
# thread-start and scratch-allocation failures (the fuzz preset builds with ATTN_FAULT_INJECTION).
suite_fuzz() {
  need cmake ninja clang clang++ || return 1
  cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j "$JOBS" || return 1
  fuzz_target fuzz_attn fuzz/corpus && fuzz_target fuzz_run fuzz/corpus_run
}

suite_leaks() {
  need cmake ninja valgrind || return 1
  cmake --preset valgrind >/dev/null && cmake --build --preset valgrind -j "$JOBS" || return 1
  # valgrind cannot run AVX-512 code and hides it from CPUID, so the library picks avx2 here.
  local vg=(valgrind --quiet --error-exitcode=99 --leak-check=full
            --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
            --track-origins=yes)
  echo "leaks: valgrind attn_memory 60 (create/configure/forward/weights/simple/destroy loops)"
  "${vg[@]}" build-valgrind/tests/hardening/attn_memory 60 || return 1
  echo "leaks: valgrind attn_load 4 60 (shared descriptors, changing thread counts)"
  "${vg[@]}" build-valgrind/tests/hardening/attn_load 4 60 || return 1
  echo "leaks: valgrind clean (no definite/indirect leak, no memcheck error)"
}

declare -a results=()
failed=0
for s in "${suites[@]}"; do
  case "$s" in asan | tsan | fuzz | leaks) ;; *)
    echo "hardening: unknown suite '$s' (asan, tsan, fuzz, leaks)" >&2
    exit 2
    ;;
  esac
  echo "==================== hardening: $s ===================="
  start=$(date +%s)
  if "suite_$s"; then status=ok; else status=FAILED; failed=1; fi
  results+=("$(printf '%-6s %-7s %4d s' "$s" "$status" $(($(date +%s) - start)))")
done
echo "==================== hardening summary ===================="
printf '%s\n' "${results[@]}"
if [ $failed -ne 0 ]; then
  echo "hardening: FAILED"
  exit 1
fi
echo "hardening: all suites passed"
