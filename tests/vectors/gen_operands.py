"""Operand makers of the 0.2 case tables (variants, storage, backward, errors): each returns a
function (rng, p) -> flat list that draws the operand of problem p from rng."""

import attn_ref
from attn_ref import bshd_strides
from gen_common import NAN, NEG_INF, f32


def kv_lengths(lengths):
    """key_valid for sequences of the given lengths, padded at the end."""
    return lambda rng, p: [j < lengths[b] for b in range(p.batch) for j in range(p.seq_k)]


def kv_random(p_true):
    def make(rng, p):
        m = [rng.random() < p_true for _ in range(p.batch * p.seq_k)]
        for b in range(p.batch):
            m[b * p.seq_k] = True
        return m
    return make


def al_random(p_true, empty_rows=()):
    def make(rng, p):
        m = [rng.random() < p_true for _ in range(p.seq_q * p.seq_k)]
        for i in empty_rows:
            for j in range(p.seq_k):
                m[i * p.seq_k + j] = False
        return m
    return make


def qv_random(p_true, padded=()):
    """query_valid: random, plus the listed (b, i) forced to padding."""
    def make(rng, p):
        m = [rng.random() < p_true for _ in range(p.batch * p.seq_q)]
        for b, i in padded:
            m[b * p.seq_q + i] = False
        return m
    return make


def bias_random(lo=-2.0, hi=2.0, p_ninf=0.0, hidden_rows=()):
    """A bias buffer of p.bias_len() NaN whose addressed elements are uniform(lo, hi), -inf with
    probability p_ninf, and -inf over whole (b, h, i) rows listed in hidden_rows (when bias rows
    are broadcast these coincide with other rows: the last write wins, deterministically)."""
    def make(rng, p):
        buf = [NAN] * p.bias_len()
        for b in range(p.batch):
            for h in range(p.heads_q):
                for i in range(p.seq_q):
                    o = attn_ref.offset(p.bias_strides, b, h, i)
                    for j in range(p.seq_k):
                        x = f32(rng.uniform(lo, hi))
                        if p_ninf and rng.random() < p_ninf:
                            x = NEG_INF
                        buf[o + j] = x
        for b, h, i in hidden_rows:
            o = attn_ref.offset(p.bias_strides, b, h, i)
            for j in range(p.seq_k):
                buf[o + j] = NEG_INF
        return buf
    return make


def overflow_under_ninf_bias(rng, p, ops):
    """Every odd key gets a -inf bias and a K row whose score overflows float32 (q and k hold
    1e20 in their first element: the product, 1e40, is finite in float64 but +inf in float32);
    the other keys hold k[0] in [-1e-20, 1e-20] there (a score term in [-1, 1]). The -inf bias
    hides the odd keys whatever their score, as a mask does."""
    for b in range(p.batch):
        for h in range(p.heads_q):
            for i in range(p.seq_q):
                ops["q"][attn_ref.offset(p.q_strides, b, h, i)] = 1e20
                o = attn_ref.offset(p.bias_strides, b, h, i)
                for j in range(1, p.seq_k, 2):
                    ops["bias"][o + j] = NEG_INF
        for h in range(p.heads_kv):
            for j in range(p.seq_k):
                ops["k"][attn_ref.offset(p.k_strides, b, h, j)] = (
                    1e20 if j % 2 else f32(rng.uniform(-1.0, 1.0) * 1e-20))


def per_head(lo, hi):
    """[heads_q] float32 values uniform(lo, hi) (ALiBi slopes, sink logits)."""
    return lambda rng, p: [f32(rng.uniform(lo, hi)) for _ in range(p.heads_q)]


def slopes_per_batch(lo, hi):
    """ALiBi slopes [batch][heads_q] by the problem's slope strides, uniform(lo, hi) (NaN in
    the gaps between batch rows: never read)."""
    def make(rng, p):
        out = [NAN] * p.alibi_slopes_len()
        for b in range(p.batch):
            for h in range(p.heads_q):
                bs, hs = p.alibi_slopes_strides
                out[b * bs + h * hs] = f32(rng.uniform(lo, hi))
        return out
    return make


def fixed(values):
    return lambda rng, p: list(values)


def bshd(heads, seq, dim):
    return bshd_strides(heads, seq, dim)
