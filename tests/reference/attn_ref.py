"""Independent float64 reference for libattn, in plain Python (no numpy, no library code).

It follows capi/attn.h word for word and is written for reading, not for speed. For batch b,
query head h, query i (one row at a time):

    if query i is padding (query_valid[b][i] false): out 0, lse -inf, weights 0; next row
    len_k(b)   = seq_lens_k[b] if given, else seq_k     keys j >= len_k(b) are padding
    cdiag(i)   = i for CAUSAL_NONE / CAUSAL_TOP_LEFT, i + len_k(b) - seq_q for CAUSAL_BOTTOM_RIGHT
    diag(i)    = cdiag(i) (DIAGONAL_CAUSAL), i (DIAGONAL_TOP_LEFT) or i + len_k(b) - seq_q
                 (DIAGONAL_BOTTOM_RIGHT): the diagonal of the window and ALiBi
    key j is hidden when: j >= len_k(b); key_valid[b][j] false; the causal rule j <= cdiag(i)
        fails (when causal); the window diag(i) - window_left <= j <= diag(i) + window_right
        fails (a bound of -1 is unbounded); allowed[i][j] false
    kv head    = h // (heads_q // heads_kv)                            (MHA, GQA, MQA)
    q_i        = q_scale[h] * q_i                      q_scale (ATTN_Q_SCALE) given
    s_j        = scale * (q_i . k_j)                   scale default 1/sqrt(head_dim)
    s_j        = softcap * tanh(s_j / softcap)         softcap > 0 (after the bias if bias_first;
                                                       a -inf s_j + bias stays -inf)
    s_j       += bias[b][h][i][j]                      bias strides, 0 broadcasts; where
                                                       bias[b][h][i][j] = -inf the key is hidden
                                                       whatever s_j is (even when the fp32 score
                                                       would overflow to +inf or be NaN)
    s_j       += -slope(b, h) * (diag(i) - j)          ALiBi (operand slopes or standard slopes),
                                                       ALIBI_LINEAR
    s_j       += -slope(b, h) * |diag(i) - j|          ALIBI_SYMMETRIC
    slope(b, h) = alibi_slopes[b * batch_stride + h * head_stride] (strides default (0, 1))
    a key whose score is -inf is hidden too (a -inf bias hides a key like a mask)
    no visible key: out 0, lse -inf, weights 0 (with or without a sink)
    sink       = sinks[h], or 0 with softmax_plus_one, or none
    M          = max(max_j s_j, sink)
    w_j        = exp(s_j - M) / (exp(sink - M) + sum_j' exp(s_j' - M))    (no sink term if none)
    out_i      = sum_j w_j * v_j                        (rows of head_dim_v)
    lse_i      = M + log(exp(sink - M) + sum_j exp(s_j - M))
    key_mass[b][h][j] = sum_i w_ij                      (padded queries contribute nothing)

Element (b, h, s, d) of a strided operand sits at b*batch_stride + h*head_stride + s*row_stride + d
(the bias: element (b, h, i, j) at b*batch_stride + h*head_stride + i*row_stride + j). Values of
hidden keys are never read, so NaN in padded K/V rows cannot reach any result.

Used by tests/vectors/gen_vectors.py (the shared vectors every language checks) and directly by
language tests (e.g. tests/python/test_attn.py). The 0.1 entry points (Problem with the 0.1
arguments, attention, simple) are unchanged; run() is the 0.2 call with every operand.
"""

import math

CAUSAL_NONE = 0
CAUSAL_TOP_LEFT = 1
CAUSAL_BOTTOM_RIGHT = 2

ALIBI_NONE = 0
ALIBI_OPERAND = 1
ALIBI_STANDARD = 2

DIAGONAL_CAUSAL = 0
DIAGONAL_TOP_LEFT = 1
DIAGONAL_BOTTOM_RIGHT = 2

ALIBI_LINEAR = 0
ALIBI_SYMMETRIC = 1


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


def alibi_standard_slopes(n):
    """The standard ALiBi slopes of n heads (Press et al. 2022), as BLOOM computes them: for a
    power of two n, slope_h = 2^(-8 (h + 1) / n); otherwise the slopes of the largest power of two
    m < n, followed by 2^(-8 (2x + 1) / (2m)) for x = 0 .. n - m - 1. Returns float64 values."""
    m = 1
    while m * 2 <= n:
        m *= 2
    slopes = [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]
    slopes += [2.0 ** (-8.0 * (2 * x + 1) / (2 * m)) for x in range(n - m)]
    return slopes


class Problem:
    """One attention problem: sizes, causal rule, scale (None = 1/sqrt(head_dim)) and strides
    (None = contiguous BHSD), plus the 0.2 parameters (keyword arguments, defaults as attn.h):
    window_left / window_right (-1 unbounded), softcap (0 off), alibi (ALIBI_*),
    softmax_plus_one, head_dim_v (None = head_dim), bias_first, bias_strides (None =
    contiguous [batch][heads_q][seq_q][seq_k]), diagonal (DIAGONAL_*), alibi_form (ALIBI_LINEAR /
    ALIBI_SYMMETRIC), alibi_slopes_strides ((batch_stride, head_stride); None = (0, 1))."""

    def __init__(self, batch, heads_q, heads_kv, seq_q, seq_k, head_dim,
                 causal=CAUSAL_NONE, scale=None,
                 q_strides=None, k_strides=None, v_strides=None, out_strides=None,
                 window_left=-1, window_right=-1, softcap=0.0, alibi=ALIBI_NONE,
                 softmax_plus_one=False, head_dim_v=None, bias_first=False, bias_strides=None,
                 diagonal=DIAGONAL_CAUSAL, alibi_form=ALIBI_LINEAR, alibi_slopes_strides=None):
        if min(batch, heads_q, heads_kv, seq_q, seq_k, head_dim) <= 0:
            raise ValueError("all sizes must be > 0")
        if heads_q % heads_kv != 0:
            raise ValueError("heads_q must be a multiple of heads_kv")
        if causal not in (CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT):
            raise ValueError("bad causal mode")
        if window_left < -1 or window_right < -1:
            raise ValueError("window bounds must be >= -1")
        if not softcap >= 0.0:
            raise ValueError("softcap must be >= 0")
        if alibi not in (ALIBI_NONE, ALIBI_OPERAND, ALIBI_STANDARD):
            raise ValueError("bad alibi mode")
        if diagonal not in (DIAGONAL_CAUSAL, DIAGONAL_TOP_LEFT, DIAGONAL_BOTTOM_RIGHT):
            raise ValueError("bad diagonal")
        if alibi_form not in (ALIBI_LINEAR, ALIBI_SYMMETRIC):
            raise ValueError("bad alibi form")
        if head_dim_v is not None and head_dim_v <= 0:
            raise ValueError("head_dim_v must be > 0")
        self.batch = batch
        self.heads_q = heads_q
        self.heads_kv = heads_kv
        self.seq_q = seq_q
        self.seq_k = seq_k
        self.head_dim = head_dim
        self.head_dim_v = head_dim if head_dim_v is None else head_dim_v
        self.causal = causal
        self.scale = scale
        self.window_left = window_left
        self.window_right = window_right
        self.softcap = float(softcap)
        self.alibi = alibi
        self.softmax_plus_one = bool(softmax_plus_one)
        self.bias_first = bool(bias_first)
        self.diagonal = diagonal
        self.alibi_form = alibi_form
        self.alibi_slopes_strides = tuple(alibi_slopes_strides or (0, 1))
        DV = self.head_dim_v
        self.q_strides = tuple(q_strides or bhsd_strides(heads_q, seq_q, head_dim))
        self.k_strides = tuple(k_strides or bhsd_strides(heads_kv, seq_k, head_dim))
        self.v_strides = tuple(v_strides or bhsd_strides(heads_kv, seq_k, DV))
        self.out_strides = tuple(out_strides or bhsd_strides(heads_q, seq_q, DV))
        self.bias_strides = tuple(bias_strides or bhsd_strides(heads_q, seq_q, seq_k))

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
        return strided_len(self.batch, self.heads_kv, self.seq_k, self.head_dim_v, self.v_strides)

    def out_len(self):
        return strided_len(self.batch, self.heads_q, self.seq_q, self.head_dim_v,
                           self.out_strides)

    def bias_len(self):
        return strided_len(self.batch, self.heads_q, self.seq_q, self.seq_k, self.bias_strides)

    def lse_len(self):
        return self.batch * self.heads_q * self.seq_q

    def weights_len(self):
        return self.batch * self.heads_q * self.seq_q * self.seq_k

    def key_valid_len(self):
        return self.batch * self.seq_k

    def allowed_len(self):
        return self.seq_q * self.seq_k

    def heads_len(self):
        """alibi_slopes and sinks: [heads_q]."""
        return self.heads_q

    def alibi_slopes_len(self):
        """alibi_slopes: [batch][heads_q] with alibi_slopes_strides."""
        bs, hs = self.alibi_slopes_strides
        return (self.batch - 1) * bs + (self.heads_q - 1) * hs + 1

    def slope(self, slopes, b, h):
        """slope(b, h) of operand slopes."""
        bs, hs = self.alibi_slopes_strides
        return float(slopes[b * bs + h * hs])

    def query_valid_len(self):
        return self.batch * self.seq_q

    def seq_lens_k_len(self):
        return self.batch

    def key_mass_len(self):
        return self.batch * self.heads_q * self.seq_k

    # The 0.1 rules (no per-batch key lengths, no window).
    def causal_visible(self, i, j):
        """The causal rule alone: may query i see key j?"""
        if self.causal == CAUSAL_NONE:
            return True
        if self.causal == CAUSAL_TOP_LEFT:
            return j <= i
        return j <= i + self.seq_k - self.seq_q  # CAUSAL_BOTTOM_RIGHT

    def visible(self, key_valid, allowed, b, i, j):
        """Is key j visible to query i of batch b? key_valid: flat [batch][seq_k] or None;
        allowed: flat [seq_q][seq_k] or None (any truthy value is true). The 0.1 rules: causal
        rule, key_valid, allowed."""
        if not self.causal_visible(i, j):
            return False
        if key_valid is not None and not key_valid[b * self.seq_k + j]:
            return False
        if allowed is not None and not allowed[i * self.seq_k + j]:
            return False
        return True

    # The 0.2 rules.
    def key_len(self, b, seq_lens_k=None):
        """len_k(b): keys of batch entry b (keys at or past it are padding)."""
        return self.seq_k if seq_lens_k is None else int(seq_lens_k[b])

    def causal_diag(self, b, i, seq_lens_k=None):
        """The causal rule's diagonal of query i in batch entry b."""
        if self.causal == CAUSAL_BOTTOM_RIGHT:
            return i + self.key_len(b, seq_lens_k) - self.seq_q
        return i

    def diag(self, b, i, seq_lens_k=None):
        """diag(i), the diagonal the window and ALiBi measure from."""
        if self.diagonal == DIAGONAL_TOP_LEFT:
            return i
        if self.diagonal == DIAGONAL_BOTTOM_RIGHT:
            return i + self.key_len(b, seq_lens_k) - self.seq_q
        return self.causal_diag(b, i, seq_lens_k)

    def alibi_term(self, slope, dg, j):
        """The ALiBi addend of key j on diagonal dg."""
        if self.alibi_form == ALIBI_SYMMETRIC:
            return -slope * abs(dg - j)
        return -slope * (dg - j)

    def in_range(self, b, i, j, seq_lens_k=None):
        """The causal rule and the sliding window: may query i see key j (masks aside)?"""
        dg = self.diag(b, i, seq_lens_k)
        if self.causal != CAUSAL_NONE and j > self.causal_diag(b, i, seq_lens_k):
            return False
        if self.window_left >= 0 and j < dg - self.window_left:
            return False
        if self.window_right >= 0 and j > dg + self.window_right:
            return False
        return True


def _cap(p, s):
    return p.softcap * math.tanh(s / p.softcap)


def run(p, q, k, v=None, key_valid=None, allowed=None, bias=None, alibi_slopes=None, sinks=None,
        query_valid=None, seq_lens_k=None, q_scale=None):
    """Reference of attn_run for Problem p with every 0.2 operand (None = not bound).

    q, k, v, bias: flat sequences addressed with p's strides; key_valid [batch][seq_k],
    allowed [seq_q][seq_k], query_valid [batch][seq_q]: flat, any truthy value is true;
    alibi_slopes: [batch][heads_q] by p.alibi_slopes_strides; sinks: [heads_q]; seq_lens_k: [batch] integers in [0, seq_k];
    q_scale: [heads_q], the factor on each head's q.
    Returns (out, lse, weights, key_mass) as float64 lists: out has p.out_len() elements
    (elements the OUT strides do not address stay 0.0; None when v is None), lse
    batch*heads_q*seq_q, weights batch*heads_q*seq_q*seq_k and key_mass batch*heads_q*seq_k
    (all contiguous). Raises ValueError for the argument errors attn_run reports."""
    if p.alibi == ALIBI_OPERAND and alibi_slopes is None:
        raise ValueError("alibi_slopes is required with ALIBI_OPERAND")
    if p.alibi != ALIBI_OPERAND and alibi_slopes is not None:
        raise ValueError("alibi_slopes given without ALIBI_OPERAND")
    if sinks is not None and p.softmax_plus_one:
        raise ValueError("sinks cannot be combined with softmax_plus_one")
    if seq_lens_k is not None:
        for b in range(p.batch):
            if not 0 <= seq_lens_k[b] <= p.seq_k:
                raise ValueError("seq_lens_k[%d] out of range" % b)

    slopes = None
    if p.alibi == ALIBI_OPERAND:
        slopes = [[p.slope(alibi_slopes, b, h) for h in range(p.heads_q)]
                  for b in range(p.batch)]
    elif p.alibi == ALIBI_STANDARD:
        slopes = [alibi_standard_slopes(p.heads_q)] * p.batch

    scale = p.effective_scale()
    group = p.heads_q // p.heads_kv
    D, DV, SQ, SK = p.head_dim, p.head_dim_v, p.seq_q, p.seq_k
    out = [0.0] * p.out_len() if v is not None else None
    lse = [0.0] * p.lse_len()
    weights = [0.0] * p.weights_len()

    for b in range(p.batch):
        L = p.key_len(b, seq_lens_k)
        for h in range(p.heads_q):
            hk = h // group
            if sinks is not None:
                sink = float(sinks[h])
            elif p.softmax_plus_one:
                sink = 0.0
            else:
                sink = None
            for i in range(SQ):
                row = (b * p.heads_q + h) * SQ + i
                if query_valid is not None and not query_valid[b * SQ + i]:
                    lse[row] = -math.inf  # padded query: output row and weights stay 0
                    continue
                qo = offset(p.q_strides, b, h, i)
                qf = float(q_scale[h]) if q_scale is not None else 1.0
                qi = [float(q[qo + d]) * qf for d in range(D)]
                dg = p.diag(b, i, seq_lens_k)

                scores = {}
                for j in range(L):  # keys j >= len_k(b) are padding: never read
                    if key_valid is not None and not key_valid[b * SK + j]:
                        continue
                    if not p.in_range(b, i, j, seq_lens_k):
                        continue
                    if allowed is not None and not allowed[i * SK + j]:
                        continue
                    ko = offset(p.k_strides, b, hk, j)
                    dot = 0.0
                    for d in range(D):
                        dot += qi[d] * float(k[ko + d])
                    s = scale * dot
                    if p.softcap > 0.0 and not p.bias_first:
                        s = _cap(p, s)
                    if bias is not None:
                        bj = float(bias[offset(p.bias_strides, b, h, i) + j])
                        if bj == -math.inf:
                            continue  # a -inf bias hides the key, whatever its score
                        s += bj
                    if p.softcap > 0.0 and p.bias_first and s != -math.inf:
                        s = _cap(p, s)  # a -inf bias still hides the key
                    if slopes is not None:
                        s += p.alibi_term(slopes[b][h], dg, j)
                    if s == -math.inf:
                        continue  # a -inf score hides the key like a mask
                    scores[j] = s

                if not scores:
                    lse[row] = -math.inf  # no visible key: output 0, weights 0, even with a sink
                    continue

                m = max(scores.values())
                if sink is not None:
                    m = max(m, sink)
                expd = {j: math.exp(scores[j] - m) for j in scores}
                terms = list(expd.values())
                if sink is not None:
                    terms.append(math.exp(sink - m))
                total = math.fsum(terms)
                lse[row] = m + math.log(total)

                acc = [0.0] * DV
                for j in scores:
                    w = expd[j] / total
                    weights[row * SK + j] = w
                    if v is not None:
                        vo = offset(p.v_strides, b, hk, j)
                        for d in range(DV):
                            acc[d] += w * float(v[vo + d])

                if v is not None:
                    oo = offset(p.out_strides, b, h, i)
                    for d in range(DV):
                        out[oo + d] = acc[d]

    key_mass = [0.0] * p.key_mass_len()
    for b in range(p.batch):
        for h in range(p.heads_q):
            for j in range(SK):
                key_mass[(b * p.heads_q + h) * SK + j] = math.fsum(
                    weights[((b * p.heads_q + h) * SQ + i) * SK + j] for i in range(SQ))
    return out, lse, weights, key_mass


def backward(p, q, k, v, dout, key_valid=None, allowed=None, bias=None, alibi_slopes=None,
             sinks=None, query_valid=None, seq_lens_k=None, q_scale=None):
    """Gradients of run()'s out with respect to q, k, v, bias and sinks, given dout (the
    gradient of out, addressed with p's OUT strides), in float64, written plainly from the
    chain rule of the score pipeline:
        w_j = exp(s_j - lse), out = sum_j w_j v_j (a sink adds exp(sink - lse) to the sum only)
        dv_j += w_j dout;  dp_j = dout . v_j;  D = dout . out;  ds_j = w_j (dp_j - D)
        dsink = -w_sink D
        s_j = cap(t_j) + bias_j + alibi_j (bias_first: s_j = cap(t_j + bias_j) + alibi_j),
        t_j = scale * (qf q) . k_j (qf = q_scale[h], else 1), cap'(x) = 1 - tanh(x / softcap)^2
        dq += scale qf dt_j k_j;  dk_j += scale dt_j (qf q)
    Returns (dq, dk, dv, dbias, dsinks): flat lists in the layouts of q, k, v (p's strides),
    bias (p.bias_strides; broadcast dimensions summed; None without a bias) and [heads_q]
    (None without sinks). Elements no stride addresses are 0."""
    out, lse, _, _ = run(p, q, k, v, key_valid, allowed, bias, alibi_slopes, sinks,
                         query_valid, seq_lens_k, q_scale)
    slopes = None
    if p.alibi == ALIBI_OPERAND:
        slopes = [[p.slope(alibi_slopes, b, h) for h in range(p.heads_q)]
                  for b in range(p.batch)]
    elif p.alibi == ALIBI_STANDARD:
        slopes = [alibi_standard_slopes(p.heads_q)] * p.batch
    scale = p.effective_scale()
    group = p.heads_q // p.heads_kv
    D, DV, SQ, SK = p.head_dim, p.head_dim_v, p.seq_q, p.seq_k
    dq = [0.0] * p.q_len()
    dk = [0.0] * p.k_len()
    dv = [0.0] * p.v_len()
    dbias = [0.0] * p.bias_len() if bias is not None else None
    dsinks = [0.0] * p.heads_q if sinks is not None else None

    def dcap(x):
        return 1.0 - math.tanh(x / p.softcap) ** 2

    for b in range(p.batch):
        L = p.key_len(b, seq_lens_k)
        for h in range(p.heads_q):
            hk = h // group
            for i in range(SQ):
                row = (b * p.heads_q + h) * SQ + i
                if lse[row] == -math.inf:
                    continue  # padded query or no visible key: no gradient
                qo = offset(p.q_strides, b, h, i)
                oo = offset(p.out_strides, b, h, i)
                qf = float(q_scale[h]) if q_scale is not None else 1.0
                qi = [float(q[qo + d]) * qf for d in range(D)]
                do = [float(dout[oo + d]) for d in range(DV)]
                Drow = math.fsum(do[d] * out[oo + d] for d in range(DV))
                dg = p.diag(b, i, seq_lens_k)
                bo = offset(p.bias_strides, b, h, i) if bias is not None else 0
                if sinks is not None:
                    dsinks[h] += -math.exp(float(sinks[h]) - lse[row]) * Drow
                for j in range(L):
                    if key_valid is not None and not key_valid[b * SK + j]:
                        continue
                    if not p.in_range(b, i, j, seq_lens_k):
                        continue
                    if allowed is not None and not allowed[i * SK + j]:
                        continue
                    ko = offset(p.k_strides, b, hk, j)
                    vo = offset(p.v_strides, b, hk, j)
                    t = scale * math.fsum(qi[d] * float(k[ko + d]) for d in range(D))
                    bj = float(bias[bo + j]) if bias is not None else 0.0
                    if bj == -math.inf:
                        continue  # hidden by its bias
                    if p.softcap > 0.0 and p.bias_first:
                        s, ds_dt, ds_db = _cap(p, t + bj), dcap(t + bj), dcap(t + bj)
                    elif p.softcap > 0.0:
                        s, ds_dt, ds_db = _cap(p, t) + bj, dcap(t), 1.0
                    else:
                        s, ds_dt, ds_db = t + bj, 1.0, 1.0
                    if slopes is not None:
                        s += p.alibi_term(slopes[b][h], dg, j)
                    w = math.exp(s - lse[row])
                    dp = math.fsum(do[d] * float(v[vo + d]) for d in range(DV))
                    ds = w * (dp - Drow)
                    for d in range(DV):
                        dv[vo + d] += w * do[d]
                    if dbias is not None:
                        dbias[bo + j] += ds * ds_db
                    dt = ds * ds_dt
                    for d in range(D):
                        dq[qo + d] += scale * qf * dt * float(k[ko + d])
                        dk[ko + d] += scale * dt * qi[d]
    return dq, dk, dv, dbias, dsinks


def attention(p, q, k, v, key_valid=None, allowed=None):
    """Reference forward pass and weights for Problem p (the 0.1 operands).

    q, k, v: flat sequences addressed with p's strides. Returns (out, lse, weights) as float64
    lists: out has p.out_len() elements (elements the OUT strides do not address stay 0.0),
    lse has batch*heads_q*seq_q, weights batch*heads_q*seq_q*seq_k (contiguous)."""
    out, lse, weights, _ = run(p, q, k, v, key_valid, allowed)
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
