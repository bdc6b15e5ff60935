// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking), after convert-inl.h. No include guard on purpose (see score-inl.h).
//
// The integer products of ATTN_COMPUTE_INT8 for the row blocks. Q.K^T:
//   - K of each (batch entry, KV head) is smoothed: its channel mean over the real keys is
//     subtracted (SageAttention's K smoothing: every score of a query moves by the same q.mean,
//     and K's outlier channels no longer set the quantization step), then quantized per key to
//     integers |code| <= kKCode with one fp32 scale (round to nearest even);
//   - the queries of a row block (scale * q, as the exact kernel holds them) are quantized per
//     row to |code| <= kQCode;
//   - each score is the exact integer dot product of the codes (pmaddwd: products of int16
//     pairs summed in int32, exact), times sq * sk, plus q.mean in fp32: the true logit up to
//     the quantization error, before softcap, bias, ALiBi, masks and the softmax, which run as
//     in the exact kernel.
// The unit multiplies int16 pairs at the same rate whatever the codes' width, so the codes are as
// wide as the int32 sum allows: queries 12 bits (|code| <= 2047), keys 11 (|code| <= 1023),
// |sum| <= 2047 * 1023 * head_dim < 2^31 for head_dim <= 1024. (With 8-bit keys, SageAttention's
// int8, SmolLM2-135M's first greedy token of a prompt whose two best logits were 0.08 apart
// changed: the keys' error moved the logits by up to 0.79.)
// P.V, per key tile: the tile's V quantized per channel (|code| <= 1023, one scale per channel
// and tile, once per call), each block's probabilities p = exp(s - m) in [0, 1] as p * 8191 rounded
// (13 bits), summed over the tile's key pairs in int32 (|sum| <= 2 * 8191 * 1023 per pair: exact
// for tiles of up to 256 keys), then times the channel's scale / 8191 into the fp32 accumulator.
// The running sum l stays the fp32 sum of the unrounded p. (8-bit V codes doubled the error of the
// output: relative L1 0.0092 against 0.0066 with fp32 P.V, gaussian inputs, head_dim 128.)

constexpr int32_t kKCode = 1023, kQCode = 2047, kVCode = 1023, kPCode = 8191;
static_assert(double(kQCode) * kKCode * kInt8MaxDim < 2147483648.0, "Q.K^T sums must fit int32");
static_assert(kBK <= 256, "a tile's P.V sum must fit int32: 2 * 8191 * 1023 per key pair");
// Keys per integer product block: kNV x kQI accumulators, a query vector per lane group, the
// broadcast key pair and a product in registers (16 vector registers on AVX2 and SSE2).
constexpr size_t kQI = kKT < (kNV >= 8 ? 1 : 8 / kNV) ? kKT : (kNV >= 8 ? 1 : 8 / kNV);
// Channels per P.V product block (kNV x kPI accumulators, the same budget).
constexpr size_t kPI = kNV >= 8 ? 1 : 8 / kNV;
// Key pairs of a tile: V's codes are stored channel by channel, kPairs per channel, so that a
// channel's pairs are read in order (key-major rows, dv pairs apart, put every pair of a tile
// on its own cache line).
constexpr size_t kPairs = (kBK + 1) / 2;

static inline int32_t pack_pair(float a, float b) {
    const int32_t lo = static_cast<int32_t>(__builtin_nearbyintf(a));
    const int32_t hi = static_cast<int32_t>(__builtin_nearbyintf(b));
    return static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) |
                                (static_cast<uint32_t>(lo) & 0xFFFFu));
}

// K of (b, kvh) smoothed and quantized (KernelInfo::quantize_keys). Padding keys are not read.
static bool quantize_keys(const Params &p, const Tensors &t, size_t b, size_t kvh, int32_t *codes,
                          size_t kq_row, float *scales, float *mean, float *work) {
    const size_t d = p.shape.head_dim, n = key_len(p, t, b);
    const uint8_t *valid = t.key_valid ? t.key_valid + b * p.shape.seq_k : nullptr;
    const KvRows kb = kv_rows(p, t, false, b, kvh);
    float *row = work, *sum = work + d, *comp = work + 2 * d; // Kahan sums per channel
    for (size_t c = 0; c < d; ++c) sum[c] = comp[c] = 0.0f;
    size_t count = 0;
    for (size_t j = 0; j < n; ++j) {
        if (valid && !valid[j]) continue;
        widen_row(kb, j, row, d, d);
        for (size_t c = 0; c < d; ++c) {
            const float y = row[c] - comp[c], s = sum[c] + y;
            comp[c] = (s - sum[c]) - y;
            sum[c] = s;
        }
        ++count;
    }
    for (size_t c = 0; c < d; ++c) mean[c] = count ? sum[c] / static_cast<float>(count) : 0.0f;
    for (size_t c = 0; c < d; ++c)
        if (!(__builtin_fabsf(mean[c]) <= __FLT_MAX__)) return false;
    for (size_t j = 0; j < n; ++j) {
        if (valid && !valid[j]) continue;
        widen_row(kb, j, row, d, d);
        float amax = 0.0f;
        for (size_t c = 0; c < d; ++c) {
            row[c] -= mean[c];
            const float a = __builtin_fabsf(row[c]);
            amax = a > amax ? a : amax;
            if (!(a <= __FLT_MAX__)) return false; // Inf or NaN
        }
        const float inv = amax > 0.0f ? static_cast<float>(kKCode) / amax : 0.0f;
        int32_t *dst = codes + j * kq_row;
        for (size_t c = 0; c + 1 < d; c += 2)
            dst[c / 2] = pack_pair(row[c] * inv, row[c + 1] * inv);
        if (d % 2) dst[d / 2] = pack_pair(row[d - 1] * inv, 0.0f);
        scales[j] = amax / static_cast<float>(kKCode);
    }
    return true;
}

// The row block's queries qt[d][R] quantized per lane into q16[(d + 1) / 2][R] (code pairs),
// with sq[R] the lanes' scales and qm[R] = sum_c qt[c][l] mean[c] (fp32, c in order). False when
// a lane holds a non-finite value (the block then computes Q.K^T exactly).
static inline bool quantize_queries(const float *qt, size_t d, const float *mean, int32_t *q16,
                                    float *sq, float *qm) {
    constexpr size_t R = kL * kNV;
    float inv[R];
    for (size_t l = 0; l < R; ++l) {
        float amax = 0.0f, dot = 0.0f;
        for (size_t c = 0; c < d; ++c) {
            const float v = qt[c * R + l], a = __builtin_fabsf(v);
            amax = a > amax ? a : amax;
            dot = __builtin_fmaf(v, mean[c], dot);
        }
        if (!(amax <= __FLT_MAX__) || !(__builtin_fabsf(dot) <= __FLT_MAX__)) return false;
        inv[l] = amax > 0.0f ? static_cast<float>(kQCode) / amax : 0.0f;
        sq[l] = amax / static_cast<float>(kQCode);
        qm[l] = dot;
    }
    for (size_t c = 0; c < d; c += 2)
        for (size_t l = 0; l < R; ++l)
            q16[c / 2 * R + l] =
                pack_pair(qt[c * R + l] * inv[l], c + 1 < d ? qt[(c + 1) * R + l] * inv[l] : 0.0f);
    return true;
}

// st[k][R] = (sum of krow[k] . q16 in int32) * sq * ks[k] + qm for kQI keys (the integer Q.K^T
// micro-kernel: kQI x kNV int32 accumulators; each step loads kNV query vectors of code pairs
// and broadcasts a code pair of each key).
static inline void qk8_block(const int32_t *const *krow, const int32_t *q16, size_t np,
                             const float *ks, const vf *sqv, const vf *qmv, float *st) {
    constexpr size_t R = kL * kNV;
    vi acc[kQI][kNV];
    for (size_t k = 0; k < kQI; ++k)
        for (size_t n = 0; n < kNV; ++n) acc[k][n] = vi_zero();
    for (size_t pd = 0; pd < np; ++pd) {
        vi qv[kNV];
        for (size_t n = 0; n < kNV; ++n) qv[n] = vi_load(q16 + pd * R + n * kL);
        for (size_t k = 0; k < kQI; ++k) {
            const vi kv = vi_bcast(krow[k][pd]);
            for (size_t n = 0; n < kNV; ++n) acc[k][n] = vi_madd(acc[k][n], qv[n], kv);
        }
    }
    for (size_t k = 0; k < kQI; ++k) {
        const vf s = vbcast(ks[k]);
        for (size_t n = 0; n < kNV; ++n)
            vstore(st + k * R + n * kL, vfma(vi_to_f(acc[k][n]), sqv[n] * s, qmv[n]));
    }
}

// V of (b, kvh) per tile of keys [t kBK, (t + 1) kBK) (KernelInfo::quantize_values): per
// channel over the tile's non-padding keys, |code| <= kVCode, the codes of its keys 2 x and
// 2 x + 1 (in order, padding skipped) paired at codes[t * tile + c * kPairs + x] (tile = kPairs
// * dv), the channel's step / kPCode (the probabilities' scale folded in) at scales[t * dv +
// c]. Padding keys are not read.
static bool quantize_values(const Params &p, const Tensors &t, size_t b, size_t kvh, int32_t *codes,
                            float *scales, float *work) {
    const size_t dv = p.shape.head_dim_v, n = key_len(p, t, b), tile = kPairs * dv;
    const uint8_t *valid = t.key_valid ? t.key_valid + b * p.shape.seq_k : nullptr;
    const KvRows vb = kv_rows(p, t, true, b, kvh);
    float *inv = work, *row = work + dv;
    for (size_t t0 = 0, ti = 0; t0 < n; t0 += kBK, ++ti) {
        const size_t end = n < t0 + kBK ? n : t0 + kBK;
        for (size_t c = 0; c < dv; ++c) inv[c] = 0.0f;
        for (size_t j = t0; j < end; ++j) {
            if (valid && !valid[j]) continue;
            widen_row(vb, j, row, dv, dv);
            for (size_t c = 0; c < dv; ++c) {
                const float a = __builtin_fabsf(row[c]);
                if (!(a <= __FLT_MAX__)) return false; // Inf or NaN
                inv[c] = a > inv[c] ? a : inv[c];
            }
        }
        float *sc = scales + ti * dv;
        for (size_t c = 0; c < dv; ++c) {
            sc[c] = inv[c] / static_cast<float>(kVCode) / static_cast<float>(kPCode);
            inv[c] = inv[c] > 0.0f ? static_cast<float>(kVCode) / inv[c] : 0.0f;
        }
        int32_t *dst = codes + ti * tile;
        size_t x = 0;
        for (size_t j = t0; j < end; ++j) {
            if (valid && !valid[j]) continue;
            float *r = row + (x % 2) * dv; // the pair's first row, then its second
            widen_row(vb, j, r, dv, dv);
            if (x % 2)
                for (size_t c = 0; c < dv; ++c)
                    dst[c * kPairs + x / 2] = pack_pair(row[c] * inv[c], r[c] * inv[c]);
            ++x;
        }
        if (x % 2)
            for (size_t c = 0; c < dv; ++c)
                dst[c * kPairs + x / 2] = pack_pair(row[c] * inv[c], 0.0f);
    }
    return true;
}

// A block's probabilities st[r][R] (of the tile's keys x0 + r, r < nsub) as code pairs of the
// tile's key pairs jp0 = x0 / 2 ... : pq[(jp - jp0)][R]. Returns the number of pairs, or 0 when
// a probability is NaN (the block's P.V of the tile then runs in fp32).
static inline size_t pack_probs(const float *st, size_t x0, size_t nsub, int32_t *pq) {
    constexpr size_t R = kL * kNV;
    const size_t jp0 = x0 / 2, jp1 = (x0 + nsub + 1) / 2;
    const vf sc = vbcast(static_cast<float>(kPCode)), zero = vzero();
    for (size_t jp = jp0; jp < jp1; ++jp) {
        const long long ra = static_cast<long long>(2 * jp) - static_cast<long long>(x0);
        const size_t rb = 2 * jp + 1 - x0;
        for (size_t n = 0; n < kNV; ++n) {
            const vf a = ra >= 0 ? vload(st + static_cast<size_t>(ra) * R + n * kL) : zero;
            const vf b = rb < nsub ? vload(st + rb * R + n * kL) : zero;
            if (vany(vne(a, a)) || vany(vne(b, b))) return 0;
            vi_store(pq + (jp - jp0) * R + n * kL,
                     vi_pack_lohi(vi_from_f(a * sc), vi_from_f(b * sc)));
        }
    }
    return jp1 - jp0;
}

// ot[k][R] += (sum over the np key pairs of pq . vq in int32) * svs[k] for C channels from c0
// (the integer P.V micro-kernel; vq and svs start at the block's first pair and channel c0, a
// channel's pairs kPairs apart).
template <size_t C>
static inline void pv8_block(const int32_t *vq, const int32_t *pq, size_t np, const float *svs,
                             float *ot) {
    constexpr size_t R = kL * kNV;
    vi acc[C][kNV];
    for (size_t k = 0; k < C; ++k)
        for (size_t n = 0; n < kNV; ++n) acc[k][n] = vi_zero();
    for (size_t j = 0; j < np; ++j) {
        vi pv[kNV];
        for (size_t n = 0; n < kNV; ++n) pv[n] = vi_load(pq + j * R + n * kL);
        for (size_t k = 0; k < C; ++k) {
            const vi vb = vi_bcast(vq[k * kPairs + j]);
            for (size_t n = 0; n < kNV; ++n) acc[k][n] = vi_madd(acc[k][n], pv[n], vb);
        }
    }
    for (size_t k = 0; k < C; ++k) {
        const vf s = vbcast(svs[k]);
        for (size_t n = 0; n < kNV; ++n) {
            float *o = ot + k * R + n * kL;
            vstore(o, vfma(vi_to_f(acc[k][n]), s, vload(o)));
        }
    }
}

// The block's P.V of the tile in integers: pq holds np pairs from key pair jp0.
static inline void pv8_tile(const int32_t *vq, size_t dv, size_t jp0, const int32_t *pq, size_t np,
                            const float *svs, float *ot) {
    constexpr size_t R = kL * kNV;
    const int32_t *v0 = vq + jp0;
    size_t c = 0;
    for (; c + kPI <= dv; c += kPI) pv8_block<kPI>(v0 + c * kPairs, pq, np, svs + c, ot + c * R);
    for (; c < dv; ++c) pv8_block<1>(v0 + c * kPairs, pq, np, svs + c, ot + c * R);
}
