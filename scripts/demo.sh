#!/usr/bin/env bash
# Builds libattn and runs the C demo (the main job on built-in data). Configures the library and
# the demo only: every optional part is off, so only the demo packages are needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh demo
cmake -S . -B build-demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_EXAMPLES=ON \
  -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF -DATTN_BUILD_DOCS=OFF -DATTN_WITH_MPI=OFF \
  -DATTN_WITH_JAVA=OFF -DATTN_WITH_CSHARP=OFF -DATTN_WITH_GO=OFF -DATTN_WITH_PYTHON=OFF >/dev/null
cmake --build build-demo --target attn_demo >/dev/null
exec ./build-demo/attn_demo
