"""Desc in 0.2: every attn_param as a keyword (validated with attn_param_bounds, read back from
the library), every operand of attn_run, the shape checks and the stride mapping of numpy arrays
and the raw Args / Desc.run face. Values are checked against the float64 reference
tests/reference/attn_ref.py (attn_ref.run) or plain numpy float64."""

import gc
import math
import os
import sys
import threading

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import attn  # noqa: E402
import attn_ref  # noqa: E402

TOL = 1e-5


def rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def flat(a):
    return None if a is None else np.ascontiguousarray(a).reshape(-1).tolist()


def assert_close(name, got, want):
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    assert got.shape == want.shape, name
    both_inf = np.isinf(want) & (got == want)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    err[both_inf] = 0.0
    bad = ~(err <= TOL)
    assert not bad.any(), "%s: %d off, first at %d: got %r want %r" % (
        name, bad.sum(), np.argmax(bad), got[np.argmax(bad)], want[np.argmax(bad)])


# ------------------------------------------------------------------------------------------
# Scale: the float the library uses
# ------------------------------------------------------------------------------------------

def f32_inv_sqrt(d):
    """1.0f / sqrtf(d) in float32 (IEEE sqrt and division are correctly rounded)."""
    return float(np.float32(1.0) / np.sqrt(np.float32(d)))


def test_default_scale_is_the_library_float_for_every_head_dim():
    differ = []
    for d in range(1, 1025):
        with attn.Desc(1, 1, 1, 1, 1, d) as desc:
            assert desc.scale == f32_inv_sqrt(d), d
            assert desc.param(attn.Param.SCALE) == desc.scale
            if desc.scale != float(np.float32(1.0 / math.sqrt(d))):
                differ.append(d)
    # the old getter's float(1/sqrt(d)) is an ulp off for these (958 of 1..4096)
    assert differ[:4] == [6, 7, 17, 18] and 96 in differ


@pytest.mark.parametrize("d", [6, 7, 17, 96])
def test_scale_read_back_gives_bit_identical_output(d):
    rng = np.random.default_rng(d)
    B, H, SQ, SK = 2, 2, 5, 9
    q, k, v = rand(rng, (B, H, SQ, d)), rand(rng, (B, H, SK, d)), rand(rng, (B, H, SK, d))
    with attn.Desc(B, H, H, SQ, SK, d) as default:
        assert default.scale != float(np.float32(1.0 / math.sqrt(d)))  # the ulp case
        out, lse = default.forward(q, k, v, lse=True)
        w = default.weights(q, k)
        scale = default.scale
    with attn.Desc(B, H, H, SQ, SK, d, scale=scale) as same:
        assert same.scale == scale
        out2, lse2 = same.forward(q, k, v, lse=True)
        assert out2.tobytes() == out.tobytes() and lse2.tobytes() == lse.tobytes()
        assert same.weights(q, k).tobytes() == w.tobytes()
    p = attn_ref.Problem(B, H, H, SQ, SK, d, scale=scale)
    ro, rl, rw, _ = attn_ref.run(p, flat(q), flat(k), flat(v))
    assert_close("out", out, ro)
    assert_close("lse", lse, rl)
    assert_close("weights", w, rw)


# ------------------------------------------------------------------------------------------
# Parameters: keywords, read back, bounds
# ------------------------------------------------------------------------------------------

def test_every_parameter_reads_back():
    with attn.Desc(2, 4, 2, 5, 7, 8, causal="bottom_right", scale=0.3, window=(3, 1),
                   softcap=30, alibi="standard", softmax_plus_one=True, head_dim_v=12,
                   weights_mode="capped", bias_first=True) as d:
        assert d.causal is attn.Causal.BOTTOM_RIGHT
        assert d.scale == float(np.float32(0.3))
        assert d.window == (3, 1) and d.window_left == 3 and d.window_right == 1
        assert d.softcap == 30.0 and isinstance(d.softcap, float)
        assert d.alibi is attn.Alibi.STANDARD
        assert d.softmax_plus_one is True and d.bias_first is True
        assert d.head_dim_v == 12
        assert d.weights_mode is attn.WeightsMode.CAPPED
        expect = {attn.Param.CAUSAL: 2, attn.Param.SCALE: float(np.float32(0.3)),
                  attn.Param.WINDOW_LEFT: 3, attn.Param.WINDOW_RIGHT: 1,
                  attn.Param.SOFTCAP: 30.0, attn.Param.ALIBI: 2,
                  attn.Param.SOFTMAX_PLUS_ONE: 1, attn.Param.HEAD_DIM_V: 12,
                  attn.Param.WEIGHTS_MODE: 3, attn.Param.BIAS_FIRST: 1}
        for p, want in expect.items():
            got = d.param(p)
            assert got == want and type(got) is type(want), (p, got)
        assert d.shape(attn.Operand.V) == (2, 2, 7, 12)
        assert d.shape(attn.Operand.OUT) == (2, 4, 5, 12)
        assert d.required_len(attn.Operand.V) == 2 * 2 * 7 * 12
        assert "window_left=3, window_right=1" in repr(d) and "head_dim_v=12" in repr(d)
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        assert (d.causal, d.window, d.softcap, d.alibi, d.softmax_plus_one, d.head_dim_v,
                d.weights_mode, d.bias_first) == (attn.Causal.NONE, (-1, -1), 0.0,
                                                  attn.Alibi.NONE, False, 4,
                                                  attn.WeightsMode.SOFTMAX, False)
    # the other spellings
    with attn.Desc(1, 1, 1, 2, 2, 4, window_left=5, causal=attn.Causal.TOP_LEFT,
                   alibi=attn.Alibi.OPERAND, weights_mode=attn.WeightsMode.SCORES) as d:
        assert d.window == (5, -1) and d.alibi is attn.Alibi.OPERAND
    with attn.Desc(1, 1, 1, 2, 2, 4, window=(None, 2), softcap=np.float32(2.5),
                   scale=np.float64(0.5)) as d:
        assert d.window == (-1, 2) and d.softcap == 2.5 and d.scale == 0.5


def test_param_bounds_from_the_library():
    assert attn.param_bounds(attn.Param.SCALE) == (True, -3.4028234663852886e38,
                                                   3.4028234663852886e38)
    assert attn.param_bounds(attn.Param.WINDOW_LEFT) == (False, -1.0, 2147483647.0)
    assert attn.param_bounds("softcap")[0] is True
    assert attn.param_bounds(attn.Param.DIAGONAL) == (False, 0.0, 2.0)
    assert attn.param_bounds("alibi_form") == (False, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"param \(17\)"):
        attn.param_bounds(17)  # 10..13 serving, 14 the forward's arithmetic, 15..16 diagonal, form


# ------------------------------------------------------------------------------------------
# compute: the forward's arithmetic (ATTN_PARAM_COMPUTE)
# ------------------------------------------------------------------------------------------

def cpu_has_avx512_fp16():
    """True when this CPU has AVX512-FP16 (Linux: the avx512_fp16 flag of /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and "avx512_fp16" in line.split()
                       for line in f)
    except OSError:  # not Linux: unknown, so only closeness is checked
        return False


def test_compute_defaults_to_exact_and_reads_back():
    assert int(attn.Param.COMPUTE) == 14
    assert (int(attn.Compute.EXACT), int(attn.Compute.FP16)) == (0, 1)
    assert attn.param_bounds(attn.Param.COMPUTE) == (False, 0.0, 3.0)
    with attn.Desc(1, 2, 2, 64, 64, 32) as d:
        assert d.compute is attn.Compute.EXACT
        assert d.param(attn.Param.COMPUTE) == 0 and d.param("compute") == 0
        assert "compute" not in repr(d)
    for spelling in (attn.Compute.FP16, 1, "fp16", "FP16"):
        with attn.Desc(1, 2, 2, 64, 64, 32, compute=spelling) as d:
            assert d.compute is attn.Compute.FP16, spelling
            assert d.param(attn.Param.COMPUTE) == 1
            assert "compute='fp16'" in repr(d)
    for spelling in (attn.Compute.EXACT, 0, "exact", None):
        with attn.Desc(1, 2, 2, 64, 64, 32, compute=spelling) as d:
            assert d.compute is attn.Compute.EXACT, spelling


def test_compute_invalid_value():
    # an out-of-range value is the library's to refuse, naming the parameter and its range;
    # a name that is not a member is refused by the binding, naming the valid ones
    with pytest.raises(attn.InvalidArgumentError) as e:
        attn.Desc(1, 2, 2, 64, 64, 32, compute=4)
    assert isinstance(e.value, ValueError) and e.value.status is attn.Status.INVALID_ARGUMENT
    assert "ATTN_PARAM_COMPUTE (4) is outside [0, 3]" in e.value.message
    with pytest.raises(attn.InvalidArgumentError, match=r"compute \('int4'\) is not one of"):
        attn.Desc(1, 2, 2, 64, 64, 32, compute="int4")
    with pytest.raises(attn.ArgumentTypeError, match="compute must be an integer, got float"):
        attn.Desc(1, 2, 2, 64, 64, 32, compute=1.0)
    # the library's own check, past the binding's: its message names ATTN_PARAM_COMPUTE
    from attn import _lib
    from attn._common import check_status
    with attn.Desc(1, 2, 2, 64, 64, 32) as d:
        with pytest.raises(attn.InvalidArgumentError) as e:
            check_status(_lib.attn_desc_set_int(d._handle, int(attn.Param.COMPUTE), 4))
        assert e.value.status is attn.Status.INVALID_ARGUMENT
        assert "ATTN_PARAM_COMPUTE (4)" in e.value.message, e.value.message
        assert "ATTN_PARAM_COMPUTE" in str(e.value)
        assert d.param(attn.Param.COMPUTE) == 0  # the refused value changed nothing


def test_compute_fp16_prefill_close_to_exact():
    rng = np.random.default_rng(1400)
    q, k, v = (rand(rng, (1, 2, 64, 32)) for _ in range(3))
    with attn.Desc(1, 2, 2, 64, 64, 32) as d:
        exact = d.forward(q, k, v)
    with attn.Desc(1, 2, 2, 64, 64, 32, compute="fp16") as d:
        fp16 = d.forward(q, k, v)
    worst = float(np.max(np.abs(fp16.astype(np.float64) - exact)))
    assert worst <= 1e-2, worst
    # with AVX512-FP16 and the kernels not capped below avx512 (isa() "avx512", or "avx512fp16"
    # where the library names that level) the fast path ran: its fp16 rounding shows
    if cpu_has_avx512_fp16() and attn.isa().startswith("avx512"):
        assert np.count_nonzero(fp16 != exact) > 0, "FP16 gave EXACT's bits"


@pytest.mark.parametrize("kwargs,exc,words", [
    ({"scale": "0.5"}, TypeError, ["scale", "real number", "str"]),
    ({"scale": 1e39}, ValueError, ["ATTN_PARAM_SCALE (9.9999999999999994e+38)", "outside"]),
    ({"scale": -1e39}, ValueError, ["ATTN_PARAM_SCALE (-9.9999999999999994e+38)"]),
    ({"scale": 10 ** 400}, ValueError, ["ATTN_PARAM_SCALE (inf)", "outside"]),
    ({"scale": float("nan")}, ValueError, ["ATTN_PARAM_SCALE", "NaN"]),
    ({"scale": True}, TypeError, ["scale", "bool"]),
    ({"scale": None}, None, []),
    ({"softcap": -1}, ValueError, ["ATTN_PARAM_SOFTCAP (-1)", "outside [0, "]),
    ({"softcap": "1"}, TypeError, ["softcap"]),
    ({"window": (-2, 0)}, ValueError, ["ATTN_PARAM_WINDOW_LEFT (-2)", "outside [-1, "]),
    ({"window_right": 2 ** 31}, ValueError, ["ATTN_PARAM_WINDOW_RIGHT (2147483648)"]),
    ({"window_left": 2 ** 70}, ValueError, ["window_left (1180591620717411303424)",
                                            "does not fit int64_t"]),
    ({"window_left": 1.5}, TypeError, ["window_left", "integer"]),
    ({"window": (1, 2, 3)}, ValueError, ["window", "pair"]),
    ({"window": 3}, TypeError, ["window", "pair"]),
    ({"window": (1, 2), "window_left": 1}, ValueError, ["not both"]),
    ({"causal": 3}, ValueError, ["ATTN_PARAM_CAUSAL (3)", "outside [0, 2]"]),
    ({"causal": 2 ** 32 + 1}, ValueError, ["ATTN_PARAM_CAUSAL (4294967297)"]),
    ({"causal": "sideways"}, ValueError, ["causal ('sideways')", "'top_left'"]),
    ({"causal": 1.0}, TypeError, ["causal", "integer"]),
    ({"alibi": "geometric"}, ValueError, ["alibi ('geometric')", "'standard'"]),
    ({"alibi": 3}, ValueError, ["ATTN_PARAM_ALIBI (3)"]),
    ({"softmax_plus_one": 2}, ValueError, ["ATTN_PARAM_SOFTMAX_PLUS_ONE (2)", "outside [0, 1]"]),
    ({"bias_first": -1}, ValueError, ["ATTN_PARAM_BIAS_FIRST (-1)"]),
    ({"head_dim_v": 0}, ValueError, ["ATTN_PARAM_HEAD_DIM_V (0)", "outside [1, "]),
    ({"head_dim_v": 2 ** 31}, ValueError, ["ATTN_PARAM_HEAD_DIM_V (2147483648)"]),
    ({"weights_mode": 5}, ValueError, ["ATTN_PARAM_WEIGHTS_MODE (5)"]),
    ({"weights_mode": "probabilities"}, ValueError, ["weights_mode"]),
    ({"compute": 4}, ValueError, ["ATTN_PARAM_COMPUTE (4)", "outside [0, 3]"]),
    ({"compute": 2 ** 32 + 1}, ValueError, ["ATTN_PARAM_COMPUTE (4294967297)"]),
    ({"bias_strides": (1, 2)}, ValueError, ["bias_strides", "3 elements"]),
])
def test_parameter_errors(kwargs, exc, words):
    if exc is None:
        attn.Desc(1, 2, 2, 3, 4, 8, **kwargs).close()
        return
    with pytest.raises(exc) as e:
        attn.Desc(1, 2, 2, 3, 4, 8, **kwargs)
    assert isinstance(e.value, attn.AttentionError)
    assert isinstance(e.value, ValueError)  # every refused argument is a ValueError too
    assert e.value.status is attn.Status.INVALID_ARGUMENT
    for w in words:
        assert w in str(e.value), str(e.value)


def test_library_checks_behind_the_binding():
    """What only the library can judge still surfaces as its own message and status."""
    with pytest.raises(attn.InvalidArgumentError) as e:
        attn.Desc(1, 2, 2, 3, 4, 8, head_dim_v=6, out_strides=(0, 0, 0))
    assert "out" in e.value.message and e.value.message.startswith("attn_desc_set_strides")
    # an overflowing head_dim_v: refused by the library, naming it
    with pytest.raises(attn.InvalidArgumentError, match="HEAD_DIM_V"):
        attn.Desc(2 ** 20, 2 ** 10, 1, 2 ** 10, 1, 1, head_dim_v=2 ** 31 - 1)


# ------------------------------------------------------------------------------------------
# Every operand against the reference
# ------------------------------------------------------------------------------------------

CONFIGS = [
    dict(name="window_tl", causal=1, window=(2, 0)),
    dict(name="window_sym_none", window=(1, 2)),
    dict(name="softcap_bias", softcap=2.0, scale=1.5, bias=(2, 4, 5, 7)),
    dict(name="softcap_bias_first", softcap=2.0, bias_first=True, bias=(1, 4, 1, 7)),
    dict(name="bias_bcast_heads", causal=2, bias=(2, 1, 5, 7)),
    dict(name="alibi_standard_br", causal=2, alibi="standard"),
    dict(name="alibi_operand", alibi="operand", alibi_slopes=True),
    dict(name="sinks", sinks=True, allowed=True),
    dict(name="plus_one_kv", softmax_plus_one=True, key_valid=True),
    dict(name="query_valid_mass", causal=1, query_valid=True, key_mass=True),
    dict(name="seq_lens_br", causal=2, seq_lens_k=True, key_mass=True),
    dict(name="head_dim_v", head_dim_v=3, causal=1, sinks=True),
    dict(name="everything", causal=2, window=(3, 1), softcap=4.0, alibi="operand",
         alibi_slopes=True, head_dim_v=6, bias=(2, 4, 5, 7), key_valid=True, allowed=True,
         sinks=True, query_valid=True, seq_lens_k=True, key_mass=True, scale=0.4),
]


def make_operands(rng, cfg, B, HQ, HKV, SQ, SK, D, DV):
    ops = {}
    if cfg.get("bias"):
        ops["bias"] = rand(rng, cfg["bias"], -2, 2)
        if cfg["name"] == "everything":
            ops["bias"][0, 1, 2, 3] = -np.inf  # a -inf bias hides a key
    if cfg.get("alibi_slopes"):
        ops["alibi_slopes"] = rand(rng, (HQ,), 0.05, 0.5)
    if cfg.get("sinks"):
        ops["sinks"] = rand(rng, (HQ,), -1, 1)
    if cfg.get("key_valid"):
        kv = rng.random((B, SK)) < 0.8
        kv[:, 0] = True
        ops["key_valid"] = kv
    if cfg.get("allowed"):
        al = rng.random((SQ, SK)) < 0.8
        al[1, :] = False  # a row with no visible key
        ops["allowed"] = al
    if cfg.get("query_valid"):
        qv = np.ones((B, SQ), np.bool_)
        qv[1, -2:] = False
        ops["query_valid"] = qv
    if cfg.get("seq_lens_k"):
        ops["seq_lens_k"] = np.array([SK - 2, 3][:B], np.int32)
    return ops


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c["name"] for c in CONFIGS])
def test_operands_against_reference(cfg):
    rng = np.random.default_rng(abs(hash(cfg["name"])) % 2 ** 32)
    B, HQ, HKV, SQ, SK, D = 2, 4, 2, 5, 7, 8
    DV = cfg.get("head_dim_v", D)
    q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, DV))
    ops = make_operands(rng, cfg, B, HQ, HKV, SQ, SK, D, DV)
    kw = {x: cfg[x] for x in ("causal", "window", "softcap", "alibi", "softmax_plus_one",
                              "head_dim_v", "bias_first", "scale") if x in cfg}
    want_mass = cfg.get("key_mass", False)
    with attn.Desc(B, HQ, HKV, SQ, SK, D, **kw) as d:
        res = d.forward(q, k, v, lse=True, key_mass=want_mass or None, **ops)
        if want_mass:
            out, lse, mass = res
            assert mass.shape == (B, HQ, SK)
        else:
            out, lse = res
        assert out.shape == (B, HQ, SQ, DV) and lse.shape == (B, HQ, SQ)
        w = d.weights(q, k, **ops)
    p = attn_ref.Problem(
        B, HQ, HKV, SQ, SK, D, cfg.get("causal", 0), d.scale,
        window_left=d.window_left, window_right=d.window_right, softcap=d.softcap,
        alibi=int(d.alibi), softmax_plus_one=d.softmax_plus_one, head_dim_v=DV,
        bias_first=d.bias_first,
        bias_strides=None if "bias" not in ops else tuple(
            0 if n == 1 else s // 4 for n, s in zip(ops["bias"].shape[:3],
                                                   ops["bias"].strides[:3])))
    ro, rl, rw, rm = attn_ref.run(p, flat(q), flat(k), flat(v), flat(ops.get("key_valid")),
                                  flat(ops.get("allowed")), flat(ops.get("bias")),
                                  flat(ops.get("alibi_slopes")), flat(ops.get("sinks")),
                                  flat(ops.get("query_valid")), flat(ops.get("seq_lens_k")))
    assert_close("out", out, ro)
    assert_close("lse", lse, rl)
    assert_close("weights", w, rw)
    rw = np.array(rw)
    assert (w.reshape(-1)[rw == 0.0] == 0.0).all()  # hidden keys exactly 0
    assert (lse.reshape(-1)[np.isneginf(rl)] == -np.inf).all()
    if want_mass:
        assert_close("key_mass", mass, rm)


def test_weights_modes_against_numpy():
    rng = np.random.default_rng(11)
    B, H, SQ, SK, D = 1, 2, 4, 6, 8
    q, k = rand(rng, (B, H, SQ, D), -2, 2), rand(rng, (B, H, SK, D), -2, 2)
    bias = rand(rng, (B, H, SQ, SK))
    cap, scale = 1.5, 0.7
    s = scale * np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64))
    causal = np.tril(np.ones((SQ, SK), bool))
    want = {
        "scores": s,
        "masked": np.where(causal, s + bias, -np.inf),
        "capped": np.where(causal, cap * np.tanh(s / cap) + bias, -np.inf),
        "softcapped": cap * np.tanh(s / cap),  # no bias, no mask
    }
    for mode, expected in want.items():
        with attn.Desc(B, H, H, SQ, SK, D, causal=1, scale=scale, softcap=cap,
                       weights_mode=mode) as d:
            got = d.weights(q, k, bias=bias)
        assert_close(mode, got, expected)
        if mode not in ("scores", "softcapped"):
            assert (got[:, :, ~causal] == -np.inf).all()
    with attn.Desc(B, H, H, SQ, SK, D, causal=1, scale=scale, softcap=cap, bias_first=True,
                   weights_mode="capped") as d:
        assert_close("capped bias_first", d.weights(q, k, bias=bias),
                     np.where(causal, cap * np.tanh((s + bias) / cap), -np.inf))


# ------------------------------------------------------------------------------------------
# Shapes and strides of numpy arrays
# ------------------------------------------------------------------------------------------

def test_strided_views_are_read_where_they_are():
    """.transpose(1, 2) of BSHD arrays, slices with gaps and broadcast views give the results of
    the same values in contiguous BHSD arrays (bit-identical), without copies."""
    rng = np.random.default_rng(21)
    B, HQ, HKV, SQ, SK, D = 2, 4, 2, 5, 7, 8
    q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, D))
    with attn.Desc(B, HQ, HKV, SQ, SK, D, causal=2) as d:
        want, want_lse = d.forward(q, k, v, lse=True)
        want_w = d.weights(q, k)
        # BSHD storage viewed as BHSD (PyTorch's q.transpose(1, 2))
        qs = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        ks = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        # a slice with gaps: every other row of a bigger head_dim buffer
        big = np.full((B, HKV, SK, 3 * D), np.nan, np.float32)
        big[..., D:2 * D] = v
        vs = big[..., D:2 * D]
        assert not vs.flags.c_contiguous and not qs.flags.c_contiguous
        got, got_lse = d.forward(qs, ks, vs, lse=True)
        assert got.tobytes() == want.tobytes() and got_lse.tobytes() == want_lse.tobytes()
        assert d.weights(qs, ks).tobytes() == want_w.tobytes()
        # out as a strided view: written in place, the gaps untouched
        obuf = np.full((B, SQ, HQ, D + 2), 7.0, np.float32)
        oview = obuf[..., :D].transpose(0, 2, 1, 3)
        res = d.forward(q, k, v, out=oview)
        assert res is oview and np.array_equal(oview, want)
        assert (obuf[..., D:] == 7.0).all()
        # K/V broadcast over the batch (stride 0)
        kb = np.broadcast_to(k[:1], k.shape)
        vb = np.broadcast_to(v[:1], v.shape)
        got_b = d.forward(q, kb, vb)
        with attn.Desc(1, HQ, HKV, SQ, SK, D, causal=2) as d1:
            for b in range(B):
                assert got_b[b].tobytes() == d1.forward(q[b:b + 1], k[:1], v[:1]).tobytes()
        assert len(d._variants) >= 3  # each stride set got its own C descriptor, cached
        n = len(d._variants)
        d.forward(qs, ks, vs)
        assert len(d._variants) == n


def test_many_stride_sets_are_bounded():
    rng = np.random.default_rng(22)
    B, H, S, D = 1, 1, 3, 4
    k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
    with attn.Desc(B, H, H, S, S, D) as d:
        for gap in range(40):
            buf = rand(rng, (B, H, S, D + gap + 1))
            q = buf[..., :D]
            assert np.array_equal(d.forward(q, k, v), d.forward(np.ascontiguousarray(q), k, v))
        assert len(d._variants) <= 32


def test_bias_broadcast_shapes():
    rng = np.random.default_rng(23)
    B, H, SQ, SK, D = 2, 3, 4, 5, 8
    q, k, v = rand(rng, (B, H, SQ, D)), rand(rng, (B, H, SK, D)), rand(rng, (B, H, SK, D))
    with attn.Desc(B, H, H, SQ, SK, D) as d:
        for shape in [(1, 1, 1, SK), (B, 1, SQ, SK), (1, H, 1, SK), (B, H, SQ, SK)]:
            bias = rand(rng, shape, -3, 3)
            full = np.ascontiguousarray(np.broadcast_to(bias, (B, H, SQ, SK)))
            got = d.forward(q, k, v, bias=bias)
            assert got.tobytes() == d.forward(q, k, v, bias=full).tobytes(), shape
            assert got.tobytes() == d.forward(q, k, v, bias=np.broadcast_to(
                bias, (B, H, SQ, SK))).tobytes()
        ro, _, _, _ = attn_ref.run(attn_ref.Problem(B, H, H, SQ, SK, D), flat(q), flat(k),
                                   flat(v), bias=flat(full))
        assert_close("out", got, ro)
        for shape, words in [((B, H, SQ, 1), ["bias has shape (2, 3, 4, 1)", "seq_k"]),
                             ((SQ, SK), ["bias has 2 dimensions", "expected 4"]),
                             ((B, H, SQ, SK + 1), ["bias has shape"]),
                             ((0, H, SQ, SK), ["bias has shape (0, 3, 4, 5)"])]:
            with pytest.raises(ValueError) as e:
                d.forward(q, k, v, bias=np.zeros(shape, np.float32))
            for w in words:
                assert w in str(e.value)
        with pytest.raises(ValueError, match="bias: its last dimension"):
            d.forward(q, k, v, bias=np.zeros((B, H, SQ, 2 * SK), np.float32)[..., ::2])


@pytest.mark.parametrize("name,make,words", [
    ("bshd q", lambda B, H, S, D: {"q": np.zeros((B, S, H, D), np.float32)},
     ["q has shape (2, 5, 3, 8)", "(batch, heads_q, seq_q, head_dim) = (2, 3, 5, 8)"]),
    ("3-d k", lambda B, H, S, D: {"k": np.zeros((H, S, D), np.float32)},
     ["k has 3 dimensions", "expected 4"]),
    ("per-head allowed", lambda B, H, S, D: {"allowed": np.ones((B, H, S, S), np.bool_)},
     ["allowed has 4 dimensions", "(seq_q, seq_k) = (5, 5)"]),
    ("allowed transposed", lambda B, H, S, D: {"allowed": np.ones((S, S + 1), np.bool_)},
     ["allowed has shape (5, 6)"]),
    ("key_valid per query", lambda B, H, S, D: {"key_valid": np.ones((B, S, S), np.bool_)},
     ["key_valid has 3 dimensions", "(batch, seq_k) = (2, 5)"]),
    ("key_valid strided", lambda B, H, S, D: {"key_valid": np.ones((B, 2 * S), np.bool_)[:, ::2]},
     ["key_valid is not C-contiguous"]),
    ("float mask", lambda B, H, S, D: {"key_valid": np.ones((B, S), np.float32)},
     ["key_valid has dtype float32", "bool or uint8"]),
    ("float64 q", lambda B, H, S, D: {"q": np.zeros((B, H, S, D))},
     ["q has dtype float64", "float32"]),
    ("uint16 v", lambda B, H, S, D: {"v": np.zeros((B, H, S, D), np.uint16)},
     ["v has dtype uint16", "attn.BF16(v)", "float16"]),
    ("int8 q", lambda B, H, S, D: {"q": np.zeros((B, H, S, D), np.int8)},
     ["q has dtype int8", "k and v"]),
    ("float16 v, wrong shape", lambda B, H, S, D: {"v": np.zeros((B, H, S, D + 1), np.float16)},
     ["v has shape (2, 3, 5, 9)", "(batch, heads_kv, seq_k, head_dim_v) = (2, 3, 5, 8)"]),
    ("float16 v, short flat", lambda B, H, S, D: {"v": np.zeros(B * H * S * D - 1, np.float16)},
     ["v has 239 elements, needs at least 240"]),
    ("int64 seq_lens_k", lambda B, H, S, D: {"seq_lens_k": np.array([1, 2])},
     ["seq_lens_k has dtype int64", "int32"]),
    ("sinks 2-d", lambda B, H, S, D: {"sinks": np.zeros((1, H), np.float32)},
     ["sinks has 2 dimensions", "(heads_q) = (3,)"]),
    ("sinks short", lambda B, H, S, D: {"sinks": np.zeros(H - 1, np.float32)},
     ["sinks has 2 elements, needs at least 3"]),
    ("lse 4-d", lambda B, H, S, D: {"lse": np.zeros((B, H, S, 1), np.float32)},
     ["lse has 4 dimensions", "(batch, heads_q, seq_q) = (2, 3, 5)"]),
    ("out wrong shape", lambda B, H, S, D: {"out": np.zeros((B, H, S, D + 1), np.float32)},
     ["out has shape (2, 3, 5, 9)", "head_dim_v"]),
    ("out negative strides", lambda B, H, S, D: {"out": np.zeros((B, H, S, D),
                                                                  np.float32)[:, :, ::-1]},
     ["out has byte strides", "non-negative"]),
    ("q list", lambda B, H, S, D: {"q": [[0.0] * D] * S}, ["q must be a numpy.ndarray"]),
    ("key_mass flat long", lambda B, H, S, D: {"key_mass": np.zeros(B * H * S + 1, np.float32)},
     ["key_mass has 31 elements, needs exactly 30"]),
    ("empty key_valid", lambda B, H, S, D: {"key_valid": np.zeros(0, np.bool_)},
     ["key_valid has 0 elements, needs at least 10"]),
    ("empty bias", lambda B, H, S, D: {"bias": np.zeros(0, np.float32)},
     ["bias has 0 elements, needs at least"]),
    ("empty lse", lambda B, H, S, D: {"lse": np.zeros((0,), np.float32)},
     ["lse has 0 elements, needs at least 30"]),
])
def test_shape_errors_name_the_array_and_dims(name, make, words):
    B, H, S, D = 2, 3, 5, 8
    args = {"q": np.zeros((B, H, S, D), np.float32), "k": np.zeros((B, H, S, D), np.float32),
            "v": np.zeros((B, H, S, D), np.float32)}
    args.update(make(B, H, S, D))
    with attn.Desc(B, H, H, S, S, D) as d:
        with pytest.raises(ValueError) as e:
            d.forward(**args)
        assert e.value.status is attn.Status.INVALID_ARGUMENT
        for w in words:
            assert w in str(e.value), str(e.value)
        # nothing was half-done: the descriptor still works
        d.forward(np.zeros((B, H, S, D), np.float32), np.zeros((B, H, S, D), np.float32),
                  np.zeros((B, H, S, D), np.float32))


def test_dtype_errors_are_type_errors():
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        z = np.zeros((1, 1, 2, 4), np.float32)
        for bad in (z.astype(np.float64), z.astype(">f4"), z.tolist(), "q"):
            with pytest.raises(TypeError) as e:
                d.forward(bad, z, z)
            assert isinstance(e.value, ValueError) and "q" in str(e.value)
        with pytest.raises(attn.NullPointerError) as e:
            d.forward(None, z, z)
        assert e.value.status is attn.Status.NULL_POINTER and isinstance(e.value, ValueError)


def test_masks_accept_bool_and_uint8():
    rng = np.random.default_rng(24)
    B, H, S, D = 2, 2, 6, 4
    q, k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
    kv = rng.random((B, S)) < 0.6
    kv[:, 0] = True
    with attn.Desc(B, H, H, S, S, D) as d:
        a = d.forward(q, k, v, key_valid=kv)
        b = d.forward(q, k, v, key_valid=kv.astype(np.uint8) * 7)  # any nonzero byte is true
        assert a.tobytes() == b.tobytes()


def test_objects_with_dlpack_or_array_are_viewed_without_copy():
    class DLPackOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    class ArrayOnly:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    rng = np.random.default_rng(25)
    q, k, v = rand(rng, (1, 2, 3, 4)), rand(rng, (1, 2, 3, 4)), rand(rng, (1, 2, 3, 4))
    from attn import _common
    assert np.shares_memory(_common.as_ndarray("q", DLPackOnly(q), "float32"), q)
    assert np.shares_memory(_common.as_ndarray("q", ArrayOnly(q), "float32"), q)
    with attn.Desc(1, 2, 2, 3, 3, 4) as d:
        want = d.forward(q, k, v)
        out = np.zeros_like(want)
        # numpy < 2 imports DLPack tensors read-only: an output then needs another way in
        writable = np.from_dlpack(DLPackOnly(out)).flags.writeable
        d.forward(DLPackOnly(q), ArrayOnly(k), DLPackOnly(v),
                  out=DLPackOnly(out) if writable else ArrayOnly(out))
        assert out.tobytes() == want.tobytes()  # the output was written through the view


# ------------------------------------------------------------------------------------------
# The raw face: Args + Desc.run
# ------------------------------------------------------------------------------------------

def test_args_run_matches_forward():
    rng = np.random.default_rng(26)
    B, HQ, HKV, S, D = 2, 2, 1, 5, 8
    q, k, v = rand(rng, (B, HQ, S, D)), rand(rng, (B, HKV, S, D)), rand(rng, (B, HKV, S, D))
    sinks = rand(rng, (HQ,))
    with attn.Desc(B, HQ, HKV, S, S, D, causal=1) as d:
        want, want_lse = d.forward(q, k, v, lse=True, sinks=sinks)
        out = np.zeros(d.required_len(attn.Operand.OUT) + 3, np.float32)  # longer: fine here
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        with attn.Args() as args:
            (args.set(attn.Operand.Q, q).set(attn.Operand.K, k).set(attn.Operand.V, v)
             .set_f32(attn.Operand.SINKS, sinks).set_out_f32(attn.Operand.OUT, out)
             .set(attn.Operand.LSE, lse))
            d.run(attn.Op.FORWARD, args)
            assert out[:want.size].tobytes() == want.tobytes() and (out[want.size:] == 0).all()
            assert lse.tobytes() == want_lse.tobytes()
            args.set(attn.Operand.SINKS, None)  # unbind
            d.run("forward", args)
            assert out[:want.size].tobytes() == d.forward(q, k, v).tobytes()
            # kinds are the library's to check: an output through the input setter
            with pytest.raises(attn.InvalidArgumentError, match="attn_args_set_out_f32"):
                args.set_f32(attn.Operand.OUT, out)
            past = len(attn.Operand)  # the first value past the library's operand table
            with pytest.raises(ValueError, match=r"operand \(%d\)" % past):
                args.set(past, out)
            with pytest.raises(ValueError, match=r"op \(3\)"):
                d.run(3, args)
            # the backward of a forward's operands: the library asks for the gradient of out
            with pytest.raises(attn.NullPointerError, match="dout is NULL"):
                d.run(attn.Op.BACKWARD, args)
            args.set(attn.Operand.KEY_VALID, np.zeros(0, np.bool_))  # empty, not None
            with pytest.raises(attn.InvalidArgumentError, match="key_valid has 0 elements"):
                d.run(attn.Op.FORWARD, args)
            args.set(attn.Operand.KEY_VALID, None)
            with pytest.raises(TypeError, match="int32"):
                args.set(attn.Operand.SEQ_LENS_K, np.zeros(B, np.int64))
            with pytest.raises(ValueError, match="C-contiguous"):
                args.set(attn.Operand.Q, q[:, :, ::2])
            args.clear()
            with pytest.raises(attn.NullPointerError, match="q is NULL"):
                d.run(attn.Op.FORWARD, args)
        assert args.closed
        with pytest.raises(ValueError, match="closed"):
            d.run(attn.Op.FORWARD, args)
        with pytest.raises(ValueError, match="closed"):
            args.set(attn.Operand.Q, q)


def test_args_objects_are_freed(monkeypatch):
    """Args: freed by close() or, forgotten, by __del__. The attn_args of Desc.forward / weights
    calls: one per thread, kept bound between calls (a call rebinds only what changed and
    unbinds what it does not pass), cleared after a failing setter, destroyed when the thread
    ends."""
    from attn import _lib
    log = []
    for fn in ("attn_args_create", "attn_args_destroy", "attn_args_clear"):
        real = getattr(_lib, fn)
        monkeypatch.setattr(_lib, fn, lambda *a, _r=real, _n=fn: (log.append(_n), _r(*a))[1])
    a = attn.Args()
    del a
    gc.collect()
    assert log == ["attn_args_create", "attn_args_destroy"]

    log.clear()
    z = np.zeros((1, 1, 2, 4), np.float32)

    def calls():
        with attn.Desc(1, 1, 1, 2, 2, 4) as d:
            d.forward(z, z, z)
            with pytest.raises(attn.AttentionError):
                d.forward(z, z, z, out=z)  # out overlaps q: refused by attn_run
            d.weights(z, z)

    th = threading.Thread(target=calls)
    th.start()
    th.join()
    del th
    gc.collect()
    assert log == ["attn_args_create", "attn_args_destroy"]


def test_a_call_sees_only_its_own_operands():
    """The per-thread attn_args keeps the previous call's bindings: an operand that call passed
    and this one does not must not reach the library (key_valid all False gives zeros; the next
    call without it gives attention over every key)."""
    rng = np.random.default_rng(33)
    q, k, v = (rand(rng, (1, 2, 3, 4)) for _ in range(3))
    with attn.Desc(1, 2, 2, 3, 3, 4) as d:
        plain = d.forward(q, k, v)
        hidden = d.forward(q, k, v, key_valid=np.zeros((1, 3), np.bool_))
        assert (hidden == 0).all()
        assert np.array_equal(d.forward(q, k, v), plain)
        ro, _, _, _ = attn_ref.run(attn_ref.Problem(1, 2, 2, 3, 3, 4, scale=d.scale), flat(q),
                                   flat(k), flat(v))
        assert_close("after", plain, ro)


def test_threads_share_a_desc_with_views():
    """Many threads, one Desc, different stride sets at once: each gets its own right answer."""
    rng = np.random.default_rng(27)
    B, H, S, D = 1, 2, 16, 8
    d = attn.Desc(B, H, H, S, S, D, causal=1, window=(4, 0))
    jobs = []
    for t in range(8):
        buf = rand(rng, (B, S, H, D + t))
        q = buf[..., :D].transpose(0, 2, 1, 3)
        k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
        jobs.append((q, k, v, d.forward(np.ascontiguousarray(q), k, v)))
    failures = []

    def work(job):
        q, k, v, want = job
        for _ in range(20):
            if d.forward(q, k, v).tobytes() != want.tobytes():
                failures.append("mismatch")

    threads = [threading.Thread(target=work, args=(j,)) for j in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    d.close()
    assert not failures
    assert d._handle is None and d._variants == {}


@pytest.mark.parametrize("diagonal", ["causal", "top_left", "bottom_right"])
@pytest.mark.parametrize("form", ["linear", "symmetric"])
@pytest.mark.parametrize("causal", [0, 1, 2])
def test_diagonal_alibi_form_and_per_batch_slopes(diagonal, form, causal):
    # seq_q != seq_k, a window on the chosen diagonal, ALiBi slopes per batch entry
    B, HQ, HKV, SQ, SK, D = 3, 4, 2, 5, 9, 8
    rng = np.random.default_rng(29)
    q, k, v = rand(rng, (B, HQ, SQ, D)), rand(rng, (B, HKV, SK, D)), rand(rng, (B, HKV, SK, D))
    slopes = rand(rng, (B, HQ), 0.05, 0.8)
    with attn.Desc(B, HQ, HKV, SQ, SK, D, causal=causal, window=(3, 2), alibi="operand",
                   diagonal=diagonal, alibi_form=form, alibi_slopes_strides=(HQ, 1, 0)) as d:
        assert d.diagonal == attn.Diagonal[diagonal.upper()]
        assert d.alibi_form == attn.AlibiForm[form.upper()]
        assert d.shape(attn.Operand.ALIBI_SLOPES) == (B, HQ)
        out, lse = d.forward(q, k, v, alibi_slopes=slopes, lse=True)
        with pytest.raises(ValueError, match="alibi_slopes"):
            d.forward(q, k, v, alibi_slopes=slopes[0])  # (heads_q,) is not (batch, heads_q)
    p = attn_ref.Problem(B, HQ, HKV, SQ, SK, D, causal=causal, window_left=3, window_right=2,
                         alibi=attn_ref.ALIBI_OPERAND,
                         diagonal=int(attn.Diagonal[diagonal.upper()]),
                         alibi_form=int(attn.AlibiForm[form.upper()]),
                         alibi_slopes_strides=(HQ, 1))
    w_out, w_lse, _, _ = attn_ref.run(p, flat(q), flat(k), flat(v),
                                      alibi_slopes=[float(x) for x in slopes.ravel()])
    assert_close("out", out, w_out)
    assert_close("lse", lse, w_lse)
