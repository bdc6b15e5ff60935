"""Storage types (capi/attn.h "Storage types", docs/storage.md) through the Python face:
float16, bfloat16 (attn.BF16) and int8 (+ k_scale / v_scale) q / k / v, zero-copy, and the
conversion helpers.

* every tests/vectors/storage.txt line (VARIANTS.md "Storage types"): forward and weights within
  1e-5, exact zeros and -inf; the same call with N-D strided views on a Desc not told the
  strides, and through the raw face (Args.set picks set_f16 / set_bf16 / set_i8 from the array):
  bit-identical; $ATTN_XLANG_DIR/python.storage.bin gets the bytes of every case;
* a stored operand gives the bits of float32 attention over its widened values, in the dense and
  the serving layouts (varlen, paged pools token- and head-major with their scale pools);
* nothing is copied: the library reads the caller's memory;
* errors name the operand (shape, length, dtype, int8 without its scale, int8 q);
* the converters: ties to even, overflow, NaN, out= views, quantize_i8's rule and its NaN row.
"""

import os
import struct
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vector_cases import (OPERAND, attn, check_forward, forward_bytes, inputs_of,  # noqa: E402
                          load, make_desc, on_every_isa, remove_stale, run, store_of, typed,
                          write_xlang)

remove_stale("python.storage.bin")

STORAGE = load("storage.txt")


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------
# storage.txt
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("c", STORAGE, ids=[c["name"] for c in STORAGE])
def test_storage_case(c):
    out, lse, w, mass = run(c, nd=False)
    check_forward(c, out, lse, w, mass)
    out2, lse2, w2, mass2 = run(c, nd=True)  # N-D strided views of the stored arrays
    assert out2.tobytes() == out.tobytes()
    assert lse2.tobytes() == lse.tobytes()
    assert w2.tobytes() == w.tobytes()


@pytest.mark.parametrize("c", STORAGE, ids=[c["name"] for c in STORAGE])
def test_storage_case_raw_face(c):
    """Args.set binds each stored array with the setter of its type (float16 -> set_f16,
    BF16 -> set_bf16, int8 -> set_i8); the scales are float32 inputs."""
    want_out, want_lse, _, _ = run(c, nd=False)
    ins = inputs_of(c)
    with make_desc(c) as d, attn.Args() as args:
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        for x, a in ins.items():
            args.set(OPERAND[x], typed(c, x, a))
        args.set(attn.Operand.OUT, out).set(attn.Operand.LSE, lse)
        d.run(attn.Op.FORWARD, args)
    assert out.tobytes() == want_out.tobytes()
    assert lse.tobytes() == want_lse.tobytes()


def test_storage_on_every_isa():
    def body(isa):
        for c in STORAGE:
            check_forward(c, *run(c, nd=False), what=isa)
    on_every_isa(body)


def test_storage_present():
    assert len(STORAGE) >= 6
    stores = {(x, store_of(c, x)) for c in STORAGE for x in "qkv"}
    for want in (("q", "f16"), ("q", "bf16"), ("k", "f16"), ("k", "bf16"), ("k", "i8"),
                 ("v", "f16"), ("v", "bf16"), ("v", "i8")):
        assert want in stores, want
    assert any("strides.k_scale" in c for c in STORAGE)


def test_storage_xlang_bytes():
    """Writes $ATTN_XLANG_DIR/python.storage.bin: per case the float32 bytes of out, lse,
    weights (and key_mass), as python.variants.bin. Two runs give identical bytes."""
    runs = [forward_bytes(STORAGE) for _ in range(2)]
    assert runs[0] == runs[1]
    n = 0
    for c in STORAGE:
        with make_desc(c) as d:
            n += 4 * (d.required_len(attn.Operand.OUT) + d.required_len(attn.Operand.LSE)
                      + d.required_len(attn.Operand.WEIGHTS)
                      + (d.required_len(attn.Operand.KEY_MASS) if c["mass"] else 0))
    assert len(runs[0]) == n
    write_xlang("python.storage.bin", runs[0])


# ------------------------------------------------------------------------------------------
# Stored operands = float32 attention over the widened values (bit for bit; int8 K/V on the
# decode path to fp32 rounding)
# ------------------------------------------------------------------------------------------

def widen(a):
    """The float32 values the kernels see: float16 / BF16 widened, (int8, scales) multiplied."""
    if isinstance(a, attn.BF16):
        return a.to_float32()
    if isinstance(a, tuple):
        q, s = a
        return (q.astype(np.float32) * s[..., None]).astype(np.float32)
    return attn.f16_to_f32(a) if a.dtype == np.float16 else a


def assert_int8_close(got, want):
    """int8 K/V on the decode path: fp32 attention over the widened values to fp32 rounding."""
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert (np.isneginf(got) == np.isneginf(want)).all() and ((got == 0) == (want == 0)).all()


def test_dense_storage_equals_widened_f32():
    rng = np.random.default_rng(11)
    B, HQ, HKV, SQ, SK, D, DV = 2, 6, 2, 7, 13, 16, 8
    q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, DV))
    key_valid = rng.random((B, SK)) > 0.2
    with attn.Desc(B, HQ, HKV, SQ, SK, D, head_dim_v=DV, causal="bottom_right",
                   softcap=4.0) as d:
        forms = {"f16": attn.f32_to_f16, "bf16": attn.BF16.from_float32, "i8": attn.quantize_i8}
        for qf in ("f32", "f16", "bf16"):
            for kf in ("f32", "f16", "bf16", "i8"):
                for vf in ("f16", "i8", "bf16"):
                    qs = q if qf == "f32" else forms[qf](q)
                    ks = k if kf == "f32" else forms[kf](k)
                    vs = forms[vf](v)
                    kw = {}
                    if kf == "i8":
                        ks, kw["k_scale"] = ks
                    if vf == "i8":
                        vs, kw["v_scale"] = vs
                    out, lse = d.forward(qs, ks, vs, key_valid, lse=True, **kw)
                    wq = widen(qs)
                    wk = widen((ks, kw["k_scale"]) if kf == "i8" else ks)
                    wv = widen((vs, kw["v_scale"]) if vf == "i8" else vs)
                    want, want_lse = d.forward(wq, wk, wv, key_valid, lse=True)
                    tag = (qf, kf, vf)
                    assert out.tobytes() == want.tobytes(), tag
                    assert lse.tobytes() == want_lse.tobytes(), tag
                    w = d.weights(qs, ks, key_valid, k_scale=kw.get("k_scale"))
                    assert w.tobytes() == d.weights(wq, wk, key_valid).tobytes(), tag


def test_strided_storage_views_are_read_in_place():
    """BSHD f16 / int8 buffers passed as transposed views, an int8 K whose scales are a strided
    view too: no copy (the library reads the views' memory), the widened result."""
    rng = np.random.default_rng(12)
    B, H, S, D = 2, 4, 9, 8
    q = rand(rng, (B, S, H, D)).transpose(0, 2, 1, 3)               # BSHD views
    k16 = attn.f32_to_f16(rand(rng, (B, S, H, D))).transpose(0, 2, 1, 3)
    vi8, vsc = attn.quantize_i8(rand(rng, (B, S, H, D)))
    v, v_scale = vi8.transpose(0, 2, 1, 3), vsc.transpose(0, 2, 1)  # scales (B, H, S) view
    with attn.Desc(B, H, H, S, S, D, causal=1) as d:
        out = d.forward(q, k16, v, v_scale=v_scale)
        want = d.forward(np.ascontiguousarray(q), np.ascontiguousarray(widen(k16)),
                         np.ascontiguousarray(widen((v, v_scale))))
        assert out.tobytes() == want.tobytes()
        # the arrays' own memory is read: change it, the result changes
        base = k16.base if k16.base is not None else k16
        base.flat[0] = np.float16(100.0)
        assert d.forward(q, k16, v, v_scale=v_scale).tobytes() != out.tobytes()


def _pack(rng, lens, H, D, f):
    return [f(rng, (n, H, D)) for n in lens]


def test_varlen_storage_equals_widened_f32():
    rng = np.random.default_rng(13)
    lq, lk = [3, 1, 4], [5, 2, 7]
    HQ, HKV, D = 4, 2, 8
    cu_q = np.array([0] + list(np.cumsum(lq)), np.int32)
    cu_k = np.array([0] + list(np.cumsum(lk)), np.int32)
    q = rand(rng, (cu_q[-1], HQ, D))
    k = rand(rng, (cu_k[-1], HKV, D))
    v = rand(rng, (cu_k[-1], HKV, D))
    with attn.Desc(3, HQ, HKV, max(lq), max(lk), D, varlen=True, causal="bottom_right") as d:
        kb = attn.BF16.from_float32(k)
        vi, vs = attn.quantize_i8(v)  # (total_k, heads_kv, D) -> scales (total_k, heads_kv)
        assert vs.shape == d.shape("v_scale", total_k=int(cu_k[-1]))
        q16 = attn.f32_to_f16(q)
        out, lse = d.forward(q16, kb, vi, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, v_scale=vs,
                             lse=True)
        want, want_lse = d.forward(widen(q16), widen(kb), widen((vi, vs)), cu_seqlens_q=cu_q,
                                   cu_seqlens_k=cu_k, lse=True)
        # V is int8: where these calls take the decode path (at most 4 query rows per KV head:
        # the 1-query sequence here, on 8-lane ISAs also head_dim 8) its scales multiply the
        # probabilities, once per key, so the result equals fp32 attention over the widened
        # values to fp32 rounding, not bit for bit (attn.h, "Storage types")
        assert_int8_close(out, want)
        assert_int8_close(lse, want_lse)
        with pytest.raises(attn.InvalidArgumentError, match=r"v_scale has shape \(13, 3\)"):
            d.forward(q, k, vi, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                      v_scale=np.zeros((13, 3), np.float32))


@pytest.mark.parametrize("layout", ["token_major", "head_major"])
def test_paged_int8_pools_equal_widened_f32(layout):
    """An int8 paged cache with its scale pools (the same page layout as the K/V pools)."""
    rng = np.random.default_rng(14)
    B, HQ, HKV, D, P, pages = 2, 4, 2, 8, 4, 6
    lens = np.array([7, 10], np.int32)
    with attn.Desc(B, HQ, HKV, 1, 12, D, page_size=P, page_layout=layout,
                   causal="bottom_right") as d:
        kpool = rand(rng, d.shape("k", num_pages=pages))
        vpool = rand(rng, d.shape("v", num_pages=pages))
        ki, ks = attn.quantize_i8(kpool)  # scales: the pool's shape without head_dim
        vi, vs = attn.quantize_i8(vpool)
        assert ks.shape == d.shape("k_scale", num_pages=pages)
        table = np.array([[3, 0, -1], [5, 1, 2]], np.int32)
        q = rand(rng, (B, HQ, 1, D))
        out = d.forward(q, ki, vi, k_scale=ks, v_scale=vs, seq_lens_k=lens, block_table=table)
        want = d.forward(q, widen((ki, ks)), widen((vi, vs)), seq_lens_k=lens,
                         block_table=table)
        assert_int8_close(out, want)  # a decode call: the int8 scales are applied once per key
        w = d.weights(q, ki, k_scale=ks, seq_lens_k=lens, block_table=table)
        assert w.tobytes() == d.weights(q, widen((ki, ks)), seq_lens_k=lens,
                                        block_table=table).tobytes()


# ------------------------------------------------------------------------------------------
# Errors name the operand
# ------------------------------------------------------------------------------------------

B, H, S, D = 2, 3, 5, 8


@pytest.fixture
def desc():
    with attn.Desc(B, H, H, S, S, D) as d:
        yield d


def f32(*shape):
    return np.zeros(shape, np.float32)


def test_16bit_operand_with_a_wrong_shape_or_length(desc):
    q, k = f32(B, H, S, D), f32(B, H, S, D)
    with pytest.raises(attn.InvalidArgumentError,
                       match=r"v has shape \(2, 3, 5, 7\), expected \(batch, heads_kv, seq_k, "
                             r"head_dim_v\) = \(2, 3, 5, 8\)"):
        desc.forward(q, k, np.zeros((B, H, S, D - 1), np.float16))
    with pytest.raises(attn.InvalidArgumentError, match="k has 239 elements, needs at least 240"):
        desc.forward(q, attn.BF16(np.zeros(B * H * S * D - 1, np.uint16)), k)
    with pytest.raises(attn.InvalidArgumentError, match="q has 3 dimensions"):
        desc.forward(attn.BF16(np.zeros((B, H, S * D), np.uint16)), k, k)
    with pytest.raises(attn.InvalidArgumentError, match="k.*last dimension.*stride 2"):
        desc.forward(q, np.zeros((B, H, S, 2 * D), np.float16)[..., ::2], k)
    # the raw face: the library checks the length, naming the operand
    with attn.Args() as args:
        args.set(attn.Operand.Q, q).set(attn.Operand.K, k).set(attn.Operand.OUT, f32(B, H, S, D))
        args.set_f16(attn.Operand.V, np.zeros(B * H * S * D - 1, np.float16))
        with pytest.raises(attn.InvalidArgumentError, match="v has 239 elements"):
            desc.run(attn.Op.FORWARD, args)


def test_int8_without_its_scale_and_scale_without_int8(desc):
    q, k = f32(B, H, S, D), f32(B, H, S, D)
    k8 = np.zeros((B, H, S, D), np.int8)
    with pytest.raises(attn.NullPointerError, match="k_scale is NULL but k is int8") as e:
        desc.forward(q, k8, k)
    assert e.value.status is attn.Status.NULL_POINTER
    with pytest.raises(attn.NullPointerError, match="v_scale"):
        desc.forward(q, k, k8)
    with pytest.raises(attn.InvalidArgumentError, match="k_scale is bound but k is not int8"):
        desc.forward(q, k, k, k_scale=f32(B, H, S))
    with pytest.raises(attn.InvalidArgumentError,
                       match=r"k_scale has 4 dimensions \(shape \(2, 3, 5, 1\)\), expected 3: "
                             r"\(batch, heads_kv, seq_k\) = \(2, 3, 5\)"):
        desc.forward(q, k8, k, k_scale=f32(B, H, S, 1))
    with pytest.raises(attn.ArgumentTypeError, match="k_scale has dtype float16"):
        desc.forward(q, k8, k, k_scale=np.zeros((B, H, S), np.float16))
    with pytest.raises(attn.InvalidArgumentError, match="k_scale has 29 elements"):
        desc.forward(q, k8, k, k_scale=f32(B * H * S - 1))
    with pytest.raises(attn.NullPointerError, match="k_scale is NULL"):
        desc.weights(q, k8)
    with attn.Args() as args:
        args.set(attn.Operand.Q, q).set(attn.Operand.K, k8).set(attn.Operand.V, k)
        args.set(attn.Operand.OUT, f32(B, H, S, D))
        with pytest.raises(attn.NullPointerError, match="k_scale is NULL but k is int8"):
            desc.run(attn.Op.FORWARD, args)
        args.set_f32(attn.Operand.K_SCALE, f32(B * H * S - 1))
        with pytest.raises(attn.InvalidArgumentError, match="k_scale has 29 elements"):
            desc.run(attn.Op.FORWARD, args)
        args.set_f32(attn.Operand.K_SCALE, f32(B * H * S))
        desc.run(attn.Op.FORWARD, args)


def test_int8_q_and_ambiguous_bits_are_refused_naming_the_operand(desc):
    k = f32(B, H, S, D)
    with pytest.raises(attn.ArgumentTypeError, match="q has dtype int8: int8 storage is for k"):
        desc.forward(np.zeros((B, H, S, D), np.int8), k, k)
    with attn.Args() as args:
        with pytest.raises(attn.InvalidArgumentError,
                           match="attn_args_set_i8: q cannot be bound with attn_args_set_i8"):
            args.set_i8(attn.Operand.Q, np.zeros(B * H * S * D, np.int8))
        with pytest.raises(attn.InvalidArgumentError, match="q cannot be bound"):
            args.set(attn.Operand.Q, np.zeros(B * H * S * D, np.int8))
        with pytest.raises(attn.InvalidArgumentError, match="bias cannot be bound with "
                                                            "attn_args_set_f16"):
            args.set_f16(attn.Operand.BIAS, np.zeros(4, np.float16))
        with pytest.raises(attn.ArgumentTypeError, match="v has dtype uint16.*attn.BF16"):
            args.set(attn.Operand.V, np.zeros(4, np.uint16))
        with pytest.raises(attn.ArgumentTypeError, match="int8"):
            args.set_i8(attn.Operand.K, np.zeros(4, np.uint8))
    for bad, words in ((np.zeros((B, H, S, D), np.uint16), "v has dtype uint16: 16-bit bit "
                        "patterns are ambiguous; wrap bfloat16 bits as attn.BF16"),
                       (np.zeros((B, H, S, D), np.float64), "v has dtype float64, expected "
                        "float32, float16, int8")):
        with pytest.raises(attn.ArgumentTypeError, match=words):
            desc.forward(k, k, bad)
    with pytest.raises(attn.ArgumentTypeError, match="BF16 bits have dtype float32"):
        attn.BF16(k)
    with pytest.raises(attn.ArgumentTypeError, match="bias must be a numpy.ndarray"):
        desc.forward(k, k, k, bias=attn.BF16(np.zeros((B, H, S, S), np.uint16)))


# ------------------------------------------------------------------------------------------
# Conversion helpers
# ------------------------------------------------------------------------------------------

def test_f16_round_trip_and_ties():
    one = 1.0
    x = np.array([0.0, -0.0, one, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -10, 65504.0,
                  65519.0, 65520.0, -1e6, 2 ** -24, 2 ** -25, np.inf, np.nan, 0.1],
                 np.float32)
    h = attn.f32_to_f16(x)
    assert h.dtype == np.float16 and h.shape == x.shape
    back = attn.f16_to_f32(h)
    assert back.dtype == np.float32
    assert back[2] == 1.0
    assert back[3] == 1.0                     # 1 + 2^-11: a tie, to even (1.0)
    assert back[4] == 1 + 2 ** -9             # 1 + 3 * 2^-11: a tie, to even (1 + 2^-9)
    assert back[5] == 1 + 2 ** -10            # exact
    assert back[6] == 65504.0 and back[7] == 65504.0
    assert np.isposinf(back[8]) and np.isneginf(back[9])   # overflow -> infinity
    assert back[10] == 2 ** -24 and back[11] == 0.0         # subnormal; tie to even (0)
    assert np.isposinf(back[12]) and np.isnan(back[13])
    assert np.signbit(back[1]) and not np.signbit(back[0])
    # numpy's own float16 conversion rounds the same way (round to nearest even)
    rng = np.random.default_rng(1)
    r = (rng.standard_normal(4099) * 10.0 ** rng.integers(-8, 6, 4099)).astype(np.float32)
    with np.errstate(over="ignore"):  # numpy warns when it rounds to infinity
        r16 = r.astype(np.float16)
    assert attn.f32_to_f16(r).tobytes() == r16.tobytes()
    assert attn.f16_to_f32(r16).tobytes() == r16.astype(np.float32).tobytes()
    # uint16 bits are accepted as binary16
    assert attn.f16_to_f32(h.view(np.uint16)).tobytes() == back.tobytes()


def bf16_reference(x):
    """Round to nearest even in integer arithmetic on the float32 bits (NaN kept NaN)."""
    out = []
    for v in x.tolist():
        (b,) = struct.unpack("<I", struct.pack("<f", v))
        if v != v:
            out.append((b >> 16) | 0x40)
            continue
        out.append(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF)
    return np.array(out, np.uint16)


def test_bf16_round_trip_and_ties():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7, -2.5, 3.4028235e38,
                  np.inf, -np.inf, np.nan, 1e-40], np.float32)
    b = attn.f32_to_bf16(x)
    assert b.dtype == np.uint16 and b.shape == x.shape
    back = attn.bf16_to_f32(b)
    assert back[0] == 1.0
    assert back[1] == 1.0                     # a tie, to even
    assert back[2] == 1 + 2 ** -6             # a tie, to even (up)
    assert back[3] == 1 + 2 ** -7 and back[4] == -2.5
    assert np.isposinf(back[5])               # rounds past the largest bf16
    assert np.isposinf(back[6]) and np.isneginf(back[7]) and np.isnan(back[8])
    rng = np.random.default_rng(2)
    r = (rng.standard_normal(4099) * 10.0 ** rng.integers(-30, 30, 4099)).astype(np.float32)
    assert attn.f32_to_bf16(r).tobytes() == bf16_reference(r).tobytes()
    # widening is a shift: exact
    assert attn.bf16_to_f32(attn.BF16(b)).tobytes() == \
        (b.astype(np.uint32) << 16).view(np.float32).tobytes()
    wrapped = attn.BF16.from_float32(x)
    assert isinstance(wrapped, attn.BF16) and wrapped.shape == x.shape
    assert wrapped.to_float32().tobytes() == back.tobytes()
    assert isinstance(wrapped[2:4], attn.BF16) and wrapped[2:4].to_float32()[0] == back[2]
    assert "BF16(shape=(10,))" == repr(wrapped)
    # int16 bits (torch's tensor.view(torch.int16)) are the same bits
    assert attn.BF16(b.view(np.int16)).bits.dtype == np.uint16


def test_converters_fill_out_in_place():
    rng = np.random.default_rng(3)
    cache = np.zeros((2, 3, 10, 8), np.float16)                 # an f16 K cache
    new = rand(rng, (2, 3, 4, 8))
    got = attn.f32_to_f16(new, out=cache[:, :, 5:9])            # a strided view: filled
    assert got.base is cache or got.base is cache.base
    assert cache[:, :, 5:9].tobytes() == new.astype(np.float16).tobytes()
    assert not cache[:, :, :5].any() and not cache[:, :, 9:].any()
    bits = np.zeros((2, 3, 4, 8), np.uint16)
    assert attn.f32_to_bf16(new, out=bits) is bits
    wrapped = attn.BF16(np.zeros((2, 3, 4, 8), np.uint16))
    assert attn.f32_to_bf16(new, out=wrapped) is wrapped
    assert wrapped.bits.tobytes() == bits.tobytes()
    f = np.zeros((2, 3, 4, 8), np.float32)
    assert attn.bf16_to_f32(bits, out=f) is f and (f != 0).any()
    # a non-contiguous x is read through a copy; other dtypes are refused
    x = rand(rng, (8, 6))[:, ::2]
    assert attn.f32_to_f16(x).tobytes() == x.astype(np.float16).tobytes()
    with pytest.raises(attn.ArgumentTypeError, match="x has dtype float64, expected float32"):
        attn.f32_to_f16(np.zeros(3))
    with pytest.raises(attn.ArgumentTypeError, match="out has dtype float32"):
        attn.f32_to_f16(new, out=f)
    with pytest.raises(attn.InvalidArgumentError, match=r"out has shape \(4,\), expected \(3,\)"):
        attn.f32_to_f16(np.zeros(3, np.float32), out=np.zeros(4, np.float16))
    ro = np.zeros(3, np.float16)
    ro.flags.writeable = False
    with pytest.raises(attn.InvalidArgumentError, match="out is read-only"):
        attn.f32_to_f16(np.zeros(3, np.float32), out=ro)
    with pytest.raises(attn.NullPointerError, match="x is None"):
        attn.f16_to_f32(None)
    assert attn.f32_to_f16(np.zeros((0, 4), np.float32)).shape == (0, 4)


def test_quantize_i8_rule():
    rng = np.random.default_rng(4)
    x = rand(rng, (2, 3, 5, 16))
    x[0, 1, 2] = 0.0                                 # an all-zero row: scale 0, q 0
    x[1, 0, 0, 3] = -7.0                             # |x| max negative
    x[1, 2, 4, :] = np.linspace(-1, 1, 16)
    q, s = attn.quantize_i8(x)
    assert q.dtype == np.int8 and q.shape == x.shape
    assert s.dtype == np.float32 and s.shape == (2, 3, 5)
    want_s = (np.abs(x).max(axis=-1) / np.float32(127)).astype(np.float32)
    assert s.tobytes() == want_s.tobytes()
    with np.errstate(invalid="ignore", divide="ignore"):
        want_q = np.where(want_s[..., None] > 0, np.rint(x / want_s[..., None]), 0)
    assert (q == want_q.astype(np.int8)).all()
    assert np.abs(q.astype(np.int32)).max() == 127
    assert s[0, 1, 2] == 0.0 and not q[0, 1, 2].any()
    assert q[1, 0, 0, 3] == -127
    # a tie: 0.5 / scale exactly half-way rounds to even
    t = np.array([[127.0, 0.5, 1.5, 2.5, -0.5]], np.float32)
    qt, st = attn.quantize_i8(t)
    assert st[0] == 1.0 and qt.tolist() == [[127, 0, 2, 2, 0]]
    # out= / scales= (a strided cache slice) are filled
    qc = np.zeros((2, 3, 9, 16), np.int8)
    sc = np.zeros((2, 3, 9), np.float32)
    rq, rs = attn.quantize_i8(x, out=qc[:, :, 2:7], scales=sc[:, :, 2:7])
    assert rq.base is qc and (qc[:, :, 2:7] == q).all() and (sc[:, :, 2:7] == s).all()
    assert not qc[:, :, :2].any() and not sc[:, :, 7:].any()


def test_quantize_i8_nan_row_is_named():
    x = np.ones((2, 3, 4), np.float32)
    x[1, 1, 2] = np.nan                              # row 4 of the 6 rows
    with pytest.raises(attn.InvalidArgumentError,
                       match=r"src row 4 holds a non-finite value.*\(x\[1, 1, :\]\)") as e:
        attn.quantize_i8(x)
    assert e.value.status is attn.Status.INVALID_ARGUMENT
    x[1, 1, 2] = np.inf
    with pytest.raises(attn.InvalidArgumentError, match="row 4"):
        attn.quantize_i8(x)
    with pytest.raises(attn.InvalidArgumentError, match="scalar"):
        attn.quantize_i8(np.float32(1.0))


def test_quantize_i8_rows_of_dim_0_get_scale_0():
    """Rows with no elements have max|x| = 0: scale 0, as attn_quantize_i8 writes in C (a given
    scales array is overwritten, a new one is zeros, never uninitialised memory)."""
    q, s = attn.quantize_i8(np.zeros((3, 0), np.float32), scales=np.full(3, 7.0, np.float32))
    assert q.shape == (3, 0) and s.tolist() == [0.0, 0.0, 0.0]
    q, s = attn.quantize_i8(np.zeros((4, 5, 0), np.float32))
    assert q.shape == (4, 5, 0) and s.shape == (4, 5) and s.tobytes() == bytes(80)
    q, s = attn.quantize_i8(np.zeros((0, 4), np.float32))
    assert q.shape == (0, 4) and s.shape == (0,)


def test_converters_refuse_any_overlap_of_out_and_x():
    """An out sharing memory with x is refused with the library's message whatever the strides
    (C sees only contiguous buffers: a strided out goes through a temporary, so the face checks
    the arrays as given); x is left untouched."""
    base = np.arange(16, dtype=np.float32).reshape(4, 4)
    keep = base.copy()
    # float32 -> 16-bit into the same bytes, out strided over x
    as16 = base.view(np.uint16)                                   # (4, 8)
    for fn in (attn.f32_to_f16, attn.f32_to_bf16):
        with pytest.raises(attn.InvalidArgumentError, match="src and dst overlap"):
            fn(base[:, :2], out=as16[:, ::4] if fn is attn.f32_to_bf16
               else as16.view(np.float16)[:, ::4])
        assert base.tobytes() == keep.tobytes()
    # x strided (read through a copy in the face), out contiguous over it
    with pytest.raises(attn.InvalidArgumentError, match="src and dst overlap"):
        attn.f32_to_f16(base[:, ::2], out=base.view(np.float16)[0, :8].reshape(4, 2))
    assert base.tobytes() == keep.tobytes()
    # 16-bit -> float32, x strided, then out strided
    h = np.zeros((4, 8), np.float16)
    with pytest.raises(attn.InvalidArgumentError, match="src and dst overlap"):
        attn.f16_to_f32(h[:, ::2], out=h.view(np.float32))
    with pytest.raises(attn.InvalidArgumentError, match="src and dst overlap"):
        attn.bf16_to_f32(h.view(np.uint16)[:, :4], out=h.view(np.float32)[::-1])
    # quantize: out or scales over x
    x = np.ones((4, 8), np.float32)
    xb = x.view(np.int8)                                          # (4, 32)
    with pytest.raises(attn.InvalidArgumentError, match="src and dst overlap"):
        attn.quantize_i8(x, out=xb[:, ::4])
    with pytest.raises(attn.InvalidArgumentError, match="scales overlaps src or dst"):
        attn.quantize_i8(x, scales=x[:, 1])
    qo = np.zeros((4, 8), np.int8)
    with pytest.raises(attn.InvalidArgumentError, match="scales overlaps src or dst"):
        attn.quantize_i8(x, out=qo, scales=qo.view(np.float32)[:, 1])
    assert (x == 1).all()
    # interleaved views of one buffer that share no byte stay fine
    buf = np.zeros((4, 16), np.float32)
    buf[:, ::2] = np.arange(32, dtype=np.float32).reshape(4, 8)
    attn.f32_to_f16(buf[:, ::2], out=buf.view(np.float16)[:, 2::4])
    assert (buf.view(np.float16)[:, 2::4] == np.arange(32).reshape(4, 8)).all()


def test_the_readme_example_runs():
    """docs/storage.md "Python": the example runs as written; the caches hold
    what the converters wrote and the result is attention over the widened values."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(root, "docs", "storage.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Python"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    ns = {}
    exec(compile(code, "docs/storage.md (Python)", "exec"), ns)
    n, k_cache, v_cache, v_scale = ns["n"], ns["k_cache"], ns["v_cache"], ns["v_scale"]
    assert k_cache[:, :, :n].tobytes() == ns["new_k"].astype(np.float16).tobytes()
    assert not k_cache[:, :, n:].any() and not v_cache[:, :, n:].any()
    wk = widen(k_cache)
    wv = widen((v_cache, v_scale))
    want = ns["desc"].forward(ns["q"], wk, wv, seq_lens_k=ns["lens"])
    # V is int8: the decode path applies its scales to the probabilities, once per key, so the
    # result equals fp32 attention over the widened values to fp32 rounding, not bit for bit
    np.testing.assert_allclose(ns["out"], want, rtol=1e-6, atol=1e-6)
    assert ns["out_bf"].shape == want.shape and np.isfinite(ns["out_bf"]).all()
    ns["desc"].close()
