// Backward side of the kernel body: dQ, dK, dV (and dBias, the per-head sink terms) of one
// (batch entry, KV head), FlashAttention-2's algorithm without the n x n matrix: the
// probabilities are recomputed key block by key block from Q, K and the forward's LSE, and
// D_i = dO_i . O_i. Included by kernel_body.hpp inside the ISA namespace, after kernel_forward.hpp.
//
// For query i and visible key j, with s the final logit and P_ij = exp(s_ij - lse_i):
//   dV_j += P_ij dO_i,  dS_ij = P_ij (dO_i . V_j - D_i)
//   back through the pipeline: the bias gets dS (or, with BIAS_FIRST, the softcap's input
//   gradient), the softcap multiplies by 1 - tanh^2, ALiBi is a constant; then with
//   x = scale * q_i . k_j:  dQ_i += scale dx_ij K_j,  dK_j += scale dx_ij Q_i.
//   A sink adds nothing to O; its logit's gradient is -p_sink D_i (collected per head).
// One call handles every query head of the KV head and every key, in a fixed order (key blocks
// ascending, then heads, queries and keys ascending): each dQ, dK and dV element is written by
// one task in one order, so the gradients are bit-identical for any thread count.

static inline float bwd_exp(float x) {
    return lane0(vexp(vbcast(x)));
}

constexpr size_t kBwdRows = 8; // query rows per step: 8 independent FMA chains per key vector

// Scratch carving of backward_item (every block 64-byte aligned); returns the bytes used.
struct BwdScratch {
    float *D, *kt, *vt, *dkb, *dvb, *zrow, *pb, *xb, *mk, *tmp;
    const float **krow;
};
static size_t backward_layout(const Params &p, unsigned char *base, BwdScratch *s) {
    const size_t group = p.shape.heads_q / p.shape.heads_kv;
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v;
    size_t off = 0;
    auto take = [&](size_t bytes) {
        unsigned char *ptr = base ? base + off : nullptr;
        off += kround_up(bytes, 64);
        return ptr;
    };
    auto fl = [&](size_t n) { return reinterpret_cast<float *>(take(sizeof(float) * n)); };
    BwdScratch x;
    x.D = fl(group * p.shape.seq_q); // [group][nq] dO . O, NaN = no gradient
    x.kt = fl(d * kL);               // [d][kL]  K of the block, transposed
    x.vt = fl(dv * kL);              // [dv][kL] V of the block, transposed
    x.dkb = fl(kL * d);              // [kL][d]  the block's dK rows
    x.dvb = fl(kL * dv);             // [kL][dv] the block's dV rows
    x.zrow = fl(d + dv);             // zeros
    x.pb = fl(kBwdRows * kL);        // [kBwdRows][kL] P of each row
    x.xb = fl(kBwdRows * kL);        // [kBwdRows][kL] d(q.k) of each row
    x.mk = fl(kBwdRows * kL);        // [kBwdRows][kL] visibility (1 / 0)
    x.tmp = fl(kL);                  // bias / dbias staging
    x.krow = reinterpret_cast<const float **>(take(sizeof(const float *) * kL));
    if (s) *s = x;
    return off;
}

static size_t backward_scratch(const Params &p) {
    return backward_layout(p, nullptr, nullptr);
}

// dsink[g] (may be null): the sink-logit gradient of query head kvh * group + g summed over
// this batch entry's rows.
//
// Keys go in blocks of kL (one vector: every per-key quantity is a vector across the block's
// keys); each block's K and V are transposed once into kt / vt and reused by all rows. Rows go
// kBwdRows at a time: scores and dO.V^T of 8 rows are 8 independent FMA chains.
static void backward_item(const Params &p, const Tensors &t, size_t b, size_t kvh, void *scratch,
                          float *dsink) {
    const Shape &s = p.shape;
    const size_t group = s.heads_q / s.heads_kv, d = s.head_dim, dv = s.head_dim_v;
    const size_t nq = query_len(p, t, b), klen = key_len(p, t, b);
    const long long off = diag_offset(p, t, b);
    BwdScratch sc;
    backward_layout(p, static_cast<unsigned char *>(scratch), &sc);
    float *const D = sc.D, *const kt = sc.kt, *const vt = sc.vt, *const dkb = sc.dkb;
    float *const dvb = sc.dvb, *const zrow = sc.zrow, *const pb = sc.pb, *const xb = sc.xb;
    float *const mk = sc.mk, *const tmp = sc.tmp;
    const float **krow = sc.krow;
    const float kNaNf = __builtin_nanf("");
    const float scale = p.scale, cap = p.softcap;
    zero_floats(zrow, d + dv);

    for (size_t g = 0; g < group; ++g) {
        const size_t h = kvh * group + g;
        float sink = 0.0f;
        const bool has_sink = sink_of(p, t, h, &sink);
        if (dsink) dsink[g] = 0.0f;
        for (size_t i = 0; i < nq; ++i) {
            if (t.dq) zero_floats(t.dq + q_index(p, t, b, h, i), d);
            const bool real = !t.query_valid || t.query_valid[b * s.seq_q + i];
            const float lse = t.lse[lse_index(p, t, b, h, i)];
            if (!real || lse == kNegInf) {
                D[g * nq + i] = kNaNf;
                continue;
            }
            // D in the same arithmetic as a lane of the dO.V^T below, so that a row with one
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
    const vf zero = vzero(), one = vbcast(1.0f), ninf = vbcast(kNegInf);
    float lane[kL];
    for (size_t x = 0; x < kL; ++x) lane[x] = static_cast<float>(x);
    const vf lanes = vload(lane);
    // Keys past this entry's length are padding: their gradient rows are 0 (dense layouts).
    const size_t kend = t.cu_k ? klen : s.seq_k;
    for (size_t j0 = 0; j0 < kend; j0 += kL) {
        const size_t nk = kmin(kL, kend - j0);
        // The block's readable keys (not padding); the others read as zero rows.
        bool any_key = false;
        float readable[kL];
        for (size_t x = 0; x < kL; ++x) {
            const size_t j = j0 + x;
            const bool ok = x < nk && j < klen && (!kvalid || kvalid[j]);
            readable[x] = ok ? 1.0f : 0.0f;
            any_key |= ok;
            krow[x] = ok ? kr.at(j) : zrow;
            const float *vrow = ok ? vr.at(j) : zrow;
            for (size_t dd = 0; dd < d; ++dd) kt[dd * kL + x] = krow[x][dd];
            for (size_t dd = 0; dd < dv; ++dd) vt[dd * kL + x] = vrow[dd];
        }
        zero_floats(dkb, kL * d);
        zero_floats(dvb, kL * dv);
        const vf rv = vload(readable);
        for (size_t g = 0; g < group && any_key; ++g) {
            const size_t h = kvh * group + g;
            const vf slope = vbcast(t.alibi ? t.alibi[h] : 0.0f);
            for (size_t i0 = 0; i0 < nq; i0 += kBwdRows) {
                const size_t nr = kmin(kBwdRows, nq - i0);
                const float *qr[kBwdRows], *dor[kBwdRows];
                long long lo[kBwdRows], hi[kBwdRows];
                bool any_row = false;
                for (size_t r = 0; r < kBwdRows; ++r) {
                    const size_t i = i0 + r;
                    bool live = r < nr && D[g * nq + i] == D[g * nq + i];
                    if (live) {
                        const long long diag = static_cast<long long>(i) + off;
                        lo[r] = static_cast<long long>(j0);
                        hi[r] = static_cast<long long>(j0 + nk);
                        clip_to_visible(p, diag, &lo[r], &hi[r]);
                        live = lo[r] < hi[r];
                    }
                    qr[r] = live ? t.q + q_index(p, t, b, h, i) : zrow;
                    dor[r] = live ? t.dout + out_index(p, t, b, h, i) : zrow;
                    if (!live) lo[r] = hi[r] = 0;
                    any_row |= live;
                }
                if (!any_row) continue;
                // scores and dO.V^T of every row, a vector across the block's keys
                vf sacc[kBwdRows], pacc[kBwdRows];
                for (size_t r = 0; r < kBwdRows; ++r) sacc[r] = pacc[r] = zero;
                // the scale enters as in the forward (folded into q when |scale| <= 1), so the
                // recomputed logits round like the forward's and P = exp(s - lse) matches it
                const float qs = fold_scale(p) ? scale : 1.0f;
                for (size_t dd = 0; dd < d; ++dd) {
                    const vf kv = vload(kt + dd * kL);
                    for (size_t r = 0; r < kBwdRows; ++r)
                        sacc[r] = vfma(vbcast(qr[r][dd] * qs), kv, sacc[r]);
                }
                for (size_t dd = 0; dd < dv; ++dd) {
                    const vf vv = vload(vt + dd * kL);
                    for (size_t r = 0; r < kBwdRows; ++r)
                        pacc[r] = vfma(vbcast(dor[r][dd]), vv, pacc[r]);
                }
                for (size_t r = 0; r < kBwdRows; ++r) {
                    float *m = mk + r * kL;
                    if (lo[r] >= hi[r]) {
                        zero_floats(m, kL);
                        zero_floats(pb + r * kL, kL);
                        zero_floats(xb + r * kL, kL);
                        continue;
                    }
                    const size_t i = i0 + r;
                    // visible: readable, lo <= j < hi (lane positions relative to j0: exact in
                    // float), allowed
                    const float lo_rel = static_cast<float>(lo[r] - static_cast<long long>(j0));
                    const float hi_rel = static_cast<float>(hi[r] - static_cast<long long>(j0));
                    vm vis = vand(vne(rv, zero), vand(vlt(vbcast(lo_rel - 0.5f), lanes),
                                                      vlt(lanes, vbcast(hi_rel))));
                    if (t.allowed) {
                        const uint8_t *al = t.allowed + i * s.seq_k + j0;
                        for (size_t x = 0; x < kL; ++x) m[x] = x < nk && al[x] ? 1.0f : 0.0f;
                        vis = vand(vis, vne(vload(m), zero));
                    }
                    const long long diag = static_cast<long long>(i) + off;
                    const vf x = fold_scale(p) ? sacc[r] : sacc[r] * vbcast(scale);
                    vf logit = x, th = zero;
                    if (cap > 0.0f && !p.bias_first) {
                        th = vtanh(x * vbcast(1.0f / cap));
                        logit = vbcast(cap) * th;
                    }
                    const float *brow =
                        t.bias ? t.bias + b * p.bias.batch + h * p.bias.head + i * p.bias.row + j0
                               : nullptr;
                    if (brow) {
                        for (size_t e = 0; e < kL; ++e) tmp[e] = e < nk ? brow[e] : 0.0f;
                        const vf bv = vload(tmp);
                        vis = vand(vis, vne(bv, ninf)); // a -inf bias hides the key
                        logit = logit + vsel(vis, bv, zero);
                    }
                    if (cap > 0.0f && p.bias_first) {
                        th = vtanh(logit * vbcast(1.0f / cap));
                        logit = vbcast(cap) * th;
                    }
                    if (t.alibi)
                        logit = vfma(
                            slope,
                            lanes + vbcast(static_cast<float>(static_cast<long long>(j0) - diag)),
                            logit);
                    const float lse = t.lse[lse_index(p, t, b, h, i)];
                    const vf pr = vsel(vis, vexp(logit - vbcast(lse)), zero);
                    const vf ds = pr * (pacc[r] - vbcast(D[g * nq + i]));
                    const vf dcap = cap > 0.0f ? ds * (one - th * th) : ds;
                    vstore(pb + r * kL, pr);
                    vstore(xb + r * kL, dcap * vbcast(scale));
                    if (t.dbias) {
                        vstore(tmp, vsel(vis, p.bias_first ? dcap : ds, zero));
                        float *dbrow =
                            t.dbias + b * p.bias.batch + h * p.bias.head + i * p.bias.row + j0;
                        for (size_t e = 0; e < nk; ++e) dbrow[e] += tmp[e];
                    }
                }
                // dQ_r += sum_x dx_rx K_x
                if (t.dq)
                    for (size_t r = 0; r < nr; ++r) {
                        if (lo[r] >= hi[r]) continue;
                        float *dq = t.dq + q_index(p, t, b, h, i0 + r);
                        const float *xr = xb + r * kL;
                        size_t dd = 0;
                        for (; dd + 4 * kL <= d; dd += 4 * kL) {
                            vf a0 = vload(dq + dd), a1 = vload(dq + dd + kL),
                               a2 = vload(dq + dd + 2 * kL), a3 = vload(dq + dd + 3 * kL);
                            for (size_t x = 0; x < nk; ++x) {
                                const vf c = vbcast(xr[x]);
                                const float *k = krow[x] + dd;
                                a0 = vfma(c, vload(k), a0);
                                a1 = vfma(c, vload(k + kL), a1);
                                a2 = vfma(c, vload(k + 2 * kL), a2);
                                a3 = vfma(c, vload(k + 3 * kL), a3);
                            }
                            vstore(dq + dd, a0);
                            vstore(dq + dd + kL, a1);
                            vstore(dq + dd + 2 * kL, a2);
                            vstore(dq + dd + 3 * kL, a3);
                        }
                        for (; dd + kL <= d; dd += kL) {
                            vf a0 = vload(dq + dd);
                            for (size_t x = 0; x < nk; ++x)
                                a0 = vfma(vbcast(xr[x]), vload(krow[x] + dd), a0);
                            vstore(dq + dd, a0);
                        }
                        for (; dd < d; ++dd)
                            for (size_t x = 0; x < nk; ++x) dq[dd] += xr[x] * krow[x][dd];
                    }
                // dK_x += sum_r dx_rx Q_r, dV_x += sum_r P_rx dO_r, over the live rows; four
                // head_dim vectors at a time (four independent FMA chains)
                size_t live[kBwdRows], nlive = 0;
                for (size_t r = 0; r < kBwdRows; ++r)
                    if (lo[r] < hi[r]) live[nlive++] = r;
                for (size_t x = 0; x < nk; ++x) {
                    if (readable[x] == 0.0f) continue;
                    for (int which = 0; which < 2; ++which) {
                        if (which == 0 ? !t.dk : !t.dv) continue;
                        const size_t n = which == 0 ? d : dv;
                        float *acc = which == 0 ? dkb + x * d : dvb + x * dv;
                        const float *coef = which == 0 ? xb : pb;
                        const float *const *src = which == 0 ? qr : dor;
                        size_t dd = 0;
                        for (; dd + 4 * kL <= n; dd += 4 * kL) {
                            vf a0 = vload(acc + dd), a1 = vload(acc + dd + kL),
                               a2 = vload(acc + dd + 2 * kL), a3 = vload(acc + dd + 3 * kL);
                            for (size_t l = 0; l < nlive; ++l) {
                                const size_t r = live[l];
                                const vf c = vbcast(coef[r * kL + x]);
                                const float *q = src[r] + dd;
                                a0 = vfma(c, vload(q), a0);
                                a1 = vfma(c, vload(q + kL), a1);
                                a2 = vfma(c, vload(q + 2 * kL), a2);
                                a3 = vfma(c, vload(q + 3 * kL), a3);
                            }
                            vstore(acc + dd, a0);
                            vstore(acc + dd + kL, a1);
                            vstore(acc + dd + 2 * kL, a2);
                            vstore(acc + dd + 3 * kL, a3);
                        }
                        for (; dd + kL <= n; dd += kL) {
                            vf a0 = vload(acc + dd);
                            for (size_t l = 0; l < nlive; ++l)
                                a0 = vfma(vbcast(coef[live[l] * kL + x]), vload(src[live[l]] + dd),
                                          a0);
                            vstore(acc + dd, a0);
                        }
                        for (; dd < n; ++dd)
                            for (size_t l = 0; l < nlive; ++l)
                                acc[dd] += coef[live[l] * kL + x] * src[live[l]][dd];
                    }
                }
            }
        }
        for (size_t x = 0; x < nk; ++x) {
            if (t.dk) {
                float *dst = const_cast<float *>(dkr.at(j0 + x));
                for (size_t e = 0; e < d; ++e) dst[e] = dkb[x * d + e];
            }
            if (t.dv) {
                float *dst = const_cast<float *>(dvr.at(j0 + x));
                for (size_t e = 0; e < dv; ++e) dst[e] = dvb[x * dv + e];
            }
        }
    }
}
