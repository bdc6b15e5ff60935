"""The 0.1 shared vectors (index.txt): attn_forward cases with masks, strides and causal
alignments, and the float64 answer to each."""

import math
import random

import attn_ref
from attn_ref import (CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT, Problem, bhsd_strides,
                      bshd_strides)
from gen_common import NAN, f32, fill_strided, pack_f32, pack_u8


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
