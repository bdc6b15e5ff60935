// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Backward side of the kernel body: dQ, dK, dV (and dBias, the per-head sink terms) of one
// (batch entry, KV head), FlashAttention-2's algorithm without the n x n matrix: the
// probabilities are recomputed key block by key block from Q, K and the forward's LSE, and
// D_i = dO_i . O_i. Included by body-inl.h inside the ISA namespace, after walks-inl.h.
//
// For query i and visible key j, with s the final logit and P_ij = exp(s_ij - lse_i):
//   dV_j += P_ij dO_i,  dS_ij = P_ij (dO_i . V_j - D_i)
//   back through the pipeline: the bias gets dS (or, with BIAS_FIRST, the softcap's input
//   gradient), the softcap multiplies by 1 - tanh^2, ALiBi is a constant; then with
//   x = scale * q_i . k_j:  dQ_i += scale dx_ij K_j,  dK_j += scale dx_ij Q_i.
//   A sink adds nothing to O; its logit's gradient is -p_sink D_i (collected per head).
// One call handles every query head of the KV head and every key, in a fixed order (key blocks
// ascending, then heads and query blocks ascending): each dQ, dK and dV element is written by
// one task in one order, so the gradients are bit-identical for any thread count.
//
// Per (key block, query block) the five products are register-tiled matrix products over
// packed operands (bwd_gemm): S = Q K^T and dP = dO V^T (rows x key vectors), dV += P^T dO and
// dK += dS^T Q (keys x head_dim vectors), dQ += dS K (rows x head_dim vectors). Each output
// tile's accumulators stay in registers over the whole inner dimension.

static inline float bwd_exp(float x) {
    return lane0(vexp(vbcast(x)));
}

// Blocking (measured on the dev machine, avx512, 1 thread, n = 2048, head_dim 64 and 128): a
// key block's K, K^T, V^T, dK and dV (5 x 72 KiB at head_dim 128) stay in L2 while every query
// block of the KV head passes; each pass re-reads the query block's Q, dO and dQ rows, so wider
// key blocks mean fewer passes (32 keys: 3.0x the forward's time, 64: 2.5x, 128: 2.2-2.3x,
// 256: no better). 64 query rows keep P and dS (36 KiB each) near L1.
constexpr size_t kBc = 128;        // keys per block (a multiple of every kL)
constexpr size_t kBV = kBc / kL;   // key vectors per block
constexpr size_t kBr = 64;         // query rows per block
constexpr bool kRegs32 = kL == 16; // AVX-512: 32 vector registers, else 16
// Register tiles (output rows x vectors): S and dP, then dK, dV and dQ.
constexpr size_t kSR = kRegs32 ? 8 : 4, kSC = kRegs32 ? 2 : 3;
constexpr size_t kGR = 4, kGC = kRegs32 ? 4 : 3;
static_assert(kBr % kSR == 0 && kBr % kGR == 0, "whole row tiles in a query block");

// c[o][n] (+)= sum_k a(o, k) b[k][n] for o < R and C vectors n, a(o, k) = a[o * sao + k * sak]
// (the accumulators start from c when Acc, else from 0). Every element is one FMA chain over
// k ascending.
template <size_t R, size_t C, bool Acc>
static inline void bwd_tile(const float *a, size_t sao, size_t sak, const float *b, size_t ldb,
                            size_t kdim, float *c, size_t ldc) {
    vf acc[R][C];
    for (size_t o = 0; o < R; ++o)
        for (size_t n = 0; n < C; ++n) acc[o][n] = Acc ? vload(c + o * ldc + n * kL) : vzero();
    for (size_t k = 0; k < kdim; ++k) {
        vf bv[C];
        for (size_t n = 0; n < C; ++n) bv[n] = vload(b + k * ldb + n * kL);
        for (size_t o = 0; o < R; ++o) {
            const vf x = vbcast(a[o * sao + k * sak]);
            for (size_t n = 0; n < C; ++n) acc[o][n] = vfma(x, bv[n], acc[o][n]);
        }
    }
    for (size_t o = 0; o < R; ++o)
        for (size_t n = 0; n < C; ++n) vstore(c + o * ldc + n * kL, acc[o][n]);
}

// bwd_tile over output rows [o0, o1) and nv vectors: vector columns outer, so one column strip
// of b stays in L1 while the row tiles pass over it; the last rows (fewer than R) take tiles of
// 2 and 1 rows, a last strip narrower than C the next narrower tile.
template <size_t R, size_t C, bool Acc>
static void bwd_gemm(const float *a, size_t sao, size_t sak, const float *b, size_t ldb,
                     size_t kdim, float *c, size_t ldc, size_t o0, size_t o1, size_t nv) {
    size_t n = 0;
    for (; n + C <= nv; n += C) {
        size_t o = o0;
        for (; o + R <= o1; o += R)
            bwd_tile<R, C, Acc>(a + o * sao, sao, sak, b + n * kL, ldb, kdim, c + o * ldc + n * kL,
                                ldc);
        for (; o + 2 <= o1; o += 2)
            bwd_tile<2, C, Acc>(a + o * sao, sao, sak, b + n * kL, ldb, kdim, c + o * ldc + n * kL,
                                ldc);
        if (o < o1)
            bwd_tile<1, C, Acc>(a + o * sao, sao, sak, b + n * kL, ldb, kdim, c + o * ldc + n * kL,
                                ldc);
    }
    if constexpr (C > 1)
        if (n < nv)
            bwd_gemm<R, C - 1, Acc>(a, sao, sak, b + n * kL, ldb, kdim, c + n * kL, ldc, o0, o1,
                                    nv - n);
}

// Leading dimensions (floats) of the packed blocks: rows of head_dim (lq) and head_dim_v (lv)
// values rounded up to whole vectors, rows of kBc keys (lk), each one vector longer than that, so
// that consecutive rows are not a multiple of 512 bytes apart (which would crowd a tile's rows
// into a few L1 sets).
static inline void bwd_lds(const Params &p, size_t *lq, size_t *lv, size_t *lk) {
    *lq = kround_up(p.shape.head_dim, kL) + kL;
    *lv = kround_up(p.shape.head_dim_v, kL) + kL;
    *lk = kBc + kL;
}

// Scratch carving of backward_item (every block 64-byte aligned); returns the bytes used.
struct BwdScratch {
    float *D, *qb, *dob, *dqb, *kb, *kt, *vt, *dkb, *dvb, *pb, *dsb, *tmp;
    unsigned char *live, *dobad;
};
static size_t backward_layout(const Params &p, unsigned char *base, BwdScratch *s) {
    const size_t group = p.shape.heads_q / p.shape.heads_kv;
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v;
    size_t lq, lv, lk;
    bwd_lds(p, &lq, &lv, &lk);
    size_t off = 0;
    auto take = [&](size_t bytes) {
        unsigned char *ptr = base ? base + off : nullptr;
        off += kround_up(bytes, 64);
        return ptr;
    };
    auto fl = [&](size_t n) { return reinterpret_cast<float *>(take(sizeof(float) * n)); };
    BwdScratch x;
    x.D = fl(group * p.shape.seq_q);      // [group][nq] dO . O (NaN where dO or O holds NaN)
    x.qb = fl(kBr * lq);                  // [kBr][lq]  the query block's rows (scale folded or not)
    x.dob = fl(kBr * lv);                 // [kBr][lv]  its dO rows
    x.dqb = fl(kBr * lq);                 // [kBr][lq]  its dQ rows (accumulated over key blocks)
    x.kb = fl(kBc * lq);                  // [kBc][lq]  K of the key block
    x.kt = fl(d * lk);                    // [d][lk]    K of the key block, transposed
    x.vt = fl(dv * lk);                   // [dv][lk]   V of the key block, transposed
    x.dkb = fl(kBc * lq);                 // [kBc][lq]  the block's dK rows
    x.dvb = fl(kBc * lv);                 // [kBc][lv]  the block's dV rows
    x.pb = fl(kBr * lk);                  // [kBr][lk]  S, then P
    x.dsb = fl(kBr * lk);                 // [kBr][lk]  dP, then d(logit) / scale
    x.tmp = fl(kBc);                      // allowed / bias / dbias staging
    x.live = take(group * p.shape.seq_q); // [group][nq] 1: the row has a gradient (a real query
                                          // with a visible key), 0: its gradients are 0
    x.dobad = take(kBr);                  // [kBr] 1: the block row's dO holds Inf or NaN
    if (s) *s = x;
    return off;
}

static size_t backward_scratch(const Params &p) {
    return backward_layout(p, nullptr, nullptr);
}

// dsink[g] (may be null): the sink-logit gradient of query head kvh * group + g summed over
// this batch entry's rows.
static void backward_item(const Params &p, const Tensors &t, size_t b, size_t kvh, size_t k0,
                          size_t k1, float *dq_part, void *scratch, float *dsink) {
    const Shape &s = p.shape;
    const size_t group = s.heads_q / s.heads_kv, d = s.head_dim, dv = s.head_dim_v;
    const size_t dp = kround_up(d, kL), dvp = kround_up(dv, kL);
    size_t lq, lv, lk;
    bwd_lds(p, &lq, &lv, &lk);
    const size_t nq = query_len(p, t, b), klen = key_len(p, t, b);
    const Diags dg = diag_offsets(p, t, b);
    const long long off = dg.window; // diag(i) = i + off, the diagonal of the window and ALiBi
    // dQ row of query i of the group's head g: in t.dq, or in the caller's partial buffer
    auto dq_row = [&](size_t g, size_t i) {
        return dq_part ? dq_part + (g * s.seq_q + i) * d
                       : t.dq + q_index(p, t, b, kvh * group + g, i);
    };
    const bool want_dq = t.dq != nullptr;
    BwdScratch sc;
    backward_layout(p, static_cast<unsigned char *>(scratch), &sc);
    float *const D = sc.D, *const qb = sc.qb, *const dob = sc.dob, *const dqb = sc.dqb;
    float *const kb = sc.kb, *const kt = sc.kt, *const vt = sc.vt, *const dkb = sc.dkb;
    float *const dvb = sc.dvb, *const pb = sc.pb, *const dsb = sc.dsb, *const tmp = sc.tmp;
    unsigned char *const live = sc.live, *const dobad = sc.dobad;
    const float scale = p.scale, cap = p.softcap;
    const CapDiv cap_of = cap_div(cap > 0.0f ? cap : 1.0f); // s / cap as the forward takes it
    // the scale enters as in the forward (folded into q when |scale| <= 1), so the recomputed
    // logits round like the forward's and P = exp(s - lse) matches it; dS is kept without the
    // scale: dK = (scale / qs) dS^T (qs Q), dQ = scale (dS K), applied when the rows are final
    const float qs = fold_scale(p) ? scale : 1.0f;
    const float kfac = fold_scale(p) ? 1.0f : scale;
    // no variant touches the logits: fully visible rows of a block take the short path
    const bool plain = !t.allowed && !t.bias && !(cap > 0.0f) && !t.alibi;
    // the logit before softcap, bias and ALiBi from the recomputed q.k (scaled in q or here)
    auto scaled = [&](const vf &sx) { return fold_scale(p) ? sx : sx * vbcast(scale); };

    for (size_t g = 0; g < group; ++g) {
        const size_t h = kvh * group + g;
        float sink = 0.0f;
        const bool has_sink = sink_of(p, t, h, &sink);
        if (dsink) dsink[g] = 0.0f;
        for (size_t i = 0; i < nq; ++i) {
            if (want_dq) zero_floats(dq_row(g, i), d);
            const bool real = !t.query_valid || t.query_valid[b * s.seq_q + i];
            const float lse = t.lse[lse_index(p, t, b, h, i)];
            live[g * nq + i] = real && lse != kNegInf;
            if (!live[g * nq + i]) {
                D[g * nq + i] = 0.0f;
                continue;
            }
            // D in the same arithmetic as a lane of dO.V^T (bwd_tile), so that a row with one
            // visible key (O = V) gets dS = P (dP - D) = 0 exactly
            const float *dO = t.dout + out_index(p, t, b, h, i);
            const float *o = t.out + out_index(p, t, b, h, i);
            vf acc = vzero();
            for (size_t dd = 0; dd < dv; ++dd) acc = vfma(vbcast(dO[dd]), vbcast(o[dd]), acc);
            const float di = lane0(acc);
            D[g * nq + i] = di;
            if (dsink && has_sink) dsink[g] -= bwd_exp(sink - lse) * di;
        }
    }

    const KvRows kr = kv_rows(p, t, false, b, kvh), vr = kv_rows(p, t, true, b, kvh);
    Tensors tg = t; // the gradients have the layouts of K and V
    tg.k = t.dk;
    tg.v = t.dv;
    const KvRows dkr = t.dk ? kv_rows(p, tg, false, b, kvh) : KvRows{};
    const KvRows dvr = t.dv ? kv_rows(p, tg, true, b, kvh) : KvRows{};
    const uint8_t *kvalid = t.key_valid ? t.key_valid + b * s.seq_k : nullptr;
    const vf zero = vzero(), one = vbcast(1.0f), ninf = vbcast(kNegInf), nzero = vbcast(-0.0f);
    float lane[kL];
    for (size_t x = 0; x < kL; ++x) lane[x] = static_cast<float>(x);
    const vf lanes = vload(lane);
    // Keys past this entry's length are padding: their gradient rows are 0 (dense layouts).
    const size_t kend = kmin(t.cu_k ? klen : s.seq_k, k1);
    for (size_t j0 = k0; j0 < kend; j0 += kBc) {
        const size_t nk = kmin(kBc, kend - j0);
        // The block's readable keys (not padding); the others read as zero rows.
        size_t nread = 0;
        float readable[kBc];
        for (size_t x = 0; x < kBc; ++x) {
            const size_t j = j0 + x;
            const bool ok = x < nk && j < klen && (!kvalid || kvalid[j]);
            readable[x] = ok ? 1.0f : 0.0f;
            nread += ok;
            float *krow = kb + x * lq;
            if (ok) {
                const float *src = kr.at(j), *vrow = vr.at(j);
                for (size_t dd = 0; dd < d; ++dd) krow[dd] = kt[dd * lk + x] = src[dd];
                for (size_t dd = 0; dd < dv; ++dd) vt[dd * lk + x] = vrow[dd];
            } else {
                for (size_t dd = 0; dd < d; ++dd) krow[dd] = kt[dd * lk + x] = 0.0f;
                for (size_t dd = 0; dd < dv; ++dd) vt[dd * lk + x] = 0.0f;
            }
            for (size_t dd = d; dd < dp; ++dd) krow[dd] = 0.0f;
        }
        zero_floats(dkb, kBc * lq);
        zero_floats(dvb, kBc * lv);
        for (size_t g = 0; g < group && nread; ++g) {
            const size_t h = kvh * group + g;
            const vf slope = vbcast(t.alibi ? alibi_slope(p, t, b, h) : 0.0f);
            for (size_t i0 = 0; i0 < nq; i0 += kBr) {
                const size_t nr = kmin(kBr, nq - i0);
                long long lo[kBr], hi[kBr];
                size_t ra = kBr, rb = 0;
                long long kl = kFar, kh = -kFar; // keys some row of the block sees
                for (size_t r = 0; r < nr; ++r) {
                    const size_t i = i0 + r;
                    lo[r] = hi[r] = 0;
                    if (!live[g * nq + i]) continue;
                    long long l = static_cast<long long>(j0), u = static_cast<long long>(j0 + nk);
                    clip_to_visible(p, static_cast<long long>(i), dg, &l, &u);
                    if (l >= u) continue;
                    lo[r] = l;
                    hi[r] = u;
                    kl = lmin(kl, l);
                    kh = lmax(kh, u);
                    if (ra == kBr) ra = r;
                    rb = r + 1;
                }
                if (ra >= rb) continue;
                ra -= ra % kSR;
                rb = kround_up(rb, kSR);
                // whole key vectors [xa, xb) of the block hold every key a row sees (the causal
                // diagonal and a sliding window leave the others out of all five products)
                const size_t xa = static_cast<size_t>(kl - static_cast<long long>(j0)) / kL * kL;
                const size_t xb =
                    kround_up(static_cast<size_t>(kh - static_cast<long long>(j0)), kL);
                const size_t va = xa / kL, vb = xb / kL;
                // the block's rows [ra, rb), rows that see nothing as zeros
                bool any_bad = false;
                for (size_t r = ra; r < rb; ++r) {
                    float *qd = qb + r * lq, *od = dob + r * lv, *gd = dqb + r * lq;
                    dobad[r] = 0;
                    if (r < nr && lo[r] < hi[r]) {
                        const size_t qi = q_index(p, t, b, h, i0 + r);
                        const float *dO = t.dout + out_index(p, t, b, h, i0 + r);
                        float fin = 0.0f; // 0 unless some dO is Inf or NaN (x * 0 is NaN then)
                        for (size_t dd = 0; dd < d; ++dd) qd[dd] = q_in(p, t, qi + dd, h) * qs;
                        for (size_t dd = 0; dd < dv; ++dd) {
                            od[dd] = dO[dd];
                            fin += dO[dd] * 0.0f;
                        }
                        dobad[r] = fin != 0.0f;
                        any_bad |= fin != 0.0f;
                        if (want_dq) {
                            const float *dq = dq_row(g, i0 + r);
                            for (size_t dd = 0; dd < d; ++dd) gd[dd] = dq[dd];
                        }
                    } else {
                        zero_floats(qd, d);
                        zero_floats(od, dv);
                        zero_floats(gd, d);
                    }
                    for (size_t dd = d; dd < dp; ++dd) qd[dd] = gd[dd] = 0.0f;
                    for (size_t dd = dv; dd < dvp; ++dd) od[dd] = 0.0f;
                }
                // S = (qs Q) K^T and dP = dO V^T of the rows
                bwd_gemm<kSR, kSC, false>(qb, lq, 1, kt + xa, lk, d, pb + xa, lk, ra, rb, vb - va);
                bwd_gemm<kSR, kSC, false>(dob, lv, 1, vt + xa, lk, dv, dsb + xa, lk, ra, rb,
                                          vb - va);
                for (size_t r = ra; r < rb; ++r) {
                    float *pr = pb + r * lk, *dr = dsb + r * lk;
                    if (r >= nr || lo[r] >= hi[r]) {
                        zero_floats(pr + xa, xb - xa);
                        zero_floats(dr + xa, xb - xa);
                        continue;
                    }
                    const size_t i = i0 + r;
                    const long long diag = static_cast<long long>(i) + off;
                    const float lse = t.lse[lse_index(p, t, b, h, i)];
                    const vf vlse = vbcast(lse), vd = vbcast(D[g * nq + i]);
                    if (plain && nread == kBc && lo[r] <= static_cast<long long>(j0 + xa) &&
                        hi[r] >= static_cast<long long>(j0 + xb)) {
                        // every key of [xa, xb) visible, no variant: P and dS only
                        for (size_t x0 = xa; x0 < xb; x0 += kL) {
                            const vf pv = vexp(scaled(vload(pr + x0)) - vlse);
                            vstore(pr + x0, pv);
                            vstore(dr + x0, pv * (vload(dr + x0) - vd));
                        }
                        continue;
                    }
                    const uint8_t *al = t.allowed ? t.allowed + i * s.seq_k + j0 : nullptr;
                    const float *brow =
                        t.bias ? t.bias + b * p.bias.batch + h * p.bias.head + i * p.bias.row + j0
                               : nullptr;
                    float *dbrow =
                        t.dbias ? t.dbias + b * p.bias.batch + h * p.bias.head + i * p.bias.row + j0
                                : nullptr;
                    // visible: readable, lo <= j < hi (lane positions relative to j0: exact in
                    // float), allowed
                    const vf vlo = vbcast(static_cast<float>(lo[r] - static_cast<long long>(j0)) -
                                          0.5f),
                             vhi = vbcast(static_cast<float>(hi[r] - static_cast<long long>(j0)));
                    for (size_t c = va; c < vb; ++c) {
                        const size_t x0 = c * kL;
                        const vf pos = lanes + vbcast(static_cast<float>(x0));
                        vm vis = vand(vne(vload(readable + x0), zero),
                                      vand(vlt(vlo, pos), vlt(pos, vhi)));
                        if (al) {
                            for (size_t x = 0; x < kL; ++x)
                                tmp[x] = x0 + x < nk && al[x0 + x] ? 1.0f : 0.0f;
                            vis = vand(vis, vne(vload(tmp), zero));
                        }
                        const vf x = scaled(vload(pr + x0));
                        vf logit = x, th = zero;
                        if (cap > 0.0f && !p.bias_first) {
                            th = vtanh(cap_of(x));
                            logit = vbcast(cap) * th;
                        }
                        if (brow) {
                            for (size_t e = 0; e < kL; ++e)
                                tmp[e] = x0 + e < nk ? brow[x0 + e] : 0.0f;
                            const vf bv = vload(tmp);
                            vis = vand(vis, vne(bv, ninf)); // a -inf bias hides the key
                            logit = logit + vsel(vis, bv, zero);
                        }
                        if (cap > 0.0f && p.bias_first) {
                            th = vtanh(cap_of(logit));
                            logit = vbcast(cap) * th;
                        }
                        if (t.alibi) {
                            // s += -slope (diag - j), or -slope |diag - j| (symmetric)
                            const vf rel =
                                pos + vbcast(static_cast<float>(static_cast<long long>(j0) - diag));
                            logit =
                                vfma(slope, p.alibi_symmetric ? zero - vmax(rel, zero - rel) : rel,
                                     logit);
                        }
                        // a hidden key's P is -0 (the exact dV of a row whose dO is not finite
                        // tells it from a visible key's P that underflowed to +0; in the
                        // products it is 0); its dS is 0 even when its score was +-inf or NaN
                        const vf pv = vsel(vis, vexp(logit - vlse), nzero);
                        const vf ds = vsel(vis, pv * (vload(dr + x0) - vd), zero);
                        const vf dcap = cap > 0.0f ? vsel(vis, ds * (one - th * th), zero) : ds;
                        vstore(pr + x0, pv);
                        vstore(dr + x0, dcap);
                        if (dbrow) {
                            vstore(tmp, p.bias_first ? dcap : ds);
                            for (size_t e = 0; e < kL && x0 + e < nk; ++e) dbrow[x0 + e] += tmp[e];
                        }
                    }
                }
                // dV += P^T dO and dK += dS^T (qs Q) over the rows; dQ += dS K
                if (t.dv && any_bad) {
                    // rows whose dO holds Inf or NaN add P_ij dO_i to the keys they see only
                    // (a hidden key's P of 0 times NaN must not reach its dV): their dO rows
                    // leave the product and are added key by key afterwards
                    for (size_t r = ra; r < rb; ++r)
                        if (dobad[r]) zero_floats(dob + r * lv, dv);
                    bwd_gemm<kGR, kGC, true>(pb + ra * lk, 1, lk, dob + ra * lv, lv, rb - ra, dvb,
                                             lv, xa, xb, dvp / kL);
                    for (size_t r = ra; r < rb; ++r) {
                        if (!dobad[r]) continue;
                        const float *dO = t.dout + out_index(p, t, b, h, i0 + r);
                        const float *pr = pb + r * lk;
                        for (size_t x = xa; x < xb; ++x) {
                            if (pr[x] == 0.0f && __builtin_signbit(pr[x])) continue; // hidden
                            for (size_t dd = 0; dd < dv; ++dd) dvb[x * lv + dd] += pr[x] * dO[dd];
                        }
                    }
                } else if (t.dv) {
                    bwd_gemm<kGR, kGC, true>(pb + ra * lk, 1, lk, dob + ra * lv, lv, rb - ra, dvb,
                                             lv, xa, xb, dvp / kL);
                }
                if (t.dk)
                    bwd_gemm<kGR, kGC, true>(dsb + ra * lk, 1, lk, qb + ra * lq, lq, rb - ra, dkb,
                                             lq, xa, xb, dp / kL);
                if (want_dq) {
                    bwd_gemm<kGR, kGC, true>(dsb + xa, lk, 1, kb + xa * lq, lq, xb - xa, dqb, lq,
                                             ra, rb, dp / kL);
                    for (size_t r = ra; r < rb && r < nr; ++r) {
                        if (lo[r] >= hi[r]) continue;
                        float *dq = dq_row(g, i0 + r);
                        const float *gd = dqb + r * lq;
                        for (size_t dd = 0; dd < d; ++dd) dq[dd] = gd[dd];
                    }
                }
            }
        }
        for (size_t x = 0; x < nk; ++x) {
            if (t.dk) {
                float *dst = const_cast<float *>(dkr.at(j0 + x));
                // + 0: a key no row sees gets +0 even when the scale is negative
                for (size_t e = 0; e < d; ++e) dst[e] = dkb[x * lq + e] * kfac + 0.0f;
            }
            if (t.dv) {
                float *dst = const_cast<float *>(dvr.at(j0 + x));
                for (size_t e = 0; e < dv; ++e) dst[e] = dvb[x * lv + e];
            }
        }
    }
    if (want_dq)
        for (size_t g = 0; g < group; ++g)
            for (size_t i = 0; i < nq; ++i) {
                if (!live[g * nq + i]) continue;
                float *dq = dq_row(g, i);
                // the gradient of the bound Q: ATTN_Q_SCALE multiplied it on the way in
                const float f = t.q_scale ? t.q_scale[kvh * group + g] : 1.0f;
                for (size_t dd = 0; dd < d; ++dd) dq[dd] = dq[dd] * scale * f + 0.0f;
            }
}
