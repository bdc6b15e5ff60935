// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Forward side of the kernel body, row blocks: P.V of a tile, the tile loop of an item's blocks
// and a row's final scale. The item's entry (forward_item: the decode path or the row blocks)
// ends decode-inl.h. Included by body-inl.h inside the ISA namespace, after
// score-inl.h.

// ot += P.V for the tile (s.vrow rows hold head_dim_v floats; ot has dp = head_dim_v rounded up
// to kDT rows, the ones past head_dim_v unused).
static inline void pv_tile(const Params &p, Block &blk, Scratch &s, const TileInfo &ti,
                           bool v_finite) {
    const size_t dv = p.shape.head_dim_v, nk = ti.nk;
    if (ti.partial && !v_finite) {
        // Exact path: a hidden key's Inf/NaN value must not turn 0 * Inf into NaN.
        for (size_t x = 0; x < nk; ++x)
            for (size_t l = 0; l < kR; ++l) {
                const float pw = s.st[x * kR + l];
                if (pw == 0.0f) continue;
                for (size_t dd = 0; dd < dv; ++dd) blk.ot[dd * kR + l] += pw * s.vrow[x][dd];
            }
        return;
    }
    const size_t full = dv / kDT * kDT;
    for (size_t dd = 0; dd < full; dd += kDT) pv_block(s.vrow, dd, s.st, nk, blk.ot + dd * kR);
    if (full < dv) pv_block_tail(s.vrow, full, s.st, nk, blk.ot + full * kR, dv - full);
}

// s.krow[x] -> K row of the tile's key x (rows past nk, up to a whole kKT block, -> a zero row).
// Rows that are not contiguous (BSHD: H * head_dim apart, often a multiple of 4 KiB, so a tile's
// rows would fight over a few L1 sets) are first copied into a contiguous tile. With integer
// Q.K^T (t.kq) s.krow16 / s.ksc -> the keys' codes and scales as well, and the fp32 rows only
// when a block needs them (f32_rows).
static inline void set_key_rows(const Params &p, const Tensors &t, const WorkItem &w,
                                const KvRows &kb, const TileInfo &tile, Scratch &s, bool f32_rows) {
    const size_t d = p.shape.head_dim;
    if (t.kq) {
        const size_t base = (w.b * p.shape.heads_kv + w.kvh) * p.shape.seq_k + tile.jbase;
        for (size_t x = 0; x < tile.nk; ++x) {
            s.krow16[x] = t.kq + (base + s.kidx[x]) * t.kq_row;
            s.ksc[x] = t.kq_scale[base + s.kidx[x]];
        }
        for (size_t x = tile.nk; x < tile.nk + 2 * kQI; ++x) {
            s.krow16[x] = reinterpret_cast<const int32_t *>(s.zero);
            s.ksc[x] = 0.0f;
        }
        if (!f32_rows) return;
    }
    // fp32 rows are read in place at any row stride: copying a strided (BSHD, token-major)
    // tile for every item made BSHD 1.09-1.15x the BHSD time, in place 0.99-1.10x (measured
    // with the same buffers in one process, n = 2048, H = 8, d = 64 and 128).
    const bool pack = kb.type != DType::F32;
    for (size_t x = 0; x < tile.nk; ++x) {
        const size_t j = tile.jbase + s.kidx[x];
        if (!pack) {
            s.krow[x] = kb.at(j);
            continue;
        }
        widen_row(kb, j, s.kpack + x * d, d, d); // a copy, or 16-bit / int8 widened
        s.krow[x] = s.kpack + x * d;
    }
    // A block may start its Q.K^T blocks at any key of the tile (see run_tiles): the rows after
    // the tile's keys point at a zero row for one whole kKT block more.
    for (size_t x = tile.nk; x < kround_up(tile.nk, kKT) + kKT; ++x) s.krow[x] = s.zero;
}

// Resets the online-softmax state of the item's blocks. Returns the key range the item's tiles
// must cover (the union of the blocks' ranges).
static inline void init_blocks(Block *blk, size_t nb, size_t dp, bool with_pv, size_t *kb,
                               size_t *ke) {
    const vf ninf = vbcast(kNegInf), zero = vzero();
    size_t lo = ~size_t(0), hi = 0;
    for (size_t bi = 0; bi < nb; ++bi) {
        Block &b = blk[bi];
        for (size_t n = 0; n < kNV; ++n) {
            vstore(b.m + n * kL, ninf);
            vstore(b.l + n * kL, zero);
            vstore(b.vis + n * kL, zero);
        }
        if (with_pv) zero_floats(b.ot, dp * kR);
        if (b.kend > b.kbeg) {
            lo = kmin(lo, b.kbeg);
            if (b.kend > hi) hi = b.kend;
        }
    }
    *kb = lo < hi ? lo : 0;
    *ke = lo < hi ? hi : 0;
}

// Runs the key tiles of one item over all its row blocks: each tile's keys are gathered, and
// its K/V rows located, once; every block then scores it, updates its softmax state and (forward
// mode) accumulates P.V, so the tile is read from memory once per item.
static void run_tiles(const Params &p, const Tensors &t, const WorkItem &w, Block *blk, size_t nb,
                      Scratch &s, bool with_pv) {
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v, dp = kround_up(dv, kDT);
    size_t kbeg, kend;
    init_blocks(blk, nb, dp, with_pv, &kbeg, &kend);
    // Batch invariance: tiles start at multiples of kBK (their boundaries then depend on the key
    // positions only, not on which rows share the item).
    // So do the tiles of integer P.V, whose V codes are per fixed tile.
    if (p.invariant || t.vq) kbeg -= kbeg % kBK;
    const size_t vqx = (w.b * p.shape.heads_kv + w.kvh) * t.vq_tiles;
    const KvRows vb = with_pv ? kv_rows(p, t, true, w.b, w.kvh) : KvRows{};
    const KvRows kb = kv_rows(p, t, false, w.b, w.kvh);
    // V rows are read in place like K's (P.V ends a row whose head_dim_v is not a multiple of kDT
    // with a narrower block, pv_block_tail), and copied into a tile of dp-float rows when not
    // fp32 (widened), or when their stride is a multiple of 1 KiB (BSHD, token-major pages):
    // P.V reads the same few values of every row of the tile for each block of head_dim_v, which
    // then fall into one or two L1 sets (AMD Zen 3, n 2048 H 8 BSHD: in place 1.01-1.04x the time
    // of the copy; BHSD in place 0.97-1.00x).
    const bool pack_v = p.v_type != DType::F32 || (vb.row * vb.elem) % 1024 == 0;
    // Rows a page or more apart (BSHD with H * head_dim >= 1024 floats, token-major pages):
    // every row is on its own 4 KiB page, where the hardware prefetchers, which stop at page
    // boundaries, do not follow; the blocks of a tile then ask for the next tile's rows.
    const bool far = kb.row * kb.elem >= 4096;
    bool f32_rows = !t.kq; // some block computes Q.K^T in fp32
    for (size_t bi = 0; bi < nb; ++bi) f32_rows |= !blk[bi].q8;
    TileInfo tile;
    for (size_t j = kbeg; next_tile(p, t, w.b, &j, kend, s.kidx, &tile);) {
        const size_t nk = tile.nk;
        // Few rows per item (decode) make the loop memory-bound: V rows of this tile arrive
        // during Q.K^T, K rows of the next tile during P.V. With many rows the tiles come from
        // cache and the prefetches only cost issue slots (-7% measured), so they are skipped.
        if (kNV == 1 && with_pv) {
            prefetch_rows(vb, tile.jbase, tile.kidx_span(s.kidx), dv);
            if (j < kend) prefetch_rows(kb, j, kmin(kBK, kend - j), d);
        }
        set_key_rows(p, t, w, kb, tile, s, f32_rows);
        bool v_checked = false, v_finite = true, v_set = false;
        for (size_t bi = 0; bi < nb; ++bi) {
            Block &b = blk[bi];
            if (kNV > 1 && far && j < kend) { // a share of the next tile's rows, into L2
                const size_t n = kmin(kBK, kend - j), x0 = n * bi / nb, x1 = n * (bi + 1) / nb;
                prefetch_rows<2>(kb, j + x0, x1 - x0, d);
                if (with_pv) prefetch_rows<2>(vb, j + x0, x1 - x0, dv);
            }
            // The block computes only the keys [x0, x1) of the tile inside its causal / window
            // range (the tiles are shared by the item's blocks, whose ranges are shifted by a
            // block's rows: with a sliding window this saves up to a tile per block).
            size_t x0 = 0, x1 = nk;
            while (x0 < nk && tile.jbase + s.kidx[x0] < b.kbeg) ++x0;
            while (x1 > x0 && tile.jbase + s.kidx[x1 - 1] >= b.kend) --x1;
            if (x0 == x1) continue;
            Scratch sb = s; // the sub-tile: the same buffers, keys from x0
            sb.kidx += x0;
            sb.krow += x0;
            sb.vrow += x0;
            if (t.kq) {
                sb.krow16 += x0;
                sb.ksc += x0;
            }
            TileInfo ti = tile;
            ti.nk = x1 - x0;
            if (!score_tile(p, t, b, sb, ti)) continue;
            softmax_tile(b, sb, ti.nk, dp, with_pv);
            if (!with_pv) continue;
            if (t.vq && b.q8) { // integers, unless a probability is NaN
                const size_t tx = vqx + tile.jbase / kBK, np = pack_probs(sb.st, x0, ti.nk, s.pq);
                if (np) {
                    pv8_tile(t.vq + tx * t.vq_tile, dv, x0 / 2, s.pq, np, t.vq_scale + tx * dv,
                             b.ot);
                    continue;
                }
            }
            if (!v_set) {
                for (size_t x = 0; x < nk; ++x) {
                    const size_t jj = tile.jbase + s.kidx[x];
                    if (!pack_v) {
                        s.vrow[x] = vb.at(jj);
                        continue;
                    }
                    widen_row(vb, jj, s.vpack + x * dp, dv, dp);
                    s.vrow[x] = s.vpack + x * dp;
                }
                v_set = true;
            }
            if (ti.partial && !v_checked) { // the whole tile: finite there is finite in [x0, x1)
                v_finite = v_tile_finite(p, s, nk);
                v_checked = true;
            }
            pv_tile(p, b, sb, ti, v_finite);
        }
    }
}

// A row whose visible keys all scored -inf (q.k = -inf: a -inf in K or Q) has l = 0: it saw no
// key after all (a -inf score hides its key, as a -inf bias does), so its output is 0 and its
// lse -inf, not 0 / 0. l = 0 only then: a finite running max contributes exp(0) = 1 to l.
static inline void hide_empty_sums(const float *l, float *vis) {
    const vf zero = vzero();
    for (size_t n = 0; n < kNV; ++n)
        vstore(vis + n * kL, vsel(veq(vload(l + n * kL), zero), zero, vload(vis + n * kL)));
}

// Final scale of a row: out = o * fo, lse. With a sink logit the denominator gains
// exp(sink - M), M = max(m, sink), so that w_ij = exp(s_ij - M) / (exp(sink - M) + l e^(m - M)).
// Rows with no visible key: out 0, lse -inf.
static inline void finish_lanes(const Params &p, const Tensors &t, const Rows &r, const float *m,
                                const float *l, const float *vis, float *fo, float *lse,
                                bool *divide) {
    const vf ninf = vbcast(kNegInf), zero = vzero();
    float sk[kR];
    bool has_sink = false;
    for (size_t x = 0; x < kR; ++x) has_sink = sink_of(p, t, r.h[x], &sk[x]);
    *divide = !has_sink;
    for (size_t n = 0; n < kNV; ++n) {
        const vm vs = vne(vload(vis + n * kL), zero);
        const vf mv = vload(m + n * kL), lv = vload(l + n * kL);
        if (!has_sink) {
            // out = o / l (divided per element by the caller: the 0.1 rounding)
            vstore(fo + n * kL, lv);
            vstore(lse + n * kL, vsel(vs, mv + vlog(lv), ninf));
            continue;
        }
        const vf sv = vload(sk + n * kL);
        const vf M = vmax(mv, sv);
        const vf alpha = vexp(mv - M);
        const vf L = vfma(lv, alpha, vexp(sv - M));
        vstore(fo + n * kL, vsel(vs, alpha / L, zero));
        vstore(lse + n * kL, vsel(vs, M + vlog(L), ninf));
    }
}
