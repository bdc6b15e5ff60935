"""fp8 K/V caches (OCP E4M3 / E5M2) through the numpy face: the converters against the formats'
definitions written out here, a paged fp8 cache filled by Desc.run_kv_append_args and decoded
against float64 over its decoded values (both page layouts, a scale per tensor or per KV head),
uint8 arrays bound without copies, and the refusals."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_storage import _attention64  # noqa: E402
from vector_cases import attn  # noqa: E402


def e4m3_value(c):
    """E4M3 code c by its definition: 2^(e-7) (1 + m/8), subnormal m 2^-9, S.1111.111 NaN."""
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    if e == 15 and m == 7:
        return float("nan")
    v = m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10)
    return -v if s else v


def e5m2_value(c):
    """E5M2 code c: 2^(e-15) (1 + m/4), subnormal m 2^-16; e = 31 infinity (m = 0) or NaN."""
    s, e, m = c >> 7, (c >> 2) & 31, c & 3
    if e == 31:
        v = float("nan") if m else float("inf")
    else:
        v = m * 2.0 ** -16 if e == 0 else (4 + m) * 2.0 ** (e - 17)
    return -v if s else v


FORMATS = {"e4m3": (e4m3_value, 0x7E), "e5m2": (e5m2_value, 0x7B)}


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_code_round_trips_ties_go_to_even_and_large_values_saturate(fmt):
    value, top = FORMATS[fmt]
    codes = np.arange(256, dtype=np.uint8)
    want = np.array([value(c) for c in range(256)])
    got = attn.dequantize_fp8(codes, fmt)
    assert got.dtype == np.float32
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].astype(np.float64), want[~nan])
    finite = np.isfinite(want)
    assert attn.quantize_fp8(got[finite], fmt).tolist() == codes[finite].tolist()
    # ties between neighbouring codes: the even code; past the largest value: saturation
    mids = np.array([(value(c) + value(c + 1)) / 2 for c in range(top)], np.float32)
    even = [c if c % 2 == 0 else c + 1 for c in range(top)]
    assert attn.quantize_fp8(mids, fmt).tolist() == even
    assert attn.quantize_fp8(-mids, fmt).tolist() == [0x80 | c for c in even]
    big = np.array([value(top) * 1.5, 1e30, -3e38], np.float32)
    assert attn.quantize_fp8(big, fmt).tolist() == [top, top, 0x80 | top]
    # with a scale: value * scale, one float32 rounding
    assert attn.dequantize_fp8(codes[finite], fmt, 0.3).tolist() == \
        (got[finite] * np.float32(0.3)).tolist()


def test_converter_refusals_name_the_row_and_the_argument():
    x = np.ones((2, 3, 4), np.float32)
    x[1, 2, 0] = np.inf
    with pytest.raises(attn.InvalidArgumentError,
                       match=r"attn_quantize_fp8: src row 5 holds a non-finite .* \(x\[1, 2, :\]\)"):
        attn.quantize_fp8(x, "e4m3")
    with pytest.raises(attn.InvalidArgumentError, match=r"scale \(0\) must be finite and > 0"):
        attn.quantize_fp8(np.ones(4, np.float32), "e5m2", 0.0)
    with pytest.raises(attn.InvalidArgumentError, match="fmt 'e3m4' is not an fp8 format"):
        attn.quantize_fp8(np.ones(4, np.float32), "e3m4")
    with pytest.raises(attn.InvalidArgumentError, match=r"fmt \(3\) is not an fp8 format"):
        attn.dequantize_fp8(np.zeros(4, np.uint8), 3)
    with pytest.raises(attn.ArgumentTypeError, match="x has dtype int8, expected uint8"):
        attn.dequantize_fp8(np.zeros(4, np.int8), "e4m3")


@pytest.mark.parametrize("layout", ["token_major", "head_major"])
@pytest.mark.parametrize("fmt,per_head", [("e4m3", False), ("e5m2", True)])
def test_paged_fp8_cache_filled_by_append_then_decoded(layout, fmt, per_head):
    """A pool of pages, reversed block table; the append quantizes float32 rows with the cache's
    scale (per tensor, or per KV head); decode over the pool matches float64 over the pool's
    decoded values, and the new rows hold exactly attn.quantize_fp8's codes."""
    B, HQ, HKV, D, P = 2, 4, 2, 16, 4
    lens = np.array([6, 9], np.int32)   # keys after the append; the last one of each is new
    rng = np.random.default_rng(31)
    table = np.array([[4, 3, -1], [2, 1, 0]], np.int32)
    num_pages = 6                       # page 5 is never used
    head_major = layout == "head_major"
    shape = (num_pages, HKV, P, D) if head_major else (num_pages, P, HKV, D)
    kc = np.full(shape, 0x7F, np.uint8)   # NaN codes wherever nothing is written
    vc = np.full(shape, 0x7F, np.uint8)
    ks = np.array([0.01, 0.03] if per_head else [0.02], np.float32)
    vs = np.array([0.02, 0.005] if per_head else [0.01], np.float32)
    strides = (0, 1, 0) if per_head else (0, 0, 0)

    def row(cache, b, j, h):
        pg, t = table[b, j // P], j % P
        return cache[pg, h, t] if head_major else cache[pg, t, h]

    def scale_of(s, h):
        return s[h] if per_head else s[0]

    for b in range(B):                  # the keys already cached, encoded by the test
        for j in range(lens[b] - 1):
            for h in range(HKV):
                for cache, s in ((kc, ks), (vc, vs)):
                    x = rng.standard_normal(D).astype(np.float32)
                    row(cache, b, j, h)[...] = attn.quantize_fp8(x, fmt, scale_of(s, h))
    new_k = rng.standard_normal((B, HKV, D)).astype(np.float32)
    new_v = rng.standard_normal((B, HKV, D)).astype(np.float32)
    q = rng.standard_normal((B, HQ, 1, D)).astype(np.float32)
    out = np.full((B, HQ, 1, D), np.nan, np.float32)
    with attn.Desc(B, HQ, HKV, 1, 3 * P, D, page_size=P, page_layout=layout,
                   causal=attn.Causal.BOTTOM_RIGHT, k_scale_strides=strides,
                   v_scale_strides=strides) as desc, attn.Args() as args:
        args.set_out_fp8(attn.Operand.K, fmt, kc)
        args.set_out_fp8(attn.Operand.V, fmt, vc)
        args.set_f32(attn.Operand.K_SCALE, ks)
        args.set_f32(attn.Operand.V_SCALE, vs)
        args.set_f32(attn.Operand.NEW_K, new_k)
        args.set_f32(attn.Operand.NEW_V, new_v)
        args.set_seq_lens_k(lens)
        args.set_block_table(table)
        before = kc.copy()
        desc.run_kv_append_args(args)
        written = np.zeros(kc.shape[:3], bool)
        for b in range(B):
            for h in range(HKV):
                j = lens[b] - 1
                assert row(kc, b, j, h).tolist() == \
                    attn.quantize_fp8(new_k[b, h], fmt, scale_of(ks, h)).tolist()
                assert row(vc, b, j, h).tolist() == \
                    attn.quantize_fp8(new_v[b, h], fmt, scale_of(vs, h)).tolist()
                pg, t = table[b, j // P], j % P
                written[(pg, h, t) if head_major else (pg, t, h)] = True
        assert kc[~written].tobytes() == before[~written].tobytes()
        args.set_f32(attn.Operand.Q, q)
        args.set_out_f32(attn.Operand.OUT, out)
        desc.run(attn.Op.FORWARD, args)
        value = FORMATS[fmt][0]
        decode = np.vectorize(lambda c: value(int(c)), otypes=[np.float64])
        for b in range(B):
            for h in range(HQ):
                kvh = h // (HQ // HKV)
                kb = np.array([decode(row(kc, b, j, kvh)).astype(np.float32) *
                               scale_of(ks, kvh) for j in range(lens[b])], np.float64)
                vb = np.array([decode(row(vc, b, j, kvh)).astype(np.float32) *
                               scale_of(vs, kvh) for j in range(lens[b])], np.float64)
                want = _attention64(q[b, h], kb, vb, 1 / np.sqrt(D))
                assert np.max(np.abs(out[b, h] - want)) <= 1e-5, (b, h)
        # the codes are bound, not copied: a change is seen by the next call
        again = out.copy()
        vc[...] = np.where(vc == 0x7F, vc, 0)      # every stored V value 0
        desc.run(attn.Op.FORWARD, args)
        assert not np.array_equal(out, again) and np.all(out == 0)


def test_fp8_bindings_refuse_wrong_arrays_and_formats():
    with attn.Args() as args:
        with pytest.raises(attn.ArgumentTypeError, match="k has dtype int8, expected uint8"):
            args.set_fp8(attn.Operand.K, "e4m3", np.zeros(4, np.int8))
        with pytest.raises(attn.InvalidArgumentError, match="fmt 'fp8' is not an fp8 format"):
            args.set_fp8(attn.Operand.K, "fp8", np.zeros(4, np.uint8))
        with pytest.raises(attn.InvalidArgumentError, match=r"attn_args_set_fp8: fmt \(0\)"):
            args.set_fp8(attn.Operand.K, 0, np.zeros(4, np.uint8))
        with pytest.raises(attn.InvalidArgumentError,
                           match="fp8 storage is for K, V, NEW_K and NEW_V"):
            args.set_fp8(attn.Operand.Q, "e5m2", np.zeros(4, np.uint8))
        args.set_fp8(attn.Operand.K, "E4M3", np.zeros(4, np.uint8))
        args.set_fp8(attn.Operand.K, "e4m3", None)
    fp8 = attn.DType.FP8_E4M3 | attn.DType.FP8_E5M2
    assert attn.operand_info("k").inputs & fp8 == fp8
    assert attn.operand_info("v").outputs & fp8 == fp8
    assert attn.operand_info("new_k").inputs & fp8 == fp8
    assert not attn.operand_info("q").inputs & fp8
