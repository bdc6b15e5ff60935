"""A Llama-architecture decoder in numpy (float32) whose every attention is one libattn call.

Layout of the work (B sequences, L padded prompt length, H = heads, D = head_dim):

* Prefill: a RIGHT-padded batch [B][L] of token ids, real lengths lens[b]. Token t of sequence
  b has position t whatever the padding, so RoPE needs no offsets. One libattn call per layer:
  Desc(B, Hq, Hkv, L, L, D, causal=TOP_LEFT) with seq_lens_k = lens (keys j >= lens[b] are
  padding, never read) and query_valid (padded query rows cost nothing and come out 0).
* Decode: one new token per sequence at position lens[b]; its K/V row goes into the dense
  cache [B][S_max][Hkv][D] (token-major, the rows of each sequence contiguous from 0) and one
  libattn call per layer reads the cache in place: Desc(B, Hq, Hkv, 1, S_max, D,
  causal=BOTTOM_RIGHT) with seq_lens_k = lens + 1, so query b sees keys 0 .. lens[b].
* Paged (--paged): the same calls over page pools [num_pages][page_size][Hkv][D] through a
  block table (Desc(..., page_size=n), block_table=), the new rows written by attn_kv_append
  (Desc.kv_append); the prefill's Desc has seq_k = S_max, the table's reach.
* Q, K, V and OUT are strided views of the (tokens, heads, head_dim) projection buffers and of
  the cache: the Desc is created with those strides, nothing is transposed or copied.
* Batch invariance: libattn's ATTN_PARAM_BATCH_INVARIANT makes each attention row depend only
  on its own sequence. The rest of the forward pass is row-local except the matrix products, and
  BLAS is not: OpenBLAS takes a gemv for one row and a gemm for several, which sum in other
  orders, so `x @ W.T` of a row differs in the last bits with its batch-mates. `linear`
  therefore multiplies fixed blocks of rows (zero-padded), the same call shape for every row
  whichever batch it is in, each sequence's rows in blocks of their own (a gemm may also sum a
  row in another order at another place in its block): blocks of PREFILL_ROWS rows (gemm) in
  the prefill, single rows
  (gemv, the fastest for decode: a small-M gemm packs the whole weight matrix on every call) in
  the decode and for the logits. The result: a prompt's logits are the same bits in a batch as
  alone (smollm2.py checks it).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

import attn

F32 = np.float32
PREFILL_ROWS = 64  # rows per gemm call of `linear` in the prefill (see the module doc)
DECODE_ROWS = 1    # rows per call in the decode steps and for the logits


# ------------------------------------------------------------------------------------------
# libattn descriptors
# ------------------------------------------------------------------------------------------

def compute_modes() -> List[str]:
    """The ATTN_PARAM_COMPUTE modes this attn package names ("exact", "fp16", "int8", "bf16")."""
    return [m.name.lower() for m in attn.Compute]


def compute_unit(mode: str) -> str:
    """The unit a compute mode runs its products on with the kernel in use
    (attn_compute_unit), or "?" with a library that lacks the query."""
    query = getattr(attn, "compute_unit", None)
    if query is not None:
        return query(mode)
    import ctypes  # the Python face has no compute_unit() yet: the C call itself
    f = getattr(attn._lib.lib, "attn_compute_unit", None)
    if f is None:
        return "?"
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int]
    name = f(int(getattr(attn.Compute, mode.upper())))
    return name.decode("ascii") if name else "?"


def make_desc(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_k: int, head_dim: int,
              *, causal, batch_invariant: bool = True, compute: str = "exact",
              **kw) -> "attn.Desc":
    """attn.Desc(...) with ATTN_PARAM_BATCH_INVARIANT = batch_invariant and ATTN_PARAM_COMPUTE
    = compute (a mode name, see compute_modes()), both read back."""
    if not hasattr(getattr(attn, "Param", None), "BATCH_INVARIANT"):
        raise SystemExit("this attn package (%s) has no Desc(batch_invariant=...): it needs the "
                         "Python face of libattn 0.2 with the serving layouts"
                         % os.path.dirname(attn.__file__))
    if compute not in compute_modes():
        raise SystemExit("this attn package (%s) has no compute mode %r (it has %s): it needs "
                         "the Python face of libattn 0.3 with the INT8 and BF16 modes"
                         % (os.path.dirname(attn.__file__), compute, ", ".join(compute_modes())))
    desc = attn.Desc(batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal=causal,
                     batch_invariant=batch_invariant, compute=compute, **kw)
    if desc.batch_invariant != bool(batch_invariant):
        raise RuntimeError("batch_invariant reads back as %r" % desc.batch_invariant)
    if desc.compute.name.lower() != compute:
        raise RuntimeError("compute reads back as %r" % desc.compute)
    return desc


# ------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------

@dataclass
class Config:
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    rope_base: float
    rope_dim: int
    eps: float
    context: int = 8192
    name: str = "llama"


def linear(x: np.ndarray, w: np.ndarray, rows: int) -> np.ndarray:
    """x (T, in) @ w.T for w (out, in), float32, one BLAS call per block of `rows` rows (the
    last block zero-padded), so that each row's result depends neither on T nor on the row's
    place (see the module doc)."""
    t = x.shape[0]
    n = -(-t // rows) * rows
    if n != t:
        xp = np.zeros((n, x.shape[1]), F32)
        xp[:t] = x
    else:
        xp = np.ascontiguousarray(x)
    y = np.matmul(xp.reshape(n // rows, rows, x.shape[1]), w.T)
    return y.reshape(n, w.shape[0])[:t]


def linear_seqs(x: np.ndarray, w: np.ndarray, rows: int, batch: int) -> np.ndarray:
    """linear() of x (batch * T, in) with each sequence's T rows in blocks of their own: a BLAS
    gemm may sum a row in another order at another place in its block (OpenBLAS on AMD EPYC
    does), so a token's row must sit at the same place in a batch as alone."""
    if rows == 1 or batch == 1:
        return linear(x, w, rows)
    t = x.shape[0] // batch
    return np.concatenate([linear(x[b * t:(b + 1) * t], w, rows) for b in range(batch)])


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.mean(np.square(x), axis=-1, keepdims=True, dtype=F32)
    return (x * (F32(1.0) / np.sqrt(ms + F32(eps)))) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x * (F32(0.5) * (F32(1.0) + np.tanh(F32(0.5) * x)))  # x * sigmoid(x), no overflow


class Rope:
    """Rotary embedding in GGUF's layout for Llama: llama.cpp permutes attn_q / attn_k at
    conversion so that the rotated pairs are ADJACENT dims (2i, 2i+1) (its LLAMA_ROPE_TYPE_NORM),
    not the halves (i, i + D/2) of Hugging Face's rotate_half. (With the halves, SmolLM2 answers
    nothing or babbles; with adjacent pairs it answers "The capital of France is Paris.")"""

    def __init__(self, dim: int, base: float, max_pos: int):
        inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
        ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
        self.cos = np.cos(ang).astype(F32)
        self.sin = np.sin(ang).astype(F32)
        self.dim = dim

    def __call__(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """x (..., T, H, D) with positions pos (..., T): rotated copy."""
        c = self.cos[pos][..., None, :]
        s = self.sin[pos][..., None, :]
        r = self.dim
        out = x.copy()
        xe, xo = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2] = xe * c - xo * s
        out[..., 1:r:2] = xe * s + xo * c
        return out


class DenseKVCache:
    """K/V of every layer, [layer][B][S_max][Hkv][D] (token-major, each sequence's rows
    contiguous from position 0), written with numpy and read in place by libattn."""
    paged = False

    def __init__(self, cfg: Config, batch: int, max_len: int):
        shape = (cfg.n_layers, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
        self.k = np.zeros(shape, F32)
        self.v = np.zeros(shape, F32)
        self.lens = np.zeros(batch, np.int32)  # keys held per sequence
        self.max_len = max_len
        self.batch = batch

    def desc_keywords(self, cfg: Config) -> dict:
        d = cfg.n_kv_heads * cfg.head_dim
        kv = (self.max_len * d, cfg.head_dim, d)  # (B, Hkv, S, D) views of the cache
        return dict(k_strides=kv, v_strides=kv)

    def append(self, desc, i: int, k: np.ndarray, v: np.ndarray, new_lens: np.ndarray):
        """k, v (B, T, Hkv, D) of the T newest tokens; new_lens: keys after the append."""
        T = k.shape[1]
        if T == 1:
            rows = np.arange(self.batch)
            self.k[i, rows, new_lens - 1] = k[:, 0]
            self.v[i, rows, new_lens - 1] = v[:, 0]
        else:  # the prefill: positions 0 .. T-1 (the padded rows too; never read)
            self.k[i, :, :T] = k
            self.v[i, :, :T] = v

    def operands(self, i: int, seq_k: int):
        """(k, v, extra forward keywords) for a Desc with seq_k keys."""
        k = self.k[i, :, :seq_k].transpose(0, 2, 1, 3)
        v = self.v[i, :, :seq_k].transpose(0, 2, 1, 3)
        return k, v, {}

    def dense(self, i: int, seq_k: int):
        """(B, Hkv, seq_k, D) copies of the keys and values (for the float64 check)."""
        k, v, _ = self.operands(i, seq_k)
        return np.array(k), np.array(v)


class PagedKVCache:
    """A paged K/V cache (the vLLM block table): page pools [layer][num_pages][page_size][Hkv][D]
    shared by the sequences, pages handed out from a free list (shuffled, so that a sequence's
    pages are scattered as in a server) when a sequence reaches them; the block table (B,
    max_pages) is the same for every layer. New rows go in with libattn's attn_kv_append
    (Desc.kv_append) and attention reads the pools through the table."""
    paged = True

    def __init__(self, cfg: Config, batch: int, max_len: int, page_size: int, seed: int = 0):
        self.page_size = page_size
        self.max_pages = -(-max_len // page_size)
        num_pages = batch * self.max_pages
        shape = (cfg.n_layers, num_pages, page_size, cfg.n_kv_heads, cfg.head_dim)
        self.k = np.zeros(shape, F32)
        self.v = np.zeros(shape, F32)
        self.table = np.full((batch, self.max_pages), -1, np.int32)
        self.free = list(np.random.default_rng(seed).permutation(num_pages))
        self.lens = np.zeros(batch, np.int32)
        self.max_len = max_len
        self.batch = batch

    def desc_keywords(self, cfg: Config) -> dict:
        return dict(page_size=self.page_size)  # token-major pools: the default page strides

    def reserve(self, lens: np.ndarray):
        """Give every sequence the pages it needs to hold lens[b] keys."""
        for b, n in enumerate(lens):
            for slot in range(-(-int(n) // self.page_size)):
                if self.table[b, slot] < 0:
                    self.table[b, slot] = self.free.pop()

    def append(self, desc, i: int, k: np.ndarray, v: np.ndarray, new_lens: np.ndarray):
        B, T = k.shape[:2]
        # dense queries: attn_kv_append writes seq_q = T rows per sequence, ending at
        # new_lens[b]; the prefill writes its padded rows too (positions lens .. T-1, later
        # overwritten by the decode, never read before)
        lens = new_lens if T == 1 else np.full(B, T, np.int32)
        if i == 0:
            self.reserve(lens)
        desc.kv_append(self.k[i], self.v[i], k.reshape(B * T, *k.shape[2:]),
                       v.reshape(B * T, *v.shape[2:]), seq_lens_k=lens, block_table=self.table)

    def operands(self, i: int, seq_k: int):
        return self.k[i], self.v[i], {"block_table": self.table}

    def dense(self, i: int, seq_k: int):
        P = self.page_size
        j = np.arange(seq_k)
        ks, vs = [], []
        for b in range(self.batch):
            pages = self.table[b, j // P]
            ok = pages >= 0
            kb = np.zeros((seq_k,) + self.k.shape[3:], F32)
            vb = np.zeros_like(kb)
            kb[ok] = self.k[i, pages[ok], (j % P)[ok]]
            vb[ok] = self.v[i, pages[ok], (j % P)[ok]]
            ks.append(kb.transpose(1, 0, 2))
            vs.append(vb.transpose(1, 0, 2))
        return np.stack(ks), np.stack(vs)


class Llama:
    """Weights use GGUF's tensor names (token_embd, blk.N.attn_q, ...), float32, (out, in)."""

    def __init__(self, cfg: Config, weights: Dict[str, np.ndarray], *,
                 batch_invariant: bool = True, page_size: int = 0, compute: str = "exact"):
        self.cfg = cfg
        self.w = weights
        self.embed = weights["token_embd.weight"]
        self.lm_head = weights.get("output.weight", self.embed)  # tied in SmolLM2
        self.rope = Rope(cfg.rope_dim, cfg.rope_base, cfg.context)
        # the Desc settings of the calls that start afterwards (ATTN_PARAM_BATCH_INVARIANT,
        # ATTN_PARAM_COMPUTE by name)
        self.batch_invariant = batch_invariant
        self.compute = compute
        self.page_size = page_size  # 0 = the dense cache
        # fused projections: one BLAS call for q|k|v and one for gate|up
        self.qkv = [np.concatenate([self.layer(i, n) for n in ("attn_q", "attn_k", "attn_v")])
                    for i in range(cfg.n_layers)]
        self.gate_up = [np.concatenate([self.layer(i, "ffn_gate"), self.layer(i, "ffn_up")])
                        for i in range(cfg.n_layers)]
        self.w = {n: a for n, a in weights.items()
                  if not n.endswith(("attn_q.weight", "attn_k.weight", "attn_v.weight",
                                     "ffn_gate.weight", "ffn_up.weight"))}
        self.attn_calls = 0
        self.attn_seconds = 0.0
        # the operands and result of every attention call of layer capture_layer (at most
        # capture_max of them), for the float64 check
        self.capture_layer: Optional[int] = None
        self.capture_max = 2
        self.captured: List[dict] = []

    def layer(self, i: int, name: str) -> np.ndarray:
        return self.w["blk.%d.%s.weight" % (i, name)]

    def new_cache(self, batch: int, max_len: int):
        if self.page_size:
            return PagedKVCache(self.cfg, batch, max_len, self.page_size)
        return DenseKVCache(self.cfg, batch, max_len)

    def _block(self, i, x, pos, cache, desc, seq_lens_k, query_valid, rows):
        """One transformer block on x (B, T, hidden): K/V of the T tokens into the cache, one
        libattn call over the cache."""
        cfg = self.cfg
        B, T, _ = x.shape
        hq, hkv, d = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        h = rms_norm(x, self.layer(i, "attn_norm"), cfg.eps).reshape(B * T, -1)
        qkv = linear_seqs(h, self.qkv[i], rows, B).reshape(B, T, hq + 2 * hkv, d)
        q = self.rope(qkv[:, :, :hq], pos)
        k = self.rope(qkv[:, :, hq:hq + hkv], pos)
        v = np.ascontiguousarray(qkv[:, :, hq + hkv:])
        cache.append(desc, i, k, v, seq_lens_k if T == 1 else None)
        kc, vc, extra = cache.operands(i, desc.seq_k)
        out = np.zeros((B, T, hq, d), F32)
        # (B, T, H, D) buffers seen as (B, H, T, D): the Desc was made with these strides
        t0 = time.perf_counter()
        desc.forward(q.transpose(0, 2, 1, 3), kc, vc, out=out.transpose(0, 2, 1, 3),
                     seq_lens_k=seq_lens_k, query_valid=query_valid, **extra)
        self.attn_seconds += time.perf_counter() - t0
        self.attn_calls += 1
        if self.capture_layer == i and len(self.captured) < self.capture_max:
            kd, vd = cache.dense(i, desc.seq_k)
            self.captured.append(dict(
                q=np.array(q.transpose(0, 2, 1, 3)), k=kd, v=vd,
                out=np.array(out.transpose(0, 2, 1, 3)), seq_lens_k=np.array(seq_lens_k),
                layer=i,
                query_valid=None if query_valid is None else np.array(query_valid)))
        o = linear_seqs(out.reshape(B * T, hq * d), self.layer(i, "attn_output"), rows, B)
        x = x + o.reshape(B, T, -1)
        h = rms_norm(x, self.layer(i, "ffn_norm"), cfg.eps).reshape(B * T, -1)
        gu = linear_seqs(h, self.gate_up[i], rows, B)
        g = silu(gu[:, :cfg.ffn]) * gu[:, cfg.ffn:]
        return x + linear_seqs(g, self.layer(i, "ffn_down"), rows, B).reshape(B, T, -1)

    def _logits(self, x_rows: np.ndarray) -> np.ndarray:
        h = rms_norm(x_rows, self.w["output_norm.weight"], self.cfg.eps)
        return linear(h, self.lm_head, DECODE_ROWS)

    def _desc(self, cache, batch, seq_q, seq_k, causal):
        cfg = self.cfg
        qo = (seq_q * cfg.n_heads * cfg.head_dim, cfg.head_dim, cfg.n_heads * cfg.head_dim)
        return make_desc(batch, cfg.n_heads, cfg.n_kv_heads, seq_q, seq_k, cfg.head_dim,
                         causal=causal, batch_invariant=self.batch_invariant,
                         compute=self.compute,
                         q_strides=qo, out_strides=qo,  # (B, T, Hq, D) buffers
                         **cache.desc_keywords(cfg))

    def prefill(self, tokens: np.ndarray, lens: np.ndarray, max_len: int):
        """tokens (B, L) right-padded, lens (B,). Returns (logits of each sequence's last real
        token (B, vocab), the cache holding the prompts)."""
        x, cache = self._prefill_states(tokens, lens, max_len)
        lens32 = cache.lens
        last = x[np.arange(tokens.shape[0]), lens32 - 1]
        return self._logits(last), cache

    def token_nll(self, ids, chunk: int = 256) -> np.ndarray:
        """Teacher forcing over one sequence of token ids (at most the model's context): one
        causal prefill call per layer over all of them, then the negative log-likelihood
        (float64) of each token ids[t + 1] given ids[0 .. t], t = 0 .. len - 2. The logits are
        one plain float32 product per `chunk` rows (no batch-invariant shapes needed here),
        the log-softmax in float64."""
        ids = np.asarray(ids, np.int64)
        T = len(ids)
        if not 2 <= T <= self.cfg.context:
            raise SystemExit("%d tokens: teacher forcing takes 2 .. %d (the model's context)"
                             % (T, self.cfg.context))
        x, _ = self._prefill_states(ids[None, :], np.array([T], np.int32), T)
        h = rms_norm(x[0, :-1], self.w["output_norm.weight"], self.cfg.eps)
        nll = np.empty(T - 1)
        for s in range(0, T - 1, chunk):
            z = (h[s:s + chunk] @ self.lm_head.T).astype(np.float64)  # (n, vocab)
            m = z.max(axis=1)
            lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
            nll[s:s + chunk] = lse - z[np.arange(len(z)), ids[s + 1:s + 1 + len(z)]]
        return nll

    def _prefill_states(self, tokens: np.ndarray, lens: np.ndarray, max_len: int):
        """The prefill's final hidden states x (B, L, hidden) and the cache holding the
        prompts (cache.lens = lens)."""
        cfg = self.cfg
        B, L = tokens.shape
        cache = self.new_cache(B, max_len)
        lens32 = np.ascontiguousarray(lens, np.int32)
        pos = np.broadcast_to(np.arange(L), (B, L))
        query_valid = np.ascontiguousarray(pos < lens32[:, None])
        x = self.embed[tokens]
        # dense: keys = the first L cache rows; paged: the pools, seq_k = the table's reach
        seq_k = max_len if cache.paged else L
        with self._desc(cache, B, L, seq_k, attn.Causal.TOP_LEFT) as desc:
            for i in range(cfg.n_layers):
                x = self._block(i, x, pos, cache, desc, lens32, query_valid, PREFILL_ROWS)
        cache.lens[:] = lens32
        return x, cache

    def decode_desc(self, cache) -> "attn.Desc":
        """The Desc of every decode step and layer: one query per sequence, the whole cache."""
        return self._desc(cache, cache.batch, 1, cache.max_len, attn.Causal.BOTTOM_RIGHT)

    def decode(self, desc, cache, tokens: np.ndarray) -> np.ndarray:
        """One token per sequence (B,) at position cache.lens; returns logits (B, vocab)."""
        cfg = self.cfg
        pos = cache.lens[:, None].astype(np.int64)
        seq_lens_k = cache.lens + np.int32(1)
        x = self.embed[tokens][:, None, :]
        for i in range(cfg.n_layers):
            x = self._block(i, x, pos, cache, desc, seq_lens_k, None, DECODE_ROWS)
        cache.lens[:] = seq_lens_k
        return self._logits(x[:, 0])


# ------------------------------------------------------------------------------------------
# Float64 reference of one attention call (the check of how the model calls libattn)
# ------------------------------------------------------------------------------------------

def reference_attention(c: dict) -> np.ndarray:
    """Plain float64 softmax attention of a captured call (GQA: query head h reads KV head
    h // (Hq / Hkv), Llama's repeat_kv; keys beyond seq_lens_k[b] are padding)."""
    q = c["q"].astype(np.float64)          # (B, Hq, Sq, D)
    k = c["k"].astype(np.float64)          # (B, Hkv, Sk, D)
    v = c["v"].astype(np.float64)
    B, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    rep = hq // hkv
    out = np.zeros_like(q)
    for b in range(B):
        n = int(c["seq_lens_k"][b])
        for h in range(hq):
            s = q[b, h] @ k[b, h // rep, :n].T / np.sqrt(d)        # (Sq, n)
            # what the model means, independently of how the Desc was configured: a prefill
            # query at position i sees keys 0..i; a decode query sees its whole cache
            if sq > 1:
                s = np.where(np.arange(n)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v[b, h // rep, :n]
        if c["query_valid"] is not None:
            out[b, :, ~c["query_valid"][b]] = 0.0
    return out


# ------------------------------------------------------------------------------------------
# The tiny random model (CI)
# ------------------------------------------------------------------------------------------

TINY_BOS, TINY_EOS = 256, 257


def tiny_model(seed: int = 1234, **kw) -> Llama:
    """Same architecture, random weights from a fixed seed: 2 layers, hidden 64, heads 4 / 2
    (GQA), head_dim 16, ffn 128, vocab 300 (bytes + specials)."""
    cfg = Config(n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn=128,
                 vocab=300, rope_base=10000.0, rope_dim=16, eps=1e-5, context=4096,
                 name="tiny-random-llama")
    rng = np.random.default_rng(seed)

    def mat(out_dim, in_dim, gain=1.0):
        return (rng.standard_normal((out_dim, in_dim)) * gain / np.sqrt(in_dim)).astype(F32)

    w = {"token_embd.weight": rng.standard_normal((cfg.vocab, cfg.hidden)).astype(F32),
         "output_norm.weight": (1 + 0.1 * rng.standard_normal(cfg.hidden)).astype(F32),
         # untied (tied random embeddings make the argmax repeat the input token forever)
         "output.weight": mat(cfg.vocab, cfg.hidden, 4.0)}
    qd, kvd = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    for i in range(cfg.n_layers):
        p = "blk.%d." % i
        w[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(cfg.hidden)).astype(F32)
        w[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(cfg.hidden)).astype(F32)
        w[p + "attn_q.weight"] = mat(qd, cfg.hidden, 2.0)   # peaked attention: a real check
        w[p + "attn_k.weight"] = mat(kvd, cfg.hidden, 2.0)
        w[p + "attn_v.weight"] = mat(kvd, cfg.hidden)
        w[p + "attn_output.weight"] = mat(cfg.hidden, qd)
        w[p + "ffn_gate.weight"] = mat(cfg.ffn, cfg.hidden)
        w[p + "ffn_up.weight"] = mat(cfg.ffn, cfg.hidden)
        w[p + "ffn_down.weight"] = mat(cfg.hidden, cfg.ffn)
    return Llama(cfg, w, **kw)


class ByteTokenizer:
    """The tiny model's tokenizer: UTF-8 bytes are ids 0..255; 256 = <bos>, 257 = <eos>."""
    bos_id, eos_id = TINY_BOS, TINY_EOS

    def encode(self, text: str) -> List[int]:
        return [self.bos_id] + list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """Printable ASCII as is, other bytes as \\xNN (a random model emits any byte)."""
        return "".join(chr(i) if 32 <= i < 127 else "\\x%02x" % i for i in ids if i < 256)
