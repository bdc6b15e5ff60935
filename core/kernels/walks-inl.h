// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// The walks of several KV heads through one decode tile (KernelInfo::forward_heads): key-major
// over token-major K/V, page-major over small head-major pages, so that memory streams in
// address order. Included by body-inl.h inside the ISA namespace, after decode-inl.h.

// The key-major walk of forward_heads. With token-major K/V (pages of FlashAttention's k_cache,
// BSHD) a token's KV heads are neighbours: 8 heads x 128 fp32 fill one 4 KiB page. One head
// walking a tile reads rows 4 KiB apart, each on a page of its own, where the hardware
// prefetchers stop and every row costs a TLB entry. Here every head reads a block of keys
// before the next block, so the pool streams in address order. Each head's arithmetic is the
// one of decode_tile (the same sums in the same order: the same bits).

// One block of the key-major and page-major walks: Q.K^T of nb (<= QB) keys with rows kt,
// kt + kstep, ... for head h (an int8 key's scale at h.krows.scale[soff + u * srow] multiplies
// its sums, as in decode_qk_run), the sums into sc[rr * kBK + u].
template <DType T, size_t QB>
__attribute__((always_inline)) static inline void
walk_qk_block(const DecodeHead &h, const unsigned char *kt, size_t kstep, size_t nb, size_t soff,
              size_t srow, size_t dpad, size_t d, size_t nr, float *sc) {
    alignas(64) float sums[kQSums];
    const unsigned char *kr[QB];
    for (size_t u = 0; u < QB; ++u) kr[u] = kt + (u < nb ? u : 0) * kstep;
    decode_qk_block<T, QB>(kr, h.q, dpad, d, sums);
    if (has_scale(T)) {
        const float *kst = h.krows.scale + soff;
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < QB; ++u) sums[rr * QB + u] *= kst[(u < nb ? u : 0) * srow];
    }
    for (size_t rr = 0; rr < nr; ++rr)
        for (size_t u = 0; u < nb; ++u) sc[rr * kBK + u] = sums[rr * QB + u];
}

// Keys of the walks' next block with r left in a run: run_keys<T>() (3 for int8 on AVX2), but
// a run's last 4 keys as two blocks of 2 (16-key pages: 3, 3, 3, 3, 2, 2), so that no block
// computes repeated keys but a run of 1.
template <DType T> static inline size_t walk_block(size_t r) {
    constexpr size_t QB = run_keys<T>();
    return QB == 3 && r == 4 ? 2 : kmin(QB, r);
}

// walk_qk_block of nb keys, by the block size that holds them
template <DType T>
__attribute__((always_inline)) static inline void
walk_qk(const DecodeHead &h, const unsigned char *kt, size_t kstep, size_t nb, size_t soff,
        size_t srow, size_t dpad, size_t d, size_t nr, float *sc) {
    if (run_keys<T>() == 3 && nb == 3)
        walk_qk_block<T, 3>(h, kt, kstep, nb, soff, srow, dpad, d, nr, sc);
    else
        walk_qk_block<T, kQB>(h, kt, kstep, nb, soff, srow, dpad, d, nr, sc);
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
    const size_t ahead = kround_up(kmax(decode_prefetch_bytes() / (n * kbytes), 1), QB);
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
        for (size_t x0 = 0, nb; x0 < m; x0 += nb) {
            nb = walk_block<T>(m - x0);
            for (size_t h = 0; h < n; ++h) {
                const unsigned char *kt = hs[h].krows.base + doff + x0 * kstep;
                if (pf)
                    prefetch_rows(hs[h].krows.base + aoff + x0 * kstep, kbytes, kstep, nullptr, 0,
                                  0, nb);
                walk_qk<T>(hs[h], kt, kstep, nb, soff + x0 * k0.srow, k0.srow, dpad, d, nr,
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
    size_t soff[has_scale(T) ? kBK : 1]; // int8: the rows' scale offsets (any head)
    for (size_t x = 0; x < nk; ++x) { // the first head's rows; another's are as far from its base
        if (x && v0.same_page(jt + x - 1, 2)) { // the next row, as in decode_pv_tile
            row0[x] = row0[x - 1] + vstep;
            if (has_scale(T)) soff[x] = soff[x - 1] + v0.srow;
            continue;
        }
        size_t doff, so;
        v0.locate(jt + x, &doff, &so);
        row0[x] = v0.base + doff * v0.elem;
        if (has_scale(T)) soff[x] = so;
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
            if (has_scale(T)) {
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
// of the next page) are requested, and fp32 rows of the head after that into L2 (run_request). Each
// head's arithmetic is the one of decode_tile.

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

// The rows of the head-turn `ahead` (1 or 2) after head h's turn in a run, requested during it:
// head h + ahead of this run or, past the last head, head h + ahead - n of the next run (base(x):
// head x's base); *pm of them. fp32 rows are requested into L1 one turn ahead and into L2 two
// turns ahead: a turn's 16 rows of d 128 take about as long as the memory needs to deliver them
// (page 16, 32k keys, GQA 32/8: 0.87-0.92x the time with the L2 request; two turns into L1
// 1.07-1.09x; 16-bit and int8 rows, 2-4 KiB a turn, gained nothing from it, and int8 lost 2-4 %).
template <class Base>
static inline const unsigned char *run_request(Base base, size_t h, size_t ahead, size_t n,
                                               const PageRun &run, size_t elem, size_t *pm) {
    const size_t a = h + ahead;
    if (a < n) {
        *pm = run.m;
        return base(a) + run.doff * elem;
    }
    *pm = a - n < n ? run.nm : 0;
    return *pm ? base(a - n) + run.ndoff * elem : nullptr;
}

template <DType T>
__attribute__((noinline)) static void decode_qk_pages(DecodeHead *hs, size_t n, size_t jt,
                                                      size_t nk, size_t klim, size_t d, size_t nr) {
    const KvRows &k0 = hs[0].krows;
    const size_t dpad = kround_up(d, kL), kbytes = d * k0.elem, kstep = k0.row * k0.elem;
    size_t doff, soff;
    k0.locate(jt, &doff, &soff);
    for (size_t x = 0; x < nk;) {
        const PageRun run = page_run(k0, jt + x, nk - x, klim, doff, soff); // next: up to klim
        const size_t m = run.m;
        for (size_t h = 0; h < n; ++h) {
            const unsigned char *kt = hs[h].krows.base + doff * k0.elem;
            auto base = [&](size_t y) { return hs[y].krows.base; };
            size_t pm, pm2 = 0;
            const unsigned char *pt = run_request(base, h, 1, n, run, k0.elem, &pm);
            const unsigned char *pt2 =
                T == DType::F32 ? run_request(base, h, 2, n, run, k0.elem, &pm2) : nullptr;
            for (size_t x0 = 0, nb; x0 < m; x0 += nb) {
                nb = walk_block<T>(m - x0);
                if (pt && x0 < pm)
                    prefetch_rows(pt + x0 * kstep, kbytes, kstep, nullptr, 0, 0, kmin(nb, pm - x0));
                if (pt2 && x0 < pm2)
                    prefetch_rows<2>(pt2 + x0 * kstep, kbytes, kstep, nullptr, 0, 0,
                                     kmin(nb, pm2 - x0));
                walk_qk<T>(hs[h], kt + x0 * kstep, kstep, nb, soff + x0 * k0.srow, k0.srow, dpad, d,
                           nr, hs[h].sc + x + x0);
            }
            if (pt && pm > m) prefetch_rows(pt + m * kstep, kbytes, kstep, nullptr, 0, 0, pm - m);
            if (pt2 && pm2 > m)
                prefetch_rows<2>(pt2 + m * kstep, kbytes, kstep, nullptr, 0, 0, pm2 - m);
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
            auto base = [&](size_t y) { return hs[y].vb.base; };
            size_t pm, pm2 = 0;
            const unsigned char *pt = run_request(base, h, 1, n, run, v0.elem, &pm);
            const unsigned char *pt2 =
                T == DType::F32 ? run_request(base, h, 2, n, run, v0.elem, &pm2) : nullptr;
            for (size_t x0 = 0; x0 < m; x0 += kPVKeys) {
                const size_t cnt = kmin(kPVKeys, m - x0);
                const bool last = x0 + kPVKeys >= m;
                if (pt && x0 < pm) // the next segment's rows, a pass at a time (the last: the rest)
                    prefetch_rows(pt + x0 * vstep, vbytes, vstep, nullptr, 0, 0,
                                  last ? pm - x0 : kmin(cnt, pm - x0));
                if (pt2 && x0 < pm2)
                    prefetch_rows<2>(pt2 + x0 * vstep, vbytes, vstep, nullptr, 0, 0,
                                     last ? pm2 - x0 : kmin(cnt, pm2 - x0));
                const unsigned char *rows[kPVKeys];
                for (size_t u = 0; u < cnt; ++u) rows[u] = vt + (x0 + u) * vstep;
                const float *pr = hs[h].sc + x + x0;
                if (has_scale(T)) {
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
        // Under batch invariance Q.K^T takes decode_tile's order head by head (the walks sum
        // along head_dim), and int8 V rows are widened with their scales (decode_tile_pv).
        const bool km_qk = km && !p.invariant, km_pv = km && !(p.invariant && has_scale(vt));
        if (km_qk)
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
        if (km_pv && !any_partial)
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
