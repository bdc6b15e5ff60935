"""Error cases (errors.txt): a valid case plus one thing to break, the attn_status the first
failing call must return and a word its message must contain."""

from gen_format import VARIANT_INPUTS, variant_line, variant_problem


# ---------------------------------------------------------------------------------------------
# Error cases (errors.txt, format in VARIANTS.md): a valid case plus one thing to break, the
# attn_status the first failing call must return and a word its message must contain.
# ---------------------------------------------------------------------------------------------

ST_OK, ST_NULL, ST_INVALID, ST_UNSUPPORTED = 0, 1, 2, 4
ALL_IN = ["q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes", "sinks", "query_valid",
          "seq_lens_k"]


def err(name, brk, status, names=None, op="forward", inputs=("q", "k", "v"), mass=0, **kw):
    c = dict(name=name, B=2, HQ=4, HKV=2, SQ=3, SK=5, D=4, mass=mass, **kw)
    return dict(c=c, inputs=set(inputs), op=op, brk=brk, status=status, names=names)


ERRORS = [
    # An operand shorter than attn_desc_required_len by one element.
    err("short_q", "short:q", ST_INVALID, "q"),
    err("short_k", "short:k", ST_INVALID, "k"),
    err("short_v", "short:v", ST_INVALID, "v"),
    err("short_out", "short:out", ST_INVALID, "out"),
    err("short_lse", "short:lse", ST_INVALID, "lse"),
    err("short_weights", "short:weights", ST_INVALID, "weights", op="weights"),
    err("short_key_mass", "short:key_mass", ST_INVALID, "key_mass", mass=1),
    err("short_key_valid", "short:key_valid", ST_INVALID, "key_valid", inputs=ALL_IN[:4]),
    err("short_allowed", "short:allowed", ST_INVALID, "allowed", inputs=ALL_IN[:3] + ["allowed"]),
    err("short_bias", "short:bias", ST_INVALID, "bias", inputs=ALL_IN[:3] + ["bias"]),
    err("short_alibi_slopes", "short:alibi_slopes", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("short_sinks", "short:sinks", ST_INVALID, "sinks", inputs=ALL_IN[:3] + ["sinks"]),
    err("short_query_valid", "short:query_valid", ST_INVALID, "query_valid",
        inputs=ALL_IN[:3] + ["query_valid"]),
    err("short_seq_lens_k", "short:seq_lens_k", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"]),
    err("short_bias_strided", "short:bias", ST_INVALID, "bias", inputs=ALL_IN[:3] + ["bias"],
        bias_s=(0, 5, 0)),
    err("short_v_head_dim_v", "short:v", ST_INVALID, "v", head_dim_v=6),
    # A required operand not bound.
    err("null_q", "null:q", ST_NULL, "q"),
    err("null_k", "null:k", ST_NULL, "k"),
    err("null_v", "null:v", ST_NULL, "v"),
    err("null_out", "null:out", ST_NULL, "out"),
    err("null_q_weights", "null:q", ST_NULL, "q", op="weights"),
    err("null_weights", "null:weights", ST_NULL, "weights", op="weights"),
    err("alibi_missing", "null:alibi_slopes", ST_NULL, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    # Operand values and combinations attn_run refuses.
    err("seq_lens_k_above", "set:seq_lens_k[1]=6", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"]),
    err("seq_lens_k_negative", "set:seq_lens_k[0]=-1", ST_INVALID, "seq_lens_k",
        inputs=ALL_IN[:3] + ["seq_lens_k"], op="weights"),
    err("alibi_unexpected", "param:alibi=0", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("alibi_unexpected_standard", "param:alibi=2", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1),
    err("sinks_with_plus_one", "param:softmax_plus_one=1", ST_INVALID, "sinks",
        inputs=ALL_IN[:3] + ["sinks"]),
    # the backward of a forward's operands: the gradient of out is missing
    err("op_backward", "op:backward", ST_NULL, "dout"),
    # Parameters out of attn_param_bounds.
    err("param_causal", "param:causal=3", ST_INVALID, "causal"),
    err("param_window_left", "param:window_left=-2", ST_INVALID, "window_left"),
    err("param_window_right", "param:window_right=-5", ST_INVALID, "window_right"),
    err("param_softcap", "param:softcap=-1", ST_INVALID, "softcap"),
    err("param_scale", "param:scale=1e39", ST_INVALID, "scale"),
    err("param_alibi", "param:alibi=3", ST_INVALID, "alibi"),
    err("param_diagonal", "param:diagonal=3", ST_INVALID, "diagonal"),
    err("param_alibi_form", "param:alibi_form=2", ST_INVALID, "alibi_form"),
    err("strides_alibi_slopes_row", "strides:alibi_slopes=4,1,1", ST_INVALID, "alibi_slopes"),
    err("short_alibi_slopes_per_batch", "short:alibi_slopes", ST_INVALID, "alibi_slopes",
        inputs=ALL_IN[:3] + ["alibi_slopes"], alibi=1, alibi_slopes_s=(4, 1, 0)),
    err("param_plus_one", "param:softmax_plus_one=2", ST_INVALID, "softmax_plus_one"),
    err("param_head_dim_v", "param:head_dim_v=0", ST_INVALID, "head_dim_v"),
    err("param_weights_mode", "param:weights_mode=5", ST_INVALID, "weights_mode"),
    err("param_bias_first", "param:bias_first=-1", ST_INVALID, "bias_first"),
    # OUT strides that let rows overlap.
    err("strides_out_overlap", "strides:out=0,4,2", ST_INVALID, "out"),
    # An output sharing memory with another operand (inputs may share memory).
    err("alias_out_q", "alias:out=q", ST_INVALID, "out"),
    err("alias_lse_k", "alias:lse=k", ST_INVALID, "lse"),
    err("alias_out_lse", "alias:out=lse", ST_INVALID, "out"),
    err("alias_key_mass_v", "alias:key_mass=v", ST_INVALID, "key_mass", mass=1),
    err("alias_weights_bias", "alias:weights=bias", ST_INVALID, "weights", op="weights",
        inputs=ALL_IN[:3] + ["bias"]),
    err("alias_inputs_ok", "alias:k=q", ST_OK, None),
    # Packed variable-length batches: the library checks the prefix sums (cu_seqlens_q
    # zero-filled, then [0, 2, 0]: decreasing); a pack of 0 tokens is valid and produces
    # nothing, with empty (not null) buffers.
    err("varlen_cu_seqlens_q_decreasing", "set:cu_seqlens_q[1]=2", ST_INVALID, "cu_seqlens_q",
        inputs=ALL_IN[:3] + ["cu_seqlens_q", "cu_seqlens_k"], varlen=1),
    err("varlen_empty_pack", "empty:q,k,v,out,lse", ST_OK, None,
        inputs=ALL_IN[:3] + ["cu_seqlens_q", "cu_seqlens_k"], varlen=1),
    # attn_kv_append without the new key rows; attn_merge without a part.
    err("kv_append_new_k_missing", "null:new_k", ST_NULL, "new_k", op="kv_append",
        inputs=ALL_IN[:3] + ["seq_lens_k", "new_k", "new_v"]),
    err("merge_part_missing", "null:part", ST_NULL, "part", op="merge"),
]


def build_error(e):
    c = e["c"]
    p = variant_problem(c)
    extra = ["op=%s" % e["op"], "break=%s" % e["brk"], "status=%d" % e["status"]]
    if e["names"]:
        extra.append("names=%s" % e["names"])
    assert set(e["inputs"]) <= set(VARIANT_INPUTS)
    return variant_line(c, p, e["inputs"], extra)


ERRORS_HEADER = """\
# libattn error cases of the extensible call (since 0.2), generated by
# tests/vectors/gen_vectors.py. Do not edit: regenerate (and --check) instead. Each line is a
# valid variants.txt case (no data files: every buffer is zero-filled) plus op, one break,
# the expected attn_status and a word the message must contain. Format: VARIANTS.md.
"""
