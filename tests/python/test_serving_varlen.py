"""Varlen packs (cu_seqlens) through the numpy face: bit-identical to each sequence alone,
against the float64 reference, with the ALiBi diagonal, form and per-sequence slopes; an empty
pack. Data: serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import (  # noqa: E402
    B, CU_K, CU_Q, D, HKV, HQ, LK, LQ, MAX_K, MAX_Q, NAN, TK, TQ, alone, attn, attn_ref,
    available_isas, block_table, cumulative, filled_pools, pack, rel_err, restore_defaults, rows,
    same_bits, sequences)


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
