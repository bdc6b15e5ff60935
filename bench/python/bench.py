#!/usr/bin/env python3
"""Call-overhead and throughput benchmark of the Python binding (numpy arrays, zero copy).

Prints exactly two lines, like bench/c/call_bench.c:
    lang=python shape=tiny ns_per_call=<float>    (B=1, H=1, n=16,   d=64, non-causal forward)
    lang=python shape=large ns_per_call=<float>   (B=1, H=1, n=2048, d=64, non-causal forward)
Each is the best of several timed loops. Run with ATTN_LIBRARY pointing at the library:
    ATTN_LIBRARY=build/libattn.so python3 bench/python/bench.py
(bench/bindings.sh runs it next to the C bench and prints the ratios.)
"""

import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import attn
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import attn

import numpy as np


def bench(n, d, min_seconds, repeats):
    rng = np.random.default_rng(42)
    q, k, v = (rng.uniform(-1, 1, (1, 1, n, d)).astype(np.float32) for _ in range(3))
    out = np.zeros((1, 1, n, d), np.float32)
    with attn.Desc(1, 1, 1, n, n, d) as desc:
        forward = desc.forward
        forward(q, k, v, out=out)  # warm up (thread pool, caches)
        # calls per loop: enough for the loop to last about min_seconds
        calls = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(calls):
                forward(q, k, v, out=out)
            elapsed = time.perf_counter() - t0
            if elapsed >= min_seconds:
                break
            calls *= 2 if elapsed <= 0 else max(2, min(10, int(min_seconds / elapsed * 1.2)))
        best = elapsed / calls
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                forward(q, k, v, out=out)
            best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e9


def main():
    tiny = bench(16, 64, min_seconds=0.05, repeats=7)
    print("lang=python shape=tiny ns_per_call=%.1f" % tiny)
    large = bench(2048, 64, min_seconds=0.2, repeats=5)
    print("lang=python shape=large ns_per_call=%.1f" % large)


if __name__ == "__main__":
    main()
