"""Arrays that are not numpy arrays, PyTorch's layouts and masks, and the package's typing.

torch is not installed: `Tensor` below stands in for a torch tensor. It only implements the
DLPack protocol (__dlpack__ / __dlpack_device__), delegating to a numpy array, so the binding can
only read it through numpy.from_dlpack, as it reads a real CPU tensor. `Interface` exposes only
__array_interface__ (as many array libraries and memory views do). Values are checked against
the float64 reference tests/reference/attn_ref.py."""

import inspect
import os
import sys
import typing

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import attn  # noqa: E402
import attn_ref  # noqa: E402
from attn import _common  # noqa: E402

sdpa = attn.scaled_dot_product_attention
TOL = 1e-5


class Tensor:
    """A torch-like tensor: DLPack only (no __array__, no __array_interface__)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class TorchLike(Tensor):
    """DLPack plus __array__ returning a view of the same memory, as torch.Tensor has (its
    __array__ is .numpy())."""

    def __array__(self, dtype=None, copy=None):
        return self.a


def _probe(f):
    try:
        return bool(f())
    except Exception:
        return False


# numpy < 1.25 cannot import bool tensors through DLPack; numpy < 2 imports them read-only.
DLPACK_BOOL = _probe(lambda: np.from_dlpack(np.zeros(2, np.bool_)).dtype == np.bool_)
DLPACK_WRITABLE = _probe(lambda: np.from_dlpack(np.zeros(2, np.float32)).flags.writeable)


class Interface:
    """An object exposing only the numpy array interface of an array's memory."""

    def __init__(self, a):
        self._keep = a
        self.__array_interface__ = a.__array_interface__


def ptr(a):
    return a.__array_interface__["data"][0]


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def flat(a):
    return None if a is None else np.ascontiguousarray(a).reshape(-1).tolist()


def assert_close(name, got, want):
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    assert got.shape == want.shape, name
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert np.all(err <= TOL), "%s: max error %g" % (name, np.nanmax(err))


def reference(q, k, v, causal=0, bias=None, key_valid=None, scale=None):
    """attn_ref.run on BHSD arrays (any strides: flattened contiguous first); bias is a full
    (B, Hq, L, S) float array (-inf hides), or None."""
    B, HQ, L, E = q.shape
    HK, S, EV = k.shape[1], k.shape[2], v.shape[3]
    p = attn_ref.Problem(B, HQ, HK, L, S, E, causal, scale, head_dim_v=EV)
    out, lse, w, _ = attn_ref.run(p, flat(q), flat(k), flat(v), key_valid=flat(key_valid),
                                  bias=flat(bias))
    return (np.array(out).reshape(B, HQ, L, EV), np.array(lse).reshape(B, HQ, L),
            np.array(w).reshape(B, HQ, L, S))


B, H, HK, L, S, E = 2, 4, 2, 5, 7, 8


def bshd(rng, heads, seq, dim):
    """A (B, heads, seq, dim) view of BSHD storage, as PyTorch's x.transpose(1, 2) gives."""
    storage = rand(rng, (B, seq, heads, dim))
    view = storage.transpose(0, 2, 1, 3)
    assert not view.flags.c_contiguous
    return storage, view


# ------------------------------------------------------------------------------------------
# DLPack and the array interface: read and written in place, never copied
# ------------------------------------------------------------------------------------------

def test_views_share_the_callers_memory():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for wrap in (Tensor, Interface):
        got = _common.as_ndarray("q", wrap(a), "float32")
        assert ptr(got) == ptr(a) and got.shape == a.shape and got.strides == a.strides
        t = a.transpose(1, 0, 2)
        got = _common.as_ndarray("q", wrap(t), "float32")
        assert ptr(got) == ptr(t) and got.strides == t.strides  # strides kept, no copy
    ro = np.broadcast_to(a[:1], a.shape)  # read-only, stride 0
    got = _common.as_ndarray("k", Interface(ro), "float32")
    assert not got.flags.writeable and got.strides == ro.strides


def test_desc_reads_and_writes_through_dlpack_without_copies():
    rng = np.random.default_rng(31)
    qs, q = bshd(rng, H, L, E)
    ks, k = bshd(rng, HK, S, E)
    vs, v = bshd(rng, HK, S, E)
    kv = rng.random((B, S)) < 0.7
    kv[:, 0] = True
    ro, rl, rw = reference(q, k, v, causal=1, key_valid=kv)
    out_storage = np.full((B, L, H, E), np.nan, np.float32)  # BSHD output, like torch's
    out = out_storage.transpose(0, 2, 1, 3)
    lse = np.full((B, H, L), np.nan, np.float32)
    w = np.full((B, H, L, S), np.nan, np.float32)
    # numpy >= 2: DLPack alone; before, the tensor's __array__ view (TorchLike) is used
    Out = Tensor if DLPACK_WRITABLE else TorchLike
    Mask = Tensor if DLPACK_BOOL else TorchLike
    with attn.Desc(B, H, HK, L, S, E, causal="top_left") as d:
        got_out, got_lse = d.forward(Tensor(q), Tensor(k), Interface(v), key_valid=Mask(kv),
                                     out=Out(out), lse=Out(lse))
        assert isinstance(got_out, Out) and got_out.a is out  # returned as given
        d.weights(Tensor(q), Interface(k), key_valid=Interface(kv), out=Out(w))
        # the same values from contiguous numpy arrays: bit-identical
        want_out, want_lse = d.forward(*(np.ascontiguousarray(x) for x in (q, k, v)),
                                       key_valid=kv, lse=True)
    assert_close("out", out, ro)  # written through the tensor into the caller's storage
    assert_close("lse", lse, rl)
    assert_close("weights", w, rw)
    assert out.tobytes() == want_out.tobytes() and lse.tobytes() == want_lse.tobytes()


def test_sdpa_reads_and_writes_through_dlpack_without_copies():
    rng = np.random.default_rng(32)
    qs, q = bshd(rng, H, L, E)
    ks, k = bshd(rng, HK, S, E)
    vs, v = bshd(rng, HK, S, E)
    ro, _, _ = reference(q, k, v, causal=1)
    out_storage = np.zeros((B, L, H, E), np.float32)
    out = out_storage.transpose(0, 2, 1, 3)
    res = sdpa(Tensor(q), Tensor(k), Tensor(v), is_causal=True, enable_gqa=True,
               out=(Tensor if DLPACK_WRITABLE else TorchLike)(out))
    assert ptr(res) == ptr(out) and res.strides == out.strides  # a view of the caller's out
    assert_close("out", out_storage.transpose(0, 2, 1, 3), ro)
    got = sdpa(Interface(q), Interface(k), Interface(v), is_causal=True, enable_gqa=True)
    assert got.tobytes() == np.ascontiguousarray(out).tobytes()


def test_torch_like_objects_fall_back_to_their_array_view():
    """With DLPack and __array__ (as torch tensors), a numpy that cannot import the tensor
    through DLPack (bool before 1.25) or only read-only (outputs before 2.0) uses the __array__
    view: the same memory, still no copy."""
    rng = np.random.default_rng(36)
    q, k, v = rand(rng, (1, 2, 3, 4)), rand(rng, (1, 2, 5, 4)), rand(rng, (1, 2, 5, 4))
    kv = np.array([[True, True, False, True, True]])
    out = np.zeros((1, 2, 3, 4), np.float32)
    with attn.Desc(1, 2, 2, 3, 5, 4) as d:
        want = d.forward(q, k, v, key_valid=kv)
        got = d.forward(TorchLike(q), TorchLike(k), TorchLike(v), key_valid=TorchLike(kv),
                        out=TorchLike(out))
    assert got.a is out and out.tobytes() == want.tobytes()
    view = _common.as_ndarray("out", TorchLike(out), "float32", writable=True)
    assert ptr(view) == ptr(out) and view.flags.writeable


@pytest.mark.skipif(DLPACK_WRITABLE, reason="this numpy imports DLPack tensors writable")
def test_read_only_dlpack_output_says_why():
    out = np.zeros((1, 1, 2, 4), np.float32)
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        with pytest.raises(ValueError, match=r"out \(Tensor\) is read-only as numpy"):
            d.forward(out, out.copy(), out.copy(), out=Tensor(out))


def test_dlpack_failures_name_the_argument():
    class Failing:
        def __dlpack__(self, **kw):
            raise BufferError("cannot export tensors that require grad")

        def __dlpack_device__(self):
            return (1, 0)

    q = np.zeros((1, 1, 2, 4), np.float32)
    with pytest.raises(TypeError) as e:
        sdpa(q, Failing(), q)
    assert isinstance(e.value, attn.InvalidArgumentError)
    assert "key (Failing) could not be viewed through DLPack" in str(e.value)
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        with pytest.raises(TypeError, match="out .Failing. could not be viewed"):
            d.forward(q, q, q, out=Failing())
    with pytest.raises(TypeError, match="value has dtype float64"):
        sdpa(q, q, Tensor(np.zeros((1, 1, 2, 4))))  # no silent conversion through DLPack
    with pytest.raises(TypeError, match="query must be a numpy.ndarray"):
        sdpa(object(), q, q)


# ------------------------------------------------------------------------------------------
# scaled_dot_product_attention: PyTorch's mask shapes, bool and float, vs the reference
# ------------------------------------------------------------------------------------------

MASK_SHAPES = [(L, S), (S,), (), (1,), (L, 1), (1, S), (H, L, S), (B, 1, L, S), (1, H, L, S),
               (B, H, L, S), (B, 1, 1, S), (1, 1, L, S)]


@pytest.mark.parametrize("shape", MASK_SHAPES, ids=[str(s) for s in MASK_SHAPES])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask_shapes_against_the_reference(shape, kind):
    rng = np.random.default_rng(abs(hash((shape, kind))) % 2 ** 32)
    q, k, v = rand(rng, (B, H, L, E)), rand(rng, (B, H, S, E)), rand(rng, (B, H, S, E))
    if kind == "bool":
        mask = np.asarray(rng.random(shape) < 0.7)  # shape (): a 0-d array, not a scalar
        bias = np.where(np.broadcast_to(mask, (B, H, L, S)), 0.0, -np.inf)
    else:
        mask = rand(rng, shape, -2, 2)
        if mask.ndim:
            mask[rng.random(shape) < 0.2] = -np.inf
        bias = np.broadcast_to(mask, (B, H, L, S)).astype(np.float64)
    ro, _, _ = reference(q, k, v, bias=bias)
    ro = np.nan_to_num(ro)  # a fully hidden row is 0 in both
    for wrap in (np.asarray, Tensor if DLPACK_BOOL or kind == "float" else TorchLike):
        got = sdpa(q, k, v, attn_mask=wrap(mask))
        assert got.shape == (B, H, L, E)
        assert_close("out", got, ro)


def test_strided_masks_and_inputs_against_the_reference():
    rng = np.random.default_rng(33)
    _, q = bshd(rng, H, L, E)
    _, k = bshd(rng, H, S, E)
    _, v = bshd(rng, H, S, E)
    bool_t = (rng.random((S, L)) < 0.7).T          # an (L, S) view with swapped strides
    float_t = rand(rng, (B, H, S, L)).transpose(0, 1, 3, 2)
    for mask in (bool_t, float_t, float_t[:, :1]):
        full = np.broadcast_to(mask, (B, H, L, S))
        bias = np.where(full, 0.0, -np.inf) if mask.dtype == np.bool_ else full
        ro, _, _ = reference(q, k, v, bias=bias)
        assert_close("mask %s" % (mask.shape,), sdpa(q, k, v, attn_mask=mask), np.nan_to_num(ro))


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(attn_mask=np.ones((1, B, H, L, S), bool)), ValueError,
     ["attn_mask has shape (1, 2, 4, 5, 7)", "does not broadcast"]),
    (dict(attn_mask=np.ones((L + 1, S), np.float32)), ValueError, ["attn_mask has shape (6, 7)"]),
    (dict(attn_mask=np.ones((H + 1, 1, S), bool)), ValueError, ["attn_mask has shape (5, 1, 7)"]),
    (dict(attn_mask=np.ones((L, S), np.uint8)), TypeError, ["attn_mask has dtype uint8"]),
    (dict(attn_mask=[[True] * S] * L), TypeError, ["attn_mask must be a numpy.ndarray"]),
    (dict(value=np.zeros((3, H, S, E), np.float32)), ValueError, ["value batch dims (3,)"]),
    (dict(value=np.zeros((B, H + 1, S, E), np.float32)), ValueError, ["value has shape"]),
    (dict(key=np.zeros((B, H, S, E), np.float32)[..., ::2]), ValueError, ["key has E = 4"]),
    (dict(value=np.zeros((B, H, S, 2 * E), np.float32)[..., ::2]), ValueError,
     ["value: its last dimension has stride 2"]),
    (dict(out=np.zeros((B, H, L, E), np.float32)[..., ::-1]), ValueError, ["out has byte strides"]),
    (dict(out=np.zeros((B, H, L, E), np.float64)), TypeError, ["out has dtype float64"]),
    (dict(alibi=np.zeros(H + 1, np.float32)), ValueError, ["alibi slopes have shape (5,)"]),
    (dict(query=np.zeros((B, H, 0, E), np.float32)), ValueError, ["empty dimension: query"]),
])
def test_sdpa_errors_name_the_array(kwargs, exc, words):
    rng = np.random.default_rng(34)
    args = dict(query=rand(rng, (B, H, L, E)), key=rand(rng, (B, H, S, E)),
                value=rand(rng, (B, H, S, E)))
    args.update(kwargs)
    with pytest.raises(exc) as e:
        sdpa(**args)
    assert isinstance(e.value, ValueError) and isinstance(e.value, attn.AttentionError)
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("name,value,words", [
    ("query_valid", np.ones((B, L + 1), bool), ["query_valid has shape (2, 6)", "(batch, seq_q)"]),
    ("query_valid", np.ones((B, 1, L), bool), ["query_valid has 3 dimensions"]),
    ("seq_lens_k", np.full((B, 1), S, np.int32), ["seq_lens_k has 2 dimensions", "(batch)"]),
    ("seq_lens_k", np.full(B + 1, S, np.int32), ["seq_lens_k has shape (3,)", "(batch) = (2,)"]),
    ("alibi_slopes", np.ones((H, 1), np.float32), ["alibi_slopes has 2 dimensions"]),
    ("sinks", np.ones(H + 1, np.float32), ["sinks has shape (5,)", "(heads_q) = (4,)"]),
    ("key_mass", np.zeros((B, H, S, 1), np.float32), ["key_mass has 4 dimensions",
                                                      "(batch, heads_q, seq_k)"]),
    ("lse", np.zeros((B, H), np.float32), ["lse has 2 dimensions"]),
    ("lse", np.zeros((B, H, L), np.float32)[:, ::-1], ["lse is not C-contiguous"]),
    ("key_valid", np.ones((B, S), bool).T, ["key_valid has shape (7, 2)"]),
    ("allowed", np.ones((1, L, S), bool), ["allowed has 3 dimensions", "(seq_q, seq_k)"]),
    ("bias", np.zeros((B, H, L, S), np.float32).transpose(0, 1, 3, 2), ["bias has shape"]),
    ("v", np.zeros((B, HK, S, E), np.float32), ["v has shape (2, 2, 7, 8)"]),
])
def test_desc_errors_name_the_array(name, value, words):
    rng = np.random.default_rng(35)
    args = dict(q=rand(rng, (B, H, L, E)), k=rand(rng, (B, H, S, E)), v=rand(rng, (B, H, S, E)))
    args[name] = value
    alibi = "operand" if name == "alibi_slopes" else None
    with attn.Desc(B, H, H, L, S, E, alibi=alibi) as d:
        with pytest.raises(ValueError) as e:
            d.forward(**args)
    assert isinstance(e.value, attn.InvalidArgumentError)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_weights_out_shape_error_names_it():
    q = np.zeros((B, H, L, E), np.float32)
    with attn.Desc(B, H, H, L, S, E) as d:
        with pytest.raises(ValueError, match=r"weights has shape \(2, 4, 5, 8\)"):
            d.weights(q, np.zeros((B, H, S, E), np.float32),
                      out=np.zeros((B, H, L, S + 1), np.float32))


# ------------------------------------------------------------------------------------------
# Typing: py.typed and annotations on the public API
# ------------------------------------------------------------------------------------------

def test_package_is_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(attn.__file__), "py.typed"))
    public = [getattr(attn, n) for n in attn.__all__]
    funcs = [f for f in public if inspect.isfunction(f)]
    funcs += [m for c in (attn.Desc, attn.Args) for n, m in vars(c).items()
              if inspect.isfunction(m) and (not n.startswith("_") or n in ("__init__",
                                                                           "__enter__"))]
    assert len(funcs) > 20
    for f in funcs:
        sig = inspect.signature(f)
        assert sig.return_annotation is not inspect.Signature.empty, f.__qualname__
        for p in sig.parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                assert p.annotation is not inspect.Parameter.empty, (f.__qualname__, p.name)
    hints = typing.get_type_hints(attn.Desc)  # the attributes read back from the library
    assert {"scale", "causal", "window", "head_dim_v"} <= set(hints)
