"""The raw face of the serving calls: Args + Desc.run / run_kv_append / run_merge give the bits
of the shaped calls, and the library checks what the raw face passes through. Data:
serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import (  # noqa: E402
    B, CU_Q, D, HQ, INVALID, LQ, NAN, NULL, TQ, _read_only, attn, rel_err, same_bits, setup)


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
