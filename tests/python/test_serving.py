"""The serving layouts (capi/attn.h "Serving layouts") through the numpy face: varlen packs,
paged caches filled with Desc.kv_append, Desc.merge, batch invariance (rows bit-identical to each
sequence computed alone), the raw Args face, and the errors naming the sequence and the slot.

The sequences are those of tests/core/test_serving.cpp's varlen merge case (and of
bindings/go/serving_test.go): query lengths {5, 0, 9}, key lengths {40, 7, 66}, GQA 4/2,
head_dim 24. Bit comparisons are on .view(np.uint32); unused memory holds a NaN with a payload,
so "untouched" is a bit comparison too."""

import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import attn  # noqa: E402
import attn_ref  # noqa: E402
from attn import _lib  # noqa: E402

HQ, HKV, D = 4, 2, 24
LQ, LK = (5, 0, 9), (40, 7, 66)
B, MAX_Q, MAX_K = 3, 9, 66
NAN = np.array([0x7FC0BEEF], np.uint32).view(np.float32)[0]  # a quiet NaN with a payload


def cumulative(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


CU_Q, CU_K = cumulative(LQ), cumulative(LK)  # [0 5 5 14], [0 40 47 113]
TQ, TK = int(CU_Q[-1]), int(CU_K[-1])
PAGES_3 = sum(-(-lk // 3) for lk in LK) + 2  # the pool of the error cases: pages of 3, 2 spare


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def same_bits(got, want):
    return got.shape == want.shape and np.array_equal(bits(got), bits(want))


def rel_err(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    both_inf = np.isinf(want) & (got == want)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    err[both_inf] = 0.0
    assert not np.isnan(err).any()
    return float(err.max()) if err.size else 0.0


def sequences(seed):
    """Per sequence: q (HQ, lq, D), k and v (HKV, lk, D)."""
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-1, 1, (HQ, lq, D)).astype(np.float32),
             rng.uniform(-1, 1, (HKV, lk, D)).astype(np.float32),
             rng.uniform(-2, 2, (HKV, lk, D)).astype(np.float32)) for lq, lk in zip(LQ, LK)]


def pack(seqs):
    """The varlen pack: q (total_q, HQ, D), k and v (total_k, HKV, D). The keys of the sequence
    without queries stay NaN: a query of another sequence that read one would be NaN."""
    q = np.full((TQ, HQ, D), NAN, np.float32)
    k = np.full((TK, HKV, D), NAN, np.float32)
    v = k.copy()
    for b, (sq, sk, sv) in enumerate(seqs):
        q[CU_Q[b]:CU_Q[b + 1]] = sq.transpose(1, 0, 2)
        if LQ[b]:
            k[CU_K[b]:CU_K[b + 1]] = sk.transpose(1, 0, 2)
            v[CU_K[b]:CU_K[b + 1]] = sv.transpose(1, 0, 2)
    return q, k, v


def rows(out, lse, b):
    """Sequence b's rows of a pack's out (total_q, HQ, D) and lse (HQ, total_q), shaped like a
    dense call of that sequence alone: (HQ, lq, D) and (HQ, lq)."""
    s = slice(CU_Q[b], CU_Q[b + 1])
    return out[s].transpose(1, 0, 2), lse[:, s]


def alone(sq, sk, sv):
    """One sequence by itself (a dense batch of one): out (HQ, lq, D), lse (HQ, lq)."""
    with attn.Desc(1, HQ, HKV, sq.shape[1], sk.shape[1], D, causal="bottom_right",
                   batch_invariant=True) as d:
        out, lse = d.forward(sq[None], sk[None], sv[None], lse=True)
    return out[0], lse[0]


def new_rows(seqs, lo, hi):
    """Keys [lo[b], hi[b]) of every sequence as contiguous token rows (the new_k / new_v layout
    (tokens, HKV, D)), with the prefix sums of the counts."""
    ks = [sk[:, lo[b]:hi[b]].transpose(1, 0, 2) for b, (_, sk, _) in enumerate(seqs)]
    vs = [sv[:, lo[b]:hi[b]].transpose(1, 0, 2) for b, (_, _, sv) in enumerate(seqs)]
    return (np.ascontiguousarray(np.concatenate(ks)), np.ascontiguousarray(np.concatenate(vs)),
            cumulative([hi[b] - lo[b] for b in range(len(seqs))]))


def block_table(page, max_pages, seed):
    """A shuffled block table over a pool with two spare pages; -1 in the unused slots."""
    rng = np.random.default_rng(seed)
    used = [-(-lk // page) for lk in LK]
    num_pages = sum(used) + 2
    ids = rng.permutation(num_pages).astype(np.int32)
    table = np.full((B, max_pages), -1, np.int32)
    start = 0
    for b, n in enumerate(used):
        table[b, :n] = ids[start:start + n]
        start += n
    return table, num_pages


def filled_pools(seqs, table, page, num_pages, head_major):
    """Pools holding every sequence's keys where the block table puts them, NaN elsewhere."""
    shape = (num_pages, HKV, page, D) if head_major else (num_pages, page, HKV, D)
    pools = np.full(shape, NAN, np.float32), np.full(shape, NAN, np.float32)
    for b, (_, sk, sv) in enumerate(seqs):
        for j in range(LK[b]):
            p, t = table[b, j // page], j % page
            for pool, x in zip(pools, (sk, sv)):
                if head_major:
                    pool[p, :, t] = x[:, j]
                else:
                    pool[p, t] = x[:, j]
    return pools


@pytest.fixture
def restore_defaults():
    yield
    attn.set_isa(None)
    attn.set_num_threads(0)


def available_isas():
    names = []
    for name in [n for n, _ in attn.isa_info()]:
        try:
            attn.set_isa(name)
        except attn.AttentionError:
            continue
        names.append(name)
    attn.set_isa(None)
    assert names
    return names


# ------------------------------------------------------------------------------------------
# Parameters, operands, shapes
# ------------------------------------------------------------------------------------------

def test_serving_parameters_read_back_and_shapes():
    assert [int(o) for o in (attn.Operand.CU_SEQLENS_Q, attn.Operand.CU_SEQLENS_K,
                             attn.Operand.BLOCK_TABLE, attn.Operand.NEW_K,
                             attn.Operand.NEW_V)] == [14, 15, 16, 17, 18]
    assert [int(p) for p in (attn.Param.VARLEN, attn.Param.PAGE_SIZE, attn.Param.MAX_PAGES,
                             attn.Param.BATCH_INVARIANT)] == [10, 11, 12, 13]
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, page_size=16, max_pages=7,
                   batch_invariant=True, causal="bottom_right") as d:
        assert (d.varlen, d.page_size, d.max_pages, d.batch_invariant, d.page_layout) == (
            True, 16, 7, True, "token_major")
        assert [d.param(p) for p in ("varlen", "page_size", "max_pages",
                                     "batch_invariant")] == [1, 16, 7, 1]
        assert d.shape(attn.Operand.BLOCK_TABLE) == (B, 7)
        assert d.shape("q", total_q=14) == (14, HQ, D)
        assert d.shape("out", total_q=0) == (0, HQ, D)
        assert d.shape("lse", total_q=14) == (HQ, 14)
        assert d.shape("new_v", total_q=3) == (3, HKV, D)
        assert d.shape("k", num_pages=5) == (5, 16, HKV, D)
        assert d.shape("cu_seqlens_q") == d.shape("cu_seqlens_k") == (B + 1,)
        with pytest.raises(ValueError, match=r"shape of q \(total_q, heads_q, head_dim\) "
                                             r"depends on the call: pass total_q="):
            d.shape("q")
        with pytest.raises(ValueError, match="pass num_pages="):
            d.shape("v")
        # the library's lengths: a full pack for the token operands (an upper bound), one page
        # for a pool
        assert d.required_len(attn.Operand.Q) == B * MAX_Q * HQ * D
        assert d.required_len(attn.Operand.LSE) == B * HQ * MAX_Q
        assert d.required_len(attn.Operand.K) == 16 * HKV * D
        assert d.required_len(attn.Operand.BLOCK_TABLE) == B * 7
        r = repr(d)
        assert "varlen=True" in r and "page_size=16" in r and "max_pages=7" in r
        assert "batch_invariant=True" in r
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, page_size=3, page_layout="head_major") as d:
        assert (d.varlen, d.page_size, d.max_pages, d.page_layout) == (False, 3, 0, "head_major")
        assert d.shape("block_table") == (B, 22)  # ceil(66 / 3)
        assert d.shape("v", num_pages=2) == (2, HKV, 3, D)
        assert d.shape("q") == (B, HQ, MAX_Q, D)  # dense queries over the paged cache
        assert d.shape("new_k") == (B * MAX_Q, HKV, D)
        assert "page_layout='head_major'" in repr(d)
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D) as d:
        assert (d.varlen, d.page_size, d.max_pages, d.batch_invariant) == (False, 0, 0, False)
        assert d.shape("block_table") == (B, 0) and d.required_len("block_table") == 0


def test_serving_enums_name_the_c_operands_and_parameters():
    """The values name the C operands and parameters of the same value: the library's messages
    spell the C name of the value Python passes."""
    with attn.Args() as a:
        for op in (attn.Operand.NEW_K, attn.Operand.NEW_V):
            with pytest.raises(attn.InvalidArgumentError,
                               match="%s is bound with attn_args_set_f32" % op.name.lower()):
                a.set_i32(op, np.zeros(4, np.int32))
        for op in (attn.Operand.CU_SEQLENS_Q, attn.Operand.CU_SEQLENS_K,
                   attn.Operand.BLOCK_TABLE):
            with pytest.raises(attn.InvalidArgumentError,
                               match="%s is bound with attn_args_set_i32" % op.name.lower()):
                a.set_f32(op, np.zeros(4, np.float32))
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        for p in (attn.Param.VARLEN, attn.Param.PAGE_SIZE, attn.Param.MAX_PAGES,
                  attn.Param.BATCH_INVARIANT):
            assert _lib.attn_desc_set_float(d._handle, int(p), float("nan")) != 0
            assert (_lib.attn_last_error().decode() ==
                    "attn_desc_set_float: ATTN_PARAM_%s must not be NaN" % p.name)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(page_size=2.5), TypeError, "page_size must be an integer, got float"),
    (dict(batch_invariant="yes"), TypeError, "batch_invariant must be an integer, got str"),
    (dict(page_size=4, page_layout="column_major"), ValueError,
     "page_layout ('column_major') is not one of 'token_major', 'head_major'"),
    (dict(page_size=4, page_layout=1), TypeError, "page_layout must be"),
    (dict(page_layout="head_major"), ValueError,
     "page_layout='head_major' needs a paged cache (page_size >= 1)"),
])
def test_serving_parameters_are_checked_before_c(kwargs, exc, words):
    """Python types and the face's page_layout: checked by the binding."""
    with pytest.raises(exc) as e:
        attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, **kwargs)
    assert isinstance(e.value, attn.AttentionError) and words in e.value.message
    assert not e.value.message.startswith("attn_")  # the binding's check, not the library's


@pytest.mark.parametrize("kwargs,words", [
    (dict(page_size=-1), "attn_desc_set_int: ATTN_PARAM_PAGE_SIZE (-1) is outside [0, "),
    (dict(page_size=2 ** 31), "ATTN_PARAM_PAGE_SIZE (2147483648) is outside"),
    (dict(max_pages=2 ** 40), "ATTN_PARAM_MAX_PAGES (1099511627776) is outside"),
    (dict(varlen=2), "ATTN_PARAM_VARLEN (2) is outside [0, 1]"),
])
def test_serving_parameter_ranges_are_the_librarys(kwargs, words):
    with pytest.raises(attn.InvalidArgumentError) as e:
        attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, **kwargs)
    assert words in e.value.message, e.value.message


# ------------------------------------------------------------------------------------------
# Varlen packs
# ------------------------------------------------------------------------------------------

def test_varlen_pack_is_bit_identical_to_each_sequence_alone(restore_defaults):
    """With batch_invariant a sequence's rows and LSE in a varlen pack are, bit for bit, those
    of that sequence computed alone, on every kernel and with 1 or 2 threads, whether the pack's
    arrays are contiguous or strided views; the sequence without queries produces nothing (its
    keys, NaN, are read by nobody). A decode step (the last query alone over all its keys) has
    the bits of that row of the whole sequence."""
    seqs = sequences(13)
    q, k, v = pack(seqs)
    q_wide = np.full((TQ, HQ, D + 8), NAN, np.float32)  # q inside wider rows: a strided view
    q_wide[..., :D] = q
    cu_dec = cumulative([1 if lq else 0 for lq in LQ])
    q_dec = np.full((2, HQ, D + 3), NAN, np.float32)
    q_dec[:, :, :D] = np.stack([seqs[b][0][:, -1] for b in (0, 2)])
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, causal="bottom_right",
                   batch_invariant=True) as d:
        for isa in available_isas():
            attn.set_isa(isa)
            attn.set_num_threads(1)
            want = {b: alone(*seqs[b]) for b in (0, 2)}
            sq, sk, sv = seqs[2]
            step, step_lse = alone(sq[:, -1:], sk, sv)
            assert same_bits(step, want[2][0][:, -1:]), isa
            assert same_bits(step_lse, want[2][1][:, -1:]), isa
            for threads in (1, 2):
                attn.set_num_threads(threads)
                label = "%s, %d threads" % (isa, threads)
                out, lse = d.forward(q, k, v, cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K, lse=True)
                assert out.shape == (TQ, HQ, D) and lse.shape == (HQ, TQ)
                out_buf = np.full((TQ, 2, HQ, D), 777.0, np.float32)
                out_view = out_buf[:, 1]  # every other head block: written where it is
                got = d.forward(q_wide[..., :D], k, v, out=out_view, cu_seqlens_q=CU_Q,
                                cu_seqlens_k=CU_K)
                assert got is out_view and (out_buf[:, 0] == 777.0).all()
                for b in (0, 2):
                    o, l = rows(out, lse, b)
                    assert same_bits(o, want[b][0]), (label, b)
                    assert same_bits(l, want[b][1]), (label, b)
                    assert same_bits(rows(out_view, lse, b)[0], want[b][0]), (label, b)
                # a decode pack (the last query of each sequence over all its keys; a strided
                # view, so through a variant descriptor): the rows of the whole sequences
                dec = d.forward(q_dec[:, :, :D], k, v, cu_seqlens_q=cu_dec, cu_seqlens_k=CU_K)
                for i, b in enumerate((0, 2)):
                    assert same_bits(dec[i], want[b][0][:, -1]), (label, "decode", b)
            # The comparison has teeth: without batch_invariant the SIMD kernels take another
            # path for decode rows, whose bits differ here (if the library's default decode path
            # ever becomes invariant too, this check is the one to drop).
            if isa != "scalar":
                with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True,
                               causal="bottom_right") as plain:
                    dec = plain.forward(q_dec[:, :, :D], k, v, cu_seqlens_q=cu_dec,
                                        cu_seqlens_k=CU_K)
                assert not all(same_bits(dec[i], want[b][0][:, -1])
                               for i, b in enumerate((0, 2))), isa


def test_varlen_pack_against_the_float64_reference():
    """One varlen case against tests/reference/attn_ref.py, each sequence on its own: a sliding
    window, a softcap, and K/V token rows padded by strides (3 NaN floats after each token)."""
    seqs = sequences(29)
    q, k, v = pack(seqs)

    def padded(x):
        buf = np.full((TK, HKV * D + 3), NAN, np.float32)
        buf[:, :HKV * D] = x.reshape(TK, HKV * D)
        view = buf[:, :HKV * D].reshape(TK, HKV, D)
        assert np.shares_memory(view, buf) and view.strides[0] == (HKV * D + 3) * 4
        return view

    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, causal="bottom_right",
                   window=(20, -1), softcap=5.0) as d:
        out, lse = d.forward(q, padded(k), padded(v), cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K,
                             lse=True)
        scale = d.scale
    checked = 0
    for b, (sq, sk, sv) in enumerate(seqs):
        if not LQ[b]:
            continue
        p = attn_ref.Problem(1, HQ, HKV, LQ[b], LK[b], D, causal=attn_ref.CAUSAL_BOTTOM_RIGHT,
                             scale=scale, window_left=20, softcap=5.0)
        ro, rl, _, _ = attn_ref.run(p, sq.ravel().tolist(), sk.ravel().tolist(),
                                    sv.ravel().tolist())
        o, l = rows(out, lse, b)
        assert rel_err(o, np.reshape(ro, o.shape)) <= 1e-5, b
        assert rel_err(l, np.reshape(rl, l.shape)) <= 1e-5, b
        checked += l.size
    assert checked == HQ * TQ


@pytest.mark.parametrize("layout", ["varlen", "paged"])
@pytest.mark.parametrize("diagonal", ["causal", "top_left", "bottom_right"])
@pytest.mark.parametrize("form", ["linear", "symmetric"])
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_diagonal_alibi_form_and_per_sequence_slopes(layout, diagonal, form, causal):
    """Varlen K/V or a paged cache (varlen queries both times), len_q != len_k, a window and ALiBi
    on the chosen diagonal, one slope row per sequence: each sequence against
    tests/reference/attn_ref.py on its own."""
    seqs = sequences(31)
    q, k, v = pack(seqs)
    rng = np.random.default_rng(32)
    slopes = rng.uniform(0.05, 0.6, (B, HQ)).astype(np.float32)
    kw = dict(varlen=True, causal=causal, window=(6, 3), alibi="operand", diagonal=diagonal,
              alibi_form=form, alibi_slopes_strides=(HQ, 1, 0))
    call = dict(cu_seqlens_q=CU_Q, alibi_slopes=slopes, lse=True)
    if layout == "paged":
        page = 8
        table, num_pages = block_table(page, 9, 33)
        k, v = filled_pools(seqs, table, page, num_pages, False)
        kw["page_size"] = page
        call.update(seq_lens_k=np.array(LK, np.int32), block_table=table)
    else:
        call["cu_seqlens_k"] = CU_K
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, **kw) as d:
        out, lse = d.forward(q, k, v, **call)
    for b, (sq, sk, sv) in enumerate(seqs):
        if not LQ[b]:
            continue
        p = attn_ref.Problem(1, HQ, HKV, LQ[b], LK[b], D, causal=int(attn.Causal[causal.upper()]),
                             window_left=6, window_right=3, alibi=attn_ref.ALIBI_OPERAND,
                             diagonal=int(attn.Diagonal[diagonal.upper()]),
                             alibi_form=int(attn.AlibiForm[form.upper()]))
        ro, rl, _, _ = attn_ref.run(p, sq.ravel().tolist(), sk.ravel().tolist(),
                                    sv.ravel().tolist(), alibi_slopes=slopes[b].tolist())
        o, l = rows(out, lse, b)
        assert rel_err(o, np.reshape(ro, o.shape)) <= 1e-5, b
        assert rel_err(l, np.reshape(rl, l.shape)) <= 1e-5, b


def test_an_empty_pack_produces_nothing():
    seqs = sequences(5)
    _, k, v = pack(seqs)
    zeros = np.zeros(B + 1, np.int32)
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True) as d:
        out, lse = d.forward(np.empty((0, HQ, D), np.float32), k, v, cu_seqlens_q=zeros,
                             cu_seqlens_k=CU_K, lse=True)
    assert out.shape == (0, HQ, D) and lse.shape == (HQ, 0)


# ------------------------------------------------------------------------------------------
# Paged caches
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("page,layout", [(16, "token_major"), (16, "head_major"),
                                         (3, "token_major"), (3, "head_major"),
                                         (3, "head-major memory, token-major view")])
def test_paged_cache_filled_by_kv_append_is_bit_identical_to_dense(page, layout):
    """The sequences in a paged cache, filled by kv_append from an empty NaN pool with a
    shuffled block table, then attended with varlen queries (chunked prefill and decode in one
    call): bit-identical to each sequence alone. Every used position holds its key's bits,
    every other one is still the NaN it was. The last case keeps head-major pages in memory and
    passes a token-major view of them (transpose): read and written where they are."""
    seqs = sequences(41)
    want = {b: alone(*seqs[b]) for b in (0, 2)}
    max_pages = -(-MAX_K // page)
    table, num_pages = block_table(page, max_pages, page * 7 + 3)
    view = layout.startswith("head-major memory")
    head_major = layout == "head_major" or view
    expect_k, expect_v = filled_pools(seqs, table, page, num_pages, head_major)
    k_pool, v_pool = np.full_like(expect_k, NAN), np.full_like(expect_v, NAN)
    k_arg, v_arg = ((k_pool.transpose(0, 2, 1, 3), v_pool.transpose(0, 2, 1, 3)) if view
                    else (k_pool, v_pool))
    layout_kw = dict(page_layout="head_major") if layout == "head_major" else {}

    # 1. a prefill of every key but each sequence's last lq ones, through a Desc with room for
    # the longest prefill (a varlen append writes at most seq_q rows of a sequence)
    before = np.array([lk - lq for lq, lk in zip(LQ, LK)], np.int32)
    nk, nv, cu = new_rows(seqs, [0] * B, before)
    with attn.Desc(B, HQ, HKV, MAX_K, MAX_K, D, varlen=True, page_size=page, **layout_kw) as w:
        assert w.kv_append(k_arg, v_arg, nk, nv, seq_lens_k=before, block_table=table,
                           cu_seqlens_q=cu) is None
    # 2. the last lq keys of each sequence with the attention Desc, which then runs over the
    # cache with the same arrays
    lens = np.array(LK, np.int32)
    nk, nv, cu = new_rows(seqs, before, lens)
    assert (cu == CU_Q).all()
    q, _, _ = pack(seqs)
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, page_size=page,
                   causal="bottom_right", batch_invariant=True, **layout_kw) as d:
        assert d.shape(attn.Operand.BLOCK_TABLE) == (B, max_pages)
        d.kv_append(k_arg, v_arg, nk, nv, seq_lens_k=lens, block_table=table, cu_seqlens_q=CU_Q)
        out, lse = d.forward(q, k_arg, v_arg, cu_seqlens_q=CU_Q, seq_lens_k=lens,
                             block_table=table, lse=True)
    assert same_bits(k_pool, expect_k) and same_bits(v_pool, expect_v)
    for b in (0, 2):
        o, l = rows(out, lse, b)
        assert same_bits(o, want[b][0]), b
        assert same_bits(l, want[b][1]), b


def test_one_token_and_one_page_as_strided_views():
    """A pack of one query token over a pool of one page, every array a strided view. numpy's
    stride of a dimension of size 1 is meaningless, but the library counts seq_q * batch rows
    of out: the binding gives that dimension a stride that nests (else the view is refused)."""
    rng = np.random.default_rng(51)
    sq = rng.uniform(-1, 1, (HQ, 1, D)).astype(np.float32)
    sk = rng.uniform(-1, 1, (HKV, 10, D)).astype(np.float32)
    sv = rng.uniform(-1, 1, (HKV, 10, D)).astype(np.float32)
    want, want_lse = alone(sq, sk, sv)
    q_buf = np.full((1, HQ, D + 5), NAN, np.float32)
    q_buf[..., :D] = sq.transpose(1, 0, 2)
    pools = [np.full((1, 16, HKV, D + 4), NAN, np.float32) for _ in range(2)]
    pools[0][0, :10, :, :D] = sk.transpose(1, 0, 2)
    pools[1][0, :10, :, :D] = sv.transpose(1, 0, 2)
    out_buf = np.full((1, HQ, D + 2), 777.0, np.float32)
    table = np.array([[-1] * 5, [-1] * 5, [0, -1, -1, -1, -1]], np.int32)
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, page_size=16,
                   causal="bottom_right", batch_invariant=True) as d:
        out, lse = d.forward(q_buf[..., :D], pools[0][..., :D], pools[1][..., :D],
                             out=out_buf[..., :D], lse=True,
                             cu_seqlens_q=np.array([0, 0, 0, 1], np.int32),
                             seq_lens_k=np.array([0, 0, 10], np.int32), block_table=table)
    assert same_bits(out.transpose(1, 0, 2), want) and same_bits(lse, want_lse)
    assert (out_buf[..., D:] == 777.0).all()


def test_decode_step_with_dense_queries_over_a_paged_cache():
    """Dense queries (batch, heads_q, 1, head_dim) over a paged cache: the decode step appends
    each sequence's last key (batch * seq_q new rows), then attends; rows bit-identical to each
    sequence's step alone, and the weights (through the pool too) match the dense ones."""
    seqs = sequences(47)
    rng = np.random.default_rng(48)
    steps = rng.uniform(-1, 1, (B, HQ, 1, D)).astype(np.float32)
    page = 16
    table, num_pages = block_table(page, 5, 2)
    k_pool, v_pool = filled_pools(seqs, table, page, num_pages, False)
    last_k = np.stack([sk[:, -1] for _, sk, _ in seqs])  # (B, HKV, D): rows [batch][seq_q = 1]
    last_v = np.stack([sv[:, -1] for _, _, sv in seqs])
    for b in range(B):  # forget the last keys: the append writes them back
        k_pool[table[b, (LK[b] - 1) // page], (LK[b] - 1) % page] = NAN
        v_pool[table[b, (LK[b] - 1) // page], (LK[b] - 1) % page] = NAN
    lens = np.array(LK, np.int32)
    with attn.Desc(B, HQ, HKV, 1, MAX_K, D, page_size=page, causal="bottom_right",
                   batch_invariant=True) as d:
        d.kv_append(k_pool, v_pool, last_k, last_v, seq_lens_k=lens, block_table=table)
        out, lse = d.forward(steps, k_pool, v_pool, seq_lens_k=lens, block_table=table, lse=True)
        w = d.weights(steps, k_pool, seq_lens_k=lens, block_table=table)
    assert same_bits(k_pool, filled_pools(seqs, table, page, num_pages, False)[0])
    for b, (_, sk, sv) in enumerate(seqs):
        o, l = alone(steps[b], sk, sv)
        assert same_bits(out[b], o) and same_bits(lse[b], l), b
        with attn.Desc(1, HQ, HKV, 1, LK[b], D, causal="bottom_right") as one:
            wb = one.weights(steps[b][None], sk[None])[0]
        assert rel_err(w[b, :, :, :LK[b]], wb) <= 1e-6, b
        assert (w[b, :, :, LK[b]:] == 0).all()


# ------------------------------------------------------------------------------------------
# Merge
# ------------------------------------------------------------------------------------------

def test_merge_of_a_key_split_equals_one_call():
    """Three key ranges (K/V read as strided views of the full arrays), merged one after the
    other: the single call within 1e-6, bit-identical from run to run. A part with lse -inf
    (its out, NaN, is never read) leaves acc unchanged; two such give out 0, lse -inf."""
    rng = np.random.default_rng(9)
    b, sq, sk, d = 2, 37, 300, 32
    q = rng.uniform(-2, 2, (b, HQ, sq, d)).astype(np.float32)
    k = rng.uniform(-2, 2, (b, HKV, sk, d)).astype(np.float32)
    v = rng.uniform(-2, 2, (b, HKV, sk, d)).astype(np.float32)

    def part(lo, hi):
        with attn.Desc(b, HQ, HKV, sq, hi - lo, d, scale=0.125) as pd:
            return pd.forward(q, k[:, :, lo:hi], v[:, :, lo:hi], lse=True)

    full, full_lse = part(0, sk)
    with attn.Desc(b, HQ, HKV, sq, sk, d) as md:
        runs = []
        for _ in range(2):
            acc, acc_lse = part(0, 17)
            for lo, hi in ((17, 190), (190, sk)):
                po, pl = part(lo, hi)
                got = md.merge(acc, acc_lse, po, pl)
                assert got[0] is acc and got[1] is acc_lse
            assert rel_err(acc, full) <= 1e-6 and rel_err(acc_lse, full_lse) <= 1e-6
            assert rel_err(acc, full) > 0  # a merge, not a copy of the single call
            runs.append((acc, acc_lse))
        assert same_bits(runs[0][0], runs[1][0]) and same_bits(runs[0][1], runs[1][1])
        acc, acc_lse = full.copy(), full_lse.copy()
        md.merge(acc, acc_lse, np.full_like(full, NAN), np.full_like(full_lse, -np.inf))
        assert same_bits(acc, full) and same_bits(acc_lse, full_lse)
        z, z_lse = np.full_like(full, 5.0), np.full_like(full_lse, -np.inf)
        md.merge(z, z_lse, np.full_like(full, NAN), np.full_like(full_lse, -np.inf))
        assert (z == 0).all() and (z_lse == -np.inf).all()
        # acc and part as strided views (rows inside wider buffers) are merged where they are,
        # with the bits of the contiguous merge; part must have acc's layout
        acc, acc_lse = part(0, 17)
        po, pl = part(17, sk)
        want, want_lse = acc.copy(), acc_lse.copy()
        md.merge(want, want_lse, po, pl)
        wide = np.zeros((b, HQ, sq, d + 4), np.float32)
        wide_part = np.full((b, HQ, sq, d + 4), NAN, np.float32)
        wide[..., :d], wide_part[..., :d] = acc, po
        with pytest.raises(attn.InvalidArgumentError, match="part_out has element strides"):
            md.merge(wide[..., :d], acc_lse.copy(), po, pl)
        md.merge(wide[..., :d], acc_lse, wide_part[..., :d], pl)
        assert same_bits(wide[..., :d], want) and same_bits(acc_lse, want_lse)
        assert (wide[..., d:] == 0).all() and not same_bits(want, acc)


def test_merge_on_varlen_packs():
    """Each sequence's keys split in halves, two pack calls, merged with cu_seqlens_q."""
    seqs = sequences(5)
    halves = ([], [])
    for sq, sk, sv in seqs:
        h = sk.shape[1] // 2
        halves[0].append((sq, sk[:, :h], sv[:, :h]))
        halves[1].append((sq, sk[:, h:], sv[:, h:]))

    def run(parts):
        lk = [x[1].shape[1] for x in parts]
        q = np.concatenate([x[0].transpose(1, 0, 2) for x in parts])
        k = np.concatenate([x[1].transpose(1, 0, 2) for x in parts])
        v = np.concatenate([x[2].transpose(1, 0, 2) for x in parts])
        with attn.Desc(B, HQ, HKV, MAX_Q, max(lk), D, varlen=True, scale=0.2) as d:
            return d.forward(q, k, v, cu_seqlens_q=CU_Q, cu_seqlens_k=cumulative(lk), lse=True)

    full, full_lse = run(seqs)
    acc, acc_lse = run(halves[0])
    po, pl = run(halves[1])
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True) as md:
        md.merge(acc, acc_lse, po, pl, cu_seqlens_q=CU_Q)
        assert rel_err(acc, full) <= 1e-6 and rel_err(acc_lse, full_lse) <= 1e-6
        with pytest.raises(attn.NullPointerError, match="cu_seqlens_q is None but the Desc has "
                                                        "varlen=True"):
            md.merge(acc, acc_lse, po, pl)
        with pytest.raises(attn.InvalidArgumentError,
                           match=r"part_lse has shape \(14, 4\), expected \(heads_q, total_q\) "
                                 r"= \(4, 14\)"):
            md.merge(acc, acc_lse, po, pl.T, cu_seqlens_q=CU_Q)
        with pytest.raises(attn.InvalidArgumentError, match="attn_merge: .*overlaps"):
            md.merge(acc, acc_lse, po, acc_lse, cu_seqlens_q=CU_Q)
        bad = CU_Q.copy()
        bad[2] = 4
        with pytest.raises(attn.InvalidArgumentError,
                           match=r"attn_merge: cu_seqlens_q must not decrease: cu_seqlens_q\[1\] "
                                 r"= 5 > cu_seqlens_q\[2\] = 4"):
            md.merge(acc, acc_lse, po, pl, cu_seqlens_q=bad)
        ro = acc.copy()
        ro.setflags(write=False)
        with pytest.raises(attn.InvalidArgumentError, match="out is read-only"):
            md.merge(ro, acc_lse, po, pl, cu_seqlens_q=CU_Q)


# ------------------------------------------------------------------------------------------
# Errors: each names the argument, the sequence and the slot
# ------------------------------------------------------------------------------------------

class Setup:
    """A paged varlen call (page 3, token-major) of the standard sequences, ready to run: bend
    one argument and look at the error."""

    def __init__(self):
        self.seqs = sequences(3)
        self.q = pack(self.seqs)[0]
        self.table, self.num_pages = block_table(3, 22, 1)
        self.k, self.v = filled_pools(self.seqs, self.table, 3, self.num_pages, False)
        self.lens = np.array(LK, np.int32)
        before = self.lens - np.array(LQ, np.int32)
        self.nk, self.nv, _ = new_rows(self.seqs, before, self.lens)
        self.desc = attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, page_size=3,
                              causal="bottom_right")

    def forward_args(self):
        return dict(q=self.q, k=self.k, v=self.v, cu_seqlens_q=CU_Q.copy(),
                    seq_lens_k=self.lens.copy(), block_table=self.table.copy())

    def append_args(self):
        return dict(k_cache=self.k, v_cache=self.v, new_k=self.nk, new_v=self.nv,
                    seq_lens_k=self.lens.copy(), block_table=self.table.copy(),
                    cu_seqlens_q=CU_Q.copy())


@pytest.fixture(scope="module")
def setup():
    s = Setup()
    yield s
    s.desc.close()


def _set(key, index, value):
    def bend(kw):
        kw[key][index] = value
    return bend


def _put(key, value):
    def bend(kw):
        kw[key] = value(kw.get(key)) if callable(value) else value
    return bend


def _same_caches(kw):
    kw["v_cache"] = kw["k_cache"]


def _read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


INVALID, NULL, TYPE = attn.InvalidArgumentError, attn.NullPointerError, attn.ArgumentTypeError

FORWARD_ERRORS = [
    ("page id out of range", _set("block_table", (1, 2), 99), INVALID,
     "attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold {np} pages"),
    ("page id = num_pages", _set("block_table", (2, 21), PAGES_3), INVALID,
     "attn_run: block_table[2][21] (%d) is not a page" % PAGES_3),
    ("negative page id", _set("block_table", (2, 0), -7), INVALID,
     "block_table[2][0] (-7) is not a page"),
    ("-1 inside the used range", _set("block_table", (0, 1), -1), INVALID,
     "attn_run: block_table[0][1] is -1 (unused) but sequence 0 has 40 keys"),
    ("seq_lens_k above seq_k", _set("seq_lens_k", 1, 67), INVALID,
     "attn_run: seq_lens_k[1] (67) is outside [0, seq_k = 66]"),
    ("negative seq_lens_k", _set("seq_lens_k", 2, -1), INVALID,
     "seq_lens_k[2] (-1) is outside [0, seq_k = 66]"),
    ("cu_seqlens_q[0] != 0", _set("cu_seqlens_q", 0, 1), INVALID,
     "attn_run: cu_seqlens_q[0] (1) must be 0"),
    ("decreasing cu_seqlens_q", _set("cu_seqlens_q", 2, 4), INVALID,
     "cu_seqlens_q must not decrease: cu_seqlens_q[1] = 5 > cu_seqlens_q[2] = 4"),
    ("a sequence longer than seq_q", _put("cu_seqlens_q", np.array([0, 10, 10, 14], np.int32)),
     INVALID, "cu_seqlens_q: sequence 0 has length 10, above seq_q = 9"),
    ("a negative total", _set("cu_seqlens_q", 3, -1), INVALID,
     "cu_seqlens_q[3] (-1) is negative"),
    ("a short block table", _put("block_table", lambda t: t[:, :-1]), INVALID,
     "block_table has shape (3, 21), expected (batch, max_pages) = (3, 22)"),
    ("a short flat block table", _put("block_table", lambda t: t.ravel()[:-1]), INVALID,
     "attn_run: block_table has 65 elements, needs at least 66"),
    ("block_table int64", _put("block_table", lambda t: t.astype(np.int64)), TYPE,
     "block_table has dtype int64, expected int32"),
    ("block_table column-major", _put("block_table", np.asfortranarray), INVALID,
     "block_table is not C-contiguous"),
    ("cu_seqlens_q of batch elements", _put("cu_seqlens_q", lambda c: c[:3]), INVALID,
     "cu_seqlens_q has shape (3,), expected (batch + 1) = (4,)"),
    ("cu_seqlens_q int64", _put("cu_seqlens_q", lambda c: c.astype(np.int64)), TYPE,
     "cu_seqlens_q has dtype int64, expected int32"),
    ("q rows other than the pack's", _put("q", lambda q: q[:13]), INVALID,
     "q has shape (13, 4, 24), expected (total_q, heads_q, head_dim) = (14, 4, 24) "
     "(total_q = cu_seqlens_q[3], the pack's query tokens)"),
    ("dense q in a varlen Desc", _put("q", np.zeros((B, HQ, MAX_Q, D), np.float32)), INVALID,
     "q has 4 dimensions (shape (3, 4, 9, 24)), expected 3: (total_q, heads_q, head_dim)"),
    ("q float64", _put("q", lambda q: q.astype(np.float64)), TYPE,
     "q has dtype float64, expected float32"),
    ("a pool with the wrong page size", _put("k", lambda k: k[:, :2]), INVALID,
     "k has shape ({np}, 2, 2, 24), expected (num_pages, page_size, heads_kv, head_dim) = "
     "(any >= 1, 3, 2, 24) (token-major pages"),
    ("a head-major pool in a token-major Desc", _put("v", lambda v: v.transpose(0, 2, 1, 3)),
     INVALID, "v has shape ({np}, 2, 3, 24), expected (num_pages, page_size, heads_kv, "
              "head_dim_v)"),
    ("an empty pool", _put("k", lambda k: k[:0]), INVALID, "(any >= 1, 3, 2, 24)"),
    ("a pool too short for its page ids", _put("k", lambda k: k[:1]), INVALID,
     "is not a page of the K/V buffers, which hold 1 pages"),
    ("a pool with strided head_dim", _put("k", lambda k: np.repeat(k, 2, axis=3)[..., ::2]),
     INVALID, "k: its last dimension (head_dim) has stride 2 elements"),
    ("lse transposed", _put("lse", np.zeros((TQ, HQ), np.float32)), INVALID,
     "lse has shape (14, 4), expected (heads_q, total_q) = (4, 14)"),
    ("a read-only out", _put("out", lambda _: _read_only(np.zeros((TQ, HQ, D), np.float32))),
     INVALID, "out is read-only"),
    ("no cu_seqlens_q", _put("cu_seqlens_q", None), NULL,
     "cu_seqlens_q is None but the Desc has varlen=True"),
    ("no block table", _put("block_table", None), NULL,
     "attn_run: block_table is NULL but ATTN_PARAM_PAGE_SIZE is set"),
    ("no seq_lens_k", _put("seq_lens_k", None), NULL, "attn_run: seq_lens_k is NULL"),
    ("cu_seqlens_k with pages", _put("cu_seqlens_k", CU_K), INVALID,
     "attn_run: cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k"),
]


@pytest.mark.parametrize("what,bend,exc,words", FORWARD_ERRORS,
                         ids=[c[0] for c in FORWARD_ERRORS])
def test_bad_serving_arguments_name_the_slot(setup, what, bend, exc, words):
    kw = setup.forward_args()
    bend(kw)
    with pytest.raises(exc) as e:
        setup.desc.forward(**kw)
    assert words.format(np=setup.num_pages) in e.value.message, e.value.message
    assert e.value.message in str(e.value)
    setup.desc.forward(**setup.forward_args())  # nothing stayed bound or broken


def test_unsupported_in_varlen_and_refused_without_the_layout(setup):
    kw = setup.forward_args()
    with pytest.raises(attn.AttentionError) as e:
        setup.desc.forward(**kw, bias=np.zeros((B, HQ, MAX_Q, MAX_K), np.float32))
    assert e.value.status is attn.Status.UNSUPPORTED
    assert "attn_run: bias is not supported with ATTN_PARAM_VARLEN" in e.value.message
    with pytest.raises(attn.AttentionError) as e:
        setup.desc.weights(setup.q, setup.k)
    assert e.value.status is attn.Status.UNSUPPORTED and "ATTN_OP_WEIGHTS" in e.value.message
    # the serving operands given to a Desc without the layout: the library says why
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D) as dense:
        q = np.zeros(dense.shape("q"), np.float32)
        k = np.zeros(dense.shape("k"), np.float32)
        with pytest.raises(INVALID, match="attn_run: cu_seqlens_q is bound but ATTN_PARAM_VARLEN "
                                          "is 0"):
            dense.forward(q, k, k, cu_seqlens_q=CU_Q)
        with pytest.raises(INVALID, match="attn_run: block_table is bound but "
                                          "ATTN_PARAM_PAGE_SIZE is 0"):
            dense.forward(q, k, k, block_table=setup.table)
    # an unpaged varlen Desc takes its keys from cu_seqlens_k
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True) as packed:
        q, k, v = pack(setup.seqs)
        with pytest.raises(NULL, match="cu_seqlens_k is None but the Desc has varlen=True "
                                       "without a page_size"):
            packed.forward(q, k, v, cu_seqlens_q=CU_Q)
        bad = CU_K.copy()
        bad[2] = 39
        with pytest.raises(INVALID, match=r"cu_seqlens_k must not decrease: cu_seqlens_k\[1\] "
                                          r"= 40 > cu_seqlens_k\[2\] = 39"):
            packed.forward(q, k, v, cu_seqlens_q=CU_Q, cu_seqlens_k=bad)
        with pytest.raises(INVALID, match=r"k has shape \(113, 2, 24\), expected \(total_k, "
                                          r"heads_kv, head_dim\) = \(112, 2, 24\) \(total_k = "
                                          r"cu_seqlens_k\[3\]"):
            packed.forward(q, k, v, cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K - np.int32(
                [0, 0, 0, 1]))
        with pytest.raises(INVALID, match="seq_lens_k is bound but a varlen batch takes its key "
                                          "lengths from cu_seqlens_k"):
            packed.forward(q, k, v, cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K, seq_lens_k=setup.lens)


APPEND_ERRORS = [
    ("fewer keys than new tokens", _set("seq_lens_k", 0, 4), INVALID,
     "attn_kv_append: seq_lens_k[0] (4) is less than the 5 new tokens of sequence 0"),
    ("page id out of range", _set("block_table", (2, 0), 1000), INVALID,
     "attn_kv_append: block_table[2][0] (1000) is not a page of the K/V buffers, which hold "
     "{np} pages"),
    ("-1 inside the used range", _set("block_table", (2, 21), -1), INVALID,
     "attn_kv_append: block_table[2][21] is -1 (unused) but sequence 2 has 66 keys"),
    ("the same cache twice", _same_caches, INVALID, "attn_kv_append: k_cache overlaps"),
    ("a read-only cache", _put("k_cache", _read_only), INVALID, "k_cache is read-only"),
    ("new rows of another pack", _put("new_k", lambda n: n[:10]), INVALID,
     "new_k has shape (10, 2, 24), expected (total_q, heads_kv, head_dim) = (14, 2, 24)"),
    ("strided new rows", _put("new_v", lambda n: np.repeat(n, 2, axis=0)[::2]), INVALID,
     "new_v is not C-contiguous"),
    ("new rows float64", _put("new_k", lambda n: n.astype(np.float64)), TYPE,
     "new_k has dtype float64, expected float32"),
    ("seq_lens_k of two sequences", _put("seq_lens_k", lambda s: s[:2]), INVALID,
     "seq_lens_k has 2 elements, needs at least 3"),
    ("no seq_lens_k", _put("seq_lens_k", None), NULL, "seq_lens_k is None"),
    ("no cu_seqlens_q", _put("cu_seqlens_q", None), NULL,
     "cu_seqlens_q is None but the Desc has varlen=True"),
    ("no block table", _put("block_table", None), NULL,
     "attn_kv_append: block_table is NULL but ATTN_PARAM_PAGE_SIZE is set"),
]


@pytest.mark.parametrize("what,bend,exc,words", APPEND_ERRORS, ids=[c[0] for c in APPEND_ERRORS])
def test_bad_kv_append_arguments_name_the_slot_and_write_nothing(setup, what, bend, exc, words):
    kw = setup.append_args()
    bend(kw)
    k0, v0 = setup.k.copy(), setup.v.copy()
    with pytest.raises(exc) as e:
        setup.desc.kv_append(**kw)
    assert words.format(np=setup.num_pages) in e.value.message, e.value.message
    assert same_bits(setup.k, k0) and same_bits(setup.v, v0)


# ------------------------------------------------------------------------------------------
# The raw face: Args + Desc.run / run_kv_append / run_merge
# ------------------------------------------------------------------------------------------

def test_raw_args_face_matches_the_shaped_calls(setup):
    s = setup
    k_pool, v_pool = np.full_like(s.k, NAN), np.full_like(s.v, NAN)
    before = s.lens - np.array(LQ, np.int32)
    # the cache up to `before`, then the rest through the raw face
    for b in range(B):
        for j in range(before[b]):
            p, t = s.table[b, j // 3], j % 3
            k_pool[p, t], v_pool[p, t] = s.k[p, t], s.v[p, t]
    out = np.zeros((TQ, HQ, D), np.float32)
    lse = np.zeros((HQ, TQ), np.float32)
    with attn.Args() as a:
        (a.set_new_k(s.nk).set_new_v(s.nv).set_cu_seqlens_q(CU_Q).set_seq_lens_k(s.lens)
         .set_block_table(s.table))
        s.desc.run_kv_append(a, k_pool, v_pool)
        assert same_bits(k_pool, s.k) and same_bits(v_pool, s.v)
        (a.set(attn.Operand.Q, s.q).set(attn.Operand.K, k_pool).set(attn.Operand.V, v_pool)
         .set(attn.Operand.OUT, out).set(attn.Operand.LSE, lse))
        s.desc.run("forward", a)
        want, want_lse = s.desc.forward(**s.forward_args(), lse=True)
        assert same_bits(out, want) and same_bits(lse, want_lse)
        a.set_block_table(s.table.ravel()[:-1])  # raw: the library checks the length
        with pytest.raises(INVALID, match="attn_run: block_table has 65 elements, needs at "
                                          "least 66"):
            s.desc.run("forward", a)
        with pytest.raises(INVALID, match="k_cache is read-only"):
            s.desc.run_kv_append(a, _read_only(k_pool), v_pool)
        with pytest.raises(TypeError, match="v_cache has dtype float64"):
            s.desc.run_kv_append(a, k_pool, v_pool.astype(np.float64))
        a.set_cu_seqlens_q(None)
        a.set_block_table(s.table)
        with pytest.raises(NULL, match="attn_kv_append: cu_seqlens_q is NULL but "
                                       "ATTN_PARAM_VARLEN is 1"):
            s.desc.run_kv_append(a, k_pool, v_pool)
    # merge: a result with a part that saw nothing, through two Args
    acc_out, acc_lse = out.copy(), lse.copy()
    part_out, part_lse = np.full_like(out, NAN), np.full_like(lse, -np.inf)
    with attn.Args() as acc, attn.Args() as part:
        (acc.set_out_f32(attn.Operand.OUT, acc_out).set_out_f32(attn.Operand.LSE, acc_lse)
         .set_cu_seqlens_q(CU_Q))
        part.set_out_f32(attn.Operand.OUT, part_out).set_out_f32(attn.Operand.LSE, part_lse)
        s.desc.run_merge(acc, part)
        assert same_bits(acc_out, out) and same_bits(acc_lse, lse)
        # part = the same result again: the same rows, twice the mass
        part.set_out_f32(attn.Operand.OUT, out.copy()).set_out_f32(attn.Operand.LSE, lse.copy())
        s.desc.run_merge(acc, part)
        assert rel_err(acc_lse, lse.astype(np.float64) + np.log(2)) <= 1e-6
        assert rel_err(acc_out, out) <= 1e-6 and not same_bits(acc_lse, lse)
        with pytest.raises(INVALID, match="acc and part are the same Args"):
            s.desc.run_merge(acc, acc)
        with pytest.raises(NULL, match="args is None"):
            s.desc.run_kv_append(None, k_pool, v_pool)


def test_the_readme_example_runs_and_prints_what_it_says(capsys):
    """docs/serving.md "Python": the example runs as written, and the error
    it prints is the comment under it."""
    with open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Python"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    namespace = {}
    exec(compile(code, "docs/serving.md (Python)", "exec"), namespace)
    printed = capsys.readouterr().out.strip()
    assert printed == code.rstrip().splitlines()[-1].lstrip("# "), printed
    out, lse = namespace["out"], namespace["lse"]
    assert out.shape == (14, 4, 24) and lse.shape == (4, 14) and np.isfinite(out).all()
    # the new keys of sequence 0 (positions 35..39) are in slot 2 (page 9), tokens 3..7; those
    # of sequence 2 (positions 57..65) in slots 3 and 4 (pages 5 and 6); the rest is untouched
    k_pool, new_k = namespace["k_pool"], namespace["new_k"]
    assert np.array_equal(k_pool[9, 3:8], new_k[:5])
    assert np.array_equal(k_pool[5, 9:], new_k[5:12]) and np.array_equal(k_pool[6, :2], new_k[12:])
    assert np.count_nonzero(k_pool.any(axis=(2, 3))) == 14
    namespace["desc"].close()
