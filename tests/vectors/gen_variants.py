"""The 0.2 variants (variants.txt): attn_args / attn_run with every parameter and operand, and
the float64 answer to each. build_variant also builds the storage and backward cases."""

import math
import random

import attn_ref
from attn_ref import CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT
from gen_backward import build_backward
from gen_common import NAN, f32, fill_strided, pack_f32, pack_i32, pack_u8
from gen_format import INPUT_TYPE, VARIANT_INPUTS, variant_line, variant_problem
from gen_operands import (al_random, bias_random, bshd, fixed, kv_lengths, kv_random,
                          overflow_under_ninf_bias, per_head, qv_random, slopes_per_batch)
from gen_storage import store_operands


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
    # --- a per-head factor on Q (q_scale) ---------------------------------------------------
    # GQA decode, one query per sequence: window, sinks, key lengths; negative and zero factors
    # (a factor of 0 leaves the scores 0, so that head's weights are uniform over its window).
    dict(name="qscale_gqa_decode_window_sinks", seed=211, B=3, HQ=6, HKV=2, SQ=1, SK=24, D=16,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=9, sinks=per_head(-1.0, 1.0),
         seq_lens_k=fixed([24, 11, 3]), q_scale=fixed([0.5, -1.25, 2.0, 0.0, -0.75, 1.5])),
    # Prefill with a bias, ALiBi slopes, causal top-left and Q in BSHD strides.
    dict(name="qscale_prefill_bias_alibi", seed=212, B=2, HQ=4, HKV=2, SQ=7, SK=9, D=8,
         causal=CAUSAL_TOP_LEFT, bias=bias_random(-1.0, 1.0), alibi=1,
         alibi_slopes=per_head(0.05, 0.5), q_s=bshd(4, 7, 8), q_scale=per_head(-2.0, 2.0)),
    # --- the fast modes (compute=, checked within tol) ----------------------------------------
    # INT8 (compute=2) on prefill-shaped calls (more than 4 query rows per KV head, so its row
    # blocks take integer Q.K^T; each case's INT8 bits differ from EXACT's). out and lse are
    # checked within tol * max(1, |want|): on these inputs the mode's largest error is 0.011 of
    # max(1, |want|) (relative L1 at most 0.004) on every ISA, while dropping any one variant of
    # a case (causal, window, softcap, ALiBi, bias, sinks) moves its outputs by 0.11 or more.
    # The weights (ATTN_OP_WEIGHTS runs exactly in every mode) keep 1e-5.
    dict(name="int8_causal_gqa", seed=221, B=1, HQ=4, HKV=2, SQ=32, SK=32, D=32,
         causal=CAUSAL_BOTTOM_RIGHT, compute=2, tol=0.05),
    dict(name="int8_window_softcap", seed=222, B=2, HQ=4, HKV=4, SQ=24, SK=40, D=64,
         causal=CAUSAL_TOP_LEFT, window_left=8, softcap=1.5, scale=0.5, compute=2, tol=0.05),
    dict(name="int8_alibi_bias", seed=223, B=1, HQ=4, HKV=2, SQ=40, SK=40, D=32, alibi=2,
         bias=bias_random(-1.0, 1.0), compute=2, tol=0.05),
    dict(name="int8_key_valid_sinks_gqa", seed=224, B=2, HQ=4, HKV=1, SQ=24, SK=36, D=48,
         key_valid=kv_random(0.8), sinks=per_head(1.0, 3.0), compute=2, tol=0.05),
    dict(name="int8_lens_qpad_wide", seed=225, B=2, HQ=2, HKV=2, SQ=28, SK=30, D=40, lo=-2.0,
         hi=2.0, causal=CAUSAL_BOTTOM_RIGHT, seq_lens_k=fixed([30, 19]),
         query_valid=qv_random(0.9, padded=[(1, 27)]), compute=2, tol=0.05),
    # BF16 (compute=3) runs exactly as EXACT on every CPU this version supports: the EXACT
    # tolerance holds.
    dict(name="bf16_causal_window", seed=226, B=1, HQ=4, HKV=2, SQ=32, SK=32, D=32,
         causal=CAUSAL_BOTTOM_RIGHT, window_left=12, compute=3, tol=1e-5),
]


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
        query_valid=ops.get("query_valid"), seq_lens_k=lens, q_scale=ops.get("q_scale"))
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
