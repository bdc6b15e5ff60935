"""The shared vectors of the extensible call (tests/vectors/variants.txt and errors.txt, format
in tests/vectors/VARIANTS.md) through the Python face.

* every variants.txt line: forward (out, lse, key_mass) and weights within 1e-5 of the float64
  reference (out and lse within the line's tol: a fast mode's), hidden weights exactly 0, -inf lse exactly -inf; then the same call again with
  every strided operand passed as an N-D numpy view of the line's strides to a Desc that was
  NOT told the strides (the face maps the views' strides itself): bit-identical results;
  $ATTN_XLANG_DIR/python.variants.bin gets out, lse, weights (and key_mass) of every case.
* every errors.txt line: the raw face (Args + Desc.run) and the shaped face (Desc.forward /
  weights) report the line's status (the exception's .status; ValueError for
  INVALID_ARGUMENT / NULL_POINTER as README says) with the named operand in the message.
"""

import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vector_cases import (FLOAT_PARAMS, INT_PARAMS, OPERAND, TYPES, VECTORS,  # noqa: E402
                          attn, check_forward, forward_bytes, load, make_desc, on_every_isa,
                          remove_stale, run, write_xlang)

remove_stale("python.variants.bin")

VARIANTS = load("variants.txt")
ERRORS = load("errors.txt")


@pytest.mark.parametrize("c", VARIANTS, ids=[c["name"] for c in VARIANTS])
def test_variant(c):
    out, lse, w, mass = run(c, nd=False)
    check_forward(c, out, lse, w, mass)
    # N-D strided views on a Desc without the strides: the same bits
    out2, lse2, w2, mass2 = run(c, nd=True)
    assert out2.tobytes() == out.tobytes()
    assert lse2.tobytes() == lse.tobytes()
    assert w2.tobytes() == w.tobytes()
    if c["mass"]:
        assert mass2.tobytes() == mass.tobytes()


def test_variants_on_every_isa():
    """Each kernel this CPU offers reproduces every variants.txt line (default restored)."""
    def body(isa):
        for c in VARIANTS:
            check_forward(c, *run(c, nd=False), what=isa)
    on_every_isa(body)


def test_variants_present():
    assert len(VARIANTS) >= 30
    kinds = set()
    for c in VARIANTS:
        kinds.update(k for k in c if k in INT_PARAMS + FLOAT_PARAMS or k.startswith("strides."))
        kinds.update(c["in"])
    for want in ("window_left", "softcap", "alibi", "softmax_plus_one", "head_dim_v", "bias",
                 "sinks", "query_valid", "seq_lens_k", "strides.bias", "compute"):
        assert want in kinds, want
    modes = {attn.Compute(int(c["compute"])) for c in VARIANTS if "compute" in c}
    assert modes >= {attn.Compute.INT8, attn.Compute.BF16}, modes


def test_q_scale_keyword_scales_q():
    """forward / weights / backward with q_scale= give the bits of the same call on Q scaled
    by hand (power-of-two factors: exact in float32), dq the gradient of the bound Q."""
    B, HQ, HKV, SQ, SK, D = 2, 4, 2, 5, 7, 8
    rng = np.random.default_rng(29)
    q, k, v, dout = (rng.uniform(-1, 1, s).astype(np.float32)
                     for s in ((B, HQ, SQ, D), (B, HKV, SK, D), (B, HKV, SK, D), (B, HQ, SQ, D)))
    s = np.array([2.0, -0.5, 1.0, -4.0], np.float32)
    qs = q * s[None, :, None, None]
    with attn.Desc(B, HQ, HKV, SQ, SK, D, causal=2) as d:
        assert d.shape(attn.Operand.Q_SCALE) == (HQ,)
        out, lse = d.forward(q, k, v, lse=True, q_scale=s)
        out_h, lse_h = d.forward(qs, k, v, lse=True)
        assert out.tobytes() == out_h.tobytes() and lse.tobytes() == lse_h.tobytes()
        assert d.weights(q, k, q_scale=s).tobytes() == d.weights(qs, k).tobytes()
        g = d.backward(q, k, v, out, lse, dout, q_scale=s)
        g_h = d.backward(qs, k, v, out_h, lse_h, dout)
        assert g.dk.tobytes() == g_h.dk.tobytes() and g.dv.tobytes() == g_h.dv.tobytes()
        assert g.dq.tobytes() == (g_h.dq * s[None, :, None, None]).tobytes()
        assert not np.array_equal(out, d.forward(q, k, v))  # the factor is not ignored


def test_variants_xlang_bytes():
    """Writes $ATTN_XLANG_DIR/python.variants.bin: per case in file order the float32 bytes of
    out, lse, weights and (mass=1) key_mass. Two runs give identical bytes."""
    runs = [forward_bytes(VARIANTS) for _ in range(2)]
    assert runs[0] == runs[1]
    write_xlang("python.variants.bin", runs[0])


# ------------------------------------------------------------------------------------------
# errors.txt
# ------------------------------------------------------------------------------------------

def break_of(c):
    kind, _, what = c["break"].partition(":")
    return kind, what


def error_desc(c):
    """The line's Desc with its break applied to the parameters / strides (param:, strides:)."""
    kind, what = break_of(c)
    override = {}
    if kind == "param":
        key, value = what.split("=")
        override[key] = float(value) if key in FLOAT_PARAMS else int(value)
    elif kind == "strides":
        op, value = what.split("=")
        override[op + "_strides"] = tuple(int(x) for x in value.split(","))
    return make_desc(c, **override)


def error_buffers(c, d):
    """Zero-filled flat buffers of every operand the line binds (inputs, then the outputs of its
    op), with the break applied (short:, null:, set:, alias:). None = not bound."""
    kind, what = break_of(c)
    names = list(c["in"])
    if c["op"] == "kv_append":    # k and v are the caches
        names.remove("q")
    elif c["op"] == "merge":      # the accumulator (the part: part_out, part_lse)
        names = [x for x in names if x not in ("q", "k", "v")] + ["out", "lse"]
    elif c["op"] == "weights":
        names += ["weights"]
    else:
        names += ["out", "lse"] + (["key_mass"] if c["mass"] else [])
    lens = {x: d.required_len(OPERAND[x]) for x in names}
    dtype = lambda x: TYPES.get(x, np.float32)
    if kind == "alias":
        dst, src = what.split("=")
        names.remove(dst)
    bufs = {x: np.zeros(lens[x], dtype(x)) for x in names}
    if kind == "short":
        bufs[what] = np.zeros(lens[what] - 1, dtype(what))
    elif kind == "null" and what != "part":
        bufs[what] = None
    elif kind == "empty":         # bound with 0 elements (not None)
        for x in what.split(","):
            bufs[x] = np.zeros(0, dtype(x))
    elif kind == "set":
        target, value = what.split("=")
        x, index = target.rstrip("]").split("[")
        bufs[x][int(index)] = int(value)
    elif kind == "alias":  # dst on src's memory: one buffer large enough for both
        n = max(lens[dst], lens[src])
        base = np.zeros(n, dtype(src))
        bufs[src], bufs[dst] = base[:lens[src]], base[:lens[dst]]
    return bufs


def status_of(call):
    """(status, message) of call, the status read from the kind of the exception: NULL_POINTER
    is an attn.NullPointerError, INVALID_ARGUMENT an attn.InvalidArgumentError that is not one
    (both ValueErrors), any other status a plain attn.AttentionError."""
    try:
        call()
    except attn.AttentionError as e:
        kind = {attn.Status.NULL_POINTER: attn.NullPointerError,
                attn.Status.INVALID_ARGUMENT: attn.InvalidArgumentError}.get(e.status)
        if kind is not None:
            assert isinstance(e, kind) and isinstance(e, ValueError), (e.status, type(e))
        if e.status == attn.Status.INVALID_ARGUMENT:
            assert not isinstance(e, attn.NullPointerError), type(e)
        if kind is None:
            assert not isinstance(e, attn.InvalidArgumentError), (e.status, type(e))
        return int(e.status), e.message
    return 0, ""


def serving_call(c, d, bufs):
    """op=kv_append / op=merge through the face's own calls (Desc.kv_append, Desc.merge)."""
    if c["op"] == "kv_append":
        k, v = bufs.pop("k"), bufs.pop("v")
        d.kv_append(k, v, bufs.pop("new_k", None), bufs.pop("new_v", None), **bufs)
    else:
        part = (None, None) if c["break"] == "null:part" else (
            np.zeros_like(bufs["out"]), np.zeros_like(bufs["lse"]))
        d.merge(bufs.pop("out"), bufs.pop("lse"), *part, **bufs)


def raw_call(c):
    """Args + Desc.run: the raw face, buffers as C sees them."""
    if c["op"] in ("kv_append", "merge"):
        with error_desc(c) as d:
            serving_call(c, d, error_buffers(c, d))
        return
    with error_desc(c) as d, attn.Args() as args:
        bufs = error_buffers(c, d)
        for x, a in bufs.items():
            if a is not None:
                args.set(OPERAND[x], a)
        kind, what = break_of(c)
        op = attn.Op.BACKWARD if (kind, what) == ("op", "backward") else attn.Op[c["op"].upper()]
        d.run(op, args)


def shaped_call(c):
    """Desc.forward / Desc.weights with the same (flat) buffers."""
    with error_desc(c) as d:
        bufs = error_buffers(c, d)
        if c["op"] in ("kv_append", "merge"):
            return serving_call(c, d, bufs)
        q, k = bufs.pop("q"), bufs.pop("k")
        if c["op"] == "weights":
            bufs.pop("v", None)
            d.weights(q, k, out=bufs.pop("weights"), **bufs)
        else:
            v = bufs.pop("v")
            d.forward(q, k, v, **bufs)


def has_word(message, word):
    """The word in the message, case-insensitively, with no letter or digit right before or
    after it (tests/c/test_variants.c's has_word)."""
    return re.search(r"(?<![A-Za-z0-9])%s(?![A-Za-z0-9])" % re.escape(word), message,
                     re.IGNORECASE) is not None


def check_error(c, call):
    try:
        status, message = status_of(lambda: call(c))
    except attn.AttentionError as e:  # raised while building the Desc (param:, strides:)
        status, message = int(e.status), e.message
    assert status == int(c["status"]), (c["name"], status, message)
    if "names" in c:
        assert has_word(message, c["names"]), (c["name"], message)


@pytest.mark.parametrize("c", ERRORS, ids=[c["name"] for c in ERRORS])
def test_error_raw_face(c):
    check_error(c, raw_call)


# In the shaped face None means "allocate" for out / weights, and there is no backward call:
# these lines are checked here as what the face does instead.
NOT_SHAPED = {("null", "out"), ("null", "weights"), ("op", "backward")}
SHAPED = [c for c in ERRORS if break_of(c) not in NOT_SHAPED]


@pytest.mark.parametrize("c", SHAPED, ids=[c["name"] for c in SHAPED])
def test_error_shaped_face(c):
    check_error(c, shaped_call)


def test_error_lines_the_shaped_face_answers_differently():
    names = {break_of(c) for c in ERRORS} & NOT_SHAPED
    assert names == NOT_SHAPED, "errors.txt changed: revisit NOT_SHAPED"
    for c in ERRORS:
        if break_of(c) in (("null", "out"), ("null", "weights")):
            assert shaped_call(c) is None  # out=None: allocated, the call succeeds


def test_errors_present():
    assert os.path.exists(os.path.join(VECTORS, "errors.txt")), "errors.txt not generated yet"
    assert len(ERRORS) >= 40
    # UNSUPPORTED has no shared case since the backward exists (test_rules covers its class)
    assert {int(c["status"]) for c in ERRORS} >= {0, 1, 2}
