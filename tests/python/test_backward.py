"""Gradients (ATTN_OP_BACKWARD, README "Gradients") through the Python face: Desc.backward and
the raw face (Args with Operand.DOUT / DQ / DK / DV / DBIAS / DSINKS, Op.BACKWARD).

* every tests/vectors/backward.txt line (VARIANTS.md "Backward"): forward, then backward with the
  listed gradients into zero-filled buffers, each within 1e-4 of the float64 reference (as
  tests/c/test_variants.c: no exact-zero rule for gradients); the same with N-D strided views
  on a Desc not told the strides, with gradients allocated by the face (dq=True ...), and
  through the raw face: bit-identical;
  $ATTN_XLANG_DIR/python.backward.bin gets the gradient bytes of every case;
* random problems with every variant against tests/reference/attn_ref.py's float64 backward;
  varlen packs against each sequence alone;
* the gradients in the layouts of their operands (BSHD views, a broadcast bias summed);
* errors: missing dout / lse, nothing requested, 16-bit q, a gradient laid out unlike its
  operand, a broadcast q, dbias without bias, dsinks without sinks, a paged cache.
"""

import math
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from vector_cases import (GRADS, OPERAND, ROOT, STRIDED, assert_close, attn,  # noqa: E402
                          inputs_of, load, make_desc, nd_arrays, on_every_isa, read,
                          remove_stale, view, write_xlang)

sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import attn_ref  # noqa: E402

remove_stale("python.backward.bin")

BACKWARD = load("backward.txt")
TOL = 1e-4
#: the forward operand whose layout each gradient has
OF = {"dq": "q", "dk": "k", "dv": "v", "dbias": "bias", "dsinks": "sinks"}


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------
# backward.txt
# ------------------------------------------------------------------------------------------

def run_backward(c, mode="flat"):
    """Forward, then backward of a line. mode "flat": flat buffers on a Desc configured with the
    line's strides, the gradients into zero-filled flat buffers; "nd": N-D strided views on a
    Desc with default strides, the gradients into N-D views of zero-filled flat buffers;
    "alloc": as "nd" but the face allocates the gradients (compared through views of the flat
    layout). Returns (out, lse, {grad: flat float32 buffer})."""
    ins = inputs_of(c, extra=("dout",))
    with make_desc(c) as d:
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        flat = {g: np.zeros(d.required_len(OPERAND[g]), np.float32) for g in c["grads"]}
        if mode == "flat":
            arrays, o, l_, gs, desc = dict(ins), out, lse, dict(flat), d
        else:
            dout = ins.pop("dout")
            arrays = nd_arrays(d, c, ins)
            arrays["dout"] = view(d, c, "out", dout, writeable=False)  # in out's layout
            o = view(d, c, "out", out)
            l_ = lse.reshape(d.shape(attn.Operand.LSE))
            gs = {g: (view(d, c, OF[g], a, writeable=True) if OF[g] in STRIDED
                      else a.reshape(d.shape(OPERAND[OF[g]]))) for g, a in flat.items()}
            desc = make_desc(c, with_strides=False)
        with desc:
            q, k, v, dout = (arrays.pop(x) for x in ("q", "k", "v", "dout"))
            desc.forward(q, k, v, out=o, lse=l_, **arrays)
            want = {g: (True if mode == "alloc" else gs[g]) if g in gs else None for g in GRADS}
            res = desc.backward(q, k, v, o, l_, dout, **arrays, **want)
            for g in GRADS:
                got = getattr(res, g)
                if g not in gs:
                    assert got is None, g
                elif mode == "alloc":  # the allocated one, in the layout of its operand
                    assert got.dtype == np.float32 and got.flags.writeable
                    gs[g][...] = np.broadcast_to(got, gs[g].shape)
                else:
                    assert got is gs[g], g  # the array given, filled in place
    return out, lse, flat


@pytest.mark.parametrize("c", BACKWARD, ids=[c["name"] for c in BACKWARD])
def test_backward_case(c):
    out, lse, grads = run_backward(c)
    assert_close(c["name"] + " out", out, read(c, "out.f32", np.float32), 1e-5)
    assert_close(c["name"] + " lse", lse, read(c, "lse.f32", np.float32), 1e-5)
    for g in c["grads"]:
        want = read(c, g + ".f32", np.float32)
        # no exact-zero rule for gradients (as tests/c/test_variants.c): a gradient may
        # cancel to 0 in exact arithmetic and not quite in float32
        assert_close("%s %s" % (c["name"], g), grads[g], want, TOL)
    for mode in ("nd", "alloc"):
        out2, lse2, grads2 = run_backward(c, mode)
        assert out2.tobytes() == out.tobytes() and lse2.tobytes() == lse.tobytes(), mode
        for g in c["grads"]:
            assert grads2[g].tobytes() == grads[g].tobytes(), (mode, g)


@pytest.mark.parametrize("c", BACKWARD, ids=[c["name"] for c in BACKWARD])
def test_backward_case_raw_face(c):
    """Args + Desc.run(Op.BACKWARD): dout with set_f32, the gradients with set_out_f32 (set()
    picks them from the operand), out / lse of the forward."""
    _, _, want = run_backward(c)
    ins = inputs_of(c, extra=("dout",))
    with make_desc(c) as d, attn.Args() as args:
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        for x, a in ins.items():
            args.set(OPERAND[x], a)
        args.set_out_f32(attn.Operand.OUT, out).set_out_f32(attn.Operand.LSE, lse)
        d.run(attn.Op.FORWARD, args)
        grads = {g: np.zeros(d.required_len(OPERAND[g]), np.float32) for g in c["grads"]}
        for g, a in grads.items():
            args.set(OPERAND[g], a)
        d.run("backward", args)
    for g in c["grads"]:
        assert grads[g].tobytes() == want[g].tobytes(), g


def test_backward_on_every_isa():
    def body(isa):
        for c in BACKWARD:
            _, _, grads = run_backward(c)
            for g in c["grads"]:
                assert_close("%s %s %s" % (isa, c["name"], g), grads[g],
                             read(c, g + ".f32", np.float32), TOL)
    on_every_isa(body)


def test_backward_present():
    assert len(BACKWARD) >= 5, "backward.txt not generated yet"
    listed = {g for c in BACKWARD for g in c["grads"]}
    assert listed == set(GRADS)


def test_backward_xlang_bytes():
    """Writes $ATTN_XLANG_DIR/python.backward.bin: per case in file order the float32 bytes of
    each listed gradient buffer, in the grads order. Two runs give identical bytes."""
    runs = []
    for _ in range(2):
        blob = bytearray()
        for c in BACKWARD:
            _, _, grads = run_backward(c)
            for g in c["grads"]:
                blob += grads[g].astype("<f4").tobytes()
        runs.append(bytes(blob))
    assert runs[0] == runs[1]
    write_xlang("python.backward.bin", runs[0])


# ------------------------------------------------------------------------------------------
# Random problems against the float64 reference backward
# ------------------------------------------------------------------------------------------

CASES = [
    dict(B=2, HQ=4, HKV=2, SQ=5, SK=7, D=8, causal=2, key_valid=True),
    dict(B=1, HQ=2, HKV=1, SQ=6, SK=6, D=4, causal=1, window=(2, 0), softcap=2.0, bias="full"),
    dict(B=2, HQ=3, HKV=1, SQ=4, SK=6, D=8, DV=5, bias="heads", bias_first=True, softcap=1.5,
         sinks=True),
    dict(B=2, HQ=2, HKV=2, SQ=3, SK=9, D=4, alibi="operand", query_valid=True, seq_lens_k=True,
         causal=2, softmax_plus_one=True),
    dict(B=1, HQ=4, HKV=1, SQ=7, SK=5, D=16, allowed=True, scale=0.5, alibi="standard",
         sinks=True, bias="rows"),
]


def problem(rng, t):
    B, HQ, HKV, SQ, SK, D = t["B"], t["HQ"], t["HKV"], t["SQ"], t["SK"], t["D"]
    DV = t.get("DV", D)
    kw = dict(causal=t.get("causal", 0), softcap=t.get("softcap"), alibi=t.get("alibi"),
              softmax_plus_one=t.get("softmax_plus_one", False), head_dim_v=DV,
              bias_first=t.get("bias_first", False), scale=t.get("scale"),
              window=t.get("window"))
    arrays = dict(q=rand(rng, (B, HQ, SQ, D)), k=rand(rng, (B, HKV, SK, D)),
                  v=rand(rng, (B, HKV, SK, DV)))
    if t.get("key_valid"):
        kv = rng.random((B, SK)) > 0.3
        kv[:, 0] = True
        arrays["key_valid"] = kv
    if t.get("allowed"):
        arrays["allowed"] = rng.random((SQ, SK)) > 0.4
    bias_shape = {"full": (B, HQ, SQ, SK), "heads": (1, HQ, SQ, SK), "rows": (1, 1, SQ, SK)}
    if t.get("bias"):
        arrays["bias"] = rand(rng, bias_shape[t["bias"]])
    if t.get("alibi") == "operand":
        arrays["alibi_slopes"] = np.abs(rand(rng, (HQ,)))
    if t.get("sinks"):
        arrays["sinks"] = rand(rng, (HQ,))
    if t.get("query_valid"):
        qv = rng.random((B, SQ)) > 0.3
        qv[:, 0] = True
        arrays["query_valid"] = qv
    if t.get("seq_lens_k"):
        arrays["seq_lens_k"] = rng.integers(1, SK + 1, B).astype(np.int32)
    return (B, HQ, HKV, SQ, SK, D), kw, arrays


def reference(dims, desc, arrays, dout):
    """attn_ref.backward with the Desc's parameters as the library holds them."""
    B, HQ, HKV, SQ, SK, D = dims
    bias = arrays.get("bias")
    bias_strides = None
    if bias is not None:  # its layout: broadcast dims have stride 0
        bias_strides = tuple(0 if n == 1 else s // 4 for n, s in zip(bias.shape[:3],
                                                                     bias.strides[:3]))
    p = attn_ref.Problem(B, HQ, HKV, SQ, SK, D, causal=int(desc.causal), scale=desc.scale,
                         window_left=desc.window_left, window_right=desc.window_right,
                         softcap=desc.softcap, alibi=int(desc.alibi),
                         softmax_plus_one=desc.softmax_plus_one, head_dim_v=desc.head_dim_v,
                         bias_first=desc.bias_first, bias_strides=bias_strides)
    fl = lambda x: None if x is None else [float(e) for e in np.asarray(x, np.float64).ravel()]
    return attn_ref.backward(
        p, fl(arrays["q"]), fl(arrays["k"]), fl(arrays["v"]), fl(dout),
        key_valid=fl(arrays.get("key_valid")), allowed=fl(arrays.get("allowed")),
        bias=fl(bias), alibi_slopes=fl(arrays.get("alibi_slopes")),
        sinks=fl(arrays.get("sinks")), query_valid=fl(arrays.get("query_valid")),
        seq_lens_k=None if "seq_lens_k" not in arrays else [int(x) for x in
                                                             arrays["seq_lens_k"]])


@pytest.mark.parametrize("t", CASES, ids=[str(i) for i in range(len(CASES))])
def test_backward_matches_the_float64_reference(t):
    rng = np.random.default_rng(100 + CASES.index(t))
    dims, kw, arrays = problem(rng, t)
    with attn.Desc(*dims, **kw) as d:
        a = dict(arrays)
        q, k, v = a.pop("q"), a.pop("k"), a.pop("v")
        out, lse = d.forward(q, k, v, lse=True, **a)
        dout = rand(rng, out.shape)
        g = d.backward(q, k, v, out, lse, dout, dbias="bias" in a or None,
                       dsinks="sinks" in a or None, **a)
        want = reference(dims, d, arrays, dout)
    for name, got, ref in zip(("dq", "dk", "dv", "dbias", "dsinks"), g, want):
        if ref is None:
            assert got is None, name
            continue
        assert got.shape == (arrays["bias"].shape if name == "dbias" else
                             arrays["sinks"].shape if name == "dsinks" else
                             arrays[name[1:]].shape), name
        assert_close(name, np.ascontiguousarray(got).ravel(), np.array(ref), TOL)


def test_reference_backward_is_the_derivative_of_its_forward():
    """Central differences of attn_ref.run (float64) on a tiny case agree with attn_ref.backward:
    the reference the library is checked against is itself the gradient of the forward."""
    rng = np.random.default_rng(7)
    p = attn_ref.Problem(1, 2, 1, 3, 4, 3, causal=2, softcap=2.0)
    q, k, v = (list(rng.standard_normal(n)) for n in (18, 12, 12))
    bias, sinks = list(rng.standard_normal(24)), list(rng.standard_normal(2))
    dout = list(rng.standard_normal(18))

    def loss(q, k, v, bias, sinks):
        out, _, _, _ = attn_ref.run(p, q, k, v, bias=bias, sinks=sinks)
        return math.fsum(o * g for o, g in zip(out, dout))

    grads = attn_ref.backward(p, q, k, v, dout, bias=bias, sinks=sinks)
    args = [q, k, v, bias, sinks]
    h = 1e-6
    for which, g in enumerate(grads):
        for i in range(len(args[which])):
            plus = [list(a) for a in args]
            minus = [list(a) for a in args]
            plus[which][i] += h
            minus[which][i] -= h
            fd = (loss(*plus) - loss(*minus)) / (2 * h)
            assert abs(fd - g[i]) <= 1e-6 * max(1.0, abs(g[i])), (which, i, fd, g[i])


def test_varlen_backward_equals_each_sequence_alone():
    rng = np.random.default_rng(8)
    lq, lk = [3, 0, 5], [4, 2, 6]
    HQ, HKV, D = 4, 2, 8
    cu_q = np.array([0] + list(np.cumsum(lq)), np.int32)
    cu_k = np.array([0] + list(np.cumsum(lk)), np.int32)
    q, k, v = rand(rng, (cu_q[-1], HQ, D)), rand(rng, (cu_k[-1], HKV, D)), \
        rand(rng, (cu_k[-1], HKV, D))
    sinks = rand(rng, (HQ,))
    with attn.Desc(3, HQ, HKV, max(lq), max(lk), D, varlen=True, causal="bottom_right") as d:
        out, lse = d.forward(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, sinks=sinks,
                             lse=True)
        dout = rand(rng, out.shape)
        g = d.backward(q, k, v, out, lse, dout, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                       sinks=sinks, dsinks=True)
        assert g.dq.shape == q.shape and g.dk.shape == k.shape and g.dv.shape == v.shape
    dsinks = np.zeros(HQ, np.float64)
    for b in range(3):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lq[b] == 0:
            assert not g.dk[ks].any() and not g.dv[ks].any()  # no query saw these keys
            continue
        with attn.Desc(1, HQ, HKV, lq[b], lk[b], D, causal="bottom_right") as one:
            tr = lambda a: np.ascontiguousarray(a.transpose(1, 0, 2)[None])
            o1, l1 = one.forward(tr(q[qs]), tr(k[ks]), tr(v[ks]), sinks=sinks, lse=True)
            g1 = one.backward(tr(q[qs]), tr(k[ks]), tr(v[ks]), o1, l1, tr(dout[qs]),
                              sinks=sinks, dsinks=True)
        for name, pack, alone in (("dq", g.dq[qs], g1.dq), ("dk", g.dk[ks], g1.dk),
                                  ("dv", g.dv[ks], g1.dv)):
            assert_close(name, tr(pack).ravel(), alone.ravel().astype(np.float64), 1e-6)
        dsinks += g1.dsinks
    assert_close("dsinks", g.dsinks, dsinks, 1e-5)


def test_gradients_in_the_layouts_of_their_operands():
    """BSHD views of q, k, v: the allocated gradients have the same strides; a bias broadcast
    over batch and heads gets its gradient summed into one (1, 1, seq_q, seq_k) matrix."""
    rng = np.random.default_rng(9)
    B, HQ, HKV, S, D = 2, 4, 2, 6, 8
    qb, kb, vb = rand(rng, (B, S, HQ, D)), rand(rng, (B, S, HKV, D)), rand(rng, (B, S, HKV, D))
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (qb, kb, vb))
    bias = np.broadcast_to(rand(rng, (S, S)), (B, HQ, S, S))  # strides (0, 0, S)
    with attn.Desc(B, HQ, HKV, S, S, D, causal=1) as d:
        out, lse = d.forward(q, k, v, bias=bias, lse=True)
        dout = rand(rng, out.shape)
        g = d.backward(q, k, v, out, lse, dout, bias=bias, dbias=True)
        assert g.dq.strides == q.strides and g.dk.strides == k.strides
        assert g.dbias.shape == (1, 1, S, S)
        # the same as contiguous inputs and a full bias, summed over batch and heads
        c = [np.ascontiguousarray(x) for x in (q, k, v)]
        full = np.ascontiguousarray(bias)
        out2, lse2 = d.forward(*c, bias=full, lse=True)
        g2 = d.backward(*c, out2, lse2, dout, bias=full, dbias=True)
        assert g2.dbias.shape == full.shape and g2.dbias.flags.c_contiguous
        for name in ("dq", "dk", "dv"):
            assert getattr(g, name).tobytes() == np.ascontiguousarray(
                getattr(g2, name)).tobytes() or np.allclose(getattr(g, name), getattr(g2, name),
                                                            rtol=1e-5, atol=1e-6), name
        assert np.allclose(g.dbias[0, 0], g2.dbias.sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)
        # a dq of another layout is refused, naming it
        with pytest.raises(attn.InvalidArgumentError,
                           match=r"dq has element strides .* q .*writes dq in q's layout"):
            d.backward(q, k, v, out, lse, dout, dq=np.zeros(q.shape, np.float32))
        # given arrays laid out like q are filled in place
        dq = np.zeros((B, S, HQ, D), np.float32).transpose(0, 2, 1, 3)
        assert d.backward(q, k, v, out, lse, dout, dq=dq, dk=None, dv=None,
                          bias=bias).dq is dq
        assert dq.tobytes() == g.dq.tobytes()


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

B, H, S, D = 2, 2, 4, 8


@pytest.fixture
def fwd():
    rng = np.random.default_rng(10)
    q, k, v = rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D)), rand(rng, (B, H, S, D))
    with attn.Desc(B, H, H, S, S, D, causal=1) as d:
        out, lse = d.forward(q, k, v, lse=True)
        yield d, q, k, v, out, lse, rand(rng, out.shape)


def test_backward_missing_dout_or_lse(fwd):
    d, q, k, v, out, lse, dout = fwd
    with pytest.raises(attn.NullPointerError, match="dout is None"):
        d.backward(q, k, v, out, lse, None)
    with pytest.raises(attn.NullPointerError, match="lse is None"):
        d.backward(q, k, v, out, None, dout)
    with pytest.raises(attn.InvalidArgumentError, match=r"dout has shape \(2, 2, 4, 7\)"):
        d.backward(q, k, v, out, lse, dout[..., :7])
    with pytest.raises(attn.InvalidArgumentError, match="dout has element strides"):
        d.backward(q, k, v, out, lse,  # a BSHD layout, out is BHSD
                   np.ascontiguousarray(dout.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3))
    with attn.Args() as args:
        for op, a in ((attn.Operand.Q, q), (attn.Operand.K, k), (attn.Operand.V, v),
                      (attn.Operand.OUT, out), (attn.Operand.LSE, lse),
                      (attn.Operand.DQ, np.zeros_like(q))):
            args.set(op, a)
        with pytest.raises(attn.NullPointerError, match="dout is NULL"):
            d.run(attn.Op.BACKWARD, args)
        args.set(attn.Operand.DOUT, dout).set(attn.Operand.LSE, None)
        with pytest.raises(attn.NullPointerError, match="lse is NULL"):
            d.run(attn.Op.BACKWARD, args)
        args.set(attn.Operand.LSE, lse).set(attn.Operand.DOUT, dout.ravel()[:-1])
        with pytest.raises(attn.InvalidArgumentError, match="dout has 127 elements"):
            d.run(attn.Op.BACKWARD, args)


def test_backward_nothing_requested_and_unpaired_gradients(fwd):
    d, q, k, v, out, lse, dout = fwd
    with pytest.raises(attn.NullPointerError, match="nothing to compute"):
        d.backward(q, k, v, out, lse, dout, dq=None, dk=False, dv=None)
    with pytest.raises(attn.InvalidArgumentError, match="dbias is requested but bias is None"):
        d.backward(q, k, v, out, lse, dout, dbias=True)
    with pytest.raises(attn.InvalidArgumentError, match="dsinks is bound but sinks is not"):
        d.backward(q, k, v, out, lse, dout, dsinks=True)
    with pytest.raises(attn.InvalidArgumentError, match=r"dsinks has shape \(3,\)"):
        d.backward(q, k, v, out, lse, dout, sinks=np.zeros(H, np.float32),
                   dsinks=np.zeros(3, np.float32))
    with pytest.raises(attn.InvalidArgumentError, match="dk is read-only"):
        ro = np.zeros_like(k)
        ro.flags.writeable = False
        d.backward(q, k, v, out, lse, dout, dk=ro)


def test_backward_takes_16bit_storage_but_not_int8(fwd):
    d, q, k, v, out, lse, dout = fwd
    # f16 q and dout: the gradients of the widened values, bit-identical to fp32 operands
    # holding them
    q16, d16 = attn.f32_to_f16(q), attn.f32_to_f16(dout)
    g = d.backward(q16, k, v, out, lse, d16)
    g32 = d.backward(attn.f16_to_f32(q16), k, v, out, lse, attn.f16_to_f32(d16))
    assert g.dq.dtype == np.float32 and g.dq.tobytes() == g32.dq.tobytes()
    assert g.dk.tobytes() == g32.dk.tobytes() and g.dv.tobytes() == g32.dv.tobytes()
    ki, ks = attn.quantize_i8(k)
    with pytest.raises(attn.NullPointerError, match="k_scale is NULL but k is int8"):
        d.backward(q, ki, v, out, lse, dout)
    with pytest.raises(attn.AttentionError, match="needs fp32, f16 or bf16 k") as e:
        d.backward(q, ki, v, out, lse, dout, k_scale=ks)
    assert e.value.status is attn.Status.UNSUPPORTED


def test_backward_of_a_broadcast_operand(fwd):
    """A broadcast q has no layout to write dq in (its rows overlap): refused, naming dq; its dk
    and dv are fine."""
    d, q, k, v, out, lse, dout = fwd
    qb = np.broadcast_to(q[:, :1], q.shape)
    out_b, lse_b = d.forward(qb, k, v, lse=True)
    with pytest.raises(attn.InvalidArgumentError, match="dq: q has element strides .* overlap"):
        d.backward(qb, k, v, out_b, lse_b, dout)
    g = d.backward(qb, k, v, out_b, lse_b, dout, dq=None)
    assert g.dq is None and g.dk.shape == k.shape
    g2 = d.backward(np.ascontiguousarray(qb), k, v, out_b, lse_b, dout)
    assert g.dk.tobytes() == g2.dk.tobytes() and g.dv.tobytes() == g2.dv.tobytes()


def test_backward_paged_is_unsupported():
    with attn.Desc(1, 2, 2, 1, 8, 4, page_size=4) as d:
        with pytest.raises(attn.AttentionError, match="paged") as e:
            d.backward(None, None, None, None, None, None)
        assert e.value.status is attn.Status.UNSUPPORTED


# ------------------------------------------------------------------------------------------
# The training example
# ------------------------------------------------------------------------------------------

def test_train_attention_example_learns():
    """examples/python/train_attention.py: a few dozen SGD steps through libattn's forward and
    backward; the loss must fall by a clear factor."""
    import importlib.util
    path = os.path.join(ROOT, "examples", "python", "train_attention.py")
    spec = importlib.util.spec_from_file_location("train_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    losses = mod.train(steps=40, seed=0, log=None)
    assert len(losses) == 40 and all(np.isfinite(losses))
    assert losses[-1] < losses[0] / 10, losses


def test_the_readme_snippet_runs():
    """bindings/python/README.md "Gradients": the snippet, with its inputs defined here."""
    with open(os.path.join(ROOT, "bindings", "python", "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Gradients"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    rng = np.random.default_rng(5)
    with attn.Desc(2, 2, 1, 4, 6, 8, causal="bottom_right") as desc:
        ns = dict(desc=desc, q=rand(rng, (2, 2, 4, 8)), k=rand(rng, (2, 1, 6, 8)),
                  v=rand(rng, (2, 1, 6, 8)), bias=rand(rng, (1, 2, 4, 6)),
                  target=rand(rng, (2, 2, 4, 8)))
        exec(compile(code, "README.md (Gradients)", "exec"), ns)
    g = ns["g"]
    assert g.dq.shape == (2, 2, 4, 8) and g.dk.shape == (2, 1, 6, 8)
    assert g.dbias.shape == (1, 2, 4, 6) and g.dsinks is None
