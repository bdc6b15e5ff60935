"""Independent float64 reference for libattn, in plain Python (no numpy, no library code).

It follows capi/attn.h word for word and is written for reading, not for speed:

    for each (b, h, i):
        visible keys j = causal rule AND key_valid[b][j] AND allowed[i][j]
        kv head        = h // (heads_q // heads_kv)                      (MHA, GQA, MQA)
        score_j        = scale * (q_i . k_j)          scale default 1/sqrt(head_dim)
        weight_j       = exp(score_j - max) / sum exp(score - max) over visible keys, 0 if hidden
        out_i          = sum_j weight_j * v_j         (0 when no key is visible)
        lse_i          = max + log(sum exp(score - max))   (-inf when no key is visible)

Element (b, h, s, d) of a strided operand sits at b*batch_stride + h*head_stride + s*row_stride + d.
Values of hidden keys are never read, so NaN in padded K/V rows cannot reach any result.

Used by tests/vectors/gen_vectors.py (the shared vectors every language checks) and directly by
language tests (e.g. tests/python/test_attn.py).
"""

import math

CAUSAL_NONE = 0
CAUSAL_TOP_LEFT = 1
CAUSAL_BOTTOM_RIGHT = 2


def bhsd_strides(heads, seq, head_dim):
    """Contiguous [batch][heads][seq][head_dim] strides: (batch_stride, head_stride, row_stride)."""
    return (heads * seq * head_dim, seq * head_dim, head_dim)


def bshd_strides(heads, seq, head_dim):
    """Contiguous [batch][seq][heads][head_dim] strides: (batch_stride, head_stride, row_stride)."""
    return (seq * heads * head_dim, head_dim, heads * head_dim)


def strided_len(batch, heads, seq, head_dim, strides):
    """Elements a strided buffer must hold: the largest addressed offset + 1."""
    bs, hs, rs = strides
    return (batch - 1) * bs + (heads - 1) * hs + (seq - 1) * rs + head_dim


def offset(strides, b, h, s):
    """Offset of element (b, h, s, 0)."""
    bs, hs, rs = strides
    return b * bs + h * hs + s * rs


class Problem:
    """One attention problem: sizes, causal rule, scale (None = 1/sqrt(head_dim)) and strides
    (None = contiguous BHSD)."""

    def __init__(self, batch, heads_q, heads_kv, seq_q, seq_k, head_dim,
                 causal=CAUSAL_NONE, scale=None,
                 q_strides=None, k_strides=None, v_strides=None, out_strides=None):
        if min(batch, heads_q, heads_kv, seq_q, seq_k, head_dim) <= 0:
            raise ValueError("all sizes must be > 0")
        if heads_q % heads_kv != 0:
            raise ValueError("heads_q must be a multiple of heads_kv")
        if causal not in (CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT):
            raise ValueError("bad causal mode")
        self.batch = batch
        self.heads_q = heads_q
        self.heads_kv = heads_kv
        self.seq_q = seq_q
        self.seq_k = seq_k
        self.head_dim = head_dim
        self.causal = causal
        self.scale = scale
        self.q_strides = tuple(q_strides or bhsd_strides(heads_q, seq_q, head_dim))
        self.k_strides = tuple(k_strides or bhsd_strides(heads_kv, seq_k, head_dim))
        self.v_strides = tuple(v_strides or bhsd_strides(heads_kv, seq_k, head_dim))
        self.out_strides = tuple(out_strides or bhsd_strides(heads_q, seq_q, head_dim))

    def effective_scale(self):
        if self.scale is None:
            return 1.0 / math.sqrt(self.head_dim)
        return float(self.scale)

    # Buffer lengths, as attn_desc_required_len reports them.
    def q_len(self):
        return strided_len(self.batch, self.heads_q, self.seq_q, self.head_dim, self.q_strides)

    def k_len(self):
        return strided_len(self.batch, self.heads_kv, self.seq_k, self.head_dim, self.k_strides)

    def v_len(self):
        return strided_len(self.batch, self.heads_kv, self.seq_k, self.head_dim, self.v_strides)

    def out_len(self):
        return strided_len(self.batch, self.heads_q, self.seq_q, self.head_dim, self.out_strides)

    def lse_len(self):
        return self.batch * self.heads_q * self.seq_q

    def weights_len(self):
        return self.batch * self.heads_q * self.seq_q * self.seq_k

    def key_valid_len(self):
        return self.batch * self.seq_k

    def allowed_len(self):
        return self.seq_q * self.seq_k

    def causal_visible(self, i, j):
        """The causal rule alone: may query i see key j?"""
        if self.causal == CAUSAL_NONE:
            return True
        if self.causal == CAUSAL_TOP_LEFT:
            return j <= i
        return j <= i + self.seq_k - self.seq_q  # CAUSAL_BOTTOM_RIGHT

    def visible(self, key_valid, allowed, b, i, j):
        """Is key j visible to query i of batch b? key_valid: flat [batch][seq_k] or None;
        allowed: flat [seq_q][seq_k] or None (any truthy value is true)."""
        if not self.causal_visible(i, j):
            return False
        if key_valid is not None and not key_valid[b * self.seq_k + j]:
            return False
        if allowed is not None and not allowed[i * self.seq_k + j]:
            return False
        return True


def attention(p, q, k, v, key_valid=None, allowed=None):
    """Reference forward pass and weights for Problem p.

    q, k, v: flat sequences addressed with p's strides. Returns (out, lse, weights) as float64
    lists: out has p.out_len() elements (elements the OUT strides do not address stay 0.0),
    lse has batch*heads_q*seq_q, weights batch*heads_q*seq_q*seq_k (contiguous)."""
    scale = p.effective_scale()
    group = p.heads_q // p.heads_kv
    D = p.head_dim
    out = [0.0] * p.out_len()
    lse = [0.0] * p.lse_len()
    weights = [0.0] * p.weights_len()

    for b in range(p.batch):
        for h in range(p.heads_q):
            hk = h // group
            for i in range(p.seq_q):
                row = (b * p.heads_q + h) * p.seq_q + i
                qo = offset(p.q_strides, b, h, i)
                qi = [float(q[qo + d]) for d in range(D)]

                visible = [j for j in range(p.seq_k) if p.visible(key_valid, allowed, b, i, j)]
                if not visible:
                    lse[row] = -math.inf  # output row and weights stay 0
                    continue

                scores = {}
                for j in visible:
                    ko = offset(p.k_strides, b, hk, j)
                    dot = 0.0
                    for d in range(D):
                        dot += qi[d] * float(k[ko + d])
                    scores[j] = scale * dot

                m = max(scores.values())
                expd = {j: math.exp(scores[j] - m) for j in visible}
                total = math.fsum(expd.values())
                lse[row] = m + math.log(total)

                acc = [0.0] * D
                for j in visible:
                    w = expd[j] / total
                    weights[row * p.seq_k + j] = w
                    vo = offset(p.v_strides, b, hk, j)
                    for d in range(D):
                        acc[d] += w * float(v[vo + d])

                oo = offset(p.out_strides, b, h, i)
                for d in range(D):
                    out[oo + d] = acc[d]
    return out, lse, weights


def simple(Q, K, V, causal=True, pad_mask=None):
    """The original attention(Q, K, V, causal, pad_mask) on lists of vectors: one sequence, one
    head, scale 1/sqrt(d), causal = TOP_LEFT, pad_mask[j] true = real token. Returns a list of
    output vectors (float64)."""
    n = len(Q)
    d = len(Q[0])
    p = Problem(1, 1, 1, n, n, d, CAUSAL_TOP_LEFT if causal else CAUSAL_NONE)
    flat = lambda rows: [x for r in rows for x in r]
    out, _, _ = attention(p, flat(Q), flat(K), flat(V),
                          key_valid=None if pad_mask is None else list(pad_mask))
    return [out[i * d:(i + 1) * d] for i in range(n)]
