"""Serving errors through the numpy face: each names the argument, the sequence and the slot,
and kv_append writes nothing when it refuses. Data: serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import (  # noqa: E402
    B, CU_K, CU_Q, D, HKV, HQ, INVALID, MAX_K, MAX_Q, NULL, PAGES_3, TQ, TYPE, _put, _read_only,
    _same_caches, _set, attn, pack, same_bits, setup)


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
