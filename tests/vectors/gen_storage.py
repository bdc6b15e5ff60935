"""Storage types (storage.txt): variants whose Q, K or V are stored as f16 / bf16 or int8 with
per-row fp32 scales; the reference sees the widened values."""

import math
import random
import struct

import attn_ref
from attn_ref import CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT
from gen_common import NAN, f32, pack_f32
from gen_operands import bias_random, bshd, fixed, kv_random, per_head


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


STORAGE_HEADER = """\
# libattn shared vectors of the storage types (16-bit and int8 Q/K/V, since 0.2), generated by
# tests/vectors/gen_vectors.py from the float64 reference over the widened values. Do not edit:
# regenerate (and --check) instead. Format: VARIANTS.md ("Storage types").
"""
