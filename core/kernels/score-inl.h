// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Score side of the kernel body: scratch, the rows of an item, key gathering, the masks and the
// score pipeline of one tile (Q.K^T, scale, softcap, bias, ALiBi, causal / window / allowed),
// and the online-softmax update. Included by body-inl.h inside the ISA namespace.

constexpr size_t kR = kL * kNV;
constexpr float kNegInf = -__builtin_inff();

static inline size_t kmin(size_t a, size_t b) {
    return a < b ? a : b;
}
static inline size_t kmax(size_t a, size_t b) {
    return a > b ? a : b;
}
static inline size_t kround_up(size_t x, size_t m) {
    return (x + m - 1) / m * m;
}
static inline long long lmin(long long a, long long b) {
    return a < b ? a : b;
}
static inline long long lmax(long long a, long long b) {
    return a > b ? a : b;
}

// Row blocks per item: a work item holds kM blocks of kR rows that share every K/V tile, so a
// tile is fetched from L2/L3 once per kM * kR queries rather than once per kR (at head_dim 128
// and seq 2048 one head's K and V are 2 MiB: they do not stay in L2 between items).
constexpr size_t kM = kNV == 1 ? 1 : 4;
constexpr size_t kRows = kM * kR;

// The decode path (decode_item) handles at most this many query rows per KV head.
constexpr size_t kDecodeRows = kDecodeRowsMax;

// "Unbounded" for key limits: far beyond any key index (< 2^31) but safe to add to.
constexpr long long kFar = 1LL << 40;

// Scratch carving. All float blocks start 64-byte aligned. Per-block state is kM times.
struct Scratch {
    float *qt, *st, *ot, *m, *l, *vis, *lim, *lo, *aux, *aux2, *mask, *arow, *kpack, *vpack, *zero;
    const float **krow, **vrow;
    const unsigned char **vraw; // decode: a tile's V rows in their storage type
    float *ps;                  // decode: an int8 tile's probabilities times its V scales
    unsigned *kidx;
    float *heads; // forward_heads: q, o and scores of kDecodeHeads heads past the first
    float *kt;    // decode under batch invariance: 2 kL keys transposed, their rows, a zero row
    // Integer Q.K^T (int8-inl.h): the blocks' query codes, scales and q.mean; a tile's key code
    // rows and scales (past the tile's keys: a zero row, scale 0).
    int32_t *q16;
    float *sq, *qm, *ksc;
    const int32_t **krow16;
    // Integer P.V (int8-inl.h): a block's probability code pairs.
    int32_t *pq;
};

static inline size_t scratch_layout(const Params &p, unsigned char *base, Scratch *s) {
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v, dp = kround_up(dv, kDT);
    size_t off = 0;
    auto take = [&](size_t bytes) {
        unsigned char *ptr = base ? base + off : nullptr;
        off += kround_up(bytes, 64);
        return ptr;
    };
    auto fl = [&](size_t n) { return reinterpret_cast<float *>(take(sizeof(float) * n)); };
    auto mx = [](size_t a, size_t b) { return a > b ? a : b; };
    Scratch x;
    x.qt = fl(mx(kM * d * kR, kDecodeRows * kround_up(d, kL)));
    x.ot = fl(mx(kM * dp * kR, kDecodeRows * kround_up(dv, kL)));
    x.m = fl(kM * kR);
    x.l = fl(kM * kR);
    x.vis = fl(kM * kR);
    x.st = fl(mx((kBK + kKT) * kR, kDecodeRows * kBK));
    x.lim = fl(kR);
    x.lo = fl(kR);
    x.aux = fl(kR);
    x.aux2 = fl(kBK); // decode: the int8 scales of a tile's V rows
    x.ps = fl(kDecodeRows * kBK);
    x.mask = fl(kBK * kR);
    x.arow = fl(kBK * kR);
    x.kpack = fl(kBK * d);
    x.vpack = fl(kBK * mx(dp, kround_up(dv, kL)));
    x.zero = fl(d);
    x.krow = reinterpret_cast<const float **>(take(sizeof(float *) * (kBK + 2 * kKT)));
    x.vrow = reinterpret_cast<const float **>(take(sizeof(float *) * kBK));
    x.vraw = reinterpret_cast<const unsigned char **>(take(sizeof(unsigned char *) * kBK));
    x.kidx = reinterpret_cast<unsigned *>(take(sizeof(unsigned) * kBK));
    x.heads = fl((kDecodeHeads - 1) * kDecodeRows * (kround_up(d, kL) + kround_up(dv, kL) + kBK));
    x.kt = fl((4 * kL + 1) * kround_up(d, kL));
    x.q16 = reinterpret_cast<int32_t *>(take(sizeof(int32_t) * kM * ((d + 1) / 2) * kR));
    x.sq = fl(kM * kR);
    x.qm = fl(kM * kR);
    x.ksc = fl(kBK + 2 * kQI);
    x.krow16 = reinterpret_cast<const int32_t **>(take(sizeof(int32_t *) * (kBK + 2 * kQI)));
    x.pq = reinterpret_cast<int32_t *>(take(sizeof(int32_t) * ((kBK + 1) / 2 + 1) * kR));
    if (s) *s = x;
    return off;
}

static size_t scratch_bytes(const Params &p) {
    return scratch_layout(p, nullptr, nullptr);
}

// The rows of one item: query index and query head of each lane, and the key range each lane
// may see under the causal rule and the sliding window ([lo, hi), padding aside). Inactive
// lanes (beyond `n`) repeat the last active row so that they never widen any range.
struct Rows {
    size_t n;
    long long i[kR];
    size_t h[kR];
    long long lo[kR], hi[kR];
    long long imin, imax;
    long long off; // diag(i) = i + off, the diagonal of the window and ALiBi
};

// Rows [r0, r0 + rows) (rows <= kR) of the item's KV head.
static inline void block_rows(const Params &p, const Tensors &t, const WorkItem &w, size_t r0,
                              size_t rows, Rows *r) {
    const size_t group = p.shape.heads_q / p.shape.heads_kv;
    const uint32_t *qmap = t.qmap ? t.qmap + w.b * p.shape.seq_q : nullptr;
    r->n = rows;
    const Diags dg = diag_offsets(p, t, w.b);
    r->off = dg.window;
    for (size_t l = 0; l < kR; ++l) {
        const size_t row = r0 + (l < rows ? l : rows - 1);
        const size_t qi = row / group;
        r->i[l] = static_cast<long long>(qmap ? qmap[qi] : qi);
        r->h[l] = w.kvh * group + row % group;
        long long hi = kFar, lo = -kFar;
        clip_to_visible(p, r->i[l], dg, &lo, &hi);
        r->lo[l] = lo;
        r->hi[l] = hi;
    }
    r->imin = r->i[0];
    r->imax = r->i[rows - 1];
}

// One row block of an item and its online-softmax state (pointers into Scratch).
struct Block {
    Rows r;
    float *qt, *ot, *m, *l, *vis;
    size_t kbeg, kend;     // keys outside [kbeg, kend) are hidden from every row of the block
    const float *brow[kR]; // bias row of each lane (at key 0), when there is a bias
    float slope[kR];       // ALiBi slope of each lane, when there is ALiBi
    bool q8;               // Q.K^T in integers (q16, sq, qm: quantize_queries)
    int32_t *q16;
    float *sq, *qm;
};

// Keys [kbeg, kend) of the block within the item's [k_begin, k_end).
static inline void block_key_range(const WorkItem &w, Block &b) {
    const long long lo = lmax(static_cast<long long>(w.k_begin), b.r.lo[0]);
    const long long hi = lmin(static_cast<long long>(w.k_end), b.r.hi[kR - 1]);
    b.kbeg = static_cast<size_t>(lo < 0 ? 0 : lo);
    b.kend = hi <= lo ? b.kbeg : static_cast<size_t>(hi);
}

static inline void block_operands(const Params &p, const Tensors &t, const WorkItem &w, Block &b) {
    for (size_t l = 0; l < kR; ++l) {
        b.brow[l] = t.bias ? t.bias + w.b * p.bias.batch + b.r.h[l] * p.bias.head +
                                 static_cast<size_t>(b.r.i[l]) * p.bias.row
                           : nullptr;
        b.slope[l] = t.alibi ? alibi_slope(p, t, w.b, b.r.h[l]) : 0.0f;
    }
}

static inline size_t item_blocks(const Params &p, const Tensors &t, const WorkItem &w, Scratch &s,
                                 Block *blk) {
    const size_t d = p.shape.head_dim, dp = kround_up(p.shape.head_dim_v, kDT);
    size_t nb = 0;
    for (size_t r0 = 0; r0 < w.rows; r0 += kR, ++nb) {
        Block &b = blk[nb];
        block_rows(p, t, w, w.r0 + r0, kmin(kR, w.rows - r0), &b.r);
        block_key_range(w, b);
        block_operands(p, t, w, b);
        b.qt = s.qt + nb * d * kR;
        b.ot = s.ot + nb * dp * kR;
        b.m = s.m + nb * kR;
        b.l = s.l + nb * kR;
        b.vis = s.vis + nb * kR;
        b.q8 = false;
        b.q16 = s.q16 + nb * ((d + 1) / 2) * kR;
        b.sq = s.sq + nb * kR;
        b.qm = s.qm + nb * kR;
    }
    return nb;
}

// qt[dd][l] = qs * q[b][h_l][i_l][dd] (q as q_in takes it), qs = scale when it is folded into q
// (fold_scale), else 1.
static inline void pack_queries(const Params &p, const Tensors &t, const WorkItem &w, const Rows &r,
                                float *qt) {
    const size_t d = p.shape.head_dim;
    const float qs = fold_scale(p) ? p.scale : 1.0f;
    if (p.q_type == DType::F32 && !t.q_scale) { // kL x kL blocks transposed in registers
        const float *rows[kR];
        for (size_t l = 0; l < kR; ++l)
            rows[l] = t.q + q_index(p, t, w.b, r.h[l], static_cast<size_t>(r.i[l]));
        const size_t dfull = d / kL * kL;
        for (size_t l0 = 0; l0 < kR; l0 += kL)
            for (size_t dd = 0; dd < dfull; dd += kL)
                vtranspose_pack(qt + dd * kR + l0, kR, rows + l0, dd, qs);
        for (size_t l = 0; l < kR; ++l)
            for (size_t dd = dfull; dd < d; ++dd) qt[dd * kR + l] = rows[l][dd] * qs;
        return;
    }
    for (size_t l = 0; l < kR; ++l) {
        const size_t q0 = q_index(p, t, w.b, r.h[l], static_cast<size_t>(r.i[l]));
        for (size_t dd = 0; dd < d; ++dd) qt[dd * kR + l] = q_in(p, t, q0 + dd, r.h[l]) * qs;
    }
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
    if (p.invariant || t.vq) { // a tile is the keys [j, j + kBK) that are not padding
        const size_t stop = kmin(span_end, j + kBK);
        for (size_t jj = j; jj < stop; ++jj)
            if (kv[jj]) kidx[nk++] = static_cast<unsigned>(jj - j);
        *next = stop;
        return nk;
    }
    size_t jj = j;
    for (; jj < span_end && nk < kBK; ++jj)
        if (kv[jj]) kidx[nk++] = static_cast<unsigned>(jj - j);
    *next = jj;
    return nk;
}

// 1 when no byte of [p, p + n) is zero, 0 when all are, 2 otherwise: eight bytes at a time and
// without a branch per word (a span is one tile; the loads of a row then overlap).
// (w - 0x01..) & ~w & 0x80.. is nonzero iff some byte of w is zero.
static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t w;
    __builtin_memcpy(&w, p, 8);
    return w;
}
static inline unsigned char byte_class(const uint8_t *p, size_t n) {
    uint64_t zero = 0, any = 0;
    size_t x = 0;
    for (; x + 8 <= n; x += 8) {
        const uint64_t w = load_u64(p + x);
        zero |= (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
        any |= w;
    }
    for (; x < n; ++x) {
        zero |= p[x] == 0;
        any |= p[x];
    }
    return !zero ? 1 : !any ? 0 : 2;
}

// Per-lane key limits for a tile whose keys are offsets o from `jbase`: key o is visible to lane
// l iff lo[l] < o < lim[l] (lo holds the first visible offset minus one).
static inline void lane_limits(const Rows &r, size_t jbase, float *lim, float *lo) {
    const long long jb = static_cast<long long>(jbase), cap = 1LL << 23;
    for (size_t l = 0; l < kR; ++l) {
        lim[l] = static_cast<float>(lmax(0, lmin(cap, r.hi[l] - jb)));
        lo[l] = static_cast<float>(lmax(-1, lmin(cap, r.lo[l] - jb - 1)));
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
    // ~nothing. With query padding the rows of a block need not be consecutive: rows between
    // them are classified too (harmless).
    if (ni > kR) { // rows far apart (query padding): one row at a time
        bool any_false = false, any_true = false;
        for (size_t x = 0; x < nk; ++x)
            for (size_t l = 0; l < kR; ++l) {
                const bool a = t.allowed[static_cast<size_t>(r.i[l]) * sk + jbase + kidx[x]] != 0;
                s.mask[x * kR + l] = a ? 1.0f : 0.0f;
                any_true |= a;
                any_false |= !a;
            }
        return !any_false ? 1 : !any_true ? 0 : 2;
    }
    unsigned char cls[kR]; // 1: all allowed, 0: none allowed, 2: mixed
    bool any_false = false, any_true = false;
    // The rows' bytes of the next tile are requested now: rows are seq_k bytes apart, and read
    // a few lines each they came from L3 one short burst at a time (an all-true mask cost 1.11x
    // the unmasked time at d64).
    const size_t next = jbase + span, next_end = kmin(sk, next + kBK);
    for (size_t qi = 0; next < next_end && qi < ni; ++qi) {
        const uint8_t *a = t.allowed + static_cast<size_t>(r.imin + qi) * sk;
        for (size_t j = next & ~size_t(63); j < next_end; j += 64) __builtin_prefetch(a + j);
    }
    for (size_t qi = 0; qi < ni; ++qi) {
        const uint8_t *a = t.allowed + static_cast<size_t>(r.imin + qi) * sk + jbase;
        cls[qi] = byte_class(a, span);
        any_true |= cls[qi] != 0;
        any_false |= cls[qi] != 1;
    }
    if (!any_false) return 1;
    if (!any_true) return 0;
    // arow[row][key] (1 / 0, padded to whole vectors), then mask[key][lane] by kL x kL
    // register transposes
    const size_t nkv = kround_up(nk, kL);
    const bool run = kidx[nk - 1] == kidx[0] + nk - 1; // no padding key inside the tile
    for (size_t qi = 0; qi < ni; ++qi) {
        const uint8_t *a = t.allowed + static_cast<size_t>(r.imin + qi) * sk + jbase;
        float *row = s.arow + qi * kBK;
        if (cls[qi] == 2 && run)
            for (size_t x = 0; x < nk; ++x) row[x] = a[kidx[0] + x] != 0 ? 1.0f : 0.0f;
        else if (cls[qi] == 2)
            for (size_t x = 0; x < nk; ++x) row[x] = a[kidx[x]] != 0 ? 1.0f : 0.0f;
        else
            for (size_t x = 0; x < nk; ++x) row[x] = cls[qi];
        for (size_t x = nk; x < nkv; ++x) row[x] = 0.0f;
    }
    for (size_t n = 0; n < kNV; ++n) {
        const float *rows[kL];
        for (size_t l = 0; l < kL; ++l)
            rows[l] = s.arow + static_cast<size_t>(r.i[n * kL + l] - r.imin) * kBK;
        for (size_t c0 = 0; c0 < nkv; c0 += kL)
            vtranspose_pack(s.mask + c0 * kR + n * kL, kR, rows, c0, 1.0f);
    }
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

// ot[k][R] += sum_t vrow[t][off + k] * p[t][R] for k < C (P.V micro-kernel; C = kDT, or fewer
// for the last values of a row whose head_dim_v is not a multiple of kDT).
template <size_t C = kDT>
static inline void pv_block(const float *const *vrow, size_t off, const float *pt, size_t nk,
                            float *ot) {
    vf acc[C][kNV];
    for (size_t k = 0; k < C; ++k)
        for (size_t n = 0; n < kNV; ++n) acc[k][n] = vload(ot + k * kR + n * kL);
    for (size_t t = 0; t < nk; ++t) {
        vf pv[kNV];
        for (size_t n = 0; n < kNV; ++n) pv[n] = vload(pt + t * kR + n * kL);
        const float *vr = vrow[t] + off;
        for (size_t k = 0; k < C; ++k) {
            const vf vb = vbcast(vr[k]);
            for (size_t n = 0; n < kNV; ++n) acc[k][n] = vfma(vb, pv[n], acc[k][n]);
        }
    }
    for (size_t k = 0; k < C; ++k)
        for (size_t n = 0; n < kNV; ++n) vstore(ot + k * kR + n * kL, acc[k][n]);
}

// pv_block over the last `rem` (< kDT) values of the rows from `off`.
template <size_t C = kDT - 1>
static inline void pv_block_tail(const float *const *vrow, size_t off, const float *pt, size_t nk,
                                 float *ot, size_t rem) {
    if constexpr (C > 0) {
        if (rem == C) return pv_block<C>(vrow, off, pt, nk, ot);
        pv_block_tail<C - 1>(vrow, off, pt, nk, ot, rem);
    }
}

// Score pipeline of one tile. Stages (see attn.h): raw scores (the scale is folded into qt, or
// applied here), softcap, bias, ALiBi, then the masks. `upto` stops early for the score modes of
// the weights entry point: Scores = after the scale (no masking), Masked = everything but the
// softcap. Returns false when the whole tile is hidden from every row.
struct TileInfo {
    size_t nk = 0, jbase = 0;
    bool partial = false; // some key hidden from some (not all) rows
    // Rows [jbase, jbase + span) hold the tile's keys.
    size_t kidx_span(const unsigned *kidx) const { return nk ? kidx[nk - 1] + 1 : 0; }
};

// The next tile of non-padding keys at or after *j (below end) into ti, advancing *j; false when
// no key is left.
static inline bool next_tile(const Params &p, const Tensors &t, size_t b, size_t *j, size_t end,
                             unsigned *kidx, TileInfo *ti) {
    while (*j < end) {
        size_t next = *j;
        ti->jbase = *j;
        ti->nk = gather_tile(p, t, b, *j, end, kidx, &next);
        *j = next;
        if (ti->nk) return true;
    }
    return false;
}

// s / cap for the softcap. Computed as s * (1 / cap) (every cap of 2^-128 or more, as before);
// below that (subnormal caps) the reciprocal overflows and 0 * inf would turn a zero score into
// NaN, so those caps divide.
struct CapDiv {
    vf cap, inv;
    bool divide;
    vf operator()(const vf &s) const { return divide ? s / cap : s * inv; }
};
static inline CapDiv cap_div(float cap) {
    const float inv = 1.0f / cap;
    return CapDiv{vbcast(cap), vbcast(inv), !(inv <= __FLT_MAX__)};
}

// s + b, or -inf where the bias b is -inf: a -inf bias hides its key whatever the score (+inf or
// NaN as well, where s + b would be NaN). Finite and +inf biases add as IEEE says.
static inline float bias_add(float s, float b) {
    return b == kNegInf ? b : s + b;
}

// s = cap * tanh(s / cap); with keep_ninf a score of -inf (a -inf bias added before the softcap)
// stays -inf, so that it still hides its key.
static inline void softcap_rows(float *st, size_t n, float cap, bool keep_ninf = false) {
    const vf c = vbcast(cap), ninf = vbcast(kNegInf);
    const CapDiv div = cap_div(cap);
    if (!keep_ninf) {
        for (size_t x = 0; x < n; x += kL) vstore(st + x, c * vtanh(div(vload(st + x))));
        return;
    }
    for (size_t x = 0; x < n; x += kL) {
        const vf v = vload(st + x);
        vstore(st + x, vsel(veq(v, ninf), ninf, c * vtanh(div(v))));
    }
}

static inline bool score_tile(const Params &p, const Tensors &t, const Block &blk, Scratch &s,
                              TileInfo &ti, WeightsMode upto = WeightsMode::Softmax) {
    const size_t d = p.shape.head_dim, nk = ti.nk, jbase = ti.jbase;
    const Rows &r = blk.r;
    // The unmasked stages cover every key that is not padding.
    const bool scores_only = upto == WeightsMode::Scores || upto == WeightsMode::Softcapped;
    // Which masks bite in this tile? (keys span [jbase, jlast])
    const long long jfirst = static_cast<long long>(jbase);
    const long long jlast = static_cast<long long>(jbase + s.kidx[nk - 1]);
    const bool range_partial = !scores_only && (jfirst < r.lo[kR - 1] || jlast >= r.hi[0]);
    int allow = 1;
    if (t.allowed && !scores_only) {
        allow = allowed_tile(p, t, r, jbase, s.kidx, nk, s);
        if (allow == 0) return false;
    }
    const bool has_bias = t.bias && !scores_only;
    ti.partial = range_partial || allow == 2 || has_bias;

    // Q.K^T over kKT-row blocks (s.krow was set for the tile; rows past nk point at a zero row
    // and are ignored afterwards).
    if (blk.q8) { // integers (int8-inl.h): the scores come out with sq * sk applied, q.mean added
        vf sqv[kNV], qmv[kNV];
        for (size_t n = 0; n < kNV; ++n) {
            sqv[n] = vload(blk.sq + n * kL);
            qmv[n] = vload(blk.qm + n * kL);
        }
        const size_t np = (d + 1) / 2, nkr = kround_up(nk, kQI);
        for (size_t x = 0; x < nkr; x += kQI)
            qk8_block(s.krow16 + x, blk.q16, np, s.ksc + x, sqv, qmv, s.st + x * kR);
    } else {
        const size_t nkr = kround_up(nk, kKT);
        for (size_t x = 0; x < nkr; x += kKT) qk_block(s.krow + x, blk.qt, d, s.st + x * kR);
    }
    if (!fold_scale(p)) {
        const vf sc = vbcast(p.scale);
        for (size_t x = 0; x < nk * kR; x += kL) vstore(s.st + x, vload(s.st + x) * sc);
    }
    if (scores_only) {
        if (upto == WeightsMode::Softcapped && p.softcap > 0.0f)
            softcap_rows(s.st, nk * kR, p.softcap);
        return true;
    }
    const bool capped = p.softcap > 0.0f && upto != WeightsMode::Masked;
    if (capped && !p.bias_first) softcap_rows(s.st, nk * kR, p.softcap);
    if (has_bias) {
        // The bias rows run along keys while the tile is lane-minor: a transposed add. Keys that
        // are consecutive go kL x kL blocks at a time (vtranspose_add), the rest key by key. Both
        // give -inf where the bias is -inf, whatever the score (bias_add).
        const bool consecutive = s.kidx[nk - 1] - s.kidx[0] == nk - 1;
        const float *rows[kR];
        for (size_t l = 0; l < kR; ++l) rows[l] = blk.brow[l] + jbase + s.kidx[0];
        // The rows are seq_k apart (often a multiple of 4 KiB: they share L1 sets); ask for the
        // next tile's part of each row now, so that it waits in L2 rather than in DRAM.
        if (consecutive && jbase + s.kidx[0] + 2 * kBK <= p.shape.seq_k)
            for (size_t l = 0; l < kR; ++l)
                for (size_t x = 0; x < kBK; x += 16) __builtin_prefetch(rows[l] + kBK + x, 0, 2);
        size_t x0 = 0;
        if (consecutive)
            for (; x0 + kL <= nk; x0 += kL)
                for (size_t n = 0; n < kNV; ++n)
                    vtranspose_add(s.st + x0 * kR + n * kL, kR, rows + n * kL, x0);
        for (size_t l = 0; l < kR; ++l) {
            float *col = s.st + l;
            const float *brow = blk.brow[l] + jbase;
            for (size_t x = x0; x < nk; ++x) col[x * kR] = bias_add(col[x * kR], brow[s.kidx[x]]);
        }
    }
    if (capped && p.bias_first) softcap_rows(s.st, nk * kR, p.softcap, has_bias);
    if (t.alibi) {
        // s += -slope * (diag(i) - j) = slope * (o - (diag(i) - jbase)), o = key offset
        for (size_t l = 0; l < kR; ++l)
            s.aux[l] = static_cast<float>(r.i[l] + r.off - static_cast<long long>(jbase));
        vf sl[kNV], dr[kNV];
        for (size_t n = 0; n < kNV; ++n) {
            sl[n] = vload(blk.slope + n * kL);
            dr[n] = vload(s.aux + n * kL);
        }
        if (p.alibi_symmetric) { // s += -slope * |diag(i) - j|
            const vf zero = vzero();
            for (size_t x = 0; x < nk; ++x) {
                const vf o = vbcast(static_cast<float>(s.kidx[x]));
                for (size_t n = 0; n < kNV; ++n) {
                    float *sp = s.st + x * kR + n * kL;
                    const vf rel = o - dr[n];
                    vstore(sp, vfma(sl[n], zero - vmax(rel, zero - rel), vload(sp)));
                }
            }
        } else {
            for (size_t x = 0; x < nk; ++x) {
                const vf o = vbcast(static_cast<float>(s.kidx[x]));
                for (size_t n = 0; n < kNV; ++n) {
                    float *sp = s.st + x * kR + n * kL;
                    vstore(sp, vfma(sl[n], o - dr[n], vload(sp)));
                }
            }
        }
    }

    // Mask: hidden scores become -inf (select, so NaN/Inf of a hidden key cannot leak).
    const vf ninf = vbcast(kNegInf), one = vbcast(1.0f);
    if (!ti.partial) {
        for (size_t n = 0; n < kNV; ++n) vstore(blk.vis + n * kL, one);
        return true;
    }
    vf hi[kNV], lo[kNV], vis[kNV];
    if (range_partial) lane_limits(r, jbase, s.lim, s.lo);
    for (size_t n = 0; n < kNV; ++n) {
        hi[n] = range_partial ? vload(s.lim + n * kL) : vbcast(16777216.0f);
        lo[n] = range_partial ? vload(s.lo + n * kL) : vbcast(-1.0f);
        vis[n] = vload(blk.vis + n * kL);
    }
    const vf zero = vzero();
    for (size_t x = 0; x < nk; ++x) {
        const vf o = vbcast(static_cast<float>(s.kidx[x]));
        for (size_t n = 0; n < kNV; ++n) {
            vm ok = vand(vlt(o, hi[n]), vlt(lo[n], o));
            if (allow == 2) ok = vand(ok, vne(vload(s.mask + x * kR + n * kL), zero));
            const vf sv = vsel(ok, vload(s.st + x * kR + n * kL), ninf);
            vstore(s.st + x * kR + n * kL, sv);
            // A bias of -inf hides a key like a mask does: only finite (or NaN) scores count.
            vis[n] = vsel(has_bias ? vne(sv, ninf) : ok, one, vis[n]);
        }
    }
    for (size_t n = 0; n < kNV; ++n) vstore(blk.vis + n * kL, vis[n]);
    return true;
}

// True when every value the tile's keys hold in V is finite.
static inline bool v_tile_finite(const Params &p, const Scratch &s, size_t nk) {
    const size_t d = p.shape.head_dim_v;
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

// Software prefetch of `n` rows of `d` elements (64-byte lines) starting at row j. K and V rows are
// streamed once per item; in decode they come from DRAM and the hardware prefetcher does not
// ramp up on 64 short row streams, so each tile asks for the next tile's rows ahead of use.
// A prefetch never faults and feeds no value into the computation. Locality: 3 = into L1, 2 =
// into L2 (__builtin_prefetch's hint).
template <int Locality = 3>
static inline void prefetch_rows(const KvRows &kv, size_t j, size_t n, size_t d) {
    const size_t bytes = d * kv.elem;
    for (size_t x = 0; x < n; ++x) {
        const unsigned char *row = kv.raw(j + x);
        for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 0, Locality);
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
        alpha[n] = vexp_nonpos(mold - msafe[n]);
        rescale |= vany(vne(mold, mnew[n]));
        lsum[n] = zero;
    }
    for (size_t x = 0; x < nk; ++x)
        for (size_t n = 0; n < kNV; ++n) {
            const vf e = vexp_nonpos(vload(s.st + x * kR + n * kL) - msafe[n]);
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
