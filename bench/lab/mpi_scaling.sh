#!/usr/bin/env bash
# Ring attention over MPI on one machine: the same causal sequence (--tokens total, default 4096,
# heads 8, head_dim 64) split over 1, 2, 3 and 4 ranks, one libattn thread per rank. Prints each
# rank count's slowest-rank ring time (best of --reps), the speedup over 1 rank and the bytes
# each rank sends per step. On a 2-core machine ranks 3 and 4 are oversubscribed.
#   bench/lab/mpi_scaling.sh [build-dir] [tokens] [reps]
set -euo pipefail
build=${1:-build}
tokens=${2:-4096}
reps=${3:-3}
exe=$build/examples/mpi/attn_mpi_ring
[ -x "$exe" ] || { echo "build $exe first (cmake --build $build)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ATTN_NUM_THREADS=1
printf '%-6s %-16s %-14s %-10s %s\n' ranks tokens/rank ring_ms speedup bytes/step/rank
base=""
for np in 1 2 3 4; do
  per=$(( tokens / np ))
  out=$(mpirun -np "$np" --oversubscribe "$exe" --tokens-per-rank "$per" --heads 8 --dim 64 \
        --reps "$reps")
  echo "$out" | grep -q '^OK$' || { echo "$out"; echo "ranks $np: FAILED"; exit 1; }
  ms=$(echo "$out" | sed -n 's/.*slowest rank \([0-9.]*\) ms.*/\1/p')
  bytes=$(echo "$out" | sed -n 's/.*steps, \([0-9]*\) bytes.*/\1/p')
  [ -z "$base" ] && base=$ms
  printf '%-6s %-16s %-14s %-10s %s\n' "$np" "$per" "$ms" \
    "$(awk -v a="$base" -v b="$ms" 'BEGIN{printf "%.2fx", a/b}')" "$bytes"
done
