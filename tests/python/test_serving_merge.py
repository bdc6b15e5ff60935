"""Desc.merge: partial results over a key split equal one call over all keys (dense and
varlen packs). Data: serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import (  # noqa: E402
    B, CU_Q, D, HKV, HQ, MAX_K, MAX_Q, NAN, attn, cumulative, rel_err, same_bits, sequences)


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
