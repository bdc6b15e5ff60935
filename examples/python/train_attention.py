#!/usr/bin/env python3
"""Training an attention head with libattn's forward and backward (ATTN_OP_BACKWARD), in numpy.

The toy task: a "previous-token head". Each sequence is random token vectors x_0 .. x_{n-1}; the
target at position i is x_{i-1} (x_0 for i = 0). The model is one causal attention head over the
inputs [x_i, onehot(i)]:

    q = X Wq, k = X Wk, v = X Wv          (Wq, Wk: (d_in, head_dim), Wv: (d_in, d_tok))
    out = attention(q, k, v)              libattn forward, causal, head_dim_v = d_tok
    loss = mean over tokens of |out_i - target_i|^2

Plain SGD learns Wq / Wk so that query i attends to key i - 1 (through the positions) and Wv to
copy the token part. Each step: desc.forward(..., lse=True), then desc.backward(q, k, v, out,
lse, dout) gives dq, dk, dv, and the chain rule through the projections gives the weight
gradients (dW = X^T d·). The loss falls by an order of magnitude in a few dozen steps.

Run (from the repository root, after building the library into build/):
    python3 examples/python/train_attention.py [--steps 300] [--seed 0]
It uses $ATTN_LIBRARY if set, else build/libattn.so if present, else the system's libattn.
"""

import argparse
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

BATCH, SEQ, D_TOK, HEAD_DIM = 32, 8, 8, 16
D_IN = D_TOK + SEQ  # token features, then a one-hot position


def make_batch(rng):
    """(inputs (batch, seq, d_in), targets (batch, seq, d_tok)): the previous token."""
    tok = rng.standard_normal((BATCH, SEQ, D_TOK)).astype(np.float32)
    pos = np.broadcast_to(np.eye(SEQ, dtype=np.float32), (BATCH, SEQ, SEQ))
    x = np.concatenate([tok, pos], axis=-1)
    target = np.concatenate([tok[:, :1], tok[:, :-1]], axis=1)
    return x, target


def train(steps=300, seed=0, lr=0.75, log=print):
    """Runs `steps` SGD steps; returns the loss of each step (before its update)."""
    rng = np.random.default_rng(seed)
    init = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    wq, wk, wv = init(D_IN, HEAD_DIM), init(D_IN, HEAD_DIM), init(D_IN, D_TOK)
    losses = []
    # one sequence per batch entry, one head: q, k (batch, 1, seq, head_dim), v (.., d_tok)
    with attn.Desc(BATCH, 1, 1, SEQ, SEQ, HEAD_DIM, causal="top_left",
                   head_dim_v=D_TOK) as desc:
        for step in range(steps):
            x, target = make_batch(rng)
            q = (x @ wq)[:, None]                      # (batch, 1, seq, head_dim)
            k = (x @ wk)[:, None]
            v = (x @ wv)[:, None]                      # (batch, 1, seq, d_tok)
            out, lse = desc.forward(q, k, v, lse=True)
            err = out[:, 0] - target
            loss = float(np.sum(err ** 2)) / (BATCH * SEQ)
            losses.append(loss)
            if log is not None and (step % 25 == 0 or step == steps - 1):
                log("step %3d  loss %.5f" % (step, loss))
            dout = (2.0 / (BATCH * SEQ)) * err[:, None]  # d loss / d out, out's layout
            g = desc.backward(q, k, v, out, lse, dout.astype(np.float32))
            # chain rule through the projections: q = x wq  =>  d wq = sum_b x_b^T dq_b
            flat_x = x.reshape(-1, D_IN)
            wq -= lr * flat_x.T @ g.dq[:, 0].reshape(-1, HEAD_DIM)
            wk -= lr * flat_x.T @ g.dk[:, 0].reshape(-1, HEAD_DIM)
            wv -= lr * flat_x.T @ g.dv[:, 0].reshape(-1, D_TOK)
        if log is not None:  # where the queries look now: the weight on key i - 1
            w = desc.weights(q, k)[:, 0]               # (batch, seq, seq)
            prev = np.mean([w[:, i, i - 1] for i in range(1, SEQ)])
            log("mean attention weight on the previous token: %.3f" % prev)
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.75)
    args = ap.parse_args()
    print("libattn %s (%s): learning a previous-token attention head, %d steps of SGD"
          % (attn.version(), attn.isa(), args.steps))
    losses = train(args.steps, args.seed, args.lr)
    print("loss %.5f -> %.5f (%.1fx lower)" % (losses[0], losses[-1], losses[0] / losses[-1]))
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
