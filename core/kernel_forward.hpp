// Forward side of the kernel body: P.V, the tile loop, the row-block forward and the decode path.
// Included by kernel_body.hpp inside the ISA namespace, after kernel_score.hpp.

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
// rows would fight over a few L1 sets) are first copied into a contiguous tile.
static inline void set_key_rows(const Params &p, const KvRows &kb, const TileInfo &tile,
                                Scratch &s) {
    const size_t d = p.shape.head_dim;
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
    if (p.invariant) kbeg -= kbeg % kBK;
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
        set_key_rows(p, kb, tile, s);
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
            TileInfo ti = tile;
            ti.nk = x1 - x0;
            if (!score_tile(p, t, b, sb, ti)) continue;
            softmax_tile(b, sb, ti.nk, dp, with_pv);
            if (!with_pv) continue;
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

// ---- Decode: at most kDecodeRows query rows per KV head (GQA decode: the group, seq_q = 1) ----
// The row-lane layout would leave most lanes idle and issue head_dim broadcast-FMAs per key; here
// the vectors run along head_dim instead: each K and V vector is loaded once per key and used by
// every row, so a row costs head_dim / kL FMAs per key and the loop keeps up with memory.
constexpr size_t kDB = kL >= 16 ? 4 : 2; // head_dim vectors per P.V register block
// Keys per Q.K^T step of the decode path: kQB x kDecodeRows accumulators (16 of AVX-512's 32
// registers; 8 of AVX2's 16).
constexpr size_t kQB = kL >= 16 ? 4 : 2;

static inline float lane0(const vf &x) {
    float tmp[kL];
    vstore(tmp, x);
    return tmp[0];
}

// Q.K^T of a decode tile, kQB keys at a time (decode_qk_block); the K rows are read in their
// storage type T and widened in the registers (an int8 key's scale multiplies its sum).
// Software prefetch of the decode stream: while Q.K^T works on a key, the K and V rows of the key
// `ahead` positions later are requested, a few lines per key rather than a tile at a time (a burst
// of hundreds of prefetches fills the line-fill buffers and stalls the loop behind them; spread
// out they overlap the arithmetic: dense decode 1.5x faster, measured). `ahead` is a few KiB of
// rows: enough to cover the memory latency, little enough to stay in L1.
constexpr size_t kPrefetchBytes = 4096;

static inline size_t prefetch_ahead(const KvRows &k, size_t d) {
    const size_t n = kPrefetchBytes / (d * k.elem); // d >= kL on the decode path
    return n < 4 ? 4 : n;
}

static inline const unsigned char *row_at(const KvRows &r, size_t j) {
    size_t doff, soff;
    r.locate(j, &doff, &soff);
    return r.base + doff * r.elem;
}

static inline void prefetch_rows(const unsigned char *kp, size_t kbytes, size_t kstep,
                                 const unsigned char *vp, size_t vbytes, size_t vstep, size_t n) {
    // Row u at u * step, never a pointer stepped past the last row: a stride is only a real one
    // between rows that exist (one key's stride may be anything, even near SIZE_MAX).
    for (size_t u = 0; u < n; ++u) {
        const unsigned char *k = kp + u * kstep, *v = vp + u * vstep;
        for (size_t off = 0; off < kbytes; off += 64) __builtin_prefetch(k + off);
        for (size_t off = 0; off < vbytes; off += 64) __builtin_prefetch(v + off);
    }
}

// Q.K^T of kQB keys (rows kr[u]) for the kDecodeRows rows of q over dqv elements (a multiple of
// kL): the sum of key u for row rr in sums[rr * kQB + u]. kQB x kDecodeRows independent
// accumulators hide the FMA latency, and their horizontal sums leave in one register where
// they fill one (vhsum_all).
template <DType T>
__attribute__((always_inline)) static inline void decode_qk_block(const unsigned char *const *kr,
                                                                  const float *q, size_t dpad,
                                                                  size_t dqv, float *sums) {
    vf acc[kDecodeRows][kQB];
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t u = 0; u < kQB; ++u) acc[rr][u] = vzero();
    for (size_t dd = 0; dd < dqv; dd += kL) {
        vf qv[kDecodeRows];
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            qv[rr] = vin_register(vload(q + rr * dpad + dd));
        for (size_t u = 0; u < kQB; ++u) {
            const vf kv = vload_raw<T>(kr[u], dd);
            for (size_t rr = 0; rr < kDecodeRows; ++rr) acc[rr][u] = vfma(qv[rr], kv, acc[rr][u]);
        }
    }
    if (kQB * kDecodeRows == kL) {
        vf a[kL]; // a copy: acc itself stays in registers
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < kQB; ++u) a[rr * kQB + u] = acc[rr][u];
        vstore(sums, vhsum_all(a));
    } else {
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < kQB; ++u) sums[rr * kQB + u] = vhsum(acc[rr][u]);
    }
}

// A run of a decode tile: nk consecutive keys at a row stride (kt, kstep), head_dim a multiple of
// kL, whose prefetch targets (the keys `ahead` on, see decode_qk_tile) are consecutive rows too,
// pk + x * kstep and pv + x * vstep. Only what varies per block is left in the loop; an int8
// key's scale multiplies its sums (one rounding).
template <DType T>
static inline void decode_qk_run(const unsigned char *kt, size_t kstep, const float *kst,
                                 size_t ksrow, const unsigned char *pk, const unsigned char *pv,
                                 size_t vstep, size_t kbytes, size_t vbytes, size_t nk,
                                 const float *q, size_t dpad, size_t d, size_t nr, float *sc) {
    // Full blocks, then the run's last keys with its first key repeated past them (their sums
    // not stored): two loops, so that the full blocks' count stays a constant (a shared lambda
    // took 1.12-1.18x the time).
    constexpr size_t QB = kQB;
    alignas(64) float sums[kDecodeRows * QB];
    size_t x0 = 0;
    for (; x0 + QB <= nk; x0 += QB) {
        const unsigned char *kr[QB];
        for (size_t u = 0; u < QB; ++u) kr[u] = kt + (x0 + u) * kstep;
        prefetch_rows(pk + x0 * kstep, kbytes, kstep, pv + x0 * vstep, vbytes, vstep, QB);
        decode_qk_block<T>(kr, q, dpad, d, sums);
        if (T == DType::I8) { // each sum times its key's scale (one rounding)
            float ks[QB];
            for (size_t u = 0; u < QB; ++u) ks[u] = kst[(x0 + u) * ksrow];
            for (size_t rr = 0; rr < kDecodeRows; ++rr)
                for (size_t u = 0; u < QB; ++u) sums[rr * QB + u] *= ks[u];
        }
        for (size_t rr = 0; rr < nr; ++rr)
            for (size_t u = 0; u < QB; ++u) sc[rr * kBK + x0 + u] = sums[rr * QB + u];
    }
    if (x0 < nk) {
        const size_t nb = nk - x0;
        const unsigned char *kr[QB];
        for (size_t u = 0; u < QB; ++u) kr[u] = kt + (u < nb ? x0 + u : x0) * kstep;
        prefetch_rows(pk + x0 * kstep, kbytes, kstep, pv + x0 * vstep, vbytes, vstep, nb);
        decode_qk_block<T>(kr, q, dpad, d, sums);
        for (size_t rr = 0; rr < nr; ++rr)
            for (size_t u = 0; u < nb; ++u)
                sc[rr * kBK + x0 + u] =
                    T == DType::I8 ? sums[rr * QB + u] * kst[(x0 + u) * ksrow] : sums[rr * QB + u];
    }
}

// Pages shorter than this take decode_qk_tile's per-block path: runs of a page or less would
// be mostly partial blocks.
constexpr size_t kRunPage = 8;

template <DType T>
static inline void decode_qk_tile(const KvRows &krows, const KvRows &vrows, size_t jbase,
                                  const unsigned *kidx, size_t nk, size_t klim, const float *q,
                                  size_t dpad, size_t d, size_t dv, size_t nr, float *sc) {
    const size_t dqv = d / kL * kL;
    const size_t ahead = prefetch_ahead(krows, d), kbytes = d * krows.elem,
                 vbytes = dv * vrows.elem;
    const size_t kstep = krows.row * krows.elem, vstep = vrows.row * vrows.elem;
    // The usual tile: consecutive keys (no padding among them), in runs of rows at a stride
    // whose prefetch targets are at a stride too: dense K/V in one run (two near the end of
    // the keys), paged K/V split where a page of the keys or of their targets ends.
    const size_t jt = jbase + kidx[0];
    if (kidx[nk - 1] == kidx[0] + nk - 1 && dqv == d &&
        (!krows.pages || krows.page_size >= kRunPage)) {
        for (size_t x = 0; x < nk;) {
            const size_t j = jt + x, ja = j + ahead;
            size_t n = kmin(nk - x, kmin(krows.run_from(j), vrows.run_from(j)));
            size_t doff, soff;
            krows.locate(j, &doff, &soff);
            const unsigned char *kt = krows.base + doff * krows.elem, *pk = kt,
                                *pv = row_at(vrows, j);
            if (ja < klim) { // else the run's own rows (in L1 already): no branch in the loop
                n = kmin(n, kmin(klim - ja, kmin(krows.run_from(ja), vrows.run_from(ja))));
                pk = row_at(krows, ja);
                pv = row_at(vrows, ja);
            }
            decode_qk_run<T>(kt, kstep, T == DType::I8 ? krows.scale + soff : nullptr, krows.srow,
                             pk, pv, vstep, kbytes, vbytes, n, q, dpad, d, nr, sc + x);
            x += n;
        }
        return;
    }
    for (size_t x0 = 0; x0 < nk; x0 += kQB) {
        const size_t nb = kmin(kQB, nk - x0);
        const unsigned char *kr[kQB];
        float ks[kQB];
        // kQB consecutive keys in one page: one look-up, then a row stride
        const size_t j0 = jbase + kidx[x0];
        const bool run = nb == kQB && kidx[x0 + kQB - 1] == kidx[x0] + kQB - 1 &&
                         krows.same_page(j0, kQB) && vrows.same_page(j0, kQB);
        if (run) {
            size_t doff, soff;
            krows.locate(j0, &doff, &soff);
            for (size_t u = 0; u < kQB; ++u) {
                kr[u] = krows.base + (doff + u * krows.row) * krows.elem;
                ks[u] = T == DType::I8 ? krows.scale[soff + u * krows.srow] : 1.0f;
            }
            if (j0 + ahead + kQB <= klim) {
                if (krows.same_page(j0, ahead + kQB) && vrows.same_page(j0, ahead + kQB))
                    prefetch_rows(kr[0] + ahead * kstep, kbytes, kstep,
                                  row_at(vrows, j0) + ahead * vstep, vbytes, vstep, kQB);
                else if (krows.same_page(j0 + ahead, kQB) && vrows.same_page(j0 + ahead, kQB))
                    prefetch_rows(row_at(krows, j0 + ahead), kbytes, kstep,
                                  row_at(vrows, j0 + ahead), vbytes, vstep, kQB);
                else
                    for (size_t u = 0; u < kQB; ++u)
                        prefetch_rows(row_at(krows, j0 + ahead + u), kbytes, 0,
                                      row_at(vrows, j0 + ahead + u), vbytes, 0, 1);
            }
        } else {
            for (size_t u = 0; u < nb; ++u) { // keys past the item's range: no prefetch
                const size_t jj = jbase + kidx[x0 + u] + ahead;
                if (jj >= klim) break;
                prefetch_rows(row_at(krows, jj), kbytes, 0, row_at(vrows, jj), vbytes, 0, 1);
            }
            for (size_t u = 0; u < kQB; ++u) {
                if (u >= nb) { // past the tile: repeat its first key (the sums are not stored)
                    kr[u] = kr[0];
                    ks[u] = ks[0];
                    continue;
                }
                size_t doff, soff;
                krows.locate(jbase + kidx[x0 + u], &doff, &soff);
                kr[u] = krows.base + doff * krows.elem;
                ks[u] = T == DType::I8 ? krows.scale[soff] : 1.0f;
            }
        }
        // [rr][u]; an int8 key's scale applied here unless the head_dim tail is still to come
        alignas(64) float sums[kDecodeRows * kQB];
        decode_qk_block<T>(kr, q, dpad, dqv, sums);
        if (T == DType::I8 && dqv == d)
            for (size_t rr = 0; rr < kDecodeRows; ++rr)
                for (size_t u = 0; u < kQB; ++u) sums[rr * kQB + u] *= ks[u];
        for (size_t rr = 0; rr < nr; ++rr) {
            if (dqv == d && nb == kQB) {
                for (size_t u = 0; u < kQB; ++u) sc[rr * kBK + x0 + u] = sums[rr * kQB + u];
                continue;
            }
            for (size_t u = 0; u < nb; ++u) {
                float sum = sums[rr * kQB + u];
                if (dqv < d) { // the tail, then an int8 key's scale (once)
                    for (size_t dd = dqv; dd < d; ++dd)
                        sum = __builtin_fmaf(q[rr * dpad + dd], value_raw<T>(kr[u], dd), sum);
                    sum = T == DType::I8 ? sum * ks[u] : sum;
                }
                sc[rr * kBK + x0 + u] = sum;
            }
        }
    }
}

// o[rr][c0 + c*kL ...] += sum_x p[rr][x] * v_x[c0 + c*kL ...] for CB vectors of head_dim_v, the V
// rows read in their storage type T (int8 rows without their scale: it is in p).
template <DType T, size_t CB>
__attribute__((always_inline)) static inline void
pv_decode_block(const unsigned char *const *vraw, size_t c0, const float *pr, size_t nk, float *o,
                size_t dpad) {
    vf acc[kDecodeRows][CB];
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t c = 0; c < CB; ++c) acc[rr][c] = vload(o + rr * dpad + c0 + c * kL);
    for (size_t x = 0; x < nk; ++x) {
        vf vv[CB];
        for (size_t c = 0; c < CB; ++c) vv[c] = vload_raw<T>(vraw[x], c0 + c * kL);
        for (size_t rr = 0; rr < kDecodeRows; ++rr) {
            const vf pb = vbcast(pr[rr * kBK + x]);
            for (size_t c = 0; c < CB; ++c) acc[rr][c] = vfma(pb, vv[c], acc[rr][c]);
        }
    }
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t c = 0; c < CB; ++c) vstore(o + rr * dpad + c0 + c * kL, acc[rr][c]);
}

// Keys per pass of decode_pv_rows over head_dim_v: a pass reads each of its V rows once per
// register block of head_dim_v, so its rows must stay in L1 between blocks. 8 rows do even when
// they are 4 KiB apart (token-major pages, BSHD: the rows of a pass then share the same few L1
// sets, and 8-way L1s, AMD's, hold 8 of them; a whole 96-key tile there was read from L2 again
// for every block: paged decode 0.63-0.70x the dense speed).
constexpr size_t kPVKeys = 8;

// o += P.V over the nk rows vraw (storage T) of a decode tile. Every output element sums its keys
// in key order whatever the passes (the accumulators go through o), so the bits do not depend
// on kPVKeys.
template <DType T>
static inline void decode_pv_rows(const unsigned char *const *vraw, size_t nk, const float *sc,
                                  size_t dv, size_t nr, float *o, size_t dvpad) {
    const size_t dvv = dv / kL * kL;
    for (size_t x0 = 0; x0 < nk; x0 += kPVKeys) {
        const size_t n = kmin(kPVKeys, nk - x0);
        size_t c0 = 0;
        for (; c0 + kDB * kL <= dvv; c0 += kDB * kL)
            pv_decode_block<T, kDB>(vraw + x0, c0, sc + x0, n, o, dvpad);
        for (; c0 < dvv; c0 += kL) pv_decode_block<T, 1>(vraw + x0, c0, sc + x0, n, o, dvpad);
    }
    for (size_t dd = dvv; dd < dv; ++dd)
        for (size_t x = 0; x < nk; ++x)
            for (size_t rr = 0; rr < nr; ++rr)
                o[rr * dvpad + dd] =
                    __builtin_fmaf(sc[rr * kBK + x], value_raw<T>(vraw[x], dd), o[rr * dvpad + dd]);
}

// P.V of a decode tile whose keys are all visible (no exact path needed), V in storage T. An
// int8 tile's probabilities are multiplied by their rows' scales first (into ps: [kDecodeRows]
// [kBK]), so the rows are only widened.
template <DType T>
static inline void decode_pv_tile(const KvRows &vb, size_t jbase, const unsigned *kidx, size_t nk,
                                  const float *sc, size_t dv, size_t nr, float *o, size_t dvpad,
                                  const unsigned char **vraw, float *vs, float *ps) {
    size_t doff = 0, soff = 0;
    const size_t j0 = jbase + kidx[0];
    if (kidx[nk - 1] == kidx[0] + nk - 1 && vb.same_page(j0, nk)) { // one run: a row stride
        vb.locate(j0, &doff, &soff);
        const unsigned char *row = vb.base + doff * vb.elem;
        const size_t step = vb.row * vb.elem;
        for (size_t x = 0; x < nk; ++x) vraw[x] = row + x * step;
        if (T == DType::I8)
            for (size_t x = 0; x < nk; ++x) vs[x] = vb.scale[soff + x * vb.srow];
    } else {
        for (size_t x = 0; x < nk; ++x) {
            const size_t j = jbase + kidx[x];
            if (x && kidx[x] == kidx[x - 1] + 1 && vb.same_page(j - 1, 2)) { // the next row
                doff += vb.row;
                soff += vb.srow;
            } else {
                vb.locate(j, &doff, &soff);
            }
            vraw[x] = vb.base + doff * vb.elem;
            if (T == DType::I8) vs[x] = vb.scale[soff];
        }
    }
    if (T == DType::I8) {
        const size_t nkv = kround_up(nk, kL);
        for (size_t x = nk; x < nkv; ++x) vs[x] = 0.0f;
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t x = 0; x < nkv; x += kL)
                vstore(ps + rr * kBK + x, vload(sc + rr * kBK + x) * vload(vs + x));
        sc = ps;
    }
    decode_pv_rows<T>(vraw, nk, sc, dv, nr, o, dvpad);
}

// The score pipeline of one decode row over a tile (scores in srow[0, nk), padded to nkv with
// -inf on return). Returns whether any key is visible; *partial is set when some key is hidden.
static inline bool decode_scores(const Params &p, const Tensors &t, const Rows &r, size_t rr,
                                 const WorkItem &w, size_t jbase, const unsigned *kidx, size_t nk,
                                 float *srow, bool *partial) {
    const size_t nkv = kround_up(nk, kL);
    for (size_t x = nk; x < nkv; ++x) srow[x] = 0.0f;
    if (!fold_scale(p))
        for (size_t x = 0; x < nkv; x += kL) vstore(srow + x, vload(srow + x) * vbcast(p.scale));
    const bool capped = p.softcap > 0.0f;
    if (capped && !p.bias_first) softcap_rows(srow, nkv, p.softcap);
    const size_t h = r.h[rr];
    const long long i = r.i[rr];
    if (t.bias) {
        const float *brow = t.bias + w.b * p.bias.batch + h * p.bias.head +
                            static_cast<size_t>(i) * p.bias.row + jbase;
        for (size_t x = 0; x < nk; ++x) srow[x] += brow[kidx[x]];
    }
    if (capped && p.bias_first) softcap_rows(srow, nkv, p.softcap, t.bias != nullptr);
    if (t.alibi) {
        const float slope = t.alibi[h];
        const float drel = static_cast<float>(i + r.off - static_cast<long long>(jbase));
        for (size_t x = 0; x < nk; ++x) srow[x] += slope * (static_cast<float>(kidx[x]) - drel);
    }
    const uint8_t *al = t.allowed ? t.allowed + static_cast<size_t>(i) * p.shape.seq_k : nullptr;
    // The usual decode tile: every key inside the row's causal / window range and no mask or
    // bias to look at: nothing is hidden.
    const long long first = static_cast<long long>(jbase + kidx[0]);
    const long long last = static_cast<long long>(jbase + kidx[nk - 1]);
    if (!al && !t.bias && first >= r.lo[rr] && last < r.hi[rr]) {
        for (size_t x = nk; x < nkv; ++x) srow[x] = kNegInf;
        return true;
    }
    bool any = false;
    for (size_t x = 0; x < nk; ++x) {
        const long long jj = static_cast<long long>(jbase + kidx[x]);
        bool ok = jj >= r.lo[rr] && jj < r.hi[rr] && (!al || al[jj]);
        if (!ok) srow[x] = kNegInf;
        if (t.bias && srow[x] == kNegInf) ok = false;
        any |= ok;
        *partial |= !ok;
    }
    for (size_t x = nk; x < nkv; ++x) srow[x] = kNegInf;
    return any;
}

// One KV head's decode rows across the tiles of an item: its queries, its unnormalised output
// and its online-softmax state. Several heads of a batch entry can share one pass over the tiles
// (decode_heads), each head's arithmetic unchanged.
struct DecodeHead {
    Rows r;
    KvRows krows, vb;
    // q: [kDecodeRows][dpad] qs * q (rows past nr and the padding 0); o: [kDecodeRows][dvpad];
    // sc: [kDecodeRows][kBK] the scores, then the weights, of the current tile
    float *q, *o, *sc;
    float m[kDecodeRows], l[kDecodeRows];
    bool vis[kDecodeRows];
    size_t kbeg, kend; // keys of the item any row may see
};

static void decode_begin(const Params &p, const Tensors &t, const WorkItem &w, float *q, float *o,
                         float *sc, DecodeHead *h) {
    block_rows(p, t, w, w.r0, w.rows, &h->r);
    const Rows &r = h->r;
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v, nr = w.rows;
    const size_t dpad = kround_up(d, kL), dvpad = kround_up(dv, kL);
    const float qs = fold_scale(p) ? p.scale : 1.0f;
    h->q = q;
    h->o = o;
    h->sc = sc;
    for (size_t rr = 0; rr < kDecodeRows; ++rr) {
        const size_t q0 = q_index(p, t, w.b, r.h[rr], static_cast<size_t>(r.i[rr]));
        for (size_t dd = 0; dd < dpad; ++dd)
            q[rr * dpad + dd] = rr < nr && dd < d ? q_value(p, t, q0 + dd) * qs : 0.0f;
        zero_floats(o + rr * dvpad, dvpad);
        zero_floats(sc + rr * kBK, kBK);
        h->m[rr] = kNegInf;
        h->l[rr] = 0.0f;
        h->vis[rr] = false;
    }
    const long long kb = lmax(static_cast<long long>(w.k_begin), r.lo[0]);
    const long long ke = lmin(static_cast<long long>(w.k_end), r.hi[kR - 1]);
    h->kbeg = kb < 0 ? 0 : static_cast<size_t>(kb);
    h->kend = ke <= kb ? h->kbeg : static_cast<size_t>(ke);
    h->krows = kv_rows(p, t, false, w.b, w.kvh);
    h->vb = kv_rows(p, t, true, w.b, w.kvh);
}

template <DType T> struct TypeTag { static constexpr DType value = T; };

// f(TypeTag<t>()) for a storage type t.
template <class F> static inline void with_type(DType t, F &&f) {
    switch (t) {
    case DType::F16:
        f(TypeTag<DType::F16>());
        break;
    case DType::BF16:
        f(TypeTag<DType::BF16>());
        break;
    case DType::I8:
        f(TypeTag<DType::I8>());
        break;
    default:
        f(TypeTag<DType::F32>());
    }
}

// A decode tile (keys jbase + s.kidx[0, nk)) of one head takes three steps: its scores
// (decode_tile_qk), their online softmax (decode_tile_softmax) and P.V (decode_tile_pv).

// Scores: one pass over each K row serves every query row.
__attribute__((always_inline)) static inline void decode_tile_qk(const Params &p, const WorkItem &w,
                                                                 DecodeHead &h, Scratch &s,
                                                                 const TileInfo &tile) {
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v, nr = w.rows;
    const size_t dpad = kround_up(d, kL);
    const KvRows &krows = h.krows, &vb = h.vb;
    const float *q = h.q;
    float *sc = h.sc;
    const size_t jbase = tile.jbase, nk = tile.nk, kend = h.kend;
    with_type(krows.type, [&](auto tag) {
        decode_qk_tile<decltype(tag)::value>(krows, vb, jbase, s.kidx, nk, kend, q, dpad, d, dv, nr,
                                             sc);
    });
}

// Score pipeline and masks, then the online softmax of each row (vectorised over keys). Returns
// whether some key of the tile is hidden from some row.
__attribute__((always_inline)) static inline bool
decode_tile_softmax(const Params &p, const Tensors &t, const WorkItem &w, DecodeHead &h,
                    const Scratch &s, const TileInfo &tile) {
    const Rows &r = h.r;
    const size_t dv = p.shape.head_dim_v, nr = w.rows, dvpad = kround_up(dv, kL);
    const vf ninf = vbcast(kNegInf), zero = vzero();
    float *o = h.o, *sc = h.sc, *m = h.m, *l = h.l;
    bool *vis = h.vis;
    const size_t jbase = tile.jbase, nk = tile.nk;
    bool partial_tile = false;
    const size_t nkv = kround_up(nk, kL);
    for (size_t rr = 0; rr < nr; ++rr) {
        float *srow = sc + rr * kBK;
        vis[rr] = decode_scores(p, t, r, rr, w, jbase, s.kidx, nk, srow, &partial_tile) || vis[rr];
        vf mt = ninf;
        for (size_t x = 0; x < nkv; x += kL) mt = vmax(mt, vload(srow + x));
        float mnew = m[rr];
        if (!vany(vne(mt, mt))) { // the usual case: a vector reduction
            const float mx = vhmax(mt);
            if (mx > mnew) mnew = mx;
        } else { // a NaN lane: the first one becomes the row's max
            float tmp[kL];
            vstore(tmp, mt);
            for (size_t e = 0; e < kL; ++e)
                if (tmp[e] > mnew || tmp[e] != tmp[e]) mnew = tmp[e];
        }
        const float msafe = mnew == kNegInf ? 0.0f : mnew;
        const float alpha = lane0(vexp_nonpos(vbcast(m[rr] - msafe)));
        vf lsum = zero;
        for (size_t x = 0; x < nkv; x += kL) {
            const vf e = vexp_nonpos(vload(srow + x) - vbcast(msafe));
            vstore(srow + x, e);
            lsum = lsum + e;
        }
        l[rr] = l[rr] * alpha + vhsum(lsum);
        if (alpha != 1.0f)
            for (size_t dd = 0; dd < dvpad; dd += kL)
                vstore(o + rr * dvpad + dd, vload(o + rr * dvpad + dd) * vbcast(alpha));
        m[rr] = mnew;
    }
    return partial_tile;
}

// P.V: one pass over each V row serves every query row. A tile with no hidden key reads V in
// its storage type; otherwise the rows are widened first (the exact path checks them for
// Inf/NaN).
__attribute__((always_inline)) static inline void decode_tile_pv(const Params &p, const WorkItem &w,
                                                                 DecodeHead &h, Scratch &s,
                                                                 const TileInfo &tile,
                                                                 bool partial_tile) {
    const size_t dv = p.shape.head_dim_v, nr = w.rows, dvpad = kround_up(dv, kL);
    const KvRows &vb = h.vb;
    const bool vf32 = vb.type == DType::F32;
    float *o = h.o, *sc = h.sc;
    const size_t jbase = tile.jbase, nk = tile.nk;
    if (!partial_tile) {
        const unsigned char **vraw = s.vraw;
        float *vs = s.aux2, *ps = s.ps;
        with_type(vb.type, [&](auto tag) {
            decode_pv_tile<decltype(tag)::value>(vb, jbase, s.kidx, nk, sc, dv, nr, o, dvpad, vraw,
                                                 vs, ps);
        });
        return;
    }
    for (size_t x = 0; x < nk; ++x) {
        if (vf32) {
            s.vrow[x] = vb.at(jbase + s.kidx[x]);
            continue;
        }
        widen_row(vb, jbase + s.kidx[x], s.vpack + x * dvpad, dv, dvpad);
        s.vrow[x] = s.vpack + x * dvpad;
    }
    if (!v_tile_finite(p, s, nk)) {
        // Exact path: a hidden key's Inf/NaN value must not turn 0 * Inf into NaN.
        for (size_t x = 0; x < nk; ++x)
            for (size_t rr = 0; rr < nr; ++rr) {
                const float pw = sc[rr * kBK + x];
                if (pw == 0.0f) continue;
                for (size_t dd = 0; dd < dv; ++dd) o[rr * dvpad + dd] += pw * s.vrow[x][dd];
            }
        return;
    }
    for (size_t x = 0; x < nk; ++x) s.vraw[x] = reinterpret_cast<const unsigned char *>(s.vrow[x]);
    decode_pv_rows<DType::F32>(s.vraw, nk, sc, dv, nr, o, dvpad);
}

static inline void decode_tile(const Params &p, const Tensors &t, const WorkItem &w, DecodeHead &h,
                               Scratch &s, const TileInfo &tile) {
    decode_tile_qk(p, w, h, s, tile);
    decode_tile_pv(p, w, h, s, tile, decode_tile_softmax(p, t, w, h, s, tile));
}

static void decode_end(const Params &p, const Tensors &t, const WorkItem &w, const DecodeHead &dh,
                       const Partial *partial) {
    const Rows &r = dh.r;
    const size_t dv = p.shape.head_dim_v, nr = w.rows, dvpad = kround_up(dv, kL);
    const float *o = dh.o, *m = dh.m, *l = dh.l;
    bool vis[kDecodeRows]; // l = 0: every visible key scored -inf (see hide_empty_sums)
    for (size_t rr = 0; rr < kDecodeRows; ++rr) vis[rr] = dh.vis[rr] && l[rr] != 0.0f;
    if (partial) { // the layout forward_item uses: [3 + dp][kRows]
        const size_t dp = kround_up(dv, kDT);
        float *dst = partial->data;
        for (size_t rr = 0; rr < nr; ++rr) {
            dst[rr] = m[rr];
            dst[kRows + rr] = l[rr];
            dst[2 * kRows + rr] = vis[rr] ? 1.0f : 0.0f;
            for (size_t dd = 0; dd < dp; ++dd)
                dst[(3 + dd) * kRows + rr] = dd < dv ? o[rr * dvpad + dd] : 0.0f;
        }
        return;
    }
    for (size_t rr = 0; rr < nr; ++rr) {
        const size_t i = static_cast<size_t>(r.i[rr]), h = r.h[rr];
        float *out = t.out + out_index(p, t, w.b, h, i);
        float sink, lse;
        if (!vis[rr]) {
            for (size_t dd = 0; dd < dv; ++dd) out[dd] = 0.0f;
            lse = kNegInf;
        } else if (sink_of(p, t, h, &sink)) {
            const float M = m[rr] > sink ? m[rr] : sink;
            const float alpha = lane0(vexp(vbcast(m[rr] - M)));
            const float L = l[rr] * alpha + lane0(vexp(vbcast(sink - M)));
            const float f = alpha / L;
            for (size_t dd = 0; dd < dv; ++dd) out[dd] = o[rr * dvpad + dd] * f;
            lse = M + lane0(vlog(vbcast(L)));
        } else {
            for (size_t dd = 0; dd < dv; ++dd) out[dd] = o[rr * dvpad + dd] / l[rr];
            lse = m[rr] + lane0(vlog(vbcast(l[rr])));
        }
        if (t.lse) t.lse[lse_index(p, t, w.b, h, i)] = lse;
    }
}

static void decode_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch,
                        const Partial *partial) {
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    DecodeHead h;
    decode_begin(p, t, w, s.qt, s.ot, s.st, &h);
    TileInfo tile;
    for (size_t j = h.kbeg; next_tile(p, t, w.b, &j, h.kend, s.kidx, &tile);)
        decode_tile(p, t, w, h, s, tile);
    decode_end(p, t, w, h, partial);
}

// Whether item w takes the decode path. It sums q.k along head_dim in another order than the
// row-block path: under batch invariance every row takes the row-block path, whatever its
// batch-mates.
static inline bool takes_decode_path(const Params &p, const WorkItem &w) {
    return kNV == 1 && w.rows <= kDecodeRows && p.shape.head_dim >= kL && !p.invariant;
}

static void forward_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch,
                         const Partial *partial) {
    if (takes_decode_path(p, w)) {
        decode_item(p, t, w, scratch, partial);
        return;
    }
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    Block blk[kM];
    const size_t nb = item_blocks(p, t, w, s, blk);
    const size_t dv = p.shape.head_dim_v, dp = kround_up(dv, kDT);
    zero_floats(s.zero, p.shape.head_dim);
    for (size_t bi = 0; bi < nb; ++bi) pack_queries(p, t, w, blk[bi].r, blk[bi].qt);
    run_tiles(p, t, w, blk, nb, s, true);
    for (size_t bi = 0; bi < nb; ++bi) hide_empty_sums(blk[bi].l, blk[bi].vis);

    for (size_t bi = 0; bi < nb; ++bi) {
        const Block &b = blk[bi];
        if (partial) { // [3 + dp][kRows]: m, l, vis, o; this block's lanes at bi * kR
            float *dst = partial->data + bi * kR;
            for (size_t x = 0; x < kR; ++x) {
                dst[x] = b.m[x];
                dst[kRows + x] = b.l[x];
                dst[2 * kRows + x] = b.vis[x];
            }
            for (size_t dd = 0; dd < dp; ++dd)
                for (size_t x = 0; x < kR; ++x) dst[(3 + dd) * kRows + x] = b.ot[dd * kR + x];
            continue;
        }
        // lse = m + log(l) (with the sink, see finish_lanes); rows with no visible key: out 0.
        bool divide;
        finish_lanes(p, t, b.r, b.m, b.l, b.vis, s.aux, s.lim, &divide);
        // Normalise the accumulator in place, a vector of lanes at a time (the same IEEE
        // quotients as one row at a time), then copy each lane's row out.
        const vf zero = vzero();
        vm vis[kNV];
        vf f[kNV];
        for (size_t n = 0; n < kNV; ++n) {
            vis[n] = vne(vload(b.vis + n * kL), zero);
            f[n] = vload(s.aux + n * kL);
        }
        for (size_t dd = 0; dd < dv; ++dd)
            for (size_t n = 0; n < kNV; ++n) {
                float *op = b.ot + dd * kR + n * kL;
                const vf x = divide ? vload(op) / f[n] : vload(op) * f[n];
                vstore(op, vsel(vis[n], x, zero));
            }
        float *orow[kR];
        for (size_t l = 0; l < b.r.n; ++l) {
            const size_t i = static_cast<size_t>(b.r.i[l]), h = b.r.h[l];
            orow[l] = t.out + out_index(p, t, w.b, h, i);
            if (t.lse) t.lse[lse_index(p, t, w.b, h, i)] = s.lim[l];
        }
        // whole groups of kL rows: kL x kL blocks transposed in registers; the rest by element
        const size_t lfull = b.r.n / kL * kL, dfull = dv / kL * kL;
        for (size_t l0 = 0; l0 < lfull; l0 += kL)
            for (size_t dd = 0; dd < dfull; dd += kL)
                vtranspose_unpack(b.ot + dd * kR + l0, kR, orow + l0, dd);
        for (size_t l = 0; l < b.r.n; ++l)
            for (size_t dd = l < lfull ? dfull : 0; dd < dv; ++dd) orow[l][dd] = b.ot[dd * kR + l];
    }
}

// The key-major walk of forward_heads. With token-major K/V (pages of FlashAttention's k_cache,
// BSHD) a token's KV heads are neighbours: 8 heads x 128 fp32 fill one 4 KiB page. One head
// walking a tile reads rows 4 KiB apart, each on a page of its own, where the hardware
// prefetchers stop and every row costs a TLB entry. Here every head reads a block of keys
// before the next block, so the pool streams in address order. Each head's arithmetic is the
// one of decode_tile (the same sums in the same order: the same bits).

// One block of the key-major and page-major walks: Q.K^T of nb (<= kQB) keys with rows kt,
// kt + kstep, ... for head h (an int8 key's scale at h.krows.scale[soff + u * srow] multiplies
// its sums, as in decode_qk_run), the sums into sc[rr * kBK + u].
template <DType T>
__attribute__((always_inline)) static inline void
walk_qk_block(const DecodeHead &h, const unsigned char *kt, size_t kstep, size_t nb, size_t soff,
              size_t srow, size_t dpad, size_t d, size_t nr, float *sc) {
    constexpr size_t QB = kQB;
    alignas(64) float sums[kDecodeRows * QB];
    const unsigned char *kr[QB];
    for (size_t u = 0; u < QB; ++u) kr[u] = kt + (u < nb ? u : 0) * kstep;
    decode_qk_block<T>(kr, h.q, dpad, d, sums);
    if (T == DType::I8) {
        const float *kst = h.krows.scale + soff;
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < QB; ++u) sums[rr * QB + u] *= kst[(u < nb ? u : 0) * srow];
    }
    for (size_t rr = 0; rr < nr; ++rr)
        for (size_t u = 0; u < nb; ++u) sc[rr * kBK + u] = sums[rr * QB + u];
}

// Q.K^T of nk consecutive keys from jt for the n heads (K in storage T, head_dim a multiple of
// kL; an int8 key's scale multiplies its sums, as in decode_qk_run); the K rows of the keys
// `ahead` on are requested (as in decode_qk_tile, a few KiB of the walk ahead). Out of line, as
// decode_qk_pages: inlined into forward_heads' type dispatch, the walks measured 1.02-1.06x.
template <DType T>
__attribute__((noinline)) static void decode_qk_heads(DecodeHead *hs, size_t n, size_t jt,
                                                      size_t nk, size_t klim, size_t d, size_t nr) {
    const KvRows &k0 = hs[0].krows;
    const size_t dpad = kround_up(d, kL), kbytes = d * k0.elem, kstep = k0.row * k0.elem;
    constexpr size_t QB = kQB;
    // a whole number of blocks, so that a run cut where its targets cross a page ends in whole
    // blocks too (16-key pages: runs of 14 and 2 keys, not 15 and 1)
    const size_t ahead = kround_up(kmax(kPrefetchBytes / (n * kbytes), 1), QB);
    for (size_t x = 0; x < nk;) {
        // a run of keys in one page whose prefetch targets are in one page too
        const size_t j = jt + x, ja = j + ahead;
        size_t m = kmin(nk - x, k0.run_from(j));
        const bool pf = ja < klim;
        if (pf) m = kmin(m, kmin(klim - ja, k0.run_from(ja)));
        size_t doff, aoff = 0, soff, asoff;
        k0.locate(j, &doff, &soff); // soff: the scales' offset, also the same for every head
        if (pf) k0.locate(ja, &aoff, &asoff);
        doff *= k0.elem; // bytes from a head's base, the same for every head
        aoff *= k0.elem;
        for (size_t x0 = 0; x0 < m; x0 += QB) {
            const size_t nb = kmin(QB, m - x0);
            for (size_t h = 0; h < n; ++h) {
                const unsigned char *kt = hs[h].krows.base + doff + x0 * kstep;
                if (pf)
                    prefetch_rows(hs[h].krows.base + aoff + x0 * kstep, kbytes, kstep, nullptr, 0,
                                  0, nb);
                walk_qk_block<T>(hs[h], kt, kstep, nb, soff + x0 * k0.srow, k0.srow, dpad, d, nr,
                                 hs[h].sc + x + x0);
            }
        }
        x += m;
    }
}

// Head-passes (kPVKeys keys of one head) ahead whose V rows decode_pv_heads requests.
constexpr size_t kPVAhead = 2;

// P.V of nk consecutive keys from jt, all visible, for the n heads (V in storage T): every
// head's pass of kPVKeys keys (decode_pv_rows) before the next pass; while a head works, the V
// rows of the head-pass kPVAhead on are requested. An int8 pass's probabilities are multiplied
// by their rows' scales first (into ps, [kDecodeRows][kBK], as decode_pv_tile does).
template <DType T>
static inline void decode_pv_heads(DecodeHead *hs, size_t n, size_t jt, size_t nk, size_t dv,
                                   size_t nr, const unsigned char **row0, float *ps) {
    const KvRows &v0 = hs[0].vb;
    const size_t dvpad = kround_up(dv, kL), vbytes = dv * v0.elem, vstep = v0.row * v0.elem;
    size_t soff[T == DType::I8 ? kBK : 1]; // int8: the rows' scale offsets (any head)
    for (size_t x = 0; x < nk; ++x) { // the first head's rows; another's are as far from its base
        if (x && v0.slot_of_run(jt + x)) {
            row0[x] = row0[x - 1] + vstep;
            if (T == DType::I8) soff[x] = soff[x - 1] + v0.srow;
            continue;
        }
        size_t doff, so;
        v0.locate(jt + x, &doff, &so);
        row0[x] = v0.base + doff * v0.elem;
        if (T == DType::I8) soff[x] = so;
    }
    const size_t passes = (nk + kPVKeys - 1) / kPVKeys;
    auto request = [&](size_t pass, size_t h) {
        const size_t x0 = pass * kPVKeys, cnt = kmin(kPVKeys, nk - x0);
        for (size_t u = 0; u < cnt; ++u)
            prefetch_rows(row0[x0 + u] + (hs[h].vb.base - v0.base), vbytes, 0, nullptr, 0, 0, 1);
    };
    for (size_t a = 0; a < kPVAhead && a < passes * n; ++a) request(a / n, a % n);
    for (size_t pass = 0; pass < passes; ++pass) {
        const size_t x0 = pass * kPVKeys, cnt = kmin(kPVKeys, nk - x0);
        for (size_t h = 0; h < n; ++h) {
            const size_t ahead = pass * n + h + kPVAhead;
            if (ahead < passes * n) request(ahead / n, ahead % n);
            const unsigned char *rows[kPVKeys];
            const ptrdiff_t dh = hs[h].vb.base - v0.base;
            for (size_t u = 0; u < cnt; ++u) rows[u] = row0[x0 + u] + dh;
            const float *pr = hs[h].sc + x0;
            if (T == DType::I8) {
                for (size_t rr = 0; rr < kDecodeRows; ++rr)
                    for (size_t u = 0; u < cnt; ++u)
                        ps[rr * kBK + x0 + u] =
                            hs[h].sc[rr * kBK + x0 + u] * hs[h].vb.scale[soff[x0 + u]];
                pr = ps + x0;
            }
            decode_pv_rows<T>(rows, cnt, pr, dv, nr, hs[h].o, dvpad);
        }
    }
}

// The page-major walk of forward_heads, for head-major pages (vLLM CPU / OpenVINO: a page holds
// each KV head's rows in turn). Within a page, head after head, so the page streams in address
// order; while a head works on its rows, the next head's rows of the page (or the first head's
// of the next page) are requested. Each head's arithmetic is the one of decode_tile.

// A run of the page-major walk: m keys from key j in one page, their rows at doff and scales
// at soff (offsets from a head's base, the same for every head), and the next run's (nm keys,
// 0: none before `end`).
struct PageRun {
    size_t m, doff, soff, nm = 0, ndoff = 0, nsoff = 0;
};

static inline PageRun page_run(const KvRows &r, size_t j, size_t left, size_t end, size_t doff,
                               size_t soff) {
    PageRun run;
    run.m = kmin(left, r.run_from(j));
    run.doff = doff;
    run.soff = soff;
    if (j + run.m < end) {
        r.locate(j + run.m, &run.ndoff, &run.nsoff);
        run.nm = kmin(end - (j + run.m), r.run_from(j + run.m));
    }
    return run;
}

// The rows requested during a head's turn in a run: the next head's rows of the run (next_head:
// its base), or after the last head the first head's of the next run; *pm of them.
static inline const unsigned char *run_request(const unsigned char *next_head,
                                               const unsigned char *first_head, const PageRun &run,
                                               size_t elem, size_t *pm) {
    if (next_head) {
        *pm = run.m;
        return next_head + run.doff * elem;
    }
    *pm = run.nm;
    return run.nm ? first_head + run.ndoff * elem : nullptr;
}

template <DType T>
__attribute__((noinline)) static void decode_qk_pages(DecodeHead *hs, size_t n, size_t jt,
                                                      size_t nk, size_t klim, size_t d, size_t nr) {
    const KvRows &k0 = hs[0].krows;
    const size_t dpad = kround_up(d, kL), kbytes = d * k0.elem, kstep = k0.row * k0.elem;
    constexpr size_t QB = kQB;
    size_t doff, soff;
    k0.locate(jt, &doff, &soff);
    for (size_t x = 0; x < nk;) {
        const PageRun run = page_run(k0, jt + x, nk - x, klim, doff, soff); // next: up to klim
        const size_t m = run.m;
        for (size_t h = 0; h < n; ++h) {
            const unsigned char *kt = hs[h].krows.base + doff * k0.elem;
            size_t pm;
            const unsigned char *pt = run_request(h + 1 < n ? hs[h + 1].krows.base : nullptr,
                                                  hs[0].krows.base, run, k0.elem, &pm);
            for (size_t x0 = 0; x0 < m; x0 += QB) {
                const size_t nb = kmin(QB, m - x0);
                if (pt && x0 < pm)
                    prefetch_rows(pt + x0 * kstep, kbytes, kstep, nullptr, 0, 0, kmin(nb, pm - x0));
                walk_qk_block<T>(hs[h], kt + x0 * kstep, kstep, nb, soff + x0 * k0.srow, k0.srow,
                                 dpad, d, nr, hs[h].sc + x + x0);
            }
            if (pt && pm > m) prefetch_rows(pt + m * kstep, kbytes, kstep, nullptr, 0, 0, pm - m);
        }
        x += m;
        doff = run.ndoff;
        soff = run.nsoff;
    }
}

// P.V of the page-major walk (see decode_qk_pages), all keys visible; int8 as decode_pv_heads.
template <DType T>
static inline void decode_pv_pages(DecodeHead *hs, size_t n, size_t jt, size_t nk, size_t dv,
                                   size_t nr, float *ps) {
    const KvRows &v0 = hs[0].vb;
    const size_t dvpad = kround_up(dv, kL), vbytes = dv * v0.elem, vstep = v0.row * v0.elem;
    size_t doff, soff;
    v0.locate(jt, &doff, &soff);
    for (size_t x = 0; x < nk;) {
        const PageRun run = page_run(v0, jt + x, nk - x, jt + nk, doff, soff); // next: the tile's
        const size_t m = run.m;
        for (size_t h = 0; h < n; ++h) {
            const unsigned char *vt = hs[h].vb.base + doff * v0.elem;
            size_t pm;
            const unsigned char *pt = run_request(h + 1 < n ? hs[h + 1].vb.base : nullptr,
                                                  hs[0].vb.base, run, v0.elem, &pm);
            for (size_t x0 = 0; x0 < m; x0 += kPVKeys) {
                const size_t cnt = kmin(kPVKeys, m - x0);
                if (pt && x0 < pm) // the next segment's rows, a pass at a time (the last: the rest)
                    prefetch_rows(pt + x0 * vstep, vbytes, vstep, nullptr, 0, 0,
                                  x0 + kPVKeys >= m ? pm - x0 : kmin(cnt, pm - x0));
                const unsigned char *rows[kPVKeys];
                for (size_t u = 0; u < cnt; ++u) rows[u] = vt + (x0 + u) * vstep;
                const float *pr = hs[h].sc + x + x0;
                if (T == DType::I8) {
                    const float *vst = hs[h].vb.scale + soff + x0 * v0.srow;
                    for (size_t rr = 0; rr < kDecodeRows; ++rr)
                        for (size_t u = 0; u < cnt; ++u)
                            ps[rr * kBK + x + x0 + u] =
                                hs[h].sc[rr * kBK + x + x0 + u] * vst[u * v0.srow];
                    pr = ps + x + x0;
                }
                decode_pv_rows<T>(rows, cnt, pr, dv, nr, hs[h].o, dvpad);
            }
        }
        x += m;
        doff = run.ndoff;
        soff = run.nsoff;
    }
}

static void forward_heads(const Params &p, const Tensors &t, const WorkItem *ws, size_t n,
                          void *scratch, const Partial *partials) {
    const WorkItem &w0 = ws[0];
    bool together = takes_decode_path(p, w0) && n <= kDecodeHeads;
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    DecodeHead hs[kDecodeHeads];
    if (together) {
        const size_t qf = kDecodeRows * kround_up(p.shape.head_dim, kL);
        const size_t of = kDecodeRows * kround_up(p.shape.head_dim_v, kL);
        const size_t scf = kDecodeRows * kBK;
        for (size_t x = 0; x < n; ++x) {
            float *q = x ? s.heads + (x - 1) * (qf + of + scf) : s.qt;
            float *o = x ? q + qf : s.ot;
            float *sc = x ? o + of : s.st;
            decode_begin(p, t, ws[x], q, o, sc, &hs[x]);
            // the heads share the tiles: the same rows (so key ranges) in the same entry
            together = together && ws[x].b == w0.b && ws[x].r0 == w0.r0 && ws[x].rows == w0.rows &&
                       ws[x].k_begin == w0.k_begin && ws[x].k_end == w0.k_end &&
                       hs[x].kbeg == hs[0].kbeg && hs[x].kend == hs[0].kend;
        }
    }
    if (!together) {
        for (size_t x = 0; x < n; ++x)
            forward_item(p, t, ws[x], scratch, partials ? &partials[x] : nullptr);
        return;
    }
    // Tiles of consecutive keys take the key-major walk, or over head-major pages the
    // page-major one (but pages too short for runs); tiles with a hidden key take
    // decode_tile's P.V head by head.
    const DType kt = p.k_type, vt = p.v_type;
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v, nr = w0.rows;
    const bool key_major = d % kL == 0 && (!t.block_table || p.page_size >= kRunPage);
    const bool page_major = page_major_pages(p);
    TileInfo tile;
    for (size_t j = hs[0].kbeg; next_tile(p, t, w0.b, &j, hs[0].kend, s.kidx, &tile);) {
        const size_t jt = tile.jbase + s.kidx[0], nk = tile.nk;
        const bool km = key_major && s.kidx[nk - 1] == s.kidx[0] + nk - 1;
        if (km)
            with_type(kt, [&](auto tag) {
                constexpr DType T = decltype(tag)::value;
                if (page_major)
                    decode_qk_pages<T>(hs, n, jt, nk, hs[0].kend, d, nr);
                else
                    decode_qk_heads<T>(hs, n, jt, nk, hs[0].kend, d, nr);
            });
        else
            for (size_t x = 0; x < n; ++x) decode_tile_qk(p, ws[x], hs[x], s, tile);
        bool partial[kDecodeHeads], any_partial = false;
        for (size_t x = 0; x < n; ++x) {
            partial[x] = decode_tile_softmax(p, t, ws[x], hs[x], s, tile);
            any_partial = any_partial || partial[x];
        }
        if (km && !any_partial)
            with_type(vt, [&](auto tag) {
                constexpr DType T = decltype(tag)::value;
                if (page_major)
                    decode_pv_pages<T>(hs, n, jt, nk, dv, nr, s.ps);
                else
                    decode_pv_heads<T>(hs, n, jt, nk, dv, nr, s.vraw, s.ps);
            });
        else
            for (size_t x = 0; x < n; ++x) decode_tile_pv(p, ws[x], hs[x], s, tile, partial[x]);
    }
    for (size_t x = 0; x < n; ++x)
        decode_end(p, t, ws[x], hs[x], partials ? &partials[x] : nullptr);
}
