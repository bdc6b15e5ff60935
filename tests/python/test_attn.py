"""pytest suite for the Python binding (bindings/python/attn).

Run from ctest (python_tests) or directly:
    ATTN_LIBRARY=build/libattn.so python3 -m pytest -q tests/python
Checks the shared vectors (tests/vectors) within 1e-5, writes $ATTN_XLANG_DIR/python.bin for the
cross-language byte comparison, the seed example, the list API against the float64 reference,
error paths and concurrency on one descriptor.
"""

import math
import os
import random
import struct
import sys
import threading

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "vectors"))

import attn  # noqa: E402
import attn_ref  # noqa: E402

VECTORS = os.path.join(ROOT, "tests", "vectors")
TOL = 1e-5


# ------------------------------------------------------------------------------------------
# Shared vectors
# ------------------------------------------------------------------------------------------

def load_cases():
    cases = []
    with open(os.path.join(VECTORS, "index.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            c = dict(tok.split("=", 1) for tok in line.split())
            for key in ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal",
                        "key_valid", "allowed"):
                c[key] = int(c[key])
            c["scale"] = None if c["scale"] == "default" else float(c["scale"])
            for key in ("q_strides", "k_strides", "v_strides", "out_strides"):
                c[key] = None if c[key] == "default" else tuple(int(x) for x in c[key].split(","))
            cases.append(c)
    return cases


CASES = load_cases()

# A stale python.bin must never stand in for this run's output (xlang_identical reads it).
if os.environ.get("ATTN_XLANG_DIR"):
    try:
        os.remove(os.path.join(os.environ["ATTN_XLANG_DIR"], "python.bin"))
    except FileNotFoundError:
        pass


def read(case, part, dtype):
    return np.fromfile(os.path.join(VECTORS, "%s.%s" % (case["name"], part)), dtype=dtype)


def make_desc(c):
    return attn.Desc(c["batch"], c["heads_q"], c["heads_kv"], c["seq_q"], c["seq_k"],
                     c["head_dim"], causal=c["causal"], scale=c["scale"],
                     q_strides=c["q_strides"], k_strides=c["k_strides"],
                     v_strides=c["v_strides"], out_strides=c["out_strides"])


def ref_problem(c):
    return attn_ref.Problem(c["batch"], c["heads_q"], c["heads_kv"], c["seq_q"], c["seq_k"],
                            c["head_dim"], c["causal"], c["scale"], c["q_strides"],
                            c["k_strides"], c["v_strides"], c["out_strides"])


def run_case(c):
    """forward (zero-initialised out, lse wanted) and weights, exactly as the brief says."""
    q, k, v = read(c, "q.f32", np.float32), read(c, "k.f32", np.float32), read(c, "v.f32",
                                                                                np.float32)
    kv = read(c, "key_valid.u8", np.uint8).astype(np.bool_) if c["key_valid"] else None
    al = read(c, "allowed.u8", np.uint8).astype(np.bool_) if c["allowed"] else None
    with make_desc(c) as d:
        assert q.size == d.required_len(attn.Operand.Q)
        assert k.size == d.required_len(attn.Operand.K)
        assert v.size == d.required_len(attn.Operand.V)
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        res_out, res_lse = d.forward(q, k, v, key_valid=kv, allowed=al, out=out, lse=lse)
        assert res_out is out and res_lse is lse  # written in place
        w = d.weights(q, k, key_valid=kv, allowed=al)
    return out, lse, w.reshape(-1), kv, al


def assert_close(name, got, expected):
    assert got.shape == expected.shape, name
    both_inf = np.isinf(expected) & (got == expected)
    with np.errstate(invalid="ignore"):  # inf - inf
        err = np.abs(got.astype(np.float64) - expected) / np.maximum(1.0, np.abs(expected))
    err[both_inf] = 0.0
    bad = ~(err <= TOL)  # NaN counts as bad
    assert not bad.any(), "%s: %d elements off, first at %d: got %r expected %r" % (
        name, bad.sum(), np.argmax(bad), got[np.argmax(bad)], expected[np.argmax(bad)])


@pytest.mark.parametrize("c", CASES, ids=[c["name"] for c in CASES])
def test_shared_vector(c):
    out, lse, w, kv, al = run_case(c)
    assert_close("out", out, read(c, "out.f32", np.float32))
    assert_close("lse", lse, read(c, "lse.f32", np.float32))
    assert_close("weights", w, read(c, "weights.f32", np.float32))

    # Hidden keys get exactly 0, OUT elements the strides do not address stay exactly 0.
    p = ref_problem(c)
    hidden = np.array([not p.visible(kv, al, b, i, j)
                       for b in range(p.batch) for h in range(p.heads_q)
                       for i in range(p.seq_q) for j in range(p.seq_k)])
    assert (w[hidden] == 0.0).all()
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    addressed = np.zeros(out.size, np.bool_)
    for b in range(p.batch):
        for h in range(p.heads_q):
            for i in range(p.seq_q):
                o = attn_ref.offset(p.out_strides, b, h, i)
                addressed[o:o + p.head_dim] = True
    assert (out[~addressed] == 0.0).all()


def test_shared_vectors_present_and_current():
    """The committed vectors are what the generator produces from the reference."""
    import gen_vectors
    files = gen_vectors.generate()
    assert len(CASES) >= 20
    for name, data in files.items():
        with open(os.path.join(VECTORS, name), "rb") as f:
            assert f.read() == data, name


def test_xlang_bytes():
    """Cross-language identity: writes $ATTN_XLANG_DIR/python.bin (out, lse, weights per case in
    index order, little-endian float32). Also checks that two runs give identical bytes."""
    runs = []
    for _ in range(2):
        blob = bytearray()
        for c in CASES:
            out, lse, w, _, _ = run_case(c)
            for a in (out, lse, w):
                blob += a.astype("<f4").tobytes()
        runs.append(bytes(blob))
    assert runs[0] == runs[1]
    xdir = os.environ.get("ATTN_XLANG_DIR")
    if xdir:
        os.makedirs(xdir, exist_ok=True)
        with open(os.path.join(xdir, "python.bin"), "wb") as f:
            f.write(runs[0])


# ------------------------------------------------------------------------------------------
# The seed example and the list API
# ------------------------------------------------------------------------------------------

def test_seed_example():
    Q, K, V = [[0.0], [0.0], [0.0]], [[1.0], [2.0], [3.0]], [[10.0], [20.0], [30.0]]
    out = attn.attention(Q, K, V, causal=True)
    assert out[1][0] == 15.0
    assert out == [[10.0], [15.0], [20.0]]
    assert all(isinstance(x, float) for row in out for x in row)

    with attn.Desc(1, 1, 1, 3, 3, 1, causal=attn.Causal.TOP_LEFT) as d:
        q = np.array(Q, np.float32).reshape(1, 1, 3, 1)  # exactly (batch, heads, seq, head_dim)
        w = d.weights(q, np.array(K, np.float32).reshape(1, 1, 3, 1))
        third = np.float32(1.0) / np.float32(3.0)
        np.testing.assert_allclose(w[0, 0], [[1, 0, 0], [0.5, 0.5, 0], [third] * 3], rtol=1e-6)
        assert w[0, 0, 0, 1] == 0.0 and w[0, 0, 0, 2] == 0.0 and w[0, 0, 1, 2] == 0.0


def test_list_api_against_reference():
    rng = random.Random(1234)
    for trial in range(40):
        n, d = rng.randint(1, 9), rng.choice([1, 2, 3, 8, 17, 64])
        rows = lambda: [[rng.uniform(-2, 2) for _ in range(d)] for _ in range(n)]
        Q, K, V = rows(), rows(), rows()
        causal = rng.random() < 0.5
        pad = None if rng.random() < 0.4 else [rng.random() < 0.7 for _ in range(n)]
        got = attn.attention(Q, K, V, causal=causal, pad_mask=pad)
        # The library computes in float32: feed the reference the same float32 inputs.
        f32 = lambda rs: [[struct.unpack("f", struct.pack("f", x))[0] for x in r] for r in rs]
        ref = attn_ref.simple(f32(Q), f32(K), f32(V), causal=causal, pad_mask=pad)
        assert len(got) == n and all(len(r) == d for r in got)
        for gi, ri in zip(got, ref):
            for g, r in zip(gi, ri):
                assert abs(g - r) <= TOL * max(1.0, abs(r)), (trial, g, r)


def test_list_api_defaults_and_inputs():
    Q = [[1.0, 0.0], [0.0, 1.0]]
    K = [[1.0, 0.0], [0.0, 1.0]]
    V = [[1.0, 2.0], [3.0, 4.0]]
    # default causal=True: query 0 sees only key 0
    assert attn.attention(Q, K, V)[0] == [1.0, 2.0]
    # tuples, numpy rows, ints all accepted
    a = attn.attention(tuple(map(tuple, Q)), np.array(K), [[1, 2], [3, 4]], causal=False)
    b = attn.attention(Q, K, V, causal=False)
    assert a == b
    # padding: key 1 never attended; a query whose keys are all padding gets zeros
    assert attn.attention(Q, K, V, causal=False, pad_mask=[True, False]) == [[1.0, 2.0]] * 2
    assert attn.attention(Q, K, V, causal=True, pad_mask=[False, True]) == [[0.0, 0.0],
                                                                            [3.0, 4.0]]
    # NaN in a padded row never reaches the output
    nan = float("nan")
    out = attn.attention(Q, [[1.0, 0.0], [nan, nan]], [[1.0, 2.0], [nan, nan]],
                         causal=False, pad_mask=[1, 0])
    assert out == [[1.0, 2.0], [1.0, 2.0]]


@pytest.mark.parametrize("args,kwargs,words", [
    ((None, [[1.0]], [[1.0]]), {}, ["Q", "None"]),
    (([[1.0]], None, [[1.0]]), {}, ["K", "None"]),
    (([[1.0]], [[1.0]], None), {}, ["V", "None"]),
    (([], [], []), {}, ["Q", "empty"]),
    (([[]], [[]], [[]]), {}, ["Q[0]", "empty"]),
    (([[1.0], [2.0]], [[1.0]], [[1.0], [2.0]]), {}, ["K", "1 vectors", "Q has 2"]),
    (([[1.0], [2.0]], [[1.0], [2.0]], [[1.0]]), {}, ["V", "1 vectors"]),
    (([[1.0, 2.0]], [[1.0]], [[1.0, 2.0]]), {}, ["K", "1 elements"]),
    (([[1.0, 2.0], [1.0]], [[1.0, 2.0]] * 2, [[1.0, 2.0]] * 2), {}, ["Q[1]", "1 elements"]),
    (([["x"]], [[1.0]], [[1.0]]), {}, ["Q[0][0]", "not a number"]),
    (("abc", [[1.0]], [[1.0]]), {}, ["Q"]),
    (([[1.0]], [[1.0]], [[1.0]]), {"causal": 2}, ["causal"]),
    (([[1.0]], [[1.0]], [[1.0]]), {"causal": None}, ["causal"]),
    (([[1.0]], [[1.0]], [[1.0]]), {"pad_mask": [True, True]}, ["pad_mask", "2 elements"]),
    (([[1.0]], [[1.0]], [[1.0]]), {"pad_mask": 3}, ["pad_mask"]),
])
def test_list_api_errors(args, kwargs, words):
    with pytest.raises(ValueError) as e:
        attn.attention(*args, **kwargs)
    for w in words:
        assert w in str(e.value)


# ------------------------------------------------------------------------------------------
# Descriptor API
# ------------------------------------------------------------------------------------------

def rand(rng, shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def ref_forward(p, q, k, v, kv=None, al=None):
    out, lse, w = attn_ref.attention(p, q.reshape(-1).tolist(), k.reshape(-1).tolist(),
                                     v.reshape(-1).tolist(),
                                     None if kv is None else kv.reshape(-1).tolist(),
                                     None if al is None else al.reshape(-1).tolist())
    return np.array(out), np.array(lse), np.array(w)


def test_desc_forward_shapes_and_reference():
    rng = np.random.default_rng(5)
    B, HQ, HKV, SQ, SK, D = 2, 4, 2, 5, 7, 8
    q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, D))
    kv = rng.random((B, SK)) < 0.7
    kv[:, 0] = True
    al = rng.random((SQ, SK)) < 0.8
    with attn.Desc(B, HQ, HKV, SQ, SK, D, causal=attn.Causal.BOTTOM_RIGHT, scale=0.5) as d:
        assert d.causal is attn.Causal.BOTTOM_RIGHT and d.scale == 0.5
        out = d.forward(q, k, v, key_valid=kv, allowed=al)
        assert out.shape == (B, HQ, SQ, D) and out.dtype == np.float32
        out2, lse = d.forward(q, k, v, key_valid=kv, allowed=al, lse=True)
        assert lse.shape == (B, HQ, SQ)
        assert isinstance(d.forward(q, k, v, lse=False), np.ndarray)
        w = d.weights(q, k, key_valid=kv, allowed=al)
        assert w.shape == (B, HQ, SQ, SK)
    assert np.array_equal(out, out2)
    p = attn_ref.Problem(B, HQ, HKV, SQ, SK, D, attn_ref.CAUSAL_BOTTOM_RIGHT, 0.5)
    ro, rl, rw = ref_forward(p, q, k, v, kv, al)
    assert_close("out", out.reshape(-1), ro)
    assert_close("lse", lse.reshape(-1), rl)
    assert_close("weights", w.reshape(-1), rw)


def test_desc_zero_copy_in_place():
    rng = np.random.default_rng(6)
    B, H, S, D = 1, 2, 6, 16
    q, k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
    big = np.full(10000, 7.0, np.float32)
    out = big[100:100 + B * H * S * D]  # a view: results must land in big's memory
    lse = np.full(B * H * S, 7.0, np.float32)
    with attn.Desc(B, H, H, S, S, D) as d:
        res, res_lse = d.forward(q, k, v, out=out, lse=lse)
        assert res is out and res_lse is lse
        assert np.shares_memory(res, big)
        assert (big[:100] == 7.0).all() and (big[100 + out.size:] == 7.0).all()
        expected = d.forward(q, k, v)
        assert np.array_equal(out, expected.reshape(-1))
        # inputs are read where they are: q changed in place changes the result
        q[...] = 0.0
        uniform = d.forward(q, k, v)
        np.testing.assert_allclose(uniform, np.broadcast_to(v.mean(axis=2, keepdims=True),
                                                            v.shape), rtol=1e-5, atol=1e-6)
        # numpy arrays must have exactly the descriptor's shape, or be flat buffers of exactly
        # required_len elements: a longer flat buffer is refused (docs/errors.md, "One rule")
        longer = np.zeros(out.size + 5, np.float32)
        with pytest.raises(ValueError, match="out has %d elements, needs exactly %d"
                           % (out.size + 5, out.size)):
            d.forward(q, k, v, out=longer)
        assert (longer == 0.0).all()


def test_desc_strided_out_and_bshd():
    rng = np.random.default_rng(7)
    B, H, S, D = 2, 3, 4, 5
    # BSHD inputs: natural numpy shapes (B, S, H, D), passed as flat buffers (read with the
    # configured strides) or as their (B, H, S, D) views (.transpose(0, 2, 1, 3))
    q, k, v = rand(rng, (B, S, H, D)), rand(rng, (B, S, H, D)), rand(rng, (B, S, H, D))
    bshd = (S * H * D, D, H * D)
    gap = (H * S * (D + 3), S * (D + 3), D + 3)
    with attn.Desc(B, H, H, S, S, D, causal=attn.Causal.TOP_LEFT, q_strides=bshd,
                   k_strides=bshd, v_strides=bshd, out_strides=gap) as d:
        n = d.required_len(attn.Operand.OUT)
        assert n == (B - 1) * gap[0] + (H - 1) * gap[1] + (S - 1) * gap[2] + D
        out = d.forward(q.reshape(-1), k.reshape(-1), v.reshape(-1))
        # the allocated out is a (B, H, S, D) view laid out with out_strides
        assert out.shape == (B, H, S, D)
        assert out.strides == tuple(4 * x for x in gap + (1,))
        t = lambda a: a.transpose(0, 2, 1, 3)
        out_views = d.forward(t(q), t(k), t(v))
        assert np.array_equal(out_views, out)
        assert len(d._variants) == 0  # the views match the configured strides
        # a (B, S, H, D) array is not a (B, H, S, D) one: refused, never misread
        with pytest.raises(ValueError, match=r"q has shape \(2, 4, 3, 5\), expected"):
            d.forward(q, t(k), t(v))
    flat_out = np.lib.stride_tricks.as_strided(out, (n,), (4,))
    p = attn_ref.Problem(B, H, H, S, S, D, attn_ref.CAUSAL_TOP_LEFT, None, bshd, bshd, bshd, gap)
    ro, _, _ = ref_forward(p, q, k, v)
    assert_close("out", np.array(flat_out), ro)


def test_desc_attributes():
    with attn.Desc(2, 6, 2, 3, 5, 16, causal=2) as d:
        assert (d.batch, d.heads_q, d.heads_kv, d.seq_q, d.seq_k, d.head_dim) == (2, 6, 2, 3, 5,
                                                                                  16)
        assert d.causal is attn.Causal.BOTTOM_RIGHT and d.scale == 0.25
        assert d.required_len(attn.Operand.Q) == 2 * 6 * 3 * 16
        assert d.required_len(attn.Operand.K) == 2 * 2 * 5 * 16
        assert d.required_len(attn.Operand.LSE) == 2 * 6 * 3
        assert d.required_len(attn.Operand.WEIGHTS) == 2 * 6 * 3 * 5
        assert d.required_len(attn.Operand.KEY_VALID) == 2 * 5
        assert d.required_len(attn.Operand.ALLOWED) == 3 * 5
        assert "heads_q=6" in repr(d)
        past = len(attn.Operand)  # the first value past the library's operand table
        with pytest.raises(ValueError, match=r"operand \(%d\)" % past):
            d.required_len(past)
        with pytest.raises(ValueError, match=r"operand \(4294967296\)"):
            d.required_len(2 ** 32)  # no truncation to 32 bits
    with attn.Desc(1, 1, 1, 1, 1, 4, scale=0.1) as d:
        assert d.scale == np.float32(0.1)


def test_library_info():
    assert attn.version() == "%d.%d.%d" % (attn.version_number() // 10000,
                                           attn.version_number() // 100 % 100,
                                           attn.version_number() % 100)
    assert attn.isa() in [n for n, _ in attn.isa_info()]
    assert attn.num_threads() >= 1
    assert attn.status_string(attn.Status.OK) == "ok"
    assert attn.status_string(12345) == "unknown status"
    with pytest.raises(attn.AttentionError) as e:
        attn.set_isa("avx9000")
    assert e.value.status is attn.Status.INVALID_ARGUMENT and "avx9000" in e.value.message
    with pytest.raises(attn.AttentionError) as e:
        attn.set_num_threads(100000)
    assert e.value.status is attn.Status.INVALID_ARGUMENT


def test_isa_info_lists_what_set_isa_takes():
    """attn.isa_info() (attn_isa_info): weakest first, scalar always runs, each name it calls
    supported is taken by set_isa and each other one refused as UNSUPPORTED."""
    info = attn.isa_info()
    assert info[0] == ("scalar", True) and len({n for n, _ in info}) == len(info) >= 2
    try:
        for name, supported in info:
            if supported:
                attn.set_isa(name)
                assert attn.isa() == name
            else:
                with pytest.raises(attn.AttentionError) as e:
                    attn.set_isa(name)
                assert e.value.status is attn.Status.UNSUPPORTED
    finally:
        attn.set_isa(None)


def test_every_isa_matches_reference():
    """Each kernel this CPU offers reproduces every shared vector (default restored after)."""
    seen = []
    try:
        for name in [n for n, _ in attn.isa_info()]:
            try:
                attn.set_isa(name)
            except attn.AttentionError as e:
                assert e.status is attn.Status.UNSUPPORTED, e
                continue
            assert attn.isa() == name
            seen.append(name)
            for c in CASES:
                out, lse, w, _, _ = run_case(c)
                assert_close(name + " " + c["name"] + " out", out, read(c, "out.f32", np.float32))
                assert_close(name + " " + c["name"] + " lse", lse, read(c, "lse.f32", np.float32))
                assert_close(name + " " + c["name"] + " weights", w,
                             read(c, "weights.f32", np.float32))
    finally:
        attn.set_isa(None)
    assert "scalar" in seen


def test_thread_count_does_not_change_bits():
    c = next(c for c in CASES if c["name"] == "head_dim_128_seq40")
    before = attn.num_threads()
    try:
        attn.set_num_threads(1)
        one = run_case(c)[:3]
        attn.set_num_threads(2)
        two = run_case(c)[:3]
    finally:
        attn.set_num_threads(0)
    for a, b in zip(one, two):
        assert a.tobytes() == b.tobytes()
    assert attn.num_threads() == before


# ------------------------------------------------------------------------------------------
# Error paths
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dims,words", [
    ((0, 1, 1, 4, 4, 8), ["batch"]),
    ((1, 0, 1, 4, 4, 8), ["heads_q"]),
    ((1, 1, 0, 4, 4, 8), ["heads_kv"]),
    ((1, 1, 1, 0, 4, 8), ["seq_q"]),
    ((1, 1, 1, 4, 0, 8), ["seq_k"]),
    ((1, 1, 1, 4, 4, 0), ["head_dim"]),
    ((1, 6, 4, 4, 4, 8), ["heads_q", "6", "heads_kv", "4"]),
    ((1, 1, 1, 2 ** 31, 4, 8), ["seq_q"]),
])
def test_bad_dims(dims, words):
    with pytest.raises(attn.AttentionError) as e:
        attn.Desc(*dims)
    assert e.value.status is attn.Status.INVALID_ARGUMENT
    for w in words:
        assert w in e.value.message
    assert e.value.message in str(e.value)


@pytest.mark.parametrize("kwargs,words", [
    ({"batch": -1}, ["batch", "negative"]),
    ({"seq_q": 2.5}, ["seq_q", "integer"]),
    ({"head_dim": None}, ["head_dim", "integer"]),
    ({"causal": "top"}, ["causal"]),
    ({"scale": "x"}, ["scale"]),
    ({"q_strides": (1, 2)}, ["q_strides", "3 elements"]),
    ({"out_strides": (1, -2, 3)}, ["out_strides[1]", "negative"]),
])
def test_bad_python_arguments(kwargs, words):
    args = dict(batch=1, heads_q=1, heads_kv=1, seq_q=4, seq_k=4, head_dim=8)
    args.update(kwargs)
    dims = [args.pop(k) for k in ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim")]
    with pytest.raises(ValueError) as e:
        attn.Desc(*dims, **args)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("kwargs,word", [
    ({"causal": 3}, "ATTN_PARAM_CAUSAL"),
    ({"causal": -1}, "ATTN_PARAM_CAUSAL"),
    ({"scale": float("nan")}, "ATTN_PARAM_SCALE"),
    ({"scale": float("inf")}, "ATTN_PARAM_SCALE"),
    ({"out_strides": (0, 0, 0)}, ""),  # OUT rows overlap
])
def test_bad_configuration(kwargs, word):
    with pytest.raises(attn.AttentionError) as e:
        attn.Desc(1, 2, 2, 4, 4, 8, **kwargs)
    assert e.value.status is attn.Status.INVALID_ARGUMENT
    assert word in e.value.message and e.value.message


def test_bad_arrays():
    B, H, S, D = 1, 2, 4, 8
    good = lambda *shape: np.zeros(shape, np.float32)
    q, k, v = good(B, H, S, D), good(B, H, S, D), good(B, H, S, D)
    with attn.Desc(B, H, H, S, S, D) as d:
        def fails(words, *args, **kwargs):
            with pytest.raises(ValueError) as e:
                d.forward(*args, **kwargs)
            for w in words:
                assert w in str(e.value), str(e.value)
        fails(["q", "None"], None, k, v)
        fails(["k", "None"], q, None, v)
        fails(["v", "None"], q, k, None)
        fails(["q", "ndarray"], q.tolist(), k, v)
        fails(["k", "63 elements", "at least 64"], q, k.reshape(-1)[:-1], v)
        fails(["v", "dtype float64"], q, k, v.astype(np.float64))
        fails(["q", "last dimension", "stride 2"],
              np.zeros((B, H, S, 2 * D), np.float32)[..., ::2], k, v)
        fails(["q", "2 dimensions", "expected 4"],
              np.asfortranarray(np.zeros((S, 2 * H * D), np.float32)), k, v)
        fails(["v", "dtype >f4"], q, k, v.astype(">f4"))
        fails(["key_valid", "dtype int32", "bool or uint8"], q, k, v,
              key_valid=np.ones((B, S), np.int32))
        fails(["key_valid", "3 elements"], q, k, v, key_valid=np.ones(3, np.bool_))
        fails(["allowed", "15 elements"], q, k, v, allowed=np.ones(15, np.bool_))
        fails(["out", "63 elements"], q, k, v, out=np.zeros(63, np.float32))
        fails(["lse", "7 elements"], q, k, v, lse=np.zeros(7, np.float32))
        ro = np.zeros(B * H * S * D, np.float32)
        ro.flags.writeable = False
        fails(["out", "read-only"], q, k, v, out=ro)
        with pytest.raises(ValueError, match=r"weights has 7 elements"):
            d.weights(q, k, out=np.zeros(7, np.float32))
        with pytest.raises(ValueError, match="k is None"):
            d.weights(q, None)

        # read-only inputs are fine
        qr = q.copy()
        qr.flags.writeable = False
        d.forward(qr, k, v)

        # out aliasing an input: the library refuses it (never writes)
        with pytest.raises(attn.AttentionError) as e:
            d.forward(q, k, v, out=q)
        assert e.value.status is attn.Status.INVALID_ARGUMENT and "out" in e.value.message
        with pytest.raises(attn.AttentionError) as e:
            d.weights(q, k, out=k.reshape(-1)[:B * H * S * S])
        assert e.value.status is attn.Status.INVALID_ARGUMENT
        # nothing above closed or broke the descriptor
        assert np.array_equal(d.forward(q, k, v), np.zeros_like(q))


def test_use_after_close():
    q = np.zeros((1, 1, 2, 4), np.float32)
    d = attn.Desc(1, 1, 1, 2, 2, 4)
    d.forward(q, q, q)
    d.close()
    assert d.closed
    d.close()  # idempotent
    for call in (lambda: d.forward(q, q, q), lambda: d.weights(q, q),
                 lambda: d.required_len(attn.Operand.Q), lambda: d.__enter__()):
        with pytest.raises(ValueError, match="closed"):
            call()
    with attn.Desc(1, 1, 1, 2, 2, 4) as d2:
        d2.forward(q, q, q)
    with pytest.raises(ValueError, match="closed"):
        d2.forward(q, q, q)
    # the with statement of either handle: a closed one is refused by name, the block closes it
    with pytest.raises(ValueError, match="^Desc is closed$"):
        with d2:
            pass
    with attn.Args() as a:
        assert not a.closed
    assert a.closed
    with pytest.raises(ValueError, match="^Args is closed$"):
        with a:
            pass


# ------------------------------------------------------------------------------------------
# Concurrency
# ------------------------------------------------------------------------------------------

def test_many_threads_one_desc():
    """16 threads share one descriptor; each checks its own results (bit-identical to the
    single-threaded answer for its own inputs) and its own error messages."""
    B, HQ, HKV, SQ, SK, D = 2, 4, 2, 9, 13, 24
    n_threads, iterations = 16, 40
    desc = attn.Desc(B, HQ, HKV, SQ, SK, D, causal=attn.Causal.BOTTOM_RIGHT)
    inputs, expected = [], []
    for t in range(n_threads):
        rng = np.random.default_rng(100 + t)
        q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, D))
        kv = rng.random((B, SK)) < 0.8
        inputs.append((q, k, v, kv))
        expected.append((desc.forward(q, k, v, key_valid=kv, lse=True),
                         desc.weights(q, k, key_valid=kv)))
    # the answers differ between threads, so a mix-up would show
    assert not np.array_equal(expected[0][0][0], expected[1][0][0])
    p = attn_ref.Problem(B, HQ, HKV, SQ, SK, D, attn_ref.CAUSAL_BOTTOM_RIGHT)
    ro, _, _ = ref_forward(p, *inputs[3])
    assert_close("out", expected[3][0][0].reshape(-1), ro)

    failures = []
    barrier = threading.Barrier(n_threads)

    def worker(t):
        try:
            q, k, v, kv = inputs[t]
            (eo, el), ew = expected[t]
            barrier.wait()
            for it in range(iterations):
                out, lse = desc.forward(q, k, v, key_valid=kv, lse=True)
                if not (np.array_equal(out, eo) and np.array_equal(lse, el)):
                    failures.append("thread %d iteration %d: wrong forward result" % (t, it))
                if not np.array_equal(desc.weights(q, k, key_valid=kv), ew):
                    failures.append("thread %d iteration %d: wrong weights" % (t, it))
                # a failing call of this thread's own: its message names this thread's numbers
                hq, hkv = 7 + 2 * t, 2 + t % 5
                if hq % hkv == 0:
                    hq += 1
                try:
                    attn.Desc(1, hq, hkv, 1, 1, 1)
                    failures.append("thread %d: bad heads accepted" % t)
                except attn.AttentionError as e:
                    if "(%d)" % hq not in e.message or "(%d)" % hkv not in e.message:
                        failures.append("thread %d got someone else's message: %r"
                                        % (t, e.message))
                # and a failure on the shared descriptor (out aliases q), then it still works
                try:
                    desc.forward(q, k, v, out=q)
                    failures.append("thread %d: aliasing accepted" % t)
                except attn.AttentionError as e:
                    if e.status is not attn.Status.INVALID_ARGUMENT or "out" not in e.message:
                        failures.append("thread %d: wrong aliasing error %r" % (t, e.message))
        except Exception as e:  # pragma: no cover - reported below
            failures.append("thread %d raised %r" % (t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    desc.close()
    assert not failures, failures[:5]


def test_close_while_threads_call():
    """close() racing with running calls never frees the descriptor under them: each call
    either completes correctly or raises ValueError('... closed')."""
    B, H, S, D = 1, 2, 64, 64
    rng = np.random.default_rng(9)
    q, k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
    for _ in range(5):
        desc = attn.Desc(B, H, H, S, S, D)
        expected = desc.forward(q, k, v)
        results = []

        def worker():
            for _ in range(30):
                try:
                    out = desc.forward(q, k, v)
                    results.append(np.array_equal(out, expected))
                except ValueError as e:
                    results.append("closed" in str(e))
                    return
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for th in threads:
            th.start()
        desc.close()
        for th in threads:
            th.join()
        assert results and all(results)
        assert desc._handle is None  # freed once the last call returned


def test_readme_example_runs():
    """The first example of bindings/python/README.md runs as written (its values checked)."""
    import contextlib
    import io
    import re
    with open(os.path.join(ROOT, "bindings", "python", "README.md")) as f:
        text = f.read()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(code, "README.md", "exec"), ns)
    assert printed.getvalue().startswith(repr(np.float32(1 / 8).item()))  # desc.scale at d=64
    assert ns["w"].shape == (2, 8, 16, 16) and ns["lse"].shape == (2, 8, 16)
    assert ns["out"].shape == (2, 8, 16, 64)
    assert (ns["w"][1][..., 12:] == 0.0).all()  # padding keys of batch 1
