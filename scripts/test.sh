#!/usr/bin/env bash
# Builds everything and runs every test in every language (C, C++, Java, C#, Go, Python) with
# ctest. The last lines are ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh all
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=ON \
  -DATTN_WITH_JAVA=ON -DATTN_WITH_CSHARP=ON -DATTN_WITH_GO=ON -DATTN_WITH_PYTHON=ON
cmake --build build
rm -rf build/xlang && mkdir -p build/xlang
ctest --test-dir build --output-on-failure -j2
