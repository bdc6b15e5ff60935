"""attn.scaled_dot_product_attention against a plain float64 numpy reference of PyTorch's
documented semantics (torch.nn.functional.scaled_dot_product_attention's reference code):

    scale = 1 / sqrt(E) unless given
    k, v  = repeat_interleave over the head dim when enable_gqa
    bias  = -inf above the diagonal when is_causal (top-left); bool mask: 0 where True, -inf
            where False; float mask: added; broadcast to (..., Hq, L, S)
    out   = softmax(q k^T * scale + bias) v        (a row with no finite score gives 0)

torch is not needed: numpy arrays, objects with __dlpack__ and with __array__ stand in."""

import math
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import attn  # noqa: E402

sdpa = attn.scaled_dot_product_attention
TOL = 1e-5


def ref(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False, window=None,
        softcap=None, sinks=None):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(E)
    if enable_gqa and q.ndim >= 3:
        g = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    bias = np.zeros((L, S))
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    if is_causal:
        bias[j > i] = -np.inf
    if window is not None:
        left, right = window
        if left is not None and left >= 0:
            bias[j < i - left] = -np.inf
        if right is not None and right >= 0:
            bias[j > i + right] = -np.inf
    if mask is not None:
        m = np.asarray(mask)
        bias = bias + (np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m.astype(np.float64))
    s = s + bias
    m = np.max(s, axis=-1, keepdims=True)
    if sinks is not None:
        sk = np.asarray(sinks, np.float64).reshape(-1, 1, 1)
        m = np.maximum(m, np.broadcast_to(sk, m.shape))
    empty = ~np.isfinite(m)
    m = np.where(empty, 0.0, m)
    e = np.exp(s - m)
    den = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        den = den + np.exp(sk - m)
    w = np.where(empty, 0.0, e / np.where(den == 0, 1.0, den))
    return np.matmul(w, v)


def assert_close(name, got, want):
    assert got.shape == want.shape, (name, got.shape, want.shape)
    err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    assert np.all(err <= TOL), "%s: max error %g" % (name, np.nanmax(err))


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


N, H, L, S, E = 2, 4, 5, 7, 8


def qkv(rng, hk=H, ev=E, lead=(N,)):
    return (rand(rng, lead + (H, L, E)), rand(rng, lead + (hk, S, E)),
            rand(rng, lead + (hk, S, ev)))


MASK_SHAPES = [(L, S), (N, 1, L, S), (1, H, L, S), (N, H, L, S), (N, 1, 1, S), (1, S), (L, 1),
               (H, L, S), (1, 1, L, S)]


@pytest.mark.parametrize("shape", MASK_SHAPES, ids=[str(s) for s in MASK_SHAPES])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_broadcast_like_pytorch(shape, kind):
    rng = np.random.default_rng(hash((shape, kind)) % 2 ** 32)
    q, k, v = qkv(rng)
    if kind == "bool":
        mask = rng.random(shape) < 0.7
    else:
        mask = rand(rng, shape, -2, 2)
        mask[rng.random(shape) < 0.2] = -np.inf
    got = sdpa(q, k, v, attn_mask=mask)
    assert got.shape == (N, H, L, E) and got.dtype == np.float32
    assert np.all(np.isfinite(got))
    assert_close("out", got, ref(q, k, v, mask))


def test_bool_lxs_mask_becomes_allowed_and_fully_masked_rows_are_zero():
    rng = np.random.default_rng(1)
    q, k, v = qkv(rng)
    mask = rng.random((L, S)) < 0.6
    mask[2] = False  # no visible key: 0 (PyTorch >= 2.5's math kernel also gives 0)
    got = sdpa(q, k, v, attn_mask=mask)
    assert (got[:, :, 2] == 0.0).all()
    assert_close("out", got, ref(q, k, v, mask))
    # the same through a 0/-inf float bias of the per-head path: the same values
    mask4 = np.broadcast_to(mask, (N, H, L, S))
    assert_close("out4", sdpa(q, k, v, attn_mask=mask4), ref(q, k, v, mask))


@pytest.mark.parametrize("lead", [(), (3,), (N, H), (2, 3, H)], ids=["LE", "HLE", "NHLE",
                                                                       "ABHLE"])
def test_leading_dims(lead):
    rng = np.random.default_rng(len(lead))
    q, k, v = rand(rng, lead + (L, E)), rand(rng, lead + (S, E)), rand(rng, lead + (S, E))
    for causal in (False, True):
        got = sdpa(q, k, v, is_causal=causal)
        assert got.shape == q.shape
        assert_close("out", got, ref(q, k, v, is_causal=causal))
    if len(lead) == 3:
        mask = rng.random((2, 1, 1, L, S)) < 0.7
        assert_close("masked", sdpa(q, k, v, attn_mask=mask), ref(q, k, v, mask))
        # a non-mergeable batch view is refused with a clear message, not misread
        with pytest.raises(ValueError, match="one batch stride"):
            sdpa(np.swapaxes(q, 0, 1), np.swapaxes(k, 0, 1), np.swapaxes(v, 0, 1))


def test_causal_is_top_left():
    rng = np.random.default_rng(2)
    for l_, s_ in ((5, 7), (7, 5), (6, 6)):
        q, k, v = rand(rng, (N, H, l_, E)), rand(rng, (N, H, s_, E)), rand(rng, (N, H, s_, E))
        got = sdpa(q, k, v, is_causal=True)
        assert_close("out", got, ref(q, k, v, is_causal=True))
        assert np.array_equal(got[..., 0, :], v[..., 0, :])  # query 0 sees key 0 only


def test_gqa_and_scale_and_value_dim():
    rng = np.random.default_rng(3)
    q, k, v = qkv(rng, hk=2, ev=5)
    for scale in (None, 0.25, 0.0, 3.0):
        got = sdpa(q, k, v, scale=scale, enable_gqa=True)
        assert got.shape == (N, H, L, 5)
        assert_close("out", got, ref(q, k, v, scale=scale, enable_gqa=True))
    got = sdpa(q, k, v, is_causal=True, enable_gqa=True)
    assert_close("causal gqa", got, ref(q, k, v, is_causal=True, enable_gqa=True))
    with pytest.raises(ValueError, match="enable_gqa=True"):
        sdpa(q, k, v)
    q3 = rand(rng, (N, 3, L, E))
    with pytest.raises(ValueError, match="multiple"):
        sdpa(q3, k, v, enable_gqa=True)


def test_default_scale_is_the_library_float():
    rng = np.random.default_rng(4)
    for e in (6, 7, 17, 96):
        q, k, v = rand(rng, (1, 2, 3, e)), rand(rng, (1, 2, 4, e)), rand(rng, (1, 2, 4, e))
        with attn.Desc(1, 2, 2, 3, 4, e) as d:
            scale = d.scale
        assert sdpa(q, k, v).tobytes() == sdpa(q, k, v, scale=scale).tobytes()


def test_strided_inputs_are_not_copied_or_misread():
    rng = np.random.default_rng(5)
    # PyTorch layout habit: (N, L, H, E) storage, .transpose(1, 2) to (N, H, L, E)
    qs, ks, vs = rand(rng, (N, L, H, E)), rand(rng, (N, S, H, E)), rand(rng, (N, S, H, E))
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (qs, ks, vs))
    got = sdpa(q, k, v, is_causal=True)
    want = sdpa(*(np.ascontiguousarray(x) for x in (q, k, v)), is_causal=True)
    assert got.tobytes() == want.tobytes()
    assert_close("out", got, ref(q, k, v, is_causal=True))
    # broadcast K/V over the batch (stride 0) and a sliced value with gaps
    kb = np.broadcast_to(k[:1], k.shape)
    vbig = rand(rng, (N, H, S, 3 * E))
    vg = vbig[..., E:2 * E]
    assert_close("bcast", sdpa(q, kb, vg), ref(q, kb, vg))
    # batch broadcast by a size-1 key batch dim
    assert_close("k batch 1", sdpa(q, k[:1], v[:1]), ref(q, np.broadcast_to(k[:1], k.shape),
                                                         np.broadcast_to(v[:1], v.shape)))
    # out written in place, any nesting strides
    obuf = np.zeros((N, L, H, E), np.float32)
    res = sdpa(q, k, v, out=obuf.transpose(0, 2, 1, 3))
    assert np.shares_memory(res, obuf) and res.tobytes() != obuf.tobytes()
    assert_close("out=", res, ref(q, k, v))


def test_dlpack_and_array_interface():
    class Tensor:  # a torch-like object: DLPack only
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    class ArrayLike:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    rng = np.random.default_rng(6)
    q, k, v = qkv(rng)
    mask = rng.random((N, 1, L, S)) < 0.8
    want = sdpa(q, k, v, attn_mask=mask)
    try:  # numpy < 1.25 cannot import bool tensors through DLPack
        dl_mask = Tensor(mask) if np.from_dlpack(Tensor(mask)).dtype == np.bool_ else mask
    except (TypeError, BufferError, RuntimeError):
        dl_mask = ArrayLike(mask)
    got = sdpa(Tensor(q), ArrayLike(k), Tensor(v.transpose(0, 1, 2, 3)), attn_mask=dl_mask)
    assert got.tobytes() == want.tobytes()


def test_extensions_window_softcap_sinks():
    rng = np.random.default_rng(7)
    q, k, v = qkv(rng)
    sinks = rand(rng, (H,))
    for kw in (dict(window=(2, 1)), dict(window=(1, None), is_causal=True), dict(softcap=1.5),
               dict(sinks=sinks), dict(sinks=sinks, is_causal=True, window=(3, 0),
                                        softcap=2.0)):
        got = sdpa(q, k, v, **kw)
        assert_close(str(sorted(kw)), got, ref(q, k, v, **kw))
    # softmax_plus_one = a zero sink on every head
    assert_close("plus one", sdpa(q, k, v, softmax_plus_one=True),
                 ref(q, k, v, sinks=np.zeros(H)))
    # alibi: standard or explicit slopes, as an added -slope * (i - j) bias
    slopes = rand(rng, (H,), 0.1, 0.6)
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    alibi_bias = (-slopes.astype(np.float64)[:, None, None] * (i - j)).astype(np.float32)
    assert_close("alibi", sdpa(q, k, v, alibi=slopes), ref(q, k, v, alibi_bias))
    std = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)  # H = 4: a power of two
    std_bias = (-std[:, None, None] * (i - j)).astype(np.float32)
    assert_close("alibi standard", sdpa(q, k, v, alibi="standard"), ref(q, k, v, std_bias))


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(dropout_p=0.1), ValueError, ["dropout_p (0.1)", "must be 0"]),
    (dict(dropout_p="0"), TypeError, ["dropout_p"]),
    (dict(is_causal=True, attn_mask=np.ones((L, S), bool)), ValueError, ["is_causal"]),
    (dict(attn_mask=np.ones((L, S + 1), bool)), ValueError, ["attn_mask has shape (5, 8)",
                                                             "(2, 4, 5, 7)"]),
    (dict(attn_mask=np.ones((3, N, H, L, S), bool)), ValueError, ["attn_mask"]),
    (dict(attn_mask=np.ones((L, S), np.int32)), TypeError, ["attn_mask", "int32"]),
    (dict(attn_mask=np.ones((L, S), np.float64)), TypeError, ["attn_mask", "float64"]),
    (dict(query=np.zeros((N, H, L, E))), TypeError, ["query has dtype float64"]),
    (dict(key=np.zeros((N, H, S, E + 1), np.float32)), ValueError, ["key has E = 9"]),
    (dict(value=np.zeros((N, H, S + 1, E), np.float32)), ValueError, ["value has shape"]),
    (dict(key=np.zeros((H, S, E), np.float32)), ValueError, ["same number of dimensions"]),
    (dict(key=np.zeros((3, H, S, E), np.float32)), ValueError, ["key batch dims (3,)"]),
    (dict(query=np.zeros((E,), np.float32)), ValueError, ["query has 1 dimension"]),
    (dict(query=None), ValueError, ["query is None"]),
    (dict(query=[[0.0] * E] * L), TypeError, ["query must be a numpy.ndarray"]),
    (dict(query=np.zeros((N, H, L, 2 * E), np.float32)[..., ::2]), ValueError,
     ["query: its last dimension has stride 2"]),
    (dict(scale="0.5"), TypeError, ["scale"]),
    (dict(scale=1e39), ValueError, ["ATTN_PARAM_SCALE (9.9999999999999994e+38)"]),
    (dict(window=(-3, 0)), ValueError, ["ATTN_PARAM_WINDOW_LEFT (-3)"]),
    (dict(sinks=np.zeros(H + 1, np.float32)), ValueError, ["sinks has shape (5,)"]),
    (dict(is_causal=1), TypeError, ["is_causal"]),
    (dict(out=np.zeros((N, H, L, E + 1), np.float32)), ValueError, ["out has shape"]),
    (dict(out=np.zeros((N, 1, L, E), np.float32)[:, [0] * H]), None, []),
])
def test_errors(kwargs, exc, words):
    rng = np.random.default_rng(8)
    q, k, v = qkv(rng)
    args = dict(query=q, key=k, value=v)
    args.update(kwargs)
    if exc is None:  # a fancy-indexed (copied, contiguous) out is fine
        sdpa(**args)
        return
    with pytest.raises(exc) as e:
        sdpa(**args)
    assert isinstance(e.value, ValueError) and isinstance(e.value, attn.AttentionError)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_overlapping_out_is_the_librarys_error():
    rng = np.random.default_rng(9)
    q, k, v = qkv(rng)
    with pytest.raises(attn.InvalidArgumentError, match="out overlaps"):
        sdpa(q, k, v, out=q)
    with pytest.raises(attn.InvalidArgumentError, match="do not nest"):
        sdpa(q, k, v, out=np.lib.stride_tricks.as_strided(
            np.zeros((1, H, L, E), np.float32), (N, H, L, E), (0, L * E * 4, E * 4, 4),
            writeable=True))
