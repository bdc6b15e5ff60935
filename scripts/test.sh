#!/usr/bin/env bash
# Builds everything and runs every test in every language (C, C++, Java, C#, Go, Python, MPI) with
# ctest. Every optional part is required (ON): a missing toolchain stops the configure, and a test
# that did not run (disabled or skipped) fails the script: nothing counts as passed unrun. The
# last lines are ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh all
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_EXAMPLES=ON \
  -DATTN_BUILD_TESTS=ON -DATTN_BUILD_BENCH=ON -DATTN_BUILD_DOCS=ON -DATTN_WITH_MPI=ON \
  -DATTN_WITH_JAVA=ON -DATTN_WITH_CSHARP=ON -DATTN_WITH_GO=ON -DATTN_WITH_PYTHON=ON
cmake --build build
rm -rf build/xlang && mkdir -p build/xlang
log=build/ctest-output.log
set +e
ctest --test-dir build --output-on-failure -j2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -eq 0 ] && grep -q "^The following tests did not run:" "$log"; then
  echo "test.sh: FAIL: the tests above did not run (every part is installed here: a test that"
  echo "does not run is a failure)"
  exit 1
fi
exit "$rc"
