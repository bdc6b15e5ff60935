#!/usr/bin/env python3
"""Generate the shared test vectors (tests/vectors/) from the float64 reference.

    python3 tests/vectors/gen_vectors.py            # (re)write index.txt and the binary files
    python3 tests/vectors/gen_vectors.py --check    # regenerate in memory, compare byte for byte

Every language's tests read these files (format: index.txt's header). Inputs are drawn from
random.Random(seed) per case and rounded to float32 before the reference sees them, so the
expected values are the float64 answer to exactly the float32 inputs the libraries get; the
expected outputs are then rounded to float32. Output is deterministic byte for byte.

Input elements the strides do not address, and the K/V rows of padding keys (key_valid false),
hold NaN: they must never be read, so every expected value is still finite (or -inf for the
lse of a row with no visible key).
"""

import math
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import attn_ref  # noqa: E402
from attn_ref import (CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT,  # noqa: E402
                      Problem, bhsd_strides, bshd_strides)

NAN = float("nan")


def f32(x):
    """Round a Python float to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def pack_f32(values):
    return struct.pack("<%df" % len(values), *values)


def pack_u8(values):
    return bytes(1 if x else 0 for x in values)


# ---------------------------------------------------------------------------------------------
# Cases. Each: name, seed, sizes, optional causal/scale/strides, and how to build the masks:
#   key_valid: None or a function (rng, batch, seq_k) -> list of bools (flat [batch][seq_k])
#   allowed:   None or a function (rng, seq_q, seq_k) -> list of bools (flat [seq_q][seq_k])
#   lo/hi:     input value range (default -1..1)
# ---------------------------------------------------------------------------------------------

def lengths_mask(lengths, seq_k):
    """key_valid for sequences of the given lengths, padded at the end."""
    return lambda rng, batch, sk: [j < lengths[b] for b in range(batch) for j in range(sk)]


def random_allowed(p_true):
    return lambda rng, sq, sk: [rng.random() < p_true for _ in range(sq * sk)]


def allowed_with_empty_rows(empty_rows, p_true=0.7):
    def make(rng, sq, sk):
        m = [rng.random() < p_true for _ in range(sq * sk)]
        for i in empty_rows:
            for j in range(sk):
                m[i * sk + j] = False
        return m
    return make


def random_key_valid(p_true, force_first=True):
    def make(rng, batch, sk):
        m = [rng.random() < p_true for _ in range(batch * sk)]
        if force_first:
            for b in range(batch):
                m[b * sk] = True
        return m
    return make


CASES = [
    dict(name="no_mask", seed=1, B=2, HQ=2, HKV=2, SQ=5, SK=7, D=8),
    dict(name="causal_tl_square", seed=2, B=1, HQ=2, HKV=2, SQ=6, SK=6, D=8,
         causal=CAUSAL_TOP_LEFT),
    dict(name="causal_tl_sq_lt_sk", seed=3, B=1, HQ=2, HKV=2, SQ=4, SK=9, D=8,
         causal=CAUSAL_TOP_LEFT),
    dict(name="causal_tl_sq_gt_sk", seed=4, B=1, HQ=2, HKV=2, SQ=9, SK=4, D=8,
         causal=CAUSAL_TOP_LEFT),
    dict(name="causal_br_sq_lt_sk", seed=5, B=2, HQ=1, HKV=1, SQ=4, SK=9, D=8,
         causal=CAUSAL_BOTTOM_RIGHT),
    # seq_q > seq_k bottom-right: queries i < seq_q - seq_k see no key (output 0, lse -inf).
    dict(name="causal_br_sq_gt_sk", seed=6, B=1, HQ=2, HKV=2, SQ=9, SK=4, D=8,
         causal=CAUSAL_BOTTOM_RIGHT),
    dict(name="decode_br_seq_q1", seed=7, B=2, HQ=4, HKV=2, SQ=1, SK=17, D=16,
         causal=CAUSAL_BOTTOM_RIGHT),
    # Padding: NaN in the padded K and V rows.
    dict(name="key_padding", seed=8, B=3, HQ=2, HKV=2, SQ=6, SK=6, D=8,
         key_valid=lengths_mask([6, 3, 4], 6)),
    dict(name="key_padding_random", seed=9, B=2, HQ=1, HKV=1, SQ=5, SK=11, D=5,
         key_valid=random_key_valid(0.6)),
    dict(name="allowed_mask", seed=10, B=2, HQ=2, HKV=2, SQ=7, SK=8, D=8,
         allowed=random_allowed(0.6)),
    dict(name="combined_all", seed=11, B=3, HQ=6, HKV=2, SQ=6, SK=10, D=12,
         causal=CAUSAL_BOTTOM_RIGHT, key_valid=random_key_valid(0.7),
         allowed=random_allowed(0.75)),
    dict(name="combined_tl", seed=12, B=2, HQ=2, HKV=1, SQ=7, SK=7, D=8,
         causal=CAUSAL_TOP_LEFT, key_valid=lengths_mask([5, 7], 7),
         allowed=random_allowed(0.8)),
    dict(name="fully_masked_row", seed=13, B=2, HQ=2, HKV=2, SQ=5, SK=6, D=8,
         allowed=allowed_with_empty_rows([0, 3])),
    dict(name="fully_masked_batch", seed=14, B=3, HQ=2, HKV=2, SQ=4, SK=5, D=8,
         key_valid=lengths_mask([5, 0, 2], 5)),
    dict(name="gqa_6q_2kv", seed=15, B=2, HQ=6, HKV=2, SQ=5, SK=7, D=16,
         causal=CAUSAL_TOP_LEFT),
    dict(name="mqa_4q_1kv", seed=16, B=2, HQ=4, HKV=1, SQ=5, SK=6, D=8),
    dict(name="bshd_strides", seed=17, B=2, HQ=4, HKV=2, SQ=5, SK=7, D=8,
         causal=CAUSAL_BOTTOM_RIGHT,
         q=bshd_strides(4, 5, 8), k=bshd_strides(2, 7, 8), v=bshd_strides(2, 7, 8),
         out=bshd_strides(4, 5, 8)),
    # OUT rows with gaps: elements between rows stay 0 in the expected file.
    dict(name="out_strided_gaps", seed=18, B=2, HQ=2, HKV=2, SQ=4, SK=5, D=7,
         out=(2 * 4 * 10 + 6, 4 * 10 + 1, 10)),
    # Inputs with gaps (filled with NaN: never read) and broadcast K/V over the batch (stride 0).
    dict(name="inputs_strided_gaps", seed=19, B=2, HQ=2, HKV=1, SQ=3, SK=5, D=6,
         q=(2 * 3 * 11 + 4, 3 * 11 + 2, 11), k=(0, 5 * 9, 9), v=(0, 5 * 8 + 3, 8)),
    dict(name="custom_scale", seed=20, B=1, HQ=2, HKV=2, SQ=5, SK=5, D=8, scale=0.375),
    dict(name="scale_zero", seed=21, B=1, HQ=1, HKV=1, SQ=4, SK=6, D=4, scale=0.0,
         causal=CAUSAL_TOP_LEFT),
    dict(name="seq1", seed=22, B=2, HQ=2, HKV=2, SQ=1, SK=1, D=4, causal=CAUSAL_TOP_LEFT),
    dict(name="head_dim_1", seed=23, B=2, HQ=2, HKV=1, SQ=6, SK=6, D=1, causal=CAUSAL_TOP_LEFT),
    dict(name="head_dim_3", seed=24, B=1, HQ=2, HKV=2, SQ=7, SK=5, D=3),
    dict(name="head_dim_17", seed=25, B=1, HQ=2, HKV=2, SQ=9, SK=9, D=17,
         causal=CAUSAL_TOP_LEFT, key_valid=lengths_mask([7], 9)),
    dict(name="head_dim_33", seed=26, B=1, HQ=3, HKV=1, SQ=8, SK=12, D=33,
         causal=CAUSAL_BOTTOM_RIGHT),
    dict(name="head_dim_64_seq40", seed=27, B=1, HQ=2, HKV=2, SQ=40, SK=40, D=64,
         causal=CAUSAL_TOP_LEFT),
    dict(name="head_dim_128_seq40", seed=28, B=1, HQ=2, HKV=1, SQ=37, SK=43, D=128,
         key_valid=lengths_mask([39], 43)),
    # Scores up to about +-50: the softmax must subtract the row maximum.
    dict(name="large_logits", seed=29, B=1, HQ=2, HKV=2, SQ=6, SK=9, D=16, scale=16.0,
         causal=CAUSAL_BOTTOM_RIGHT),
]


def fmt_strides(s, default):
    return "default" if s is None or tuple(s) == tuple(default) else "%d,%d,%d" % tuple(s)


def fmt_scale(scale):
    if scale is None:
        return "default"
    assert f32(scale) == scale, "scales must be exact float32 values"
    return repr(float(scale))


def fill_strided(rng, n, batch, heads, seq, D, strides, lo, hi):
    """A buffer of n NaN with every addressed element drawn from rng (float32 values)."""
    buf = [NAN] * n
    for b in range(batch):
        for h in range(heads):
            for s in range(seq):
                o = attn_ref.offset(strides, b, h, s)
                for d in range(D):
                    buf[o + d] = f32(rng.uniform(lo, hi))
    return buf


def build_case(c):
    """Returns (index line, {part: bytes}) for one case."""
    B, HQ, HKV, SQ, SK, D = c["B"], c["HQ"], c["HKV"], c["SQ"], c["SK"], c["D"]
    causal = c.get("causal", CAUSAL_NONE)
    scale = c.get("scale")
    p = Problem(B, HQ, HKV, SQ, SK, D, causal, scale,
                c.get("q"), c.get("k"), c.get("v"), c.get("out"))
    rng = random.Random(c["seed"])
    lo, hi = c.get("lo", -1.0), c.get("hi", 1.0)

    q = fill_strided(rng, p.q_len(), B, HQ, SQ, D, p.q_strides, lo, hi)
    k = fill_strided(rng, p.k_len(), B, HKV, SK, D, p.k_strides, lo, hi)
    v = fill_strided(rng, p.v_len(), B, HKV, SK, D, p.v_strides, lo, hi)

    key_valid = c["key_valid"](rng, B, SK) if c.get("key_valid") else None
    allowed = c["allowed"](rng, SQ, SK) if c.get("allowed") else None

    if key_valid is not None:
        # Padding keys are never read: poison their K and V rows (all KV heads).
        assert p.k_strides[0] != 0 and p.v_strides[0] != 0, "padding with broadcast K/V"
        for b in range(B):
            for j in range(SK):
                if not key_valid[b * SK + j]:
                    for h in range(HKV):
                        ko = attn_ref.offset(p.k_strides, b, h, j)
                        vo = attn_ref.offset(p.v_strides, b, h, j)
                        for d in range(D):
                            k[ko + d] = NAN
                            v[vo + d] = NAN

    out, lse, weights = attn_ref.attention(p, q, k, v, key_valid, allowed)
    out = [f32(x) for x in out]
    lse = [f32(x) for x in lse]
    weights = [f32(x) for x in weights]
    assert all(math.isfinite(x) for x in out + weights), c["name"]
    assert all(math.isfinite(x) or x == -math.inf for x in lse), c["name"]

    parts = {
        "q.f32": pack_f32(q),
        "k.f32": pack_f32(k),
        "v.f32": pack_f32(v),
        "out.f32": pack_f32(out),
        "lse.f32": pack_f32(lse),
        "weights.f32": pack_f32(weights),
    }
    if key_valid is not None:
        parts["key_valid.u8"] = pack_u8(key_valid)
    if allowed is not None:
        parts["allowed.u8"] = pack_u8(allowed)

    line = ("name=%s batch=%d heads_q=%d heads_kv=%d seq_q=%d seq_k=%d head_dim=%d causal=%d "
            "scale=%s q_strides=%s k_strides=%s v_strides=%s out_strides=%s "
            "key_valid=%d allowed=%d") % (
        c["name"], B, HQ, HKV, SQ, SK, D, causal, fmt_scale(scale),
        fmt_strides(c.get("q"), bhsd_strides(HQ, SQ, D)),
        fmt_strides(c.get("k"), bhsd_strides(HKV, SK, D)),
        fmt_strides(c.get("v"), bhsd_strides(HKV, SK, D)),
        fmt_strides(c.get("out"), bhsd_strides(HQ, SQ, D)),
        key_valid is not None, allowed is not None)
    return line, parts


INDEX_HEADER = """\
# libattn shared test vectors, generated by tests/vectors/gen_vectors.py from the float64
# reference tests/reference/attn_ref.py. Do not edit: regenerate (and --check) instead.
# One case per line: name batch heads_q heads_kv seq_q seq_k head_dim causal (0 none,
# 1 top-left, 2 bottom-right) scale (float or default = 1/sqrt(head_dim)) q/k/v/out_strides
# (batch,head,row element strides or default = contiguous BHSD) key_valid allowed (0/1: file
# present). Files <name>.<part>, little-endian: q.f32 k.f32 v.f32 (attn_desc_required_len floats;
# unaddressed elements and padded K/V rows are NaN and must never be read), key_valid.u8
# ([batch][seq_k]), allowed.u8 ([seq_q][seq_k]), expected out.f32 (required_len(OUT) floats,
# unaddressed elements 0), lse.f32 ([batch][heads_q][seq_q], -inf for a row with no visible key),
# weights.f32 ([batch][heads_q][seq_q][seq_k], hidden keys exactly 0).
"""


# ---------------------------------------------------------------------------------------------
# The 0.2 variants (variants.txt, format in VARIANTS.md): attn_args / attn_run with every
# parameter and operand. Each case: name, seed, sizes, and optionally
#   params:  causal window_left window_right softcap alibi softmax_plus_one head_dim_v
#            bias_first scale diagonal alibi_form (written to the line exactly when given, even
#            at the default)
#   strides: q k v out bias alibi_slopes (None/absent = default)
#   operand makers, each a function (rng, p) -> flat list, drawn in the order of VARIANT_INPUTS:
#            key_valid allowed bias alibi_slopes sinks query_valid seq_lens_k
#   mass:    1 = key_mass is bound as a forward output
# ---------------------------------------------------------------------------------------------

VARIANT_PARAMS = ["causal", "window_left", "window_right", "softcap", "alibi",
                  "softmax_plus_one", "head_dim_v", "bias_first", "scale", "varlen", "diagonal",
                  "alibi_form"]
FLOAT_PARAMS = ("softcap", "scale")
VARIANT_STRIDES = ["q", "k", "v", "out", "bias", "alibi_slopes"]
VARIANT_INPUTS = ["q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes", "sinks",
                  "query_valid", "seq_lens_k", "cu_seqlens_q", "cu_seqlens_k", "new_k", "new_v"]
INPUT_TYPE = {"q": "f32", "k": "f32", "v": "f32", "bias": "f32", "alibi_slopes": "f32",
              "sinks": "f32", "key_valid": "u8", "allowed": "u8", "query_valid": "u8",
              "seq_lens_k": "i32", "cu_seqlens_q": "i32", "cu_seqlens_k": "i32",
              "new_k": "f32", "new_v": "f32"}
NEG_INF = -math.inf


def pack_i32(values):
    return struct.pack("<%di" % len(values), *values)


def fmt_float(x):
    """Shortest decimal of a value that is exact both as float32 and as double."""
    x = float(x)
    assert f32(x) == x and math.isfinite(x), x
    s = repr(x)
    assert float(s) == x
    return s


# Operand makers.

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


VARIANTS = [
    # --- sliding window ---------------------------------------------------------------------
    dict(name="win_sym", seed=101, B=1, HQ=2, HKV=2, SQ=12, SK=12, D=8,
         window_left=3, window_right=2),
    dict(name="win_diag_only", seed=102, B=1, HQ=1, HKV=1, SQ=7, SK=9, D=8,
         window_left=0, window_right=0),
    dict(name="win_left_causal_tl", seed=103, B=2, HQ=2, HKV=1, SQ=20, SK=20, D=8,
         causal=CAUSAL_TOP_LEFT, window_left=4, window_right=-1),
    dict(name="win_causal_br_sq_lt_sk", seed=104, B=1, HQ=2, HKV=2, SQ=6, SK=15, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=4, window_right=1),
    # Bottom-right with seq_q > seq_k: the first rows see no key.
    dict(name="win_causal_br_sq_gt_sk", seed=105, B=1, HQ=2, HKV=2, SQ=10, SK=6, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=2),
    dict(name="win_right_only", seed=106, B=1, HQ=2, HKV=2, SQ=8, SK=8, D=4,
         window_right=1),
    # 70 keys: more than one key tile; the window crosses the tile boundary.
    dict(name="win_tl_seq70", seed=107, B=1, HQ=2, HKV=1, SQ=70, SK=70, D=16,
         causal=CAUSAL_TOP_LEFT, window_left=20),
    # --- softcap and bias -------------------------------------------------------------------
    dict(name="softcap_only", seed=111, B=1, HQ=2, HKV=2, SQ=6, SK=9, D=16, scale=2.0,
         softcap=5.0),
    dict(name="softcap_bias_after", seed=112, B=2, HQ=2, HKV=1, SQ=5, SK=7, D=8, scale=1.5,
         softcap=2.5, bias_first=0, bias=bias_random(-3.0, 3.0)),
    dict(name="softcap_bias_first", seed=113, B=2, HQ=2, HKV=1, SQ=5, SK=7, D=8, scale=1.5,
         softcap=2.5, bias_first=1, bias=bias_random(-3.0, 3.0)),
    dict(name="bias_full", seed=114, B=2, HQ=3, HKV=1, SQ=5, SK=7, D=8,
         bias=bias_random()),
    # [1][1][seq_q][seq_k] broadcast over batch and heads.
    dict(name="bias_bcast_bh", seed=115, B=2, HQ=4, HKV=2, SQ=4, SK=6, D=8,
         bias_s=(0, 0, 6), bias=bias_random(), causal=CAUSAL_TOP_LEFT),
    # [batch][heads][1][seq_k] broadcast over queries, with a row gap (NaN, never read).
    dict(name="bias_bcast_rows", seed=116, B=2, HQ=2, HKV=2, SQ=5, SK=6, D=8,
         bias_s=(2 * 9, 9, 0), bias=bias_random(-1.0, 1.0)),
    # -inf entries hide keys; row (b=1, h=0, i=2) is hidden entirely (out 0, lse -inf).
    dict(name="bias_ninf", seed=117, B=2, HQ=2, HKV=2, SQ=5, SK=8, D=8,
         bias_s=(2 * 5 * 11, 5 * 11, 11),
         bias=bias_random(-2.0, 2.0, p_ninf=0.3, hidden_rows=[(1, 0, 2)])),
    # -inf bias over keys whose float32 score overflows to +inf: they stay hidden.
    dict(name="bias_ninf_overflow", seed=118, B=1, HQ=2, HKV=1, SQ=3, SK=6, D=4,
         bias=bias_random(-1.0, 1.0), patch=overflow_under_ninf_bias),
    dict(name="bias_ninf_overflow_capped", seed=119, B=1, HQ=1, HKV=1, SQ=2, SK=5, D=1,
         softcap=2.0, bias_first=1, bias=bias_random(-1.0, 1.0), patch=overflow_under_ninf_bias),
    # --- ALiBi ------------------------------------------------------------------------------
    dict(name="alibi_operand_tl", seed=121, B=2, HQ=3, HKV=3, SQ=6, SK=6, D=8,
         causal=CAUSAL_TOP_LEFT, alibi=1, alibi_slopes=per_head(0.05, 1.0)),
    dict(name="alibi_standard_6h_br", seed=122, B=1, HQ=6, HKV=2, SQ=5, SK=9, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, alibi=2),
    # Power-of-two heads, no causal rule: keys right of the diagonal get a positive term.
    dict(name="alibi_standard_8h_none", seed=123, B=1, HQ=8, HKV=4, SQ=4, SK=7, D=8, alibi=2),
    dict(name="alibi_standard_5h_br_lens", seed=124, B=3, HQ=5, HKV=1, SQ=3, SK=10, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, alibi=2, seq_lens_k=fixed([10, 4, 7])),
    # --- sinks and "+1" softmax -------------------------------------------------------------
    dict(name="sinks_masked_row", seed=131, B=2, HQ=4, HKV=2, SQ=5, SK=6, D=8,
         sinks=per_head(-1.0, 2.0), allowed=al_random(0.7, empty_rows=[1, 4])),
    dict(name="sinks_causal_br", seed=132, B=1, HQ=2, HKV=1, SQ=7, SK=5, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, sinks=per_head(-0.5, 1.5)),
    dict(name="plus_one_tl", seed=133, B=2, HQ=2, HKV=2, SQ=6, SK=6, D=8,
         causal=CAUSAL_TOP_LEFT, softmax_plus_one=1),
    # Batch entry 1 has no valid key: its rows are 0 / -inf despite the "+1".
    dict(name="plus_one_padded_batch", seed=134, B=3, HQ=2, HKV=2, SQ=4, SK=5, D=8,
         softmax_plus_one=1, key_valid=kv_lengths([5, 0, 2])),
    # --- query padding ----------------------------------------------------------------------
    dict(name="qpad_causal_tl_allowed", seed=141, B=2, HQ=2, HKV=1, SQ=8, SK=8, D=8,
         causal=CAUSAL_TOP_LEFT, allowed=al_random(0.8),
         query_valid=qv_random(0.7, padded=[(0, 0), (1, 7)])),
    dict(name="qpad_causal_br_mass", seed=142, B=2, HQ=4, HKV=2, SQ=6, SK=10, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, query_valid=qv_random(0.8, padded=[(1, 5)]), mass=1),
    # --- per-batch key lengths --------------------------------------------------------------
    dict(name="seqlens_none", seed=151, B=4, HQ=2, HKV=2, SQ=4, SK=9, D=8,
         seq_lens_k=fixed([5, 0, 9, 3])),
    dict(name="seqlens_br_decode", seed=152, B=4, HQ=4, HKV=2, SQ=1, SK=30, D=16,
         causal=CAUSAL_BOTTOM_RIGHT, seq_lens_k=fixed([17, 1, 0, 30])),
    dict(name="seqlens_br_prefill", seed=153, B=3, HQ=2, HKV=1, SQ=6, SK=12, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, seq_lens_k=fixed([12, 7, 3]),
         key_valid=kv_random(0.8)),
    # --- head_dim_v -------------------------------------------------------------------------
    dict(name="hdv_24_16", seed=161, B=2, HQ=2, HKV=1, SQ=6, SK=8, D=24, head_dim_v=16,
         causal=CAUSAL_TOP_LEFT),
    dict(name="hdv_8_20_bshd", seed=162, B=2, HQ=4, HKV=2, SQ=5, SK=7, D=8, head_dim_v=20,
         q_s=bshd(4, 5, 8), k_s=bshd(2, 7, 8), v_s=bshd(2, 7, 20), out_s=bshd(4, 5, 20)),
    # --- GQA, strides, padding, key mass ----------------------------------------------------
    dict(name="gqa_window_sinks", seed=171, B=2, HQ=6, HKV=2, SQ=9, SK=11, D=16,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=3, sinks=per_head(-1.0, 1.0)),
    # Gaps in Q and OUT rows (NaN / untouched 0), K/V broadcast over the batch.
    dict(name="strided_gaps_softcap", seed=172, B=2, HQ=2, HKV=1, SQ=4, SK=6, D=6,
         softcap=3.0, scale=1.25,
         q_s=(2 * 4 * 9 + 3, 4 * 9 + 1, 9), k_s=(0, 6 * 8, 8), v_s=(0, 6 * 7 + 2, 7),
         out_s=(2 * 4 * 8 + 5, 4 * 8, 8)),
    dict(name="kvpad_nan_bias_alibi", seed=173, B=3, HQ=2, HKV=2, SQ=5, SK=9, D=8,
         key_valid=kv_random(0.6), bias=bias_random(-1.0, 1.0), alibi=1,
         alibi_slopes=per_head(0.1, 0.6)),
    dict(name="mass_plain", seed=174, B=2, HQ=2, HKV=2, SQ=7, SK=5, D=8, mass=1),
    dict(name="mass_causal_kvpad", seed=175, B=2, HQ=4, HKV=1, SQ=6, SK=70, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, key_valid=kv_random(0.7), window_left=40, mass=1),
    # --- everything at once -----------------------------------------------------------------
    dict(name="all_combined", seed=181, B=3, HQ=6, HKV=2, SQ=9, SK=13, D=12, head_dim_v=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=5, window_right=1, softcap=4.0, bias_first=0,
         scale=0.375, alibi=1, alibi_slopes=per_head(0.05, 0.5), sinks=per_head(-1.0, 1.0),
         key_valid=kv_random(0.8), allowed=al_random(0.85),
         bias_s=(0, 9 * 13, 13), bias=bias_random(-1.0, 1.0, p_ninf=0.1),
         query_valid=qv_random(0.8, padded=[(2, 8)]), seq_lens_k=fixed([13, 9, 5]),
         q_s=bshd(6, 9, 12), k_s=bshd(2, 13, 12), v_s=bshd(2, 13, 8), out_s=bshd(6, 9, 8),
         mass=1),
    dict(name="all_combined_plus_one", seed=182, B=2, HQ=5, HKV=1, SQ=8, SK=10, D=8,
         head_dim_v=12, causal=CAUSAL_TOP_LEFT, window_left=4, softcap=2.0, bias_first=1,
         alibi=2, softmax_plus_one=1, bias=bias_random(-1.0, 1.0),
         query_valid=qv_random(0.75), seq_lens_k=fixed([10, 6]), key_valid=kv_random(0.85),
         allowed=al_random(0.9), mass=1),
    # --- the diagonal of the window and ALiBi, the ALiBi form, per-batch slopes --------------
    # FlashAttention's window without a causal rule: i + sk - sq - 1 <= j <= i + sk - sq + 1
    dict(name="diag_br_window_none", seed=191, B=2, HQ=2, HKV=1, SQ=3, SK=7, D=8,
         window_left=1, window_right=1, diagonal=2),
    dict(name="diag_tl_window_none", seed=192, B=2, HQ=2, HKV=1, SQ=3, SK=7, D=8,
         window_left=1, window_right=1, diagonal=1),
    # the causal rule keeps its own diagonal: causal bottom-right, window top-left
    dict(name="diag_tl_causal_br", seed=193, B=1, HQ=2, HKV=2, SQ=5, SK=9, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=2, window_right=3, diagonal=1),
    # and causal top-left with a bottom-right window, len_k(b) per batch entry
    dict(name="diag_br_causal_tl_lens", seed=194, B=3, HQ=2, HKV=1, SQ=4, SK=10, D=8,
         causal=CAUSAL_TOP_LEFT, window_left=6, diagonal=2, seq_lens_k=fixed([10, 7, 4])),
    dict(name="diag_br_lens_sq_gt_sk", seed=195, B=2, HQ=2, HKV=2, SQ=9, SK=6, D=8,
         window_left=2, window_right=1, diagonal=2, seq_lens_k=fixed([6, 3])),
    # FlashAttention's non-causal ALiBi: -slope |i + sk - sq - j|
    dict(name="alibi_sym_br_none", seed=196, B=2, HQ=3, HKV=1, SQ=5, SK=9, D=8, alibi=1,
         alibi_form=1, diagonal=2, alibi_slopes=per_head(0.05, 0.8)),
    dict(name="alibi_sym_standard_tl", seed=197, B=1, HQ=4, HKV=2, SQ=7, SK=5, D=8, alibi=2,
         alibi_form=1),
    dict(name="alibi_sym_causal_br_window", seed=198, B=2, HQ=2, HKV=1, SQ=4, SK=11, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=5, alibi=2, alibi_form=1),
    # per-batch slopes [batch][heads_q] (FlashAttention's alibi_slopes of shape (batch, heads))
    dict(name="alibi_per_batch_sym_none", seed=199, B=3, HQ=2, HKV=2, SQ=6, SK=4, D=8, alibi=1,
         alibi_form=1, diagonal=2, alibi_slopes_s=(2, 1, 0),
         alibi_slopes=slopes_per_batch(0.05, 1.0)),
    dict(name="alibi_per_batch_linear_br_lens", seed=200, B=3, HQ=4, HKV=2, SQ=3, SK=12, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=7, alibi=1, alibi_slopes_s=(6, 1, 0),
         alibi_slopes=slopes_per_batch(0.05, 0.6), seq_lens_k=fixed([12, 5, 9])),
]


def variant_problem(c):
    kw = {x: c[x] for x in ("window_left", "window_right", "softcap", "alibi", "head_dim_v",
                            "diagonal", "alibi_form") if x in c}
    if c.get("alibi_slopes_s") is not None:
        kw["alibi_slopes_strides"] = tuple(c["alibi_slopes_s"][:2])
    kw["softmax_plus_one"] = bool(c.get("softmax_plus_one", 0))
    kw["bias_first"] = bool(c.get("bias_first", 0))
    return Problem(c["B"], c["HQ"], c["HKV"], c["SQ"], c["SK"], c["D"],
                   c.get("causal", CAUSAL_NONE), c.get("scale"),
                   c.get("q_s"), c.get("k_s"), c.get("v_s"), c.get("out_s"),
                   bias_strides=c.get("bias_s"), **kw)


def default_strides(p, which):
    return {"q": bhsd_strides(p.heads_q, p.seq_q, p.head_dim),
            "k": bhsd_strides(p.heads_kv, p.seq_k, p.head_dim),
            "v": bhsd_strides(p.heads_kv, p.seq_k, p.head_dim_v),
            "out": bhsd_strides(p.heads_q, p.seq_q, p.head_dim_v),
            "bias": bhsd_strides(p.heads_q, p.seq_q, p.seq_k),
            "alibi_slopes": (0, 1, 0)}[which]


def variant_line(c, p, inputs, extra=()):
    """The variants.txt / errors.txt line of a case (keys in the order of VARIANTS.md)."""
    toks = ["name=%s" % c["name"]]
    for key, x in zip(("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"),
                      (p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim)):
        toks.append("%s=%d" % (key, x))
    for key in VARIANT_PARAMS:
        if key in c:
            toks.append("%s=%s" % (key, fmt_float(c[key]) if key in FLOAT_PARAMS
                                   else "%d" % c[key]))
    for key in VARIANT_STRIDES:
        s = c.get(key + "_s")
        if s is not None and tuple(s) != tuple(default_strides(p, key)):
            toks.append("strides.%s=%d,%d,%d" % ((key,) + tuple(s)))
    toks.append("in=" + ",".join(x for x in VARIANT_INPUTS if x in inputs))
    toks.append("mass=%d" % c.get("mass", 0))
    toks.extend(extra)
    return " ".join(toks)


def build_variant(c):
    """Returns (variants.txt line, {part: bytes}) for one 0.2 case."""
    p = variant_problem(c)
    B, HQ, HKV, SQ, SK, D, DV = (p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim,
                                 p.head_dim_v)
    rng = random.Random(c["seed"])
    lo, hi = c.get("lo", -1.0), c.get("hi", 1.0)
    ops = {
        "q": fill_strided(rng, p.q_len(), B, HQ, SQ, D, p.q_strides, lo, hi),
        "k": fill_strided(rng, p.k_len(), B, HKV, SK, D, p.k_strides, lo, hi),
        "v": fill_strided(rng, p.v_len(), B, HKV, SK, DV, p.v_strides, lo, hi),
    }
    for x in VARIANT_INPUTS[3:]:
        if c.get(x):
            ops[x] = c[x](rng, p)
    if p.alibi == attn_ref.ALIBI_OPERAND:
        assert "alibi_slopes" in ops, c["name"]
    if c.get("patch"):
        c["patch"](rng, p, ops)

    # Padding keys (key_valid false, j >= seq_lens_k[b]) are never read: poison their K/V rows.
    kv, lens = ops.get("key_valid"), ops.get("seq_lens_k")
    if kv is not None or lens is not None:
        assert p.k_strides[0] != 0 and p.v_strides[0] != 0, "padding with broadcast K/V"
        for b in range(B):
            for j in range(SK):
                if (kv is None or kv[b * SK + j]) and (lens is None or j < lens[b]):
                    continue
                for h in range(HKV):
                    ko = attn_ref.offset(p.k_strides, b, h, j)
                    vo = attn_ref.offset(p.v_strides, b, h, j)
                    for d in range(D):
                        ops["k"][ko + d] = NAN
                    for d in range(DV):
                        ops["v"][vo + d] = NAN

    stored, store_toks = store_operands(c, p, ops) if c.get("store") else ({}, [])
    if c.get("grads"):
        return build_backward(c, p, rng, ops)

    out, lse, weights, mass = attn_ref.run(
        p, ops["q"], ops["k"], ops["v"], key_valid=kv, allowed=ops.get("allowed"),
        bias=ops.get("bias"), alibi_slopes=ops.get("alibi_slopes"), sinks=ops.get("sinks"),
        query_valid=ops.get("query_valid"), seq_lens_k=lens)
    out = [f32(x) for x in out]
    lse = [f32(x) for x in lse]
    weights = [f32(x) for x in weights]
    mass = [f32(x) for x in mass]
    name = c["name"]
    assert all(math.isfinite(x) for x in out + weights + mass), name
    assert all(math.isfinite(x) or x == -math.inf for x in lse), name
    # A visible key's weight must not round to 0 (the "exact 0" rule is for hidden keys only).
    assert all(x == 0.0 or x > 1e-30 for x in weights), name

    parts = dict(stored)
    for x in VARIANT_INPUTS:
        if x in ops:
            if x in c.get("store", {}):
                continue  # written by store_operands
            t = INPUT_TYPE[x]
            pack = pack_f32 if t == "f32" else pack_u8 if t == "u8" else pack_i32
            parts["%s.%s" % (x, t)] = pack(ops[x])
    parts["out.f32"] = pack_f32(out)
    parts["lse.f32"] = pack_f32(lse)
    parts["weights.f32"] = pack_f32(weights)
    if c.get("mass"):
        parts["key_mass.f32"] = pack_f32(mass)
    return variant_line(c, p, ops, store_toks), parts


VARIANTS_HEADER = """\
# libattn shared vectors of the extensible call (attn_args / attn_run, since 0.2), generated by
# tests/vectors/gen_vectors.py from the float64 reference tests/reference/attn_ref.py. Do not
# edit: regenerate (and --check) instead. Format, files and checks: VARIANTS.md.
"""


# ---------------------------------------------------------------------------------------------
# Error cases (errors.txt, format in VARIANTS.md): a valid case plus one thing to break, the
# attn_status the first failing call must return and a word its message must contain.
# ---------------------------------------------------------------------------------------------

ST_OK, ST_NULL, ST_INVALID, ST_UNSUPPORTED = 0, 1, 2, 4
ALL_IN = ["q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes", "sinks", "query_valid",
          "seq_lens_k"]


def err(name, brk, status, names=None, op="forward", inputs=("q", "k", "v"), mass=0, **kw):
    c = dict(name=name, B=2, HQ=4, HKV=2, SQ=3, SK=5, D=4, mass=mass, **kw)
    return dict(c=c, inputs=set(inputs), op=op, brk=brk, status=status, names=names)


ERRORS = [
    # An operand shorter than attn_desc_required_len by one element.
    err("short_q", "short:q", ST_INVALID, "q"),
    err("short_k", "short:k", ST_INVALID, "k"),
    err("short_v", "short:v", ST_INVALID, "v"),
    err("short_out", "short:out", ST_INVALID, "out"),
    err("short_lse", "short:lse", ST_INVALID, "lse"),
    err("short_weights", "short:weights", ST_INVALID, "weights", op="weights"),
    err("short_key_mass", "short:key_mass", ST_INVALID, "key_mass", mass=1),
    err("short_key_valid", "short:key_valid", ST_INVALID, "key_valid", inputs=ALL_IN[:4]),
    err("short_allowed", "short:allowed", ST_INVALID, "allowed", inputs=ALL_IN[:3] + ["allowed"]),
    err("short_bias", "short:bias", ST_INVALID, "bias", inputs=ALL_IN[:3] + ["bias"]),
    err("short_alibi_slopes", "short:alibi_slopes", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("short_sinks", "short:sinks", ST_INVALID, "sinks", inputs=ALL_IN[:3] + ["sinks"]),
    err("short_query_valid", "short:query_valid", ST_INVALID, "query_valid",
        inputs=ALL_IN[:3] + ["query_valid"]),
    err("short_seq_lens_k", "short:seq_lens_k", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"]),
    err("short_bias_strided", "short:bias", ST_INVALID, "bias", inputs=ALL_IN[:3] + ["bias"],
        bias_s=(0, 5, 0)),
    err("short_v_head_dim_v", "short:v", ST_INVALID, "v", head_dim_v=6),
    # A required operand not bound.
    err("null_q", "null:q", ST_NULL, "q"),
    err("null_k", "null:k", ST_NULL, "k"),
    err("null_v", "null:v", ST_NULL, "v"),
    err("null_out", "null:out", ST_NULL, "out"),
    err("null_q_weights", "null:q", ST_NULL, "q", op="weights"),
    err("null_weights", "null:weights", ST_NULL, "weights", op="weights"),
    err("alibi_missing", "null:alibi_slopes", ST_NULL, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    # Operand values and combinations attn_run refuses.
    err("seq_lens_k_above", "set:seq_lens_k[1]=6", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"]),
    err("seq_lens_k_negative", "set:seq_lens_k[0]=-1", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"], op="weights"),
    err("alibi_unexpected", "param:alibi=0", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("alibi_unexpected_standard", "param:alibi=2", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("sinks_with_plus_one", "param:softmax_plus_one=1", ST_INVALID, "sinks",
        inputs=ALL_IN[:3] + ["sinks"]),
    # the backward of a forward's operands: the gradient of out is missing
    err("op_backward", "op:backward", ST_NULL, "dout"),
    # Parameters out of attn_param_bounds.
    err("param_causal", "param:causal=3", ST_INVALID, "causal"),
    err("param_window_left", "param:window_left=-2", ST_INVALID, "window_left"),
    err("param_window_right", "param:window_right=-5", ST_INVALID, "window_right"),
    err("param_softcap", "param:softcap=-1", ST_INVALID, "softcap"),
    err("param_scale", "param:scale=1e39", ST_INVALID, "scale"),
    err("param_alibi", "param:alibi=3", ST_INVALID, "alibi"),
    err("param_diagonal", "param:diagonal=3", ST_INVALID, "diagonal"),
    err("param_alibi_form", "param:alibi_form=2", ST_INVALID, "alibi_form"),
    err("strides_alibi_slopes_row", "strides:alibi_slopes=4,1,1", ST_INVALID, "alibi_slopes"),
    err("short_alibi_slopes_per_batch", "short:alibi_slopes", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1, alibi_slopes_s=(4, 1, 0)),
    err("param_plus_one", "param:softmax_plus_one=2", ST_INVALID, "softmax_plus_one"),
    err("param_head_dim_v", "param:head_dim_v=0", ST_INVALID, "head_dim_v"),
    err("param_weights_mode", "param:weights_mode=5", ST_INVALID, "weights_mode"),
    err("param_bias_first", "param:bias_first=-1", ST_INVALID, "bias_first"),
    # OUT strides that let rows overlap.
    err("strides_out_overlap", "strides:out=0,4,2", ST_INVALID, "out"),
    # An output sharing memory with another operand (inputs may share memory).
    err("alias_out_q", "alias:out=q", ST_INVALID, "out"),
    err("alias_lse_k", "alias:lse=k", ST_INVALID, "lse"),
    err("alias_out_lse", "alias:out=lse", ST_INVALID, "out"),
    err("alias_key_mass_v", "alias:key_mass=v", ST_INVALID, "key_mass", mass=1),
    err("alias_weights_bias", "alias:weights=bias", ST_INVALID, "weights", op="weights",
        inputs=ALL_IN[:3] + ["bias"]),
    err("alias_inputs_ok", "alias:k=q", ST_OK, None),
    # Packed variable-length batches: the library checks the prefix sums (cu_seqlens_q
    # zero-filled, then [0, 2, 0]: decreasing); a pack of 0 tokens is valid and produces
    # nothing, with empty (not null) buffers.
    err("varlen_cu_seqlens_q_decreasing", "set:cu_seqlens_q[1]=2", ST_INVALID, "cu_seqlens_q",
        inputs=ALL_IN[:3] + ["cu_seqlens_q", "cu_seqlens_k"], varlen=1),
    err("varlen_empty_pack", "empty:q,k,v,out,lse", ST_OK, None,
        inputs=ALL_IN[:3] + ["cu_seqlens_q", "cu_seqlens_k"], varlen=1),
    # attn_kv_append without the new key rows; attn_merge without a part.
    err("kv_append_new_k_missing", "null:new_k", ST_NULL, "new_k", op="kv_append",
        inputs=ALL_IN[:3] + ["seq_lens_k", "new_k", "new_v"]),
    err("merge_part_missing", "null:part", ST_NULL, "part", op="merge"),
]


def build_error(e):
    c = e["c"]
    p = variant_problem(c)
    extra = ["op=%s" % e["op"], "break=%s" % e["brk"], "status=%d" % e["status"]]
    if e["names"]:
        extra.append("names=%s" % e["names"])
    assert set(e["inputs"]) <= set(VARIANT_INPUTS)
    return variant_line(c, p, e["inputs"], extra)


# ---------------------------------------------------------------------------------------------
# Storage types (storage.txt, format in VARIANTS.md "Storage types"): variants.txt lines whose
# Q, K or V are stored as f16 / bf16 (uint16 bit patterns) or int8 with per-row fp32 scales.
# The reference sees the widened values (exactly what the kernels compute with).
# ---------------------------------------------------------------------------------------------

def to_f16(x):
    """float32 -> binary16 bits, round to nearest even (struct's 'e' rounds so)."""
    if math.isnan(x):
        return 0x7e00
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0x7c00 if x > 0 else 0xfc00


def from_f16(b):
    return struct.unpack("<e", struct.pack("<H", b))[0]


def to_bf16(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN)."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7fffffff) > 0x7f800000:
        return (u >> 16) | 0x40
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff


def from_bf16(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def quantize_row(row):
    """Symmetric int8 of one row: (q list, scale) with scale = f32(max|x| / 127) and q the
    nearest-even integer of f32(x / scale) (|q| <= 127); both f32 operations are computed in
    double and rounded once, which gives the float32 result exactly."""
    amax = max(abs(x) for x in row)
    scale = f32(amax / 127.0)
    if scale == 0.0:
        return [0] * len(row), scale
    return [int(round(max(-127.0, min(127.0, f32(x / scale))))) for x in row], scale


STORE_TYPES = ("f16", "bf16", "i8")

STORAGE = [
    dict(name="st_f16_kv", seed=201, B=2, HQ=4, HKV=2, SQ=5, SK=9, D=16,
         causal=CAUSAL_BOTTOM_RIGHT, store=dict(k="f16", v="f16")),
    dict(name="st_bf16_qkv_window", seed=202, B=1, HQ=2, HKV=1, SQ=12, SK=12, D=8,
         causal=CAUSAL_TOP_LEFT, window_left=4, store=dict(q="bf16", k="bf16", v="bf16")),
    # padded keys: their int8 rows are garbage and their scales NaN (never read)
    dict(name="st_i8_kv_padded", seed=203, B=3, HQ=6, HKV=2, SQ=4, SK=10, D=16,
         key_valid=kv_random(0.7), store=dict(k="i8", v="i8")),
    # BSHD K/V, token-major scales [batch][seq_k][heads_kv] with a gap, f16 V, sinks
    dict(name="st_i8k_f16v_bshd", seed=204, B=2, HQ=4, HKV=2, SQ=6, SK=7, D=8,
         causal=CAUSAL_TOP_LEFT, sinks=per_head(-1.0, 1.0),
         q_s=bshd(4, 6, 8), k_s=bshd(2, 7, 8), v_s=bshd(2, 7, 8), out_s=bshd(4, 6, 8),
         k_scale_s=(7 * 2 + 1, 1, 2), store=dict(k="i8", v="f16")),
    dict(name="st_i8_decode_lens", seed=205, B=3, HQ=8, HKV=2, SQ=1, SK=70, D=64,
         causal=CAUSAL_BOTTOM_RIGHT, seq_lens_k=fixed([70, 3, 41]),
         store=dict(q="f16", k="i8", v="i8")),
    dict(name="st_mixed_variants", seed=206, B=2, HQ=3, HKV=1, SQ=5, SK=9, D=12,
         head_dim_v=8, causal=CAUSAL_BOTTOM_RIGHT, softcap=3.0, scale=0.5, alibi=2,
         bias=bias_random(-1.0, 1.0), store=dict(q="f16", k="i8", v="bf16")),
]


def scale_strides(p, c, which):
    """Strides of the int8 scales of K or V: given, or K's default layout with head_dim 1."""
    s = c.get(which + "_scale_s")
    return tuple(s) if s is not None else (p.heads_kv * p.seq_k, p.seq_k, 1)


def store_operands(c, p, ops):
    """Replaces ops q/k/v by their widened stored values; returns {part: bytes} of the stored
    operands (and scales) and the line tokens."""
    parts, toks = {}, []
    store = c["store"]
    for x in ("q", "k", "v"):
        t = store.get(x)
        if t is None:
            continue
        assert t in STORE_TYPES and (x != "q" or t != "i8"), (c["name"], x, t)
        toks.append("store.%s=%s" % (x, t))
        vals = ops[x]
        if t in ("f16", "bf16"):
            bits = [(to_f16 if t == "f16" else to_bf16)(v) for v in vals]
            ops[x] = [(from_f16 if t == "f16" else from_bf16)(b) for b in bits]
            parts["%s.%s" % (x, t)] = struct.pack("<%dH" % len(bits), *bits)
            continue
        dim = p.head_dim if x == "k" else p.head_dim_v
        strides = p.k_strides if x == "k" else p.v_strides
        ss = scale_strides(p, c, x)
        if c.get(x + "_scale_s") is not None:
            toks.append("strides.%s_scale=%d,%d,%d" % ((x,) + ss))
        rng = random.Random(c["seed"] * 7 + (1 if x == "k" else 2))
        q8 = [rng.randrange(-128, 128) for _ in vals]  # unaddressed / padded: garbage
        slen = (p.batch - 1) * ss[0] + (p.heads_kv - 1) * ss[1] + (p.seq_k - 1) * ss[2] + 1
        scales = [NAN] * slen
        wide = list(vals)
        for b in range(p.batch):
            for h in range(p.heads_kv):
                for j in range(p.seq_k):
                    o = attn_ref.offset(strides, b, h, j)
                    row = vals[o:o + dim]
                    if any(math.isnan(v) for v in row):
                        continue  # a padded row
                    qr, sc = quantize_row(row)
                    q8[o:o + dim] = qr
                    scales[b * ss[0] + h * ss[1] + j * ss[2]] = sc
                    wide[o:o + dim] = [f32(qv * sc) for qv in qr]
        ops[x] = wide
        parts["%s.i8" % x] = struct.pack("<%db" % len(q8), *q8)
        parts["%s_scale.f32" % x] = pack_f32(scales)
    return parts, toks


# ---------------------------------------------------------------------------------------------
# Backward (backward.txt, format in VARIANTS.md "Backward"): variants.txt lines plus the
# gradients to compute; the reference is attn_ref.backward (float64 chain rule).
# ---------------------------------------------------------------------------------------------

GRADS = ("dq", "dk", "dv", "dbias", "dsinks")

BACKWARD = [
    dict(name="bw_causal_gqa_padded", seed=301, B=2, HQ=4, HKV=2, SQ=6, SK=9, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, key_valid=kv_random(0.7), grads=("dq", "dk", "dv")),
    dict(name="bw_window_softcap_bias", seed=302, B=1, HQ=2, HKV=1, SQ=10, SK=10, D=16,
         causal=CAUSAL_TOP_LEFT, window_left=3, softcap=2.5, scale=0.75,
         bias=bias_random(-1.0, 1.0, p_ninf=0.1), grads=("dq", "dk", "dv", "dbias")),
    dict(name="bw_bias_first_alibi_sinks", seed=303, B=2, HQ=3, HKV=3, SQ=5, SK=7, D=8,
         softcap=3.0, bias_first=1, alibi=2, bias_s=(0, 0, 7), bias=bias_random(-1.0, 1.0),
         sinks=per_head(-1.0, 1.0), grads=("dq", "dk", "dv", "dbias", "dsinks")),
    dict(name="bw_bshd_hdv", seed=304, B=2, HQ=4, HKV=2, SQ=5, SK=6, D=8, head_dim_v=12,
         causal=CAUSAL_TOP_LEFT,
         q_s=bshd(4, 5, 8), k_s=bshd(2, 6, 8), v_s=bshd(2, 6, 12), out_s=bshd(4, 5, 12),
         grads=("dq", "dk", "dv")),
    dict(name="bw_qpad_lens_allowed", seed=305, B=3, HQ=2, HKV=1, SQ=4, SK=8, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, query_valid=qv_random(0.75), seq_lens_k=fixed([8, 5, 0]),
         allowed=al_random(0.8), grads=("dq", "dk", "dv")),
    dict(name="bw_alibi_sym_per_batch_diag_br", seed=307, B=2, HQ=2, HKV=1, SQ=4, SK=9, D=8,
         window_left=3, window_right=2, diagonal=2, alibi=1, alibi_form=1,
         alibi_slopes_s=(2, 1, 0), alibi_slopes=slopes_per_batch(0.05, 0.8),
         grads=("dq", "dk", "dv")),
    dict(name="bw_alibi_linear_diag_tl_causal_br", seed=308, B=1, HQ=3, HKV=3, SQ=6, SK=8, D=8,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=4, window_right=4, diagonal=1, alibi=2,
         grads=("dq", "dk", "dv")),
    # only some gradients wanted
    dict(name="bw_dv_only_decode", seed=306, B=2, HQ=8, HKV=2, SQ=1, SK=40, D=32,
         causal=CAUSAL_BOTTOM_RIGHT, grads=("dv",)),
]


def build_backward(c, p, rng, ops):
    """Returns (backward.txt line, {part: bytes}): dout, the forward's out and lse, and every
    listed gradient."""
    B, HQ, SQ, DV = p.batch, p.heads_q, p.seq_q, p.head_dim_v
    dout = fill_strided(rng, p.out_len(), B, HQ, SQ, DV, p.out_strides, -1.0, 1.0)
    kw = dict(key_valid=ops.get("key_valid"), allowed=ops.get("allowed"), bias=ops.get("bias"),
              alibi_slopes=ops.get("alibi_slopes"), sinks=ops.get("sinks"),
              query_valid=ops.get("query_valid"), seq_lens_k=ops.get("seq_lens_k"))
    out, lse, _, _ = attn_ref.run(p, ops["q"], ops["k"], ops["v"], **kw)
    grads = dict(zip(GRADS, attn_ref.backward(p, ops["q"], ops["k"], ops["v"], dout, **kw)))
    name = c["name"]
    for g in c["grads"]:
        assert g in GRADS and grads[g] is not None, (name, g)
        assert all(math.isfinite(x) for x in grads[g]), (name, g)
    parts = {}
    for x in VARIANT_INPUTS:
        if x in ops:
            t = INPUT_TYPE[x]
            pack = pack_f32 if t == "f32" else pack_u8 if t == "u8" else pack_i32
            parts["%s.%s" % (x, t)] = pack(ops[x])
    parts["dout.f32"] = pack_f32(dout)
    parts["out.f32"] = pack_f32([f32(x) for x in out])
    parts["lse.f32"] = pack_f32([f32(x) for x in lse])
    for g in c["grads"]:
        parts["%s.f32" % g] = pack_f32([f32(x) for x in grads[g]])
    toks = ["grads=" + ",".join(g for g in GRADS if g in c["grads"])]
    return variant_line(c, p, ops, toks), parts


BACKWARD_HEADER = """\
# libattn shared vectors of ATTN_OP_BACKWARD (since 0.2), generated by tests/vectors/gen_vectors.py
# from the float64 reference tests/reference/attn_ref.py (backward()). Do not edit: regenerate
# (and --check) instead. Format: VARIANTS.md ("Backward").
"""

STORAGE_HEADER = """\
# libattn shared vectors of the storage types (16-bit and int8 Q/K/V, since 0.2), generated by
# tests/vectors/gen_vectors.py from the float64 reference over the widened values. Do not edit:
# regenerate (and --check) instead. Format: VARIANTS.md ("Storage types").
"""

ERRORS_HEADER = """\
# libattn error cases of the extensible call (since 0.2), generated by
# tests/vectors/gen_vectors.py. Do not edit: regenerate (and --check) instead. Each line is a
# valid variants.txt case (no data files: every buffer is zero-filled) plus op, one break,
# the expected attn_status and a word the message must contain. Format: VARIANTS.md.
"""


def generate():
    """All files as {filename: bytes}."""
    files = {}
    names = set()

    def add_set(cases, build, header, index):
        """The data files of every case and the index file listing them."""
        lines = []
        for c in cases:
            assert c["name"] not in names, c["name"]
            names.add(c["name"])
            line, parts = build(c)
            lines.append(line)
            for part, data in parts.items():
                files["%s.%s" % (c["name"], part)] = data
        files[index] = (header + "\n".join(lines) + "\n").encode("ascii")

    add_set(CASES, build_case, INDEX_HEADER, "index.txt")
    add_set(VARIANTS, build_variant, VARIANTS_HEADER, "variants.txt")
    add_set(STORAGE, build_variant, STORAGE_HEADER, "storage.txt")
    add_set(BACKWARD, build_variant, BACKWARD_HEADER, "backward.txt")

    lines = []
    for e in ERRORS:
        assert e["c"]["name"] not in names, e["c"]["name"]
        names.add(e["c"]["name"])
        lines.append(build_error(e))
    files["errors.txt"] = (ERRORS_HEADER + "\n".join(lines) + "\n").encode("ascii")
    return files


def is_vector_file(name):
    return (name in ("index.txt", "variants.txt", "storage.txt", "backward.txt", "errors.txt") or
            name.endswith(".f32") or name.endswith(".f16") or name.endswith(".bf16") or
            name.endswith(".i8") or
            name.endswith(".u8") or name.endswith(".i32"))


def main(argv):
    check = "--check" in argv[1:]
    files = generate()
    if check:
        bad = []
        present = {n for n in os.listdir(HERE) if is_vector_file(n)}
        for name in sorted(present - set(files)):
            bad.append("unexpected file %s" % name)
        for name, data in sorted(files.items()):
            path = os.path.join(HERE, name)
            if not os.path.exists(path):
                bad.append("missing %s" % name)
                continue
            with open(path, "rb") as f:
                if f.read() != data:
                    bad.append("differs: %s" % name)
        for b in bad:
            print(b)
        print("%s: %d files, %d problems" % ("FAIL" if bad else "OK", len(files), len(bad)))
        return 1 if bad else 0

    for name in [n for n in os.listdir(HERE) if is_vector_file(n) and n not in files]:
        os.remove(os.path.join(HERE, name))
    total = 0
    for name, data in sorted(files.items()):
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        total += len(data)
    print("wrote %d files, %d + %d + %d + %d cases, %d error cases, %d bytes"
          % (len(files), len(CASES), len(VARIANTS), len(STORAGE), len(BACKWARD), len(ERRORS),
             total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
