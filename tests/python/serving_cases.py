"""The serving test data shared by the test_serving_*.py files (the serving layouts of capi/attn.h
"Serving layouts" through the numpy face): the standard sequences, their varlen pack and paged
pools, and the prepared paged call the error tests bend.

The sequences are those of tests/core/test_serving_merge.cpp's varlen merge case (and of
bindings/go/helpers_test.go): query lengths {5, 0, 9}, key lengths {40, 7, 66}, GQA 4/2,
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

INVALID, NULL, TYPE = attn.InvalidArgumentError, attn.NullPointerError, attn.ArgumentTypeError
