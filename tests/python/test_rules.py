"""docs/errors.md, "One rule in every language": every row of the table, asserted for the Python face.

Python's reading of the rows: the shaped face (Desc.forward / weights, scaled_dot_product_attention)
requires numpy arrays of exactly the descriptor's shape (or flat buffers of exactly
required_len elements); the raw face (Args + Desc.run) passes each buffer with its length and
lets the library check it, as C does. Errors: INVALID_ARGUMENT and NULL_POINTER are ValueError
(attn.InvalidArgumentError / attn.NullPointerError, carrying .status), other statuses
attn.AttentionError."""

import gc
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import attn  # noqa: E402
from attn import _lib  # noqa: E402

B, HQ, HKV, SQ, SK, D = 1, 2, 1, 2, 3, 2  # q: 8 elements, k / v: 6, out: 8, lse: 4


def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


@pytest.fixture
def desc():
    with attn.Desc(B, HQ, HKV, SQ, SK, D) as d:
        yield d


def qkv():
    return zeros(B, HQ, SQ, D), zeros(B, HKV, SK, D), zeros(B, HKV, SK, D)


def raises(exc, status, *words):
    """pytest.raises that also checks the status the exception carries and its message."""
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *a):
            handled = self.ctx.__exit__(*a)
            e = self.info.value
            assert e.status is status, (e.status, str(e))
            for w in words:
                assert w in str(e), (w, str(e))
            return handled
    return Check()


INVALID, NULL = attn.Status.INVALID_ARGUMENT, attn.Status.NULL_POINTER


def test_longer_array_shaped_face_needs_the_exact_shape(desc):
    q, k, v = qkv()
    with raises(ValueError, INVALID, "q has 9 elements, needs exactly 8"):
        desc.forward(zeros(9), k, v)
    with raises(ValueError, INVALID, "q has shape (1, 2, 3, 2)"):
        desc.forward(zeros(B, HQ, SQ + 1, D), k, v)
    with raises(ValueError, INVALID, "key_valid has shape (1, 4)"):
        desc.forward(q, k, v, key_valid=zeros(B, SK + 1, dtype=np.bool_))


def test_longer_array_raw_face_reads_the_prefix(desc):
    q, k, v = qkv()
    want = desc.forward(q + 1, k + 1, v + 2)
    out = np.full(desc.required_len(attn.Operand.OUT) + 4, 9.0, np.float32)
    with attn.Args() as a:
        a.set(attn.Operand.Q, np.append(q + 1, [5.0] * 3).astype(np.float32))
        a.set(attn.Operand.K, np.append(k + 1, [np.nan] * 2).astype(np.float32))
        a.set(attn.Operand.V, (v + 2).reshape(-1))
        a.set(attn.Operand.OUT, out)
        desc.run(attn.Op.FORWARD, a)
    assert out[:8].tobytes() == want.tobytes() and (out[8:] == 9.0).all()


def test_shorter_array(desc):
    q, k, v = qkv()
    with raises(ValueError, INVALID, "k has 5 elements, needs at least 6"):
        desc.forward(q, zeros(5), v)
    with raises(ValueError, INVALID, "lse has 3 elements, needs at least 4"):
        desc.forward(q, k, v, lse=zeros(3))
    with attn.Args() as a:  # the raw face: the library's own check, same wording
        a.set(attn.Operand.Q, q).set(attn.Operand.K, zeros(5)).set(attn.Operand.V, v)
        a.set(attn.Operand.OUT, zeros(8))
        with raises(ValueError, INVALID, "k has 5 elements, needs at least 6"):
            desc.run(attn.Op.FORWARD, a)


def test_empty_required_array_is_a_length_error(desc):
    q, k, v = qkv()
    with raises(ValueError, INVALID, "q has 0 elements, needs at least 8"):
        desc.forward(zeros(0), k, v)
    with raises(ValueError, INVALID, "out has 0 elements"):
        desc.forward(q, k, v, out=zeros(0))
    with raises(ValueError, INVALID, "query"):
        attn.scaled_dot_product_attention(zeros(1, 2, 0, D), zeros(1, 2, 3, D), zeros(1, 2, 3, D))
    with attn.Args() as a, raises(ValueError, INVALID, "q has 0 elements, needs at least 8"):
        a.set(attn.Operand.Q, zeros(0))  # bound as empty (not None): the library refuses it
        a.set(attn.Operand.K, k).set(attn.Operand.V, v).set(attn.Operand.OUT, zeros(8))
        desc.run(attn.Op.FORWARD, a)


@pytest.mark.parametrize("name,array", [
    ("key_valid", zeros(0, dtype=np.bool_)), ("allowed", zeros(0, dtype=np.bool_)),
    ("lse", zeros(0)), ("bias", zeros(0)), ("sinks", zeros(0)),
    ("query_valid", zeros(0, dtype=np.uint8)), ("seq_lens_k", zeros(0, dtype=np.int32)),
    ("key_mass", zeros(0)), ("alibi_slopes", zeros(0)),
])
def test_empty_optional_array_is_a_length_error(desc, name, array):
    q, k, v = qkv()
    with raises(ValueError, INVALID, "%s has 0 elements" % name):
        desc.forward(q, k, v, **{name: array})
    with attn.Args() as a, raises(ValueError, INVALID, "%s has 0 elements" % name):
        a.set(attn.Operand.Q, q).set(attn.Operand.K, k).set(attn.Operand.V, v)
        a.set(attn.Operand.OUT, zeros(q.size))
        a.set(attn.Operand[name.upper()], array)  # bound as empty: the library refuses it
        desc.run(attn.Op.FORWARD, a)


def test_none_required_array(desc):
    q, k, v = qkv()
    for args, name in (((None, k, v), "q"), ((q, None, v), "k"), ((q, k, None), "v")):
        with raises(ValueError, NULL, "%s is None" % name):
            desc.forward(*args)
    with raises(ValueError, NULL, "k is None"):
        desc.weights(q, None)
    with raises(ValueError, NULL, "value is None"):
        attn.scaled_dot_product_attention(q, k, None)
    with raises(ValueError, NULL, "Q is None"):
        attn.attention(None, [[1.0]], [[1.0]])
    with attn.Args() as a:  # the raw face: not bound = NULL, named by the library
        a.set(attn.Operand.Q, q).set(attn.Operand.V, v).set(attn.Operand.OUT, zeros(8))
        with raises(ValueError, NULL, "k is NULL"):
            desc.run(attn.Op.FORWARD, a)
    # None means "not given" for every optional array
    assert desc.forward(q, k, v, key_valid=None, allowed=None, lse=None, bias=None, sinks=None,
                        query_valid=None, seq_lens_k=None, key_mass=None).shape == q.shape


def test_output_overlapping_an_input(desc):
    q, k, v = qkv()
    with raises(ValueError, INVALID, "out overlaps q"):
        desc.forward(q, k, v, out=q)
    with raises(ValueError, INVALID, "lse overlaps"):
        desc.forward(q, k, v, lse=k.reshape(-1)[:4])
    assert desc.forward(q, k, k).shape == q.shape  # inputs may share memory


@pytest.mark.parametrize("call,words", [
    (lambda d: d.required_len(2 ** 32 + 6), ["operand (4294967302)"]),
    (lambda d: d.required_len(-1), ["operand (-1)"]),
    (lambda d: d.param(2 ** 32 + 1), ["param (4294967297)"]),
    (lambda d: attn.param_bounds(17), ["param (17)"]),
    (lambda d: d.run(2 ** 32, attn.Args()), ["op (4294967296)"]),
    (lambda d: attn.Args().set(2 ** 32 + 3, zeros(8)), ["operand (4294967299)"]),
])
def test_enum_out_of_range_refused_before_c(desc, call, words, monkeypatch):
    called = []
    for fn in ("attn_desc_set_int", "attn_desc_required_len", "attn_desc_get_int",
               "attn_desc_get_float", "attn_run", "attn_args_set_f32", "attn_param_bounds"):
        real = getattr(_lib, fn)
        monkeypatch.setattr(_lib, fn, lambda *a, _r=real, _n=fn: (called.append(_n), _r(*a))[1])
    with raises(ValueError, INVALID, *words):
        call(desc)
    assert called == [], "reached C: %s" % called


@pytest.mark.parametrize("kwargs,words", [
    (dict(causal=2 ** 32 + 1), "ATTN_PARAM_CAUSAL (4294967297) is outside [0, 2]"),
    (dict(causal=-1), "ATTN_PARAM_CAUSAL (-1) is outside [0, 2]"),
    (dict(weights_mode=2 ** 33), "ATTN_PARAM_WEIGHTS_MODE (8589934592) is outside [0, "),
])
def test_enum_parameter_out_of_range_is_the_librarys(kwargs, words):
    """An enum parameter passes as the int64 of attn_desc_set_int, untruncated: the library
    judges its range and names the parameter."""
    with raises(ValueError, INVALID, words):
        attn.Desc(1, 1, 1, 1, 1, 1, **kwargs)


def test_impossible_sizes_refused_before_allocation():
    with raises(ValueError, INVALID, "seq_q (2147483648) exceeds the limit"):
        attn.Desc(1, 1, 1, 2 ** 31, 1, 1)
    with raises(ValueError, INVALID, "overflow"):
        attn.Desc(2 ** 30, 2 ** 30, 1, 2 ** 30, 1, 1)
    with raises(ValueError, INVALID, "batch (18446744073709551616) does not fit size_t"):
        attn.Desc(2 ** 64, 1, 1, 1, 1, 1)
    with raises(ValueError, INVALID, "head_dim (-3) is negative"):
        attn.Desc(1, 1, 1, 1, 1, -3)
    # the list API takes its sizes from the lists: a pad_mask longer than n is refused
    with raises(ValueError, INVALID, "pad_mask has 40000 elements"):
        attn.attention([[0.0]], [[1.0]], [[2.0]], pad_mask=[True] * 40000)


@pytest.mark.parametrize("name,shown", [("avx2\x00junk", "avx2\\x00junk"), ("\x00", "\\x00"),
                                        ("avx2é", "avx2é"), ("скаляр", "скаляр"),
                                        ("avx9000", "avx9000")])
def test_isa_name_refused_with_the_library_wording(name, shown):
    before = attn.isa()
    with raises(ValueError, INVALID, 'name "%s" is not one of scalar, sse2, avx2, avx512'
                % shown) as e:
        attn.set_isa(name)
    # the list of names is the library's own (one table in C), whatever the name
    with pytest.raises(attn.InvalidArgumentError) as lib:
        attn.set_isa("no-such-isa")
    tail = lambda m: m[m.index("is not one of "):]
    assert tail(str(e.value)) == tail(str(lib.value)), (str(e.value), str(lib.value))
    assert str(lib.value).endswith(", avx512fp16")
    assert attn.isa() == before  # nothing changed ("avx2\0junk" did not select avx2)
    with raises(TypeError, INVALID, "name must be a str"):
        attn.set_isa(b"avx2")


def test_never_closed_objects_are_freed_by_gc(monkeypatch):
    freed = []
    for fn in ("attn_desc_destroy", "attn_args_destroy"):
        real = getattr(_lib, fn)
        monkeypatch.setattr(_lib, fn, lambda h, _r=real, _n=fn: (freed.append(_n), _r(h))[1])
    d = attn.Desc(1, 1, 1, 2, 2, 2)
    q = zeros(1, 1, 2, 2)
    d.forward(q, zeros(1, 1, 2, 4)[..., :2], q)  # a second stride set: a second C descriptor
    assert len(d._variants) == 1
    a = attn.Args()
    del d, a
    gc.collect()
    assert freed.count("attn_desc_destroy") == 2 and freed.count("attn_args_destroy") == 1


def test_use_after_close():
    q = zeros(1, 1, 2, 2)
    d = attn.Desc(1, 1, 1, 2, 2, 2)
    d.close()
    for call in (lambda: d.forward(q, q, q), lambda: d.weights(q, q),
                 lambda: d.param(attn.Param.SCALE), lambda: d.required_len(0),
                 lambda: d.run(attn.Op.FORWARD, attn.Args())):
        with pytest.raises(ValueError, match="closed"):
            call()
    a = attn.Args()
    a.close()
    with pytest.raises(ValueError, match="closed"):
        a.set(attn.Operand.Q, q)


def test_default_scale_is_read_from_the_library():
    for d in (1, 6, 7, 17, 96, 128):
        with attn.Desc(1, 1, 1, 1, 1, d) as desc:
            assert desc.scale == float(np.float32(1.0) / np.sqrt(np.float32(d)))


def test_error_classes_per_status(desc):
    # UNSUPPORTED: a combination the header marks as not supported (a bias in a varlen pack)
    x = np.zeros(8, np.float32)
    cu = np.array([0, 2], np.int32)
    with attn.Desc(1, 1, 1, 2, 2, 4, varlen=True) as vd, attn.Args() as a:
        a.set(attn.Operand.Q, x).set(attn.Operand.K, x).set(attn.Operand.V, x)
        a.set(attn.Operand.OUT, np.zeros(8, np.float32))
        a.set(attn.Operand.CU_SEQLENS_Q, cu).set(attn.Operand.CU_SEQLENS_K, cu)
        a.set(attn.Operand.BIAS, np.zeros(4, np.float32))
        with pytest.raises(attn.AttentionError) as e:
            vd.run(attn.Op.FORWARD, a)
    assert e.value.status is attn.Status.UNSUPPORTED and not isinstance(e.value, ValueError)
    assert "ATTN_PARAM_VARLEN" in e.value.message and e.value.message in str(e.value)
    for exc in (attn.InvalidArgumentError, attn.NullPointerError, attn.ArgumentTypeError):
        assert issubclass(exc, ValueError) and issubclass(exc, attn.AttentionError)
    assert issubclass(attn.ArgumentTypeError, TypeError)
