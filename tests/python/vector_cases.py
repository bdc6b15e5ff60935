"""The shared-vector runner of the Python face (format: tests/vectors/VARIANTS.md), used by
test_variants.py (variants.txt, errors.txt), test_storage.py (storage.txt) and test_backward.py
(backward.txt). Not a test module itself.

A case line becomes: a Desc (its parameters, strides and k_scale / v_scale strides), its input
files read at their stored type (f32, u8, i32; f16, bf16 and i8 for the store.q/k/v keys, with the
int8 scales), and run() calls forward + weights through the numpy face either on flat buffers
(the Desc configured with the line's strides) or on N-D strided views of the same memory (a Desc
NOT told the strides: the face maps the views' strides itself).
"""

import os
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import attn  # noqa: E402

VECTORS = os.path.join(ROOT, "tests", "vectors")
TOL = 1e-5

INT_PARAMS = ("causal", "window_left", "window_right", "alibi", "softmax_plus_one",
              "head_dim_v", "weights_mode", "bias_first", "varlen", "diagonal", "alibi_form",
              "compute")
FLOAT_PARAMS = ("softcap", "scale")
STRIDED = ("q", "k", "v", "out", "bias", "k_scale", "v_scale")
#: strides.<x> keys that are not N-D strided views (the slopes: [batch][heads_q] or flat)
OTHER_STRIDES = ("alibi_slopes",)
OPERAND = {op.name.lower(): op for op in attn.Operand}


def _file_type(inputs):
    """The element type of an input operand's file from the types the library lists for it
    (attn.operand_info): byte masks u8, int32 i32, every other input float32."""
    return (np.uint8 if inputs & attn.DType.U8 else np.int32 if inputs & attn.DType.I32
            else np.float32)


#: The input operands and the numpy type of their files, from the library's operand table: an
#: `in` list may name any of them, so a new operand needs no change here.
TYPES = {x: _file_type(attn.operand_info(op).inputs) for x, op in OPERAND.items()
         if attn.operand_info(op).inputs}
SUFFIX = {np.float32: "f32", np.uint8: "u8", np.int32: "i32"}
#: store.<x> values: the file suffix -> numpy dtype of the file's elements
STORE = {"f16": np.float16, "bf16": np.uint16, "i8": np.int8}
GRADS = ("dq", "dk", "dv", "dbias", "dsinks")

# Every key a line may have (VARIANTS.md: a reader must reject a key it does not know).
KNOWN = ({"name", "batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "in", "mass",
          "tol", "op", "break", "status", "names", "grads", "store.q", "store.k", "store.v"}
         | set(INT_PARAMS) | set(FLOAT_PARAMS)
         | {"strides." + x for x in STRIDED + OTHER_STRIDES})


def parse(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            c = dict(tok.split("=", 1) for tok in line.split())
            unknown = set(c) - KNOWN
            assert not unknown, "%s: unknown key(s) %s in %s" % (path, sorted(unknown), c["name"])
            for key in ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "mass"):
                c[key] = int(c[key])
            c["in"] = c["in"].split(",")
            c["tol"] = float(c.get("tol", TOL))
            bad = [x for x in c["in"] if x not in TYPES]
            assert not bad, "%s: in= names %s, not input operands of the library" % (c["name"], bad)
            if "grads" in c:
                c["grads"] = c["grads"].split(",")
            for x in ("q", "k", "v"):
                assert c.get("store." + x, "f32") in ("f32",) + tuple(STORE), c["name"]
            cases.append(c)
    return cases


def load(name):
    """The cases of tests/vectors/<name> ([] when the file does not exist yet)."""
    path = os.path.join(VECTORS, name)
    return parse(path) if os.path.exists(path) else []


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
            for op in STRIDED + OTHER_STRIDES if "strides." + op in c}


def make_desc(c, with_strides=True, **override):
    kw = params_of(c)
    kw.update(override)
    kw.update({op + "_strides": s for op, s in strides_of(c).items()
               if with_strides or op in OTHER_STRIDES})
    return attn.Desc(c["batch"], c["heads_q"], c["heads_kv"], c["seq_q"], c["seq_k"],
                     c["head_dim"], **kw)


def read(c, part, dtype):
    return np.fromfile(os.path.join(VECTORS, "%s.%s" % (c["name"], part)), dtype=dtype)


def store_of(c, x):
    """'f32', or the storage type of q / k / v on this line ('f16', 'bf16', 'i8')."""
    return c.get("store." + x, "f32")


def inputs_of(c, extra=()):
    """The line's input files as flat arrays at their stored type, by operand name: every
    operand of `in` (q / k / v as f32, float16, uint16 bf16 bits or int8), the int8 scales of an
    i8 k / v, and the `extra` operands (e.g. dout)."""
    ins = {}
    for x in list(c["in"]) + list(extra):
        st = store_of(c, x) if x in ("q", "k", "v") else "f32"
        if st != "f32":
            ins[x] = read(c, "%s.%s" % (x, st), STORE[st])
        else:
            ins[x] = read(c, "%s.%s" % (x, SUFFIX[TYPES[x]]), TYPES[x])
    for x in ("k", "v"):
        if store_of(c, x) == "i8":
            ins[x + "_scale"] = read(c, "%s_scale.f32" % x, np.float32)
    return ins


def typed(c, x, a):
    """The value to pass for operand x: a bf16 file's bits wrapped as attn.BF16."""
    return attn.BF16(a) if x in ("q", "k", "v") and store_of(c, x) == "bf16" else a


def view(d, c, op, flat, writeable=None):
    """An N-D numpy view of a flat buffer laid out with the line's strides for `op` (q, k, v,
    out, bias: 4-D with the last dimension contiguous; k_scale, v_scale: 3-D)."""
    s = strides_of(c).get(op)
    shape = d.shape(OPERAND[op])
    if s is None:  # default contiguous
        return flat.reshape(shape)
    item = flat.itemsize
    inner = (item,) if len(shape) == 4 else ()
    return np.lib.stride_tricks.as_strided(
        flat, shape, tuple(item * x for x in s) + inner,
        writeable=(op == "out") if writeable is None else writeable)


def nd_arrays(d, c, flats):
    """N-D views (strided ones with the line's strides) of flat input buffers."""
    return {x: (view(d, c, x, a) if x in STRIDED else a.reshape(d.shape(OPERAND[x])))
            for x, a in flats.items()}


def run(c, nd):
    """forward + weights of a line. nd=False: flat buffers on a Desc configured with the line's
    strides; nd=True: N-D strided views on a Desc with default strides. Returns (out, lse,
    weights, key_mass) as flat float32 arrays (key_mass None unless mass=1)."""
    ins = inputs_of(c)
    with make_desc(c) as d:
        out = np.zeros(d.required_len(attn.Operand.OUT), np.float32)
        lse = np.zeros(d.required_len(attn.Operand.LSE), np.float32)
        mass = np.zeros(d.required_len(attn.Operand.KEY_MASS), np.float32) if c["mass"] else None
        for x in ins:
            assert ins[x].size == d.required_len(OPERAND[x]), (c["name"], x)
        if nd:
            arrays = nd_arrays(d, c, ins)
            outs = {"out": view(d, c, "out", out), "lse": lse.reshape(d.shape(attn.Operand.LSE))}
            if mass is not None:
                outs["key_mass"] = mass.reshape(d.shape(attn.Operand.KEY_MASS))
            desc = make_desc(c, with_strides=False)
        else:
            arrays, outs, desc = dict(ins), {"out": out, "lse": lse}, d
            if mass is not None:
                outs["key_mass"] = mass
        arrays = {x: typed(c, x, a) for x, a in arrays.items()}
        with desc:
            q, k, v = arrays.pop("q"), arrays.pop("k"), arrays.pop("v")
            res = desc.forward(q, k, v, **arrays, **outs)
            assert res[0] is outs["out"] and res[1] is outs["lse"]
            arrays.pop("v_scale", None)  # the weights do not read V
            w = desc.weights(q, k, **arrays)
            if nd:
                # every differently strided operand made the Desc configure a matching one
                assert len(desc._variants) == (
                    1 if any(op in STRIDED for op in strides_of(c)) else 0)
    return out, lse, w.reshape(-1), mass


def assert_close(name, got, want, tol=TOL):
    """|got - want| <= tol * max(1, |want|) everywhere (equal infinities pass, NaN fails)."""
    assert got.shape == want.shape, name
    both_inf = np.isinf(want) & (got == want)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    err[both_inf] = 0.0
    bad = ~(err <= tol)  # NaN counts as bad
    assert not bad.any(), "%s: %d elements off, first at %d: got %r want %r" % (
        name, bad.sum(), np.argmax(bad), got[np.argmax(bad)], want[np.argmax(bad)])


def check_forward(c, out, lse, w, mass, what=""):
    """A forward + weights result against the line's expected files (VARIANTS.md: out and lse
    within the line's tol (1e-5 unless a fast mode gives one), weights and key_mass within
    1e-5, expected zeros exactly 0, expected -inf lse exactly -inf)."""
    tag = (what + " " if what else "") + c["name"]
    want_out = read(c, "out.f32", np.float32)
    want_lse = read(c, "lse.f32", np.float32)
    want_w = read(c, "weights.f32", np.float32)
    assert_close(tag + " out", out, want_out, c["tol"])
    assert_close(tag + " lse", lse, want_lse, c["tol"])
    assert_close(tag + " weights", w, want_w)
    assert (w[want_w == 0.0] == 0.0).all(), tag + ": an expected 0 weight is not exactly 0"
    assert (out[want_out == 0.0] == 0.0).all(), tag + ": an expected 0 out is not exactly 0"
    assert (lse[np.isneginf(want_lse)] == -np.inf).all(), tag + ": an expected -inf lse"
    if c["mass"]:
        want_mass = read(c, "key_mass.f32", np.float32)
        assert_close(tag + " key_mass", mass, want_mass)
        assert (mass[want_mass == 0.0] == 0.0).all()


def forward_bytes(cases):
    """Per case in file order, the float32 bytes of out, lse, weights and (mass=1) key_mass:
    what <lang>.variants.bin / <lang>.storage.bin hold."""
    blob = bytearray()
    for c in cases:
        out, lse, w, mass = run(c, nd=False)
        for a in (out, lse, w) + ((mass,) if c["mass"] else ()):
            blob += a.astype("<f4").tobytes()
    return bytes(blob)


def write_xlang(filename, blob):
    """$ATTN_XLANG_DIR/<filename> (when ATTN_XLANG_DIR is set)."""
    xdir = os.environ.get("ATTN_XLANG_DIR")
    if xdir:
        os.makedirs(xdir, exist_ok=True)
        with open(os.path.join(xdir, filename), "wb") as f:
            f.write(blob)


def remove_stale(filename):
    """A stale file must never stand in for this run's output (xlang_identical reads it)."""
    if os.environ.get("ATTN_XLANG_DIR"):
        try:
            os.remove(os.path.join(os.environ["ATTN_XLANG_DIR"], filename))
        except FileNotFoundError:
            pass


def on_every_isa(body):
    """body(isa) on each kernel this CPU offers (default restored); returns the ISAs run."""
    seen = []
    try:
        for isa in [n for n, _ in attn.isa_info()]:
            try:
                attn.set_isa(isa)
            except attn.AttentionError as e:
                assert e.status is attn.Status.UNSUPPORTED, e
                continue
            seen.append(isa)
            body(isa)
    finally:
        attn.set_isa(None)
    assert "scalar" in seen
    return seen
