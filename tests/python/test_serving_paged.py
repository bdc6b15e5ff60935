"""Paged caches through the numpy face: filled by Desc.kv_append, bit-identical to dense calls;
one token and one page as strided views; decode steps; the docs/serving.md example. Data:
serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import (  # noqa: E402
    B, CU_Q, D, HKV, HQ, LK, LQ, MAX_K, MAX_Q, NAN, ROOT, alone, attn, block_table, filled_pools,
    new_rows, pack, rel_err, rows, same_bits, sequences)


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
