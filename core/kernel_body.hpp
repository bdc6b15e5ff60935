// Flash-style attention kernel body, written once for every ISA.
//
// Included by core/kernel_<isa>.cpp INSIDE namespace attn::core::<isa> (so every ISA's copy has
// its own symbols; highway's HWY_NAMESPACE idea). Before including, the TU defines:
//   vf, vm                      vector of floats, and its lane mask
//   kL                          lanes of vf
//   kNV, kKT, kDT, kBK          register blocking: query vectors per item, key rows per Q.K^T
//                               block, head_dim values per P.V block, keys per tile
//   vload vstore vbcast vzero vfma(a, b, c) = a*b + c, vmax, vexp, vlog, vsel(m, a, b),
//   vlt, veq, vne, vand, vor, vany
// and includes nothing else after it. No std:: function is called here (see kernel.hpp).
//
// Layout inside one work item (R = kL * kNV lanes = rows of the item; "T" marks a transposed,
// lane-minor layout so that every vector op runs across queries):
//   qt[head_dim][R]      scale * q, transposed: one vector load per head_dim step
//   st[kBK][R]           scores of the current key tile, row = key, lanes = queries
//   ot[dpad][R]          unnormalised output accumulator, row = head_dim index
//   m[R], l[R], vis[R]   running max, running sum (online softmax, Milakov & Gimelshein 2018;
//                        FlashAttention, Dao et al. 2022) and "has any visible key" flag
// Keys are read only through kidx[] (the tile's visible-candidate key indices): padding keys are
// compacted away before the tile is formed, so a padded K or V row is never read.

constexpr size_t kR = kL * kNV;
constexpr float kNegInf = -__builtin_inff();

static inline size_t kmin(size_t a, size_t b) {
    return a < b ? a : b;
}
static inline size_t kround_up(size_t x, size_t m) {
    return (x + m - 1) / m * m;
}

// Row blocks per item: a work item holds kM blocks of kR rows that share every K/V tile, so a
// tile is fetched from L2/L3 once per kM * kR queries rather than once per kR (at head_dim 128
// and seq 2048 one head's K and V are 2 MiB: they do not stay in L2 between items).
constexpr size_t kM = kNV == 1 ? 1 : 4;
constexpr size_t kRows = kM * kR;

// Scratch carving. All float blocks start 64-byte aligned. Per-block state is kM times.
struct Scratch {
    float *qt, *st, *ot, *m, *l, *vis, *lim, *mask, *arow, *kpack, *vpack, *zero;
    const float **krow, **vrow;
    unsigned *kidx;
};

static inline size_t scratch_layout(const Params &p, unsigned char *base, Scratch *s) {
    const size_t d = p.shape.head_dim, dp = kround_up(d, kDT);
    size_t off = 0;
    auto take = [&](size_t bytes) {
        unsigned char *ptr = base ? base + off : nullptr;
        off += kround_up(bytes, 64);
        return ptr;
    };
    Scratch x;
    x.qt = reinterpret_cast<float *>(take(sizeof(float) * kM * d * kR));
    x.ot = reinterpret_cast<float *>(take(sizeof(float) * kM * dp * kR));
    x.m = reinterpret_cast<float *>(take(sizeof(float) * kM * kR));
    x.l = reinterpret_cast<float *>(take(sizeof(float) * kM * kR));
    x.vis = reinterpret_cast<float *>(take(sizeof(float) * kM * kR));
    x.st = reinterpret_cast<float *>(take(sizeof(float) * (kBK + kKT) * kR));
    x.lim = reinterpret_cast<float *>(take(sizeof(float) * kR));
    x.mask = reinterpret_cast<float *>(take(sizeof(float) * kBK * kR));
    x.arow = reinterpret_cast<float *>(take(sizeof(float) * kBK * kR));
    x.kpack = reinterpret_cast<float *>(take(sizeof(float) * kBK * d));
    x.vpack = reinterpret_cast<float *>(take(sizeof(float) * kBK * dp));
    x.zero = reinterpret_cast<float *>(take(sizeof(float) * d));
    x.krow = reinterpret_cast<const float **>(take(sizeof(float *) * (kBK + kKT)));
    x.vrow = reinterpret_cast<const float **>(take(sizeof(float *) * kBK));
    x.kidx = reinterpret_cast<unsigned *>(take(sizeof(unsigned) * kBK));
    if (s) *s = x;
    return off;
}

static size_t scratch_bytes(const Params &p) {
    return scratch_layout(p, nullptr, nullptr);
}

// The rows of one item: query index and query head of each lane. Inactive lanes (beyond `rows`)
// repeat the last active row so that they never widen the causal range.
struct Rows {
    size_t n;
    long long i[kR];
    size_t h[kR];
    long long imin, imax;
};

// Rows [r0, r0 + rows) (rows <= kR) of the item's KV head.
static inline void block_rows(const Params &p, const WorkItem &w, size_t r0, size_t rows, Rows *r) {
    const size_t group = p.shape.heads_q / p.shape.heads_kv;
    r->n = rows;
    for (size_t l = 0; l < kR; ++l) {
        const size_t row = r0 + (l < rows ? l : rows - 1);
        r->i[l] = static_cast<long long>(row / group);
        r->h[l] = w.kvh * group + row % group;
    }
    r->imin = r->i[0];
    r->imax = r->i[rows - 1];
}

// One row block of an item and its online-softmax state (pointers into Scratch).
struct Block {
    Rows r;
    float *qt, *ot, *m, *l, *vis;
    size_t kend; // keys at or past kend are causally hidden from every row of the block
};

static inline size_t item_blocks(const Params &p, const WorkItem &w, Scratch &s, Block *blk) {
    const size_t d = p.shape.head_dim, dp = kround_up(d, kDT);
    size_t nb = 0;
    for (size_t r0 = 0; r0 < w.rows; r0 += kR, ++nb) {
        Block &b = blk[nb];
        block_rows(p, w, w.r0 + r0, kmin(kR, w.rows - r0), &b.r);
        b.qt = s.qt + nb * d * kR;
        b.ot = s.ot + nb * dp * kR;
        b.m = s.m + nb * kR;
        b.l = s.l + nb * kR;
        b.vis = s.vis + nb * kR;
    }
    return nb;
}

// qt[dd][l] = scale * q[b][h_l][i_l][dd]
static inline void pack_queries(const Params &p, const Tensors &t, const WorkItem &w, const Rows &r,
                                float *qt) {
    const size_t d = p.shape.head_dim;
    for (size_t l = 0; l < kR; ++l) {
        const float *q =
            t.q + w.b * p.q.batch + r.h[l] * p.q.head + static_cast<size_t>(r.i[l]) * p.q.row;
        for (size_t dd = 0; dd < d; ++dd) qt[dd * kR + l] = q[dd] * p.scale;
    }
}

// Last key (exclusive) any row of the item may see under the causal rule, within [kb, ke).
static inline size_t causal_key_end(const Params &p, const Rows &r, size_t ke) {
    if (p.causal == Causal::None) return ke;
    const long long lim = r.imax + causal_offset(p) + 1;
    if (lim <= 0) return 0;
    return kmin(ke, static_cast<size_t>(lim));
}

// Collects up to kBK keys from `j` on (below `end`) that are not padding. Returns the number of
// keys; *next receives where the next tile starts. The span of one tile stays below 2^22 so the
// key offsets are exact in float.
static inline size_t gather_tile(const Params &p, const Tensors &t, size_t b, size_t j, size_t end,
                                 unsigned *kidx, size_t *next) {
    size_t nk = 0;
    const size_t span_end = kmin(end, j + (size_t(1) << 22));
    if (!t.key_valid) {
        const size_t stop = kmin(span_end, j + kBK);
        for (size_t jj = j; jj < stop; ++jj) kidx[nk++] = static_cast<unsigned>(jj - j);
        *next = stop;
        return nk;
    }
    const uint8_t *kv = t.key_valid + b * p.shape.seq_k;
    size_t jj = j;
    for (; jj < span_end && nk < kBK; ++jj)
        if (kv[jj]) kidx[nk++] = static_cast<unsigned>(jj - j);
    *next = jj;
    return nk;
}

// Byte-span tests eight bytes at a time: has_zero_byte(w) iff some byte of w is 0.
static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t w;
    __builtin_memcpy(&w, p, 8);
    return w;
}
static inline bool has_zero_byte(uint64_t w) {
    return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0;
}
// True when none of the bytes [p, p + n) is zero.
static inline bool all_nonzero(const uint8_t *p, size_t n) {
    size_t x = 0;
    for (; x + 8 <= n; x += 8)
        if (has_zero_byte(load_u64(p + x))) return false;
    for (; x < n; ++x)
        if (!p[x]) return false;
    return true;
}
// True when every byte of [p, p + n) is zero.
static inline bool all_zero(const uint8_t *p, size_t n) {
    size_t x = 0;
    for (; x + 8 <= n; x += 8)
        if (load_u64(p + x)) return false;
    for (; x < n; ++x)
        if (p[x]) return false;
    return true;
}

// Per-lane causal limit for a tile whose keys are offsets from `jbase`: key offset o is visible to
// lane l iff o < lim[l].
static inline void causal_limits(const Params &p, const Rows &r, size_t jbase, float *lim) {
    const long long off = causal_offset(p);
    for (size_t l = 0; l < kR; ++l) {
        long long v = r.i[l] + off + 1 - static_cast<long long>(jbase);
        if (v < 0) v = 0;
        if (v > (1LL << 23)) v = 1LL << 23;
        lim[l] = static_cast<float>(v);
    }
}

// allowed[i][jbase + kidx[t]] for the tile. Returns 1 when all are true (no mask needed), 0 when
// all are false (tile hidden), 2 when mixed (mask[t][l] holds 1/0).
static inline int allowed_tile(const Params &p, const Tensors &t, const Rows &r, size_t jbase,
                               const unsigned *kidx, size_t nk, Scratch &s) {
    const size_t sk = p.shape.seq_k;
    const size_t ni = static_cast<size_t>(r.imax - r.imin) + 1;
    const size_t span = kidx[nk - 1] + 1; // the tile's keys lie in [jbase, jbase + span)
    // Classify each query row over the whole span first (8 bytes at a time); the per-key mask is
    // only built when the tile really is mixed, so all-true or block-structured masks cost
    // ~nothing.
    unsigned char cls[kR]; // 1: all allowed, 0: none allowed, 2: mixed
    bool any_false = false, any_true = false;
    for (size_t qi = 0; qi < ni; ++qi) {
        const uint8_t *a = t.allowed + static_cast<size_t>(r.imin + qi) * sk + jbase;
        cls[qi] = all_nonzero(a, span) ? 1 : all_zero(a, span) ? 0 : 2;
        any_true |= cls[qi] != 0;
        any_false |= cls[qi] != 1;
    }
    if (!any_false) return 1;
    if (!any_true) return 0;
    for (size_t qi = 0; qi < ni; ++qi) {
        const uint8_t *a = t.allowed + static_cast<size_t>(r.imin + qi) * sk + jbase;
        float *row = s.arow + qi * kBK;
        if (cls[qi] == 2)
            for (size_t x = 0; x < nk; ++x) row[x] = a[kidx[x]] != 0 ? 1.0f : 0.0f;
        else
            for (size_t x = 0; x < nk; ++x) row[x] = cls[qi];
    }
    for (size_t x = 0; x < nk; ++x)
        for (size_t l = 0; l < kR; ++l)
            s.mask[x * kR + l] = s.arow[static_cast<size_t>(r.i[l] - r.imin) * kBK + x];
    return 2;
}

// st[t][R] = sum_dd krow[t][dd] * qt[dd][R] for kKT key rows (Q.K^T micro-kernel: kKT x kNV
// accumulators stay in registers; each step loads kNV query vectors and broadcasts kKT key values).
static inline void qk_block(const float *const *krow, const float *qt, size_t d, float *st) {
    vf acc[kKT][kNV];
    for (size_t k = 0; k < kKT; ++k)
        for (size_t n = 0; n < kNV; ++n) acc[k][n] = vzero();
    for (size_t dd = 0; dd < d; ++dd) {
        vf qv[kNV];
        for (size_t n = 0; n < kNV; ++n) qv[n] = vload(qt + dd * kR + n * kL);
        for (size_t k = 0; k < kKT; ++k) {
            const vf kb = vbcast(krow[k][dd]);
            for (size_t n = 0; n < kNV; ++n) acc[k][n] = vfma(kb, qv[n], acc[k][n]);
        }
    }
    for (size_t k = 0; k < kKT; ++k)
        for (size_t n = 0; n < kNV; ++n) vstore(st + k * kR + n * kL, acc[k][n]);
}

// ot[k][R] += sum_t vrow[t][off + k] * p[t][R] for k < kDT (P.V micro-kernel).
static inline void pv_block(const float *const *vrow, size_t off, const float *pt, size_t nk,
                            float *ot) {
    vf acc[kDT][kNV];
    for (size_t k = 0; k < kDT; ++k)
        for (size_t n = 0; n < kNV; ++n) acc[k][n] = vload(ot + k * kR + n * kL);
    for (size_t t = 0; t < nk; ++t) {
        vf pv[kNV];
        for (size_t n = 0; n < kNV; ++n) pv[n] = vload(pt + t * kR + n * kL);
        const float *vr = vrow[t] + off;
        for (size_t k = 0; k < kDT; ++k) {
            const vf vb = vbcast(vr[k]);
            for (size_t n = 0; n < kNV; ++n) acc[k][n] = vfma(vb, pv[n], acc[k][n]);
        }
    }
    for (size_t k = 0; k < kDT; ++k)
        for (size_t n = 0; n < kNV; ++n) vstore(ot + k * kR + n * kL, acc[k][n]);
}

// Score pipeline of one tile: raw scores (scale is folded into qt), then the mask. Later steps
// (softcap, ALiBi / additive bias, sliding window) slot in here as one more pass over st.
// Returns false when the whole tile is hidden from every row.
struct TileInfo {
    size_t nk = 0, jbase = 0;
    bool partial = false; // some key hidden from some (not all) rows
    // Rows [jbase, jbase + span) hold the tile's keys.
    size_t kidx_span(const unsigned *kidx) const { return nk ? kidx[nk - 1] + 1 : 0; }
};

static inline bool score_tile(const Params &p, const Tensors &t, const Block &blk, Scratch &s,
                              TileInfo &ti) {
    const size_t d = p.shape.head_dim, nk = ti.nk, jbase = ti.jbase;
    const Rows &r = blk.r;
    const long long off = causal_offset(p);
    // Which masks bite in this tile?
    const bool causal_partial =
        p.causal != Causal::None && static_cast<long long>(jbase + s.kidx[nk - 1]) > r.imin + off;
    int allow = 1;
    if (t.allowed) {
        allow = allowed_tile(p, t, r, jbase, s.kidx, nk, s);
        if (allow == 0) return false;
    }
    ti.partial = causal_partial || allow == 2;

    // Q.K^T over kKT-row blocks (s.krow was set for the tile; rows past nk point at a zero row
    // and are ignored afterwards).
    const size_t nkr = kround_up(nk, kKT);
    for (size_t x = 0; x < nkr; x += kKT) qk_block(s.krow + x, blk.qt, d, s.st + x * kR);

    // Mask: hidden scores become -inf (select, so NaN/Inf of a hidden key cannot leak).
    const vf ninf = vbcast(kNegInf), one = vbcast(1.0f);
    if (!ti.partial) {
        for (size_t n = 0; n < kNV; ++n) vstore(blk.vis + n * kL, one);
        return true;
    }
    vf lim[kNV], vis[kNV];
    if (causal_partial) causal_limits(p, r, jbase, s.lim);
    for (size_t n = 0; n < kNV; ++n) {
        lim[n] = causal_partial ? vload(s.lim + n * kL) : vbcast(16777216.0f);
        vis[n] = vload(blk.vis + n * kL);
    }
    const vf zero = vzero();
    for (size_t x = 0; x < nk; ++x) {
        const vf o = vbcast(static_cast<float>(s.kidx[x]));
        for (size_t n = 0; n < kNV; ++n) {
            vm ok = vlt(o, lim[n]);
            if (allow == 2) ok = vand(ok, vne(vload(s.mask + x * kR + n * kL), zero));
            vstore(s.st + x * kR + n * kL, vsel(ok, vload(s.st + x * kR + n * kL), ninf));
            vis[n] = vsel(ok, one, vis[n]);
        }
    }
    for (size_t n = 0; n < kNV; ++n) vstore(blk.vis + n * kL, vis[n]);
    return true;
}

// True when every value the tile's keys hold in V is finite.
static inline bool v_tile_finite(const Params &p, const Scratch &s, size_t nk) {
    const size_t d = p.shape.head_dim;
    const vf zero = vzero();
    vf acc = zero;
    float sacc = 0.0f;
    for (size_t x = 0; x < nk; ++x) {
        const float *v = s.vrow[x];
        size_t dd = 0;
        for (; dd + kL <= d; dd += kL) acc = vfma(vload(v + dd), zero, acc);
        for (; dd < d; ++dd) sacc += v[dd] * 0.0f;
    }
    float tmp[kL];
    vstore(tmp, acc);
    for (size_t x = 0; x < kL; ++x) sacc += tmp[x];
    return sacc == 0.0f;
}

// Software prefetch of `n` rows of `d` floats (64-byte lines) starting at row j. K and V rows are
// streamed once per item; in decode they come from DRAM and the hardware prefetcher does not
// ramp up on 64 short row streams, so each tile asks for the next tile's rows ahead of use.
// A prefetch never faults and feeds no value into the computation.
static inline void prefetch_rows(const float *base, size_t row_stride, size_t j, size_t n,
                                 size_t d) {
    for (size_t x = 0; x < n; ++x) {
        const char *row = reinterpret_cast<const char *>(base + (j + x) * row_stride);
        for (size_t off = 0; off < d * sizeof(float); off += 64) __builtin_prefetch(row + off);
    }
}

static void zero_floats(float *p, size_t n) {
    for (size_t x = 0; x < n; ++x) p[x] = 0.0f;
}

// Online softmax update of one block for the scores in s.st: new running max, rescale of the
// sum (and of the output accumulator when with_pv), probabilities exp(s - m) in place.
static inline void softmax_tile(Block &blk, Scratch &s, size_t nk, size_t dp, bool with_pv) {
    const vf ninf = vbcast(kNegInf), zero = vzero();
    vf mnew[kNV], msafe[kNV], alpha[kNV], lsum[kNV];
    bool rescale = false;
    for (size_t n = 0; n < kNV; ++n) {
        vf mt = ninf;
        for (size_t x = 0; x < nk; ++x) mt = vmax(mt, vload(s.st + x * kR + n * kL));
        const vf mold = vload(blk.m + n * kL);
        mnew[n] = vmax(mold, mt);
        msafe[n] = vsel(veq(mnew[n], ninf), zero, mnew[n]); // -inf - -inf would be NaN
        alpha[n] = vexp(mold - msafe[n]);
        rescale |= vany(vne(mold, mnew[n]));
        lsum[n] = zero;
    }
    for (size_t x = 0; x < nk; ++x)
        for (size_t n = 0; n < kNV; ++n) {
            const vf e = vexp(vload(s.st + x * kR + n * kL) - msafe[n]);
            vstore(s.st + x * kR + n * kL, e);
            lsum[n] = lsum[n] + e;
        }
    for (size_t n = 0; n < kNV; ++n) {
        vstore(blk.l + n * kL, vfma(vload(blk.l + n * kL), alpha[n], lsum[n]));
        vstore(blk.m + n * kL, mnew[n]);
    }
    if (with_pv && rescale)
        for (size_t dd = 0; dd < dp; ++dd)
            for (size_t n = 0; n < kNV; ++n)
                vstore(blk.ot + dd * kR + n * kL, vload(blk.ot + dd * kR + n * kL) * alpha[n]);
}

// ot += P.V for the tile (s.vrow rows hold at least dp = head_dim rounded up to kDT floats).
static inline void pv_tile(const Params &p, Block &blk, Scratch &s, const TileInfo &ti,
                           bool v_finite) {
    const size_t d = p.shape.head_dim, nk = ti.nk;
    if (ti.partial && !v_finite) {
        // Exact path: a hidden key's Inf/NaN value must not turn 0 * Inf into NaN.
        for (size_t x = 0; x < nk; ++x)
            for (size_t l = 0; l < kR; ++l) {
                const float pw = s.st[x * kR + l];
                if (pw == 0.0f) continue;
                for (size_t dd = 0; dd < d; ++dd) blk.ot[dd * kR + l] += pw * s.vrow[x][dd];
            }
        return;
    }
    const size_t dp = kround_up(d, kDT);
    for (size_t dd = 0; dd < dp; dd += kDT) pv_block(s.vrow, dd, s.st, nk, blk.ot + dd * kR);
}

// dst[0, n) = src[0, n), then zeros up to `padded`.
static inline void copy_row(float *dst, const float *src, size_t n, size_t padded) {
    size_t x = 0;
    for (; x + kL <= n; x += kL) vstore(dst + x, vload(src + x));
    for (; x < n; ++x) dst[x] = src[x];
    for (; x < padded; ++x) dst[x] = 0.0f;
}

// s.krow[x] -> K row of the tile's key x (rows past nk, up to a whole kKT block, -> a zero row).
// Rows that are not contiguous (BSHD: H * head_dim apart, often a multiple of 4 KiB, so a tile's
// rows would fight over a few L1 sets) are first copied into a contiguous tile.
static inline void set_key_rows(const Params &p, const float *kbase, const TileInfo &tile,
                                Scratch &s) {
    const size_t d = p.shape.head_dim;
    const bool pack = p.k.row != d;
    for (size_t x = 0; x < tile.nk; ++x) {
        const float *src = kbase + (tile.jbase + s.kidx[x]) * p.k.row;
        if (pack) copy_row(s.kpack + x * d, src, d, d);
        s.krow[x] = pack ? s.kpack + x * d : src;
    }
    for (size_t x = tile.nk; x < kround_up(tile.nk, kKT); ++x) s.krow[x] = s.zero;
}

// Runs the key tiles of one item over all its row blocks: each tile's keys are gathered, and
// its K/V rows located, once; every block then scores it, updates its softmax state and (forward
// mode) accumulates P.V, so the tile is read from memory once per item.
static void run_tiles(const Params &p, const Tensors &t, const WorkItem &w, Block *blk, size_t nb,
                      Scratch &s, size_t k_end, bool with_pv) {
    const size_t d = p.shape.head_dim, dp = kround_up(d, kDT);
    const vf ninf = vbcast(kNegInf), zero = vzero();
    // Strided V rows are copied into a contiguous tile (see set_key_rows), and V is padded to
    // whole kDT blocks when head_dim is not a multiple of kDT.
    const bool pack_v = p.v.row != d || dp != d;
    size_t kend = 0;
    for (size_t bi = 0; bi < nb; ++bi) {
        Block &b = blk[bi];
        for (size_t n = 0; n < kNV; ++n) {
            vstore(b.m + n * kL, ninf);
            vstore(b.l + n * kL, zero);
            vstore(b.vis + n * kL, zero);
        }
        if (with_pv) zero_floats(b.ot, dp * kR);
        b.kend = causal_key_end(p, b.r, k_end);
        if (b.kend > kend) kend = b.kend;
    }
    const float *vbase = with_pv ? t.v + w.b * p.v.batch + w.kvh * p.v.head : nullptr;
    const float *kbase = t.k + w.b * p.k.batch + w.kvh * p.k.head;
    size_t j = w.k_begin;
    while (j < kend) {
        TileInfo tile;
        size_t next = j;
        tile.jbase = j;
        tile.nk = gather_tile(p, t, w.b, j, kend, s.kidx, &next);
        j = next;
        const size_t nk = tile.nk;
        if (nk == 0) continue;
        // Few rows per item (decode) make the loop memory-bound: V rows of this tile arrive
        // during Q.K^T, K rows of the next tile during P.V. With many rows the tiles come from
        // cache and the prefetches only cost issue slots (-7% measured), so they are skipped.
        if (kNV == 1 && with_pv) {
            prefetch_rows(vbase, p.v.row, tile.jbase, tile.kidx_span(s.kidx), d);
            if (j < kend) prefetch_rows(kbase, p.k.row, j, kmin(kBK, kend - j), d);
        }
        set_key_rows(p, kbase, tile, s);
        bool v_checked = false, v_finite = true;
        if (with_pv)
            for (size_t x = 0; x < nk; ++x) {
                const float *src = vbase + (tile.jbase + s.kidx[x]) * p.v.row;
                if (pack_v) copy_row(s.vpack + x * dp, src, d, dp);
                s.vrow[x] = pack_v ? s.vpack + x * dp : src;
            }
        for (size_t bi = 0; bi < nb; ++bi) {
            Block &b = blk[bi];
            if (tile.jbase >= b.kend) continue; // every key of the tile is causally hidden
            TileInfo ti = tile;
            if (!score_tile(p, t, b, s, ti)) continue;
            softmax_tile(b, s, nk, dp, with_pv);
            if (!with_pv) continue;
            if (ti.partial && !v_checked) {
                v_finite = v_tile_finite(p, s, nk);
                v_checked = true;
            }
            pv_tile(p, b, s, ti, v_finite);
        }
    }
}

// ---- Decode: at most kDecodeRows query rows per KV head (GQA decode: the group, seq_q = 1) ----
// The row-lane layout would leave most lanes idle and issue head_dim broadcast-FMAs per key; here
// the vectors run along head_dim instead: each K and V vector is loaded once per key and used by
// every row, so a row costs head_dim / kL FMAs per key and the loop keeps up with memory.
constexpr size_t kDecodeRows = 4;
constexpr size_t kDB = kL >= 16 ? 4 : 2; // head_dim vectors per P.V register block

static inline float lane0(const vf &x) {
    float tmp[kL];
    vstore(tmp, x);
    return tmp[0];
}

// o[rr][c0 + c*kL ...] += sum_x p[rr][x] * v_x[c0 + c*kL ...] for CB vectors of head_dim.
template <size_t CB>
static inline void pv_decode_block(const float *const *vrow, size_t c0, const float *pr, size_t nk,
                                   float *o, size_t dpad) {
    vf acc[kDecodeRows][CB];
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t c = 0; c < CB; ++c) acc[rr][c] = vload(o + rr * dpad + c0 + c * kL);
    for (size_t x = 0; x < nk; ++x) {
        vf vv[CB];
        for (size_t c = 0; c < CB; ++c) vv[c] = vload(vrow[x] + c0 + c * kL);
        for (size_t rr = 0; rr < kDecodeRows; ++rr) {
            const vf pb = vbcast(pr[rr * kBK + x]);
            for (size_t c = 0; c < CB; ++c) acc[rr][c] = vfma(pb, vv[c], acc[rr][c]);
        }
    }
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t c = 0; c < CB; ++c) vstore(o + rr * dpad + c0 + c * kL, acc[rr][c]);
}

static void decode_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch,
                        const Partial *partial) {
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    Rows r;
    block_rows(p, w, w.r0, w.rows, &r);
    const size_t d = p.shape.head_dim, nr = w.rows, dv = d / kL * kL, dpad = kround_up(d, kL);
    float *q = s.qt;  // [kDecodeRows][dpad]  scale * q (rows past nr and the padding are 0)
    float *o = s.ot;  // [kDecodeRows][dpad]  unnormalised output
    float *sc = s.st; // [kDecodeRows][kBK]   scores, then probabilities
    float m[kDecodeRows], l[kDecodeRows];
    bool vis[kDecodeRows];
    for (size_t rr = 0; rr < kDecodeRows; ++rr) {
        const float *qs =
            t.q + w.b * p.q.batch + r.h[rr] * p.q.head + static_cast<size_t>(r.i[rr]) * p.q.row;
        for (size_t dd = 0; dd < dpad; ++dd)
            q[rr * dpad + dd] = rr < nr && dd < d ? qs[dd] * p.scale : 0.0f;
        zero_floats(o + rr * dpad, dpad);
        zero_floats(sc + rr * kBK, kBK);
        m[rr] = kNegInf;
        l[rr] = 0.0f;
        vis[rr] = false;
    }
    const long long off = causal_offset(p);
    const size_t kend = causal_key_end(p, r, w.k_end);
    const float *kbase = t.k + w.b * p.k.batch + w.kvh * p.k.head;
    const float *vbase = t.v + w.b * p.v.batch + w.kvh * p.v.head;
    const vf ninf = vbcast(kNegInf), zero = vzero();
    size_t j = w.k_begin;
    while (j < kend) {
        size_t next = j;
        const size_t jbase = j;
        const size_t nk = gather_tile(p, t, w.b, j, kend, s.kidx, &next);
        j = next;
        if (nk == 0) continue;
        prefetch_rows(vbase, p.v.row, jbase, s.kidx[nk - 1] + 1, d);
        if (j < kend) prefetch_rows(kbase, p.k.row, j, kmin(kBK, kend - j), d);

        // Scores: one pass over each K row serves every query row.
        for (size_t x = 0; x < nk; ++x) {
            const float *kr = kbase + (jbase + s.kidx[x]) * p.k.row;
            vf acc[kDecodeRows];
            for (size_t rr = 0; rr < kDecodeRows; ++rr) acc[rr] = zero;
            for (size_t dd = 0; dd < dv; dd += kL) {
                const vf kv = vload(kr + dd);
                for (size_t rr = 0; rr < kDecodeRows; ++rr)
                    acc[rr] = vfma(vload(q + rr * dpad + dd), kv, acc[rr]);
            }
            for (size_t rr = 0; rr < nr; ++rr) {
                float sum = vhsum(acc[rr]);
                for (size_t dd = dv; dd < d; ++dd) sum += q[rr * dpad + dd] * kr[dd];
                sc[rr * kBK + x] = sum;
            }
        }
        // Mask, then the online softmax of each row (vectorised over the tile's keys).
        bool partial_tile = false;
        const size_t nkv = kround_up(nk, kL);
        for (size_t rr = 0; rr < nr; ++rr) {
            float *srow = sc + rr * kBK;
            const uint8_t *al =
                t.allowed ? t.allowed + static_cast<size_t>(r.i[rr]) * p.shape.seq_k : nullptr;
            bool any = false;
            for (size_t x = 0; x < nk; ++x) {
                const size_t jj = jbase + s.kidx[x];
                const bool ok =
                    (p.causal == Causal::None || static_cast<long long>(jj) <= r.i[rr] + off) &&
                    (!al || al[jj]);
                if (!ok) srow[x] = kNegInf;
                any |= ok;
                partial_tile |= !ok;
            }
            for (size_t x = nk; x < nkv; ++x) srow[x] = kNegInf;
            vis[rr] = vis[rr] || any;
            vf mt = ninf;
            for (size_t x = 0; x < nkv; x += kL) mt = vmax(mt, vload(srow + x));
            float tmp[kL];
            vstore(tmp, mt);
            float mnew = m[rr];
            for (size_t e = 0; e < kL; ++e)
                if (tmp[e] > mnew || tmp[e] != tmp[e]) mnew = tmp[e];
            const float msafe = mnew == kNegInf ? 0.0f : mnew;
            const float alpha = lane0(vexp(vbcast(m[rr] - msafe)));
            vf lsum = zero;
            for (size_t x = 0; x < nkv; x += kL) {
                const vf e = vexp(vload(srow + x) - vbcast(msafe));
                vstore(srow + x, e);
                lsum = lsum + e;
            }
            l[rr] = l[rr] * alpha + vhsum(lsum);
            if (alpha != 1.0f)
                for (size_t dd = 0; dd < dpad; dd += kL)
                    vstore(o + rr * dpad + dd, vload(o + rr * dpad + dd) * vbcast(alpha));
            m[rr] = mnew;
        }
        // P.V: one pass over each V row serves every query row.
        for (size_t x = 0; x < nk; ++x) s.vrow[x] = vbase + (jbase + s.kidx[x]) * p.v.row;
        if (partial_tile && !v_tile_finite(p, s, nk)) {
            // Exact path: a hidden key's Inf/NaN value must not turn 0 * Inf into NaN.
            for (size_t x = 0; x < nk; ++x)
                for (size_t rr = 0; rr < nr; ++rr) {
                    const float pw = sc[rr * kBK + x];
                    if (pw == 0.0f) continue;
                    for (size_t dd = 0; dd < d; ++dd) o[rr * dpad + dd] += pw * s.vrow[x][dd];
                }
            continue;
        }
        size_t c0 = 0;
        for (; c0 + kDB * kL <= dv; c0 += kDB * kL)
            pv_decode_block<kDB>(s.vrow, c0, sc, nk, o, dpad);
        for (; c0 < dv; c0 += kL) pv_decode_block<1>(s.vrow, c0, sc, nk, o, dpad);
        for (size_t dd = dv; dd < d; ++dd)
            for (size_t x = 0; x < nk; ++x)
                for (size_t rr = 0; rr < nr; ++rr)
                    o[rr * dpad + dd] += sc[rr * kBK + x] * s.vrow[x][dd];
    }

    if (partial) { // the layout forward_item uses: [3 + dp][kRows]
        const size_t dp = kround_up(d, kDT);
        float *dst = partial->data;
        for (size_t rr = 0; rr < nr; ++rr) {
            dst[rr] = m[rr];
            dst[kRows + rr] = l[rr];
            dst[2 * kRows + rr] = vis[rr] ? 1.0f : 0.0f;
            for (size_t dd = 0; dd < dp; ++dd)
                dst[(3 + dd) * kRows + rr] = dd < d ? o[rr * dpad + dd] : 0.0f;
        }
        return;
    }
    for (size_t rr = 0; rr < nr; ++rr) {
        const size_t i = static_cast<size_t>(r.i[rr]), h = r.h[rr];
        float *out = t.out + w.b * p.out.batch + h * p.out.head + i * p.out.row;
        for (size_t dd = 0; dd < d; ++dd) out[dd] = vis[rr] ? o[rr * dpad + dd] / l[rr] : 0.0f;
        if (t.lse)
            t.lse[(w.b * p.shape.heads_q + h) * p.shape.seq_q + i] =
                vis[rr] ? m[rr] + lane0(vlog(vbcast(l[rr]))) : kNegInf;
    }
}

static void forward_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch,
                         const Partial *partial) {
    if (kNV == 1 && w.rows <= kDecodeRows && p.shape.head_dim >= kL) {
        decode_item(p, t, w, scratch, partial);
        return;
    }
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    Block blk[kM];
    const size_t nb = item_blocks(p, w, s, blk);
    const size_t d = p.shape.head_dim, dp = kround_up(d, kDT);
    zero_floats(s.zero, d);
    for (size_t bi = 0; bi < nb; ++bi) pack_queries(p, t, w, blk[bi].r, blk[bi].qt);
    run_tiles(p, t, w, blk, nb, s, w.k_end, true);

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
        // lse = m + log(l); rows with no visible key: out 0, lse -inf.
        const vf ninf = vbcast(kNegInf), zero = vzero();
        for (size_t n = 0; n < kNV; ++n) {
            const vm vis = vne(vload(b.vis + n * kL), zero);
            const vf lse = vload(b.m + n * kL) + vlog(vload(b.l + n * kL));
            vstore(s.lim + n * kL, vsel(vis, lse, ninf));
        }
        for (size_t l = 0; l < b.r.n; ++l) {
            const size_t i = static_cast<size_t>(b.r.i[l]), h = b.r.h[l];
            float *o = t.out + w.b * p.out.batch + h * p.out.head + i * p.out.row;
            const bool vis = b.vis[l] != 0.0f;
            const float denom = b.l[l];
            for (size_t dd = 0; dd < d; ++dd) o[dd] = vis ? b.ot[dd * kR + l] / denom : 0.0f;
            if (t.lse) t.lse[(w.b * p.shape.heads_q + h) * p.shape.seq_q + i] = s.lim[l];
        }
    }
}

// weights rows of the item: pass 1 finds m and l per row, pass 2 writes exp(s - m) / l.
static void weights_item(const Params &p, const Tensors &t, const WorkItem &w, void *scratch) {
    Scratch s;
    scratch_layout(p, static_cast<unsigned char *>(scratch), &s);
    Block blk[kM];
    const size_t nb = item_blocks(p, w, s, blk);
    const size_t d = p.shape.head_dim, sk = p.shape.seq_k;
    zero_floats(s.zero, d);
    for (size_t bi = 0; bi < nb; ++bi) pack_queries(p, t, w, blk[bi].r, blk[bi].qt);
    run_tiles(p, t, w, blk, nb, s, sk, false);

    const float *kbase = t.k + w.b * p.k.batch + w.kvh * p.k.head;
    const vf ninf = vbcast(kNegInf), zero = vzero(), one = vbcast(1.0f);
    for (size_t bi = 0; bi < nb; ++bi) {
        const Block &b = blk[bi];
        const Rows &r = b.r;
        float *rowp[kR];
        for (size_t l = 0; l < r.n; ++l) {
            rowp[l] = t.weights + ((w.b * p.shape.heads_q + r.h[l]) * p.shape.seq_q +
                                   static_cast<size_t>(r.i[l])) *
                                      sk;
            zero_floats(rowp[l], sk);
        }
        vf msafe[kNV], inv[kNV];
        for (size_t n = 0; n < kNV; ++n) {
            const vf m = vload(b.m + n * kL);
            msafe[n] = vsel(veq(m, ninf), zero, m);
            inv[n] = vsel(vne(vload(b.vis + n * kL), zero), one / vload(b.l + n * kL), zero);
        }
        size_t j = 0;
        while (j < b.kend) {
            TileInfo ti;
            size_t next = j;
            ti.jbase = j;
            ti.nk = gather_tile(p, t, w.b, j, b.kend, s.kidx, &next);
            j = next;
            if (ti.nk == 0) continue;
            set_key_rows(p, kbase, ti, s);
            if (!score_tile(p, t, b, s, ti)) continue;
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

static KernelInfo make_info(const KernelInfo *narrow) {
    return KernelInfo{kRows, kDT, &scratch_bytes, &forward_item, &weights_item, narrow};
}
