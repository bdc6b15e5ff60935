#!/usr/bin/env python3
"""libattn demo in Python: the same program as examples/c/demo.c, printing the same text.

1. The original 3-token example through the list API attention(Q, K, V, causal=True): Q all
   zero, so every visible key gets the same weight; causal, so query i sees keys 0..i.
   out[1][0] = (10 + 20) / 2 = 15.
2. A batch of three sequences of lengths 5, 3 and 4, padded to 5, through the descriptor API on
   numpy arrays: padding keys get weight 0 from every query, on top of the causal rule.

Run (from the repository root, after building the library into build/):
    python3 examples/python/demo.py
It uses $ATTN_LIBRARY if set, else build/libattn.so if present, else the system's libattn.
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import attn
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    if "ATTN_LIBRARY" not in os.environ and os.path.exists(os.path.join(ROOT, "build",
                                                                        "libattn.so")):
        os.environ["ATTN_LIBRARY"] = os.path.join(ROOT, "build", "libattn.so")
    import attn

import numpy as np


def value(b, i, d, salt):
    """Deterministic demo values in [-1, 1] (as float32, like the C demo)."""
    return np.float32((b * 131 + i * 17 + d * 7 + salt) % 23) / np.float32(11.0) - np.float32(1)


def print_weights(w, rows, cols, key_valid=None):
    """Weight table: rows = queries, columns = keys; "." marks a hidden key (weight exactly 0)."""
    print("        " + "".join("  key%d%s" % (j, "*" if key_valid is not None and
                                               not key_valid[j] else " ")
                               for j in range(cols)))
    for i in range(rows):
        cells = "".join("  %6s" % "." if w[i][j] == 0.0 else "  %6.4f" % w[i][j]
                        for j in range(cols))
        print("  q%-4d%s" % (i, cells))


def main():
    print("libattn %s  (kernel: %s, threads: %d)\n" % (attn.version(), attn.isa(),
                                                       attn.num_threads()))

    # ---- 1. The seed example: attention(Q, K, V, causal=True) ----
    Q, K, V = [[0.0], [0.0], [0.0]], [[1.0], [2.0], [3.0]], [[10.0], [20.0], [30.0]]
    out = attn.attention(Q, K, V, causal=True)
    with attn.Desc(1, 1, 1, 3, 3, 1, causal=attn.Causal.TOP_LEFT) as desc:
        # numpy arrays have exactly the descriptor's shape: (batch, heads, seq, head_dim)
        w = desc.weights(np.array(Q, np.float32).reshape(1, 1, 3, 1),
                         np.array(K, np.float32).reshape(1, 1, 3, 1))[0, 0]

    print("1. Three tokens, Q = 0, V = [10, 20, 30], causal")
    print("   weights (rows = queries, columns = keys, . = masked):")
    print_weights(w, 3, 3)
    print("   out = [%g, %g, %g]   (out[1][0] = %g: the mean of V[0] and V[1])\n"
          % (out[0][0], out[1][0], out[2][0], out[1][0]))
    if out[1][0] != 15.0:
        sys.exit("out[1][0] is %r, expected 15" % out[1][0])

    # ---- 2. A padded batch: lengths 5, 3, 4 padded to 5, causal ----
    B, S, D = 3, 5, 4
    lengths = [5, 3, 4]
    shape = (B, 1, S, D)  # [batch][heads][seq][head_dim]
    q = np.array([[[[value(b, i, d, 0) for d in range(D)] for i in range(S)]] for b in range(B)],
                 np.float32).reshape(shape)
    k = np.array([[[[value(b, i, d, 5) for d in range(D)] for i in range(S)]] for b in range(B)],
                 np.float32).reshape(shape)
    v = np.array([[[[value(b, i, d, 11) for d in range(D)] for i in range(S)]] for b in range(B)],
                 np.float32).reshape(shape)
    key_valid = np.array([[i < lengths[b] for i in range(S)] for b in range(B)], np.bool_)

    with attn.Desc(B, 1, 1, S, S, D, causal=attn.Causal.TOP_LEFT) as desc:
        out = desc.forward(q, k, v, key_valid=key_valid)
        w = desc.weights(q, k, key_valid=key_valid)

    print("2. Batch of 3 sequences (lengths 5, 3, 4) padded to 5, causal; * = padding key")
    for b in range(B):
        print("   sequence %d (length %d):" % (b, lengths[b]))
        print_weights(w[b, 0], S, S, key_valid[b])
        print("   out:")
        for i in range(S):
            print("  q%-4d%s" % (i, "".join("  %8.5f" % out[b, 0, i, d] for d in range(D))))

    print("\nkernel: %s, threads: %d" % (attn.isa(), attn.num_threads()))


if __name__ == "__main__":
    main()
