"""The line format of variants.txt, storage.txt, backward.txt and errors.txt (VARIANTS.md):
the problem a case describes and the line that names it."""

from attn_ref import CAUSAL_NONE, Problem, bhsd_strides
from gen_common import fmt_float


# ---------------------------------------------------------------------------------------------
# The 0.2 variants (variants.txt, format in VARIANTS.md): attn_args / attn_run with every
# parameter and operand. Each case: name, seed, sizes, and optionally
#   params:  causal window_left window_right softcap alibi softmax_plus_one head_dim_v
#            bias_first scale diagonal alibi_form compute (written to the line exactly when
#            given, even at the default)
#   strides: q k v out bias alibi_slopes (None/absent = default)
#   operand makers, each a function (rng, p) -> flat list, drawn in the order of VARIANT_INPUTS:
#            key_valid allowed bias alibi_slopes sinks query_valid seq_lens_k q_scale
#   mass:    1 = key_mass is bound as a forward output
#   tol:     the tolerance of the forward's out and lse (a fast mode); absent = 1e-5
# ---------------------------------------------------------------------------------------------

VARIANT_PARAMS = ["causal", "window_left", "window_right", "softcap", "alibi",
                  "softmax_plus_one", "head_dim_v", "bias_first", "scale", "varlen", "diagonal",
                  "alibi_form", "compute"]
FLOAT_PARAMS = ("softcap", "scale")
VARIANT_STRIDES = ["q", "k", "v", "out", "bias", "alibi_slopes"]
# The inputs the cases bind, in the order of their attn_operand values (the order of every in=
# list), and the type of their files (from the operand's input types: u8, i32, else f32).
VARIANT_INPUTS = ["q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes", "sinks",
                  "query_valid", "seq_lens_k", "cu_seqlens_q", "cu_seqlens_k", "new_k", "new_v",
                  "q_scale"]
INPUT_TYPE = {"q": "f32", "k": "f32", "v": "f32", "bias": "f32", "alibi_slopes": "f32",
              "sinks": "f32", "key_valid": "u8", "allowed": "u8", "query_valid": "u8",
              "seq_lens_k": "i32", "cu_seqlens_q": "i32", "cu_seqlens_k": "i32",
              "new_k": "f32", "new_v": "f32", "q_scale": "f32"}


def variant_problem(c):
    kw = {x: c[x] for x in ("window_left", "window_right", "softcap", "alibi", "head_dim_v",
                            "diagonal", "alibi_form") if x in c}
    if c.get("alibi_slopes_s") is not None:
        kw["alibi_slopes_strides"] = tuple(c["alibi_slopes_s"][:2])
    kw["softmax_plus_one"] = bool(c.get("softmax_plus_one", 0))
    kw["bias_first"] = bool(c.get("bias_first", 0))
    return Problem(c["B"], c["HQ"], c["HKV"], c["SQ"], c["SK"], c["D"],
                   c.get("causal", CAUSAL_NONE), c.get("scale"),
                   c.get("q_s"), c.get("k_s"), c.get("v_s"), c.get("out_s"),
                   bias_strides=c.get("bias_s"), **kw)


def default_strides(p, which):
    return {"q": bhsd_strides(p.heads_q, p.seq_q, p.head_dim),
            "k": bhsd_strides(p.heads_kv, p.seq_k, p.head_dim),
            "v": bhsd_strides(p.heads_kv, p.seq_k, p.head_dim_v),
            "out": bhsd_strides(p.heads_q, p.seq_q, p.head_dim_v),
            "bias": bhsd_strides(p.heads_q, p.seq_q, p.seq_k),
            "alibi_slopes": (0, 1, 0)}[which]


def variant_line(c, p, inputs, extra=()):
    """The variants.txt / errors.txt line of a case (keys in the order of VARIANTS.md)."""
    toks = ["name=%s" % c["name"]]
    for key, x in zip(("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"),
                      (p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim)):
        toks.append("%s=%d" % (key, x))
    for key in VARIANT_PARAMS:
        if key in c:
            toks.append("%s=%s" % (key, fmt_float(c[key]) if key in FLOAT_PARAMS
                                   else "%d" % c[key]))
    for key in VARIANT_STRIDES:
        s = c.get(key + "_s")
        if s is not None and tuple(s) != tuple(default_strides(p, key)):
            toks.append("strides.%s=%d,%d,%d" % ((key,) + tuple(s)))
    toks.append("in=" + ",".join(x for x in VARIANT_INPUTS if x in inputs))
    toks.append("mass=%d" % c.get("mass", 0))
    if "tol" in c:
        toks.append("tol=%r" % float(c["tol"]))
    toks.extend(extra)
    return " ".join(toks)
