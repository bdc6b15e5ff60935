"""The fast compute modes INT8 and BF16 (ATTN_PARAM_COMPUTE 2 and 3) through attn.Desc: the enum
and its spellings, and a prefill call in each mode checked against the float64 reference
tests/reference/attn_ref.py (attn_ref.run)."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import attn  # noqa: E402
import attn_ref  # noqa: E402

# a prefill call: GQA 4/2, more keys than queries, bottom-right causal
B, HQ, HKV, SQ, SK, D = 1, 4, 2, 64, 96, 64


def test_fast_modes_values_and_spellings():
    assert (int(attn.Compute.INT8), int(attn.Compute.BF16)) == (2, 3)
    assert attn.param_bounds(attn.Param.COMPUTE) == (False, 0.0, 3.0)
    for member, spellings in ((attn.Compute.INT8, (2, "int8", "INT8")),
                              (attn.Compute.BF16, (3, "bf16", "BF16"))):
        for spelling in (member,) + spellings:
            with attn.Desc(1, 2, 2, 64, 64, 32, compute=spelling) as d:
                assert d.compute is member, spelling
                assert d.param(attn.Param.COMPUTE) == int(member)
                assert d.param("compute") == int(member)
                assert "compute='%s'" % member.name.lower() in repr(d), repr(d)


@pytest.fixture(scope="module")
def prefill():
    """Gaussian q, k, v from a fixed seed, the float64 reference output and each mode's output."""
    rng = np.random.default_rng(3302)
    q = rng.standard_normal((B, HQ, SQ, D)).astype(np.float32)
    k = rng.standard_normal((B, HKV, SK, D)).astype(np.float32)
    v = rng.standard_normal((B, HKV, SK, D)).astype(np.float32)
    p = attn_ref.Problem(B, HQ, HKV, SQ, SK, D, causal=attn_ref.CAUSAL_BOTTOM_RIGHT)
    ref, _, _, _ = attn_ref.run(p, q.reshape(-1).tolist(), k.reshape(-1).tolist(),
                                v.reshape(-1).tolist())
    outs = {}
    for mode in ("exact", "int8", "bf16"):
        with attn.Desc(B, HQ, HKV, SQ, SK, D, causal="bottom_right", compute=mode) as d:
            outs[mode] = d.forward(q, k, v)
    return np.array(ref, dtype=np.float64).reshape(B, HQ, SQ, D), outs


def test_int8_prefill_within_bound_of_float64_reference(prefill):
    ref, outs = prefill
    got = outs["int8"].astype(np.float64)
    for b in range(B):
        for h in range(HQ):
            o, r = got[b, h].ravel(), ref[b, h].ravel()
            cosine = float(o @ r / (np.linalg.norm(o) * np.linalg.norm(r)))
            rel_l1 = float(np.abs(o - r).sum() / np.abs(r).sum())
            assert cosine >= 0.9995, (b, h, cosine)
            assert rel_l1 <= 0.01, (b, h, rel_l1)


def test_int8_prefill_takes_the_integer_path(prefill):
    # the integer Q.K^T has a kernel on every CPU (on x86 pmaddwd, from SSE2 up): its rounding shows
    _, outs = prefill
    assert np.count_nonzero(outs["int8"] != outs["exact"]) > 0, "INT8 gave EXACT's bits"


def test_bf16_prefill_is_exact_without_a_bf16_unit(prefill):
    # no CPU this version supports gets a bf16 path: BF16 runs as EXACT, bit for bit
    _, outs = prefill
    assert np.array_equal(outs["bf16"].view(np.uint32), outs["exact"].view(np.uint32))
