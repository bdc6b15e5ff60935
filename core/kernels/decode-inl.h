// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Decode side of the kernel body: the decode path of one item (at most kDecodeRows query rows
// per KV head: Q.K^T in runs of rows with the rows ahead requested, the softmax and P.V of a
// tile, int8 / 16-bit rows widened in the registers) and forward_item, which sends an item to
// the decode path or to the row blocks of forward-inl.h. Included by body-inl.h inside
// the ISA namespace, after forward-inl.h.

// ---- Decode: at most kDecodeRows query rows per KV head (GQA decode: the group, seq_q = 1) ----
// The row-lane layout would leave most lanes idle and issue head_dim broadcast-FMAs per key; here
// the vectors run along head_dim instead: each K and V vector is loaded once per key and used by
// every row, so a row costs head_dim / kL FMAs per key and the loop keeps up with memory.
constexpr size_t kDB = kL >= 16 ? 4 : 2; // head_dim vectors per P.V register block
// Keys per Q.K^T step of the decode path: kQB x kDecodeRows accumulators (16 of AVX-512's 32
// registers; 8 of AVX2's 16).
constexpr size_t kQB = kL >= 16 ? 4 : 2;
// Keys per step of a run of int8 keys on AVX2 (decode_qk_run, and the walks' blocks but a
// run's last 4 keys: walk_block): 3, so 12 accumulators, the 3 keys' vectors and one row of q
// at a time fill the 16 registers. int8 decode is bound by its arithmetic (the widening on top
// of the FMAs): 0.93-0.97x the time of 2 keys per step. f32, f16 and bf16 are bound by memory,
// where the larger blocks' prefetch bursts cost 1.05x.
template <DType T> constexpr size_t run_keys() {
    return kL == 8 && T == DType::I8 ? 3 : kQB;
}
// decode_qk_block's sums: [kDecodeRows][keys per step], padded to whole vectors, for the largest
// step (int8's)
constexpr size_t kQSums = (kDecodeRows * run_keys<DType::I8>() + kL - 1) / kL * kL;

static inline float lane0(const vf &x) {
    float tmp[kL];
    vstore(tmp, x);
    return tmp[0];
}

// a * b + c as vfma computes it on this ISA (one rounding with FMA units, two without), so a
// scalar step of the decode path rounds like the row blocks' vector step.
static inline float sfma(float a, float b, float c) {
    return lane0(vfma(vbcast(a), vbcast(b), vbcast(c)));
}

// Q.K^T of a decode tile, kQB keys at a time (decode_qk_block); the K rows are read in their
// storage type T and widened in the registers (an int8 key's scale multiplies its sum).
// Software prefetch of the decode stream: while Q.K^T works on a key, the K and V rows of the key
// `ahead` positions later are requested, a few lines per key rather than a tile at a time (a burst
// of hundreds of prefetches fills the line-fill buffers and stalls the loop behind them; spread
// out they overlap the arithmetic: dense decode 1.5x faster, measured). `ahead` is
// decode_prefetch_bytes() of K rows (kernel.hpp: from the CPU's L1 data cache): enough to cover
// the memory latency, little enough to stay in L1.
static inline size_t prefetch_ahead(const KvRows &k, size_t d) {
    const size_t n = decode_prefetch_bytes() / (d * k.elem); // d >= kL on the decode path
    return n < 4 ? 4 : n;
}

static inline const unsigned char *row_at(const KvRows &r, size_t j) {
    size_t doff, soff;
    r.locate(j, &doff, &soff);
    return r.base + doff * r.elem;
}

// n rows of K (kbytes each, kstep apart) and of V requested; Locality 3 into L1, 2 into L2.
template <int Locality = 3>
static inline void prefetch_rows(const unsigned char *kp, size_t kbytes, size_t kstep,
                                 const unsigned char *vp, size_t vbytes, size_t vstep, size_t n) {
    // Row u at u * step, never a pointer stepped past the last row: a stride is only a real one
    // between rows that exist (one key's stride may be anything, even near SIZE_MAX).
    for (size_t u = 0; u < n; ++u) {
        const unsigned char *k = kp + u * kstep, *v = vp + u * vstep;
        for (size_t off = 0; off < kbytes; off += 64) __builtin_prefetch(k + off, 0, Locality);
        for (size_t off = 0; off < vbytes; off += 64) __builtin_prefetch(v + off, 0, Locality);
    }
}

// Q.K^T of QB keys (rows kr[u]) for the kDecodeRows rows of q over dqv elements (a multiple of
// kL): the sum of key u for row rr in sums[rr * QB + u]. QB x kDecodeRows independent
// accumulators hide the FMA latency, and their horizontal sums leave in one register where
// they fill one (vhsum_all).
template <DType T, size_t QB = kQB>
__attribute__((always_inline)) static inline void decode_qk_block(const unsigned char *const *kr,
                                                                  const float *q, size_t dpad,
                                                                  size_t dqv, float *sums) {
#if defined(__AVX2__) && !defined(__AVX512F__)
    if (kL == 8 && QB == 3 && kDecodeRows == 4) {
        // AVX2, 3 keys: 12 accumulators, the 3 keys' vectors and one row of q at a time, all 16
        // registers, in plain variables (GCC spilled an accumulator of the array form)
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00,
               a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
        for (size_t dd = 0; dd < dqv; dd += kL) {
            const __m256 x0 = static_cast<__m256>(vload_raw<T>(kr[0], dd)),
                         x1 = static_cast<__m256>(vload_raw<T>(kr[1], dd)),
                         x2 = static_cast<__m256>(vload_raw<T>(kr[2], dd));
            // one row of q: loaded once (the asm keeps it a register, not 3 memory operands)
            auto row = [&](size_t rr, __m256 &c0, __m256 &c1, __m256 &c2) {
                __m256 qq = _mm256_loadu_ps(q + rr * dpad + dd);
                __asm__("" : "+x"(qq));
                c0 = _mm256_fmadd_ps(qq, x0, c0);
                c1 = _mm256_fmadd_ps(qq, x1, c1);
                c2 = _mm256_fmadd_ps(qq, x2, c2);
            };
            row(0, a00, a01, a02);
            row(1, a10, a11, a12);
            row(2, a20, a21, a22);
            row(3, a30, a31, a32);
        }
        // vhsum_all's outputs each sum their own vector's lanes (the tree of vhsum_all over 8), so
        // the zero padding changes nothing
        vf a[kL] = {vf(a00), vf(a01), vf(a02), vf(a10), vf(a11), vf(a12), vf(a20), vf(a21)};
        vstore(sums, vhsum_all(a));
        vf b[kL] = {vf(a22), vf(a30), vf(a31), vf(a32), vzero(), vzero(), vzero(), vzero()};
        vstore(sums + kL, vhsum_all(b));
        return;
    }
#endif
    vf acc[kDecodeRows][QB];
    for (size_t rr = 0; rr < kDecodeRows; ++rr)
        for (size_t u = 0; u < QB; ++u) acc[rr][u] = vzero();
    for (size_t dd = 0; dd < dqv; dd += kL) {
        vf qv[kDecodeRows];
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            qv[rr] = vin_register(vload(q + rr * dpad + dd));
        for (size_t u = 0; u < QB; ++u) {
            const vf kv = vload_raw<T>(kr[u], dd);
            for (size_t rr = 0; rr < kDecodeRows; ++rr) acc[rr][u] = vfma(qv[rr], kv, acc[rr][u]);
        }
    }
    if (QB * kDecodeRows == kL) {
        vf a[kL]; // a copy: acc itself stays in registers
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < QB; ++u) a[rr * QB + u] = acc[rr][u];
        vstore(sums, vhsum_all(a));
    } else {
        for (size_t rr = 0; rr < kDecodeRows; ++rr)
            for (size_t u = 0; u < QB; ++u) sums[rr * QB + u] = vhsum(acc[rr][u]);
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
    constexpr size_t QB = run_keys<T>();
    alignas(64) float sums[kQSums];
    size_t x0 = 0;
    for (; x0 + QB <= nk; x0 += QB) {
        const unsigned char *kr[QB];
        for (size_t u = 0; u < QB; ++u) kr[u] = kt + (x0 + u) * kstep;
        prefetch_rows(pk + x0 * kstep, kbytes, kstep, pv + x0 * vstep, vbytes, vstep, QB);
        decode_qk_block<T, QB>(kr, q, dpad, d, sums);
        if (has_scale(T)) { // each sum times its key's scale (one rounding)
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
        decode_qk_block<T, QB>(kr, q, dpad, d, sums);
        for (size_t rr = 0; rr < nr; ++rr)
            for (size_t u = 0; u < nb; ++u)
                sc[rr * kBK + x0 + u] =
                    has_scale(T) ? sums[rr * QB + u] * kst[(x0 + u) * ksrow] : sums[rr * QB + u];
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
            decode_qk_run<T>(kt, kstep, has_scale(T) ? krows.scale + soff : nullptr, krows.srow, pk,
                             pv, vstep, kbytes, vbytes, n, q, dpad, d, nr, sc + x);
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
                ks[u] = has_scale(T) ? krows.scale[soff + u * krows.srow] : 1.0f;
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
                ks[u] = has_scale(T) ? krows.scale[soff] : 1.0f;
            }
        }
        // [rr][u]; an int8 key's scale applied here unless the head_dim tail is still to come
        alignas(64) float sums[kQSums];
        decode_qk_block<T>(kr, q, dpad, dqv, sums);
        if (has_scale(T) && dqv == d)
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
                    sum = has_scale(T) ? sum * ks[u] : sum;
                }
                sc[rr * kBK + x0 + u] = sum;
            }
        }
    }
}

// Q.K^T of a decode tile in the order of the row blocks' qk_block, for batch invariance: each
// score is one multiply-add chain over head_dim from dd = 0, so a row's scores have the same bits
// whichever path computes them. Keys run in the lanes: 2 kL keys at a time (8 chains with the 4
// rows, enough to hide the FMA latency) are transposed into kt[dd][2 kL]. Their rows are read in
// place (fp32, head_dim a multiple of kL) or widened as the row blocks widen them (widen_row: an
// int8 row times its scale, element by element). Keys past the tile read a zero row.
static inline void decode_qk_tile_seq(const KvRows &krows, const KvRows &vrows, size_t jbase,
                                      const unsigned *kidx, size_t nk, size_t klim, const float *q,
                                      size_t dpad, size_t d, size_t dv, size_t nr, float *sc,
                                      float *kt) {
    constexpr size_t KB = 2 * kL;
    float *rowbuf = kt + KB * dpad, *zero = rowbuf + KB * dpad;
    zero_floats(zero, dpad);
    const bool in_place = krows.type == DType::F32 && d % kL == 0;
    // The K and V rows of the keys `ahead` on (a whole block or more, so never the block's own
    // rows) are requested a row at a time between the block's transposes: spread out, as
    // decode_qk_tile spreads them, not in a burst of hundreds.
    const size_t ahead = kround_up(kmax(prefetch_ahead(krows, d), KB), KB);
    const size_t kbytes = d * krows.elem, vbytes = dv * vrows.elem;
    const size_t transposes = 2 * dpad / kL;
    for (size_t x0 = 0; x0 < nk; x0 += KB) {
        const size_t nb = kmin(KB, nk - x0);
        const unsigned char *pf[2 * KB]; // the rows to request: K and V of each key
        size_t npf = 0;
        for (size_t u = 0; u < nb; ++u) {
            const size_t jj = jbase + kidx[x0 + u] + ahead;
            if (jj >= klim) break;
            pf[npf++] = row_at(krows, jj);
            pf[npf++] = row_at(vrows, jj);
        }
        const float *rows[KB];
        for (size_t u = 0; u < KB; ++u) {
            if (u >= nb) {
                rows[u] = zero;
            } else if (in_place) {
                rows[u] = reinterpret_cast<const float *>(row_at(krows, jbase + kidx[x0 + u]));
            } else {
                widen_row(krows, jbase + kidx[x0 + u], rowbuf + u * dpad, d, dpad);
                rows[u] = rowbuf + u * dpad;
            }
        }
        size_t next = 0, t = 0;
        for (size_t h = 0; h < 2; ++h)
            for (size_t c0 = 0; c0 < dpad; c0 += kL) {
                for (const size_t upto = ++t * npf / transposes; next < upto; ++next)
                    prefetch_rows(pf[next], next % 2 ? vbytes : kbytes, 0, nullptr, 0, 0, 1);
                vtranspose_pack(kt + c0 * KB + h * kL, KB, rows + h * kL, c0, 1.0f);
            }
        vf acc[kDecodeRows][2];
        for (size_t rr = 0; rr < kDecodeRows; ++rr) acc[rr][0] = acc[rr][1] = vzero();
        for (size_t dd = 0; dd < d; ++dd) {
            const vf k0 = vload(kt + dd * KB), k1 = vload(kt + dd * KB + kL);
            for (size_t rr = 0; rr < kDecodeRows; ++rr) {
                const vf qb = vbcast(q[rr * dpad + dd]);
                acc[rr][0] = vfma(k0, qb, acc[rr][0]);
                acc[rr][1] = vfma(k1, qb, acc[rr][1]);
            }
        }
        for (size_t rr = 0; rr < nr; ++rr) {
            float tmp[KB];
            vstore(tmp, acc[rr][0]);
            vstore(tmp + kL, acc[rr][1]);
            for (size_t u = 0; u < nb; ++u) sc[rr * kBK + x0 + u] = tmp[u];
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
                    sfma(sc[rr * kBK + x], value_raw<T>(vraw[x], dd), o[rr * dvpad + dd]);
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
        if (has_scale(T))
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
            if (has_scale(T)) vs[x] = vb.scale[soff];
        }
    }
    if (has_scale(T)) {
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
        for (size_t x = 0; x < nk; ++x) srow[x] = bias_add(srow[x], brow[kidx[x]]);
    }
    if (capped && p.bias_first) softcap_rows(srow, nkv, p.softcap, t.bias != nullptr);
    if (t.alibi) {
        const float slope = alibi_slope(p, t, w.b, h);
        const float drel = static_cast<float>(i + r.off - static_cast<long long>(jbase));
        // one rounding, as score_tile: s + slope * rel, or s - slope * |rel| (symmetric)
        if (p.alibi_symmetric)
            for (size_t x = 0; x < nk; ++x) {
                const float rel = static_cast<float>(kidx[x]) - drel;
                srow[x] = sfma(slope, 0.0f - std::fmax(rel, 0.0f - rel), srow[x]);
            }
        else
            for (size_t x = 0; x < nk; ++x)
                srow[x] = sfma(slope, static_cast<float>(kidx[x]) - drel, srow[x]);
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
            q[rr * dpad + dd] = rr < nr && dd < d ? q_in(p, t, q0 + dd, r.h[rr]) * qs : 0.0f;
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
    // batch invariance: tiles start at multiples of kBK, as the row blocks' do (run_tiles)
    if (p.invariant && h->kend > h->kbeg) h->kbeg -= h->kbeg % kBK;
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
    case DType::E4M3:
        f(TypeTag<DType::E4M3>());
        break;
    case DType::E5M2:
        f(TypeTag<DType::E5M2>());
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
    if (p.invariant) {
        decode_qk_tile_seq(krows, vb, jbase, s.kidx, nk, kend, q, dpad, d, dv, nr, sc, s.kt);
        return;
    }
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
    float alphas[kDecodeRows];
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
        if (p.invariant) // the row blocks' order: key by key (below), one rounding for l
            alphas[rr] = alpha;
        else
            l[rr] = l[rr] * alpha + vhsum(lsum);
        if (alpha != 1.0f)
            for (size_t dd = 0; dd < dvpad; dd += kL)
                vstore(o + rr * dvpad + dd, vload(o + rr * dvpad + dd) * vbcast(alpha));
        m[rr] = mnew;
    }
    if (p.invariant) { // the rows' sums side by side: independent chains
        float sum[kDecodeRows] = {};
        for (size_t x = 0; x < nk; ++x)
            for (size_t rr = 0; rr < kDecodeRows; ++rr) sum[rr] += sc[rr * kBK + x];
        for (size_t rr = 0; rr < nr; ++rr) l[rr] = sfma(l[rr], alphas[rr], sum[rr]);
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
    // int8 V under batch invariance: widened with its scale like the row blocks' rows
    const bool widen = p.invariant && has_scale(vb.type);
    if (!partial_tile && !widen) {
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
    if (partial_tile && !v_tile_finite(p, s, nk)) {
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
            const float L = sfma(l[rr], alpha, lane0(vexp(vbcast(sink - M))));
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

// Whether item w takes the decode path. Under batch invariance the decode path computes a row
// as the row blocks do (decode_qk_tile_seq, the l-sum key by key, tiles at multiples of kBK,
// int8 rows widened with their scales), so a row's bits do not depend on the path.
static inline bool takes_decode_path(const Params &p, const WorkItem &w) {
    return kNV == 1 && w.rows <= kDecodeRows && p.shape.head_dim >= kL;
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
    for (size_t bi = 0; bi < nb; ++bi) {
        Block &b = blk[bi];
        pack_queries(p, t, w, b.r, b.qt);
        if (t.kq)
            b.q8 = quantize_queries(b.qt, p.shape.head_dim,
                                    t.kq_mean + (w.b * p.shape.heads_kv + w.kvh) * p.shape.head_dim,
                                    b.q16, b.sq, b.qm);
    }
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
