// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Weights side of the kernel body: the weight matrix (or a stage of the scores) and the per-key
// attention mass. Included by body-inl.h inside the ISA namespace, after walks-inl.h.

// Per lane: msafe = the max the probabilities are taken against, inv = 1 / their denominator
// (sink included), 0 for rows with no visible key.
static inline void softmax_norm(const Params &p, const Tensors &t, const Block &b, vf *msafe,
                                vf *inv) {
    const vf ninf = vbcast(kNegInf), zero = vzero(), one = vbcast(1.0f);
    float sk[kR];
    bool has_sink = false;
    for (size_t x = 0; x < kR; ++x) has_sink = sink_of(p, t, b.r.h[x], &sk[x]);
    for (size_t n = 0; n < kNV; ++n) {
        const vf m = vload(b.m + n * kL), l = vload(b.l + n * kL);
        const vm vis = vne(vload(b.vis + n * kL), zero);
        if (!has_sink) {
            msafe[n] = vsel(veq(m, ninf), zero, m);
            inv[n] = vsel(vis, one / l, zero);
            continue;
        }
        const vf sv = vload(sk + n * kL);
        const vf M = vmax(m, sv);
        const vf L = vfma(l, vexp(m - M), vexp(sv - M));
        msafe[n] = vsel(veq(M, ninf), zero, M);
        inv[n] = vsel(vis, one / L, zero);
    }
}

// weights rows of the item: pass 1 finds m and l per row, pass 2 writes exp(s - m) / l. The
// score modes write the scores of one stage instead (one pass; unvisited entries -inf).
static void weights_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch) {
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    Block blk[kM];
    const size_t nb = item_blocks(p, t, w, s, blk);
    const size_t d = p.shape.head_dim, sk = p.shape.seq_k;
    const WeightsMode mode = p.weights_mode;
    const bool probs = mode == WeightsMode::Softmax;
    zero_floats(s.zero, d);
    for (size_t bi = 0; bi < nb; ++bi) pack_queries(p, t, w, blk[bi].r, blk[bi].qt);
    if (probs) run_tiles(p, t, w, blk, nb, s, false);

    const KvRows kb = kv_rows(p, t, false, w.b, w.kvh);
    const vf ninf = vbcast(kNegInf), zero = vzero();
    for (size_t bi = 0; bi < nb; ++bi) {
        Block &b = blk[bi];
        const Rows &r = b.r;
        float *rowp[kR];
        for (size_t l = 0; l < r.n; ++l) {
            rowp[l] = t.weights + ((w.b * p.shape.heads_q + r.h[l]) * p.shape.seq_q +
                                   static_cast<size_t>(r.i[l])) *
                                      sk;
            if (probs)
                zero_floats(rowp[l], sk);
            else
                for (size_t x = 0; x < sk; ++x) rowp[l][x] = kNegInf;
        }
        vf msafe[kNV], inv[kNV];
        for (size_t n = 0; n < kNV; ++n) msafe[n] = inv[n] = zero;
        if (probs) softmax_norm(p, t, b, msafe, inv);
        // The raw scores cover every key that is not padding.
        const bool unmasked = mode == WeightsMode::Scores || mode == WeightsMode::Softcapped;
        const size_t jb = unmasked ? w.k_begin : b.kbeg;
        const size_t je = unmasked ? w.k_end : b.kend;
        TileInfo ti;
        for (size_t j = jb; next_tile(p, t, w.b, &j, je, s.kidx, &ti);) {
            set_key_rows(p, t, w, kb, ti, s, true);
            if (!score_tile(p, t, b, s, ti, mode)) continue;
            if (probs)
                for (size_t x = 0; x < ti.nk; ++x)
                    for (size_t n = 0; n < kNV; ++n) {
                        // A hidden key (score -inf) is exactly 0 even when the row's max is NaN.
                        const vf sc = vload(s.st + x * kR + n * kL);
                        const vf e = vexp(sc - msafe[n]) * inv[n];
                        vstore(s.st + x * kR + n * kL, vsel(veq(sc, ninf), zero, e));
                    }
            for (size_t x = 0; x < ti.nk; ++x) {
                const size_t col = ti.jbase + s.kidx[x];
                for (size_t l = 0; l < r.n; ++l) rowp[l][col] = s.st[x * kR + l];
            }
        }
    }
}

// key_mass[b][h][j] += w_ij over every row of the item's KV head, w_ij = exp(s_ij - lse_i) from
// the forward's lse. One task per (batch, KV head) walks its row blocks in order, so the sums do
// not depend on the thread count.
static void mass_item(const Params &p, const Tensors &t, const WorkItem &whole, void *scratch) {
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    const size_t d = p.shape.head_dim, sk = p.shape.seq_k;
    const KvRows kb = kv_rows(p, t, false, whole.b, whole.kvh);
    const vf ninf = vbcast(kNegInf), zero = vzero();
    zero_floats(s.zero, d);
    for (size_t r0 = 0; r0 < whole.rows; r0 += kRows) {
        WorkItem w = whole;
        w.r0 = whole.r0 + r0;
        w.rows = kmin(kRows, whole.rows - r0);
        Block blk[kM];
        const size_t nb = item_blocks(p, t, w, s, blk);
        for (size_t bi = 0; bi < nb; ++bi) {
            Block &b = blk[bi];
            const Rows &r = b.r;
            pack_queries(p, t, w, r, b.qt);
            float lse[kR];
            for (size_t l = 0; l < kR; ++l)
                lse[l] = t.lse[lse_index(p, t, w.b, r.h[l], static_cast<size_t>(r.i[l]))];
            vf lv[kNV];
            for (size_t n = 0; n < kNV; ++n) {
                const vf x = vload(lse + n * kL);
                lv[n] = vsel(veq(x, ninf), zero, x);
            }
            float *mrow[kR];
            for (size_t l = 0; l < r.n; ++l)
                mrow[l] = t.key_mass + (w.b * p.shape.heads_q + r.h[l]) * sk;
            TileInfo ti;
            for (size_t j = b.kbeg; next_tile(p, t, w.b, &j, b.kend, s.kidx, &ti);) {
                set_key_rows(p, t, w, kb, ti, s, true);
                if (!score_tile(p, t, b, s, ti)) continue;
                for (size_t x = 0; x < ti.nk; ++x)
                    for (size_t n = 0; n < kNV; ++n) {
                        const vf sc = vload(s.st + x * kR + n * kL);
                        const vf e = vexp(sc - lv[n]);
                        vstore(s.st + x * kR + n * kL, vsel(veq(sc, ninf), zero, e));
                    }
                for (size_t x = 0; x < ti.nk; ++x) {
                    const size_t col = ti.jbase + s.kidx[x];
                    for (size_t l = 0; l < r.n; ++l)
                        if (lse[l] != kNegInf) mrow[l][col] += s.st[x * kR + l];
                }
            }
        }
    }
}
