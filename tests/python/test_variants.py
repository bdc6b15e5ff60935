"""The shared vectors of the extensible call (tests/vectors/variants.txt and errors.txt, format
in tests/vectors/VARIANTS.md) through the Python face.

* every variants.txt line: forward (out, lse, key_mass) and weights within 1e-5 of the float64
  reference, hidden weights exactly 0, -inf lse exactly -inf; then the same call again with
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

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import attn  # noqa: E402

VECTORS = os.path.join(ROOT, "tests", "vectors")
TOL = 1e-5

INT_PARAMS = ("causal", "window_left", "window_right", "alibi", "softmax_plus_one",
              "head_dim_v", "weights_mode", "bias_first")
FLOAT_PARAMS = ("softcap", "scale")
STRIDED = ("q", "k", "v", "out", "bias")
OPERAND = {op.name.lower(): op for op in attn.Operand}
TYPES = {"q": np.float32, "k": np.float32, "v": np.float32, "bias": np.float32,
         "alibi_slopes": np.float32, "sinks": np.float32, "key_valid": np.uint8,
         "allowed": np.uint8, "query_valid": np.uint8, "seq_lens_k": np.int32}
SUFFIX = {np.float32: "f32", np.uint8: "u8", np.int32: "i32"}

# A stale file must never stand in for this run's output (xlang_identical reads it).
if os.environ.get("ATTN_XLANG_DIR"):
    try:
        os.remove(os.path.join(os.environ["ATTN_XLANG_DIR"], "python.variants.bin"))
    except FileNotFoundError:
        pass


def parse(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            c = dict(tok.split("=", 1) for tok in line.split())
            for key in ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "mass"):
                c[key] = int(c[key])
            c["in"] = c["in"].split(",")
            cases.append(c)
    return cases


VARIANTS = parse(os.path.join(VECTORS, "variants.txt"))
ERRORS = (parse(os.path.join(VECTORS, "errors.txt"))
          if os.path.exists(os.path.join(VECTORS, "errors.txt")) else [])


def params_of(c):
    """Desc keyword arguments of a line's attn_param values."""
    kw = {}
    for key in INT_PARAMS:
        if key in c:
            kw[key] = int(c[key])
    for key in FLOAT_PARAMS:
        if key in c:
            kw[key] = float(c[key])
    return kw


def strides_of(c):
    return {op: tuple(int(x) for x in c["strides." + op].split(","))
            for op in STRIDED if "strides." + op in c}


def make_desc(c, with_strides=True, **override):
    kw = params_of(c)
    kw.update(override)
    if with_strides:
        kw.update({op + "_strides": s for op, s in strides_of(c).items()})
    return attn.Desc(c["batch"], c["heads_q"], c["heads_kv"], c["seq_q"], c["seq_k"],
                     c["head_dim"], **kw)


def read(c, part, dtype):
    return np.fromfile(os.path.join(VECTORS, "%s.%s" % (c["name"], part)), dtype=dtype)


def inputs_of(c):
    return {x: read(c, "%s.%s" % (x, SUFFIX[TYPES[x]]), TYPES[x]) for x in c["in"]}


def view(d, c, op, flat):
    """An N-D numpy view of a flat buffer laid out with the line's strides for `op`."""
    s = strides_of(c).get(op)
    shape = d.shape(attn.Operand[op.upper()])
    if s is None:  # default contiguous
        return flat.reshape(shape)
    return np.lib.stride_tricks.as_strided(flat, shape, tuple(4 * x for x in s) + (4,),
                                           writeable=op == "out")


def run(c, nd):
    """forward + weights of a line. nd=False: flat buffers on a Desc configured with the line's
    strides; nd=True: N-D strided views on a Desc with default strides."""
    ins = inputs_of(c)
    with make_desc(c) as d:
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        mass = np.zeros(d.required_len(attn.Operand.KEY_MASS), np.float32) if c["mass"] else None
        assert all(ins[x].size == d.required_len(OPERAND[x]) for x in ins)
        if nd:
            arrays = {x: (view(d, c, x, a) if x in STRIDED else a.reshape(d.shape(OPERAND[x])))
                      for x, a in ins.items()}
            outs = {"out": view(d, c, "out", out), "lse": lse.reshape(d.shape(attn.Operand.LSE))}
            if mass is not None:
                outs["key_mass"] = mass.reshape(d.shape(attn.Operand.KEY_MASS))
            desc = make_desc(c, with_strides=False)
        else:
            arrays, outs, desc = dict(ins), {"out": out, "lse": lse}, d
            if mass is not None:
                outs["key_mass"] = mass
        with desc:
            q, k, v = arrays.pop("q"), arrays.pop("k"), arrays.pop("v")
            res = desc.forward(q, k, v, **arrays, **outs)
            assert res[0] is outs["out"] and res[1] is outs["lse"]
            w = desc.weights(q, k, **arrays)
            if nd:
                # every differently strided operand made the Desc configure a matching one
                assert len(desc._variants) == (1 if strides_of(c) else 0)
    return out, lse, w.reshape(-1), mass


def assert_close(name, got, want):
    assert got.shape == want.shape, name
    both_inf = np.isinf(want) & (got == want)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    err[both_inf] = 0.0
    bad = ~(err <= TOL)  # NaN counts as bad
    assert not bad.any(), "%s: %d elements off, first at %d: got %r want %r" % (
        name, bad.sum(), np.argmax(bad), got[np.argmax(bad)], want[np.argmax(bad)])


@pytest.mark.parametrize("c", VARIANTS, ids=[c["name"] for c in VARIANTS])
def test_variant(c):
    out, lse, w, mass = run(c, nd=False)
    want_out = read(c, "out.f32", np.float32)
    want_lse = read(c, "lse.f32", np.float32)
    want_w = read(c, "weights.f32", np.float32)
    assert_close("out", out, want_out)
    assert_close("lse", lse, want_lse)
    assert_close("weights", w, want_w)
    assert (w[want_w == 0.0] == 0.0).all(), "an expected 0 weight is not exactly 0"
    assert (lse[np.isneginf(want_lse)] == -np.inf).all(), "an expected -inf lse is not -inf"
    if c["mass"]:
        want_mass = read(c, "key_mass.f32", np.float32)
        assert_close("key_mass", mass, want_mass)
        assert (mass[want_mass == 0.0] == 0.0).all()
    # N-D strided views on a Desc without the strides: the same bits
    out2, lse2, w2, mass2 = run(c, nd=True)
    assert out2.tobytes() == out.tobytes()
    assert lse2.tobytes() == lse.tobytes()
    assert w2.tobytes() == w.tobytes()
    if c["mass"]:
        assert mass2.tobytes() == mass.tobytes()


def test_variants_on_every_isa():
    """Each kernel this CPU offers reproduces every variants.txt line (default restored)."""
    seen = []
    try:
        for isa in ("scalar", "sse2", "avx2", "avx512"):
            try:
                attn.set_isa(isa)
            except attn.AttentionError as e:
                assert e.status is attn.Status.UNSUPPORTED, e
                continue
            seen.append(isa)
            for c in VARIANTS:
                out, lse, w, mass = run(c, nd=False)
                assert_close(isa + " " + c["name"] + " out", out, read(c, "out.f32", np.float32))
                assert_close(isa + " " + c["name"] + " lse", lse, read(c, "lse.f32", np.float32))
                assert_close(isa + " " + c["name"] + " weights", w,
                             read(c, "weights.f32", np.float32))
                if c["mass"]:
                    assert_close(isa + " " + c["name"] + " key_mass", mass,
                                 read(c, "key_mass.f32", np.float32))
    finally:
        attn.set_isa(None)
    assert "scalar" in seen


def test_variants_present():
    assert len(VARIANTS) >= 30
    kinds = set()
    for c in VARIANTS:
        kinds.update(k for k in c if k in INT_PARAMS + FLOAT_PARAMS or k.startswith("strides."))
        kinds.update(c["in"])
    for want in ("window_left", "softcap", "alibi", "softmax_plus_one", "head_dim_v", "bias",
                 "sinks", "query_valid", "seq_lens_k", "strides.bias"):
        assert want in kinds, want


def test_variants_xlang_bytes():
    """Writes $ATTN_XLANG_DIR/python.variants.bin: per case in file order the float32 bytes of
    out, lse, weights and (mass=1) key_mass. Two runs give identical bytes."""
    runs = []
    for _ in range(2):
        blob = bytearray()
        for c in VARIANTS:
            out, lse, w, mass = run(c, nd=False)
            for a in (out, lse, w) + ((mass,) if c["mass"] else ()):
                blob += a.astype("<f4").tobytes()
        runs.append(bytes(blob))
    assert runs[0] == runs[1]
    xdir = os.environ.get("ATTN_XLANG_DIR")
    if xdir:
        os.makedirs(xdir, exist_ok=True)
        with open(os.path.join(xdir, "python.variants.bin"), "wb") as f:
            f.write(runs[0])


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
    names += ["weights"] if c["op"] == "weights" else ["out", "lse"] + (
        ["key_mass"] if c["mass"] else [])
    lens = {x: d.required_len(OPERAND[x]) for x in names}
    dtype = lambda x: TYPES.get(x, np.float32)
    if kind == "alias":
        dst, src = what.split("=")
        names.remove(dst)
    bufs = {x: np.zeros(lens[x], dtype(x)) for x in names}
    if kind == "short":
        bufs[what] = np.zeros(lens[what] - 1, dtype(what))
    elif kind == "null":
        bufs[what] = None
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
    try:
        call()
    except attn.AttentionError as e:
        if e.status in (attn.Status.INVALID_ARGUMENT, attn.Status.NULL_POINTER):
            assert isinstance(e, ValueError), "README: %s is a ValueError" % e.status.name
        return int(e.status), e.message
    return 0, ""


def raw_call(c):
    """Args + Desc.run: the raw face, buffers as C sees them."""
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
