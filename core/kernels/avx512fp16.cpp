// The fp16 fast path (ATTN_PARAM_COMPUTE = ATTN_COMPUTE_FP16) on AVX512-FP16: Q.K^T and P.V as
// vfmadd*ph (32 fp16 lanes, twice the fp32 rate), the online-softmax state in fp32.
//
// Layout of one item (one query head, a block of kQ = 64 consecutive queries; lanes = queries):
//   qt[d][kQ]     fp16  scale * q, transposed, so a head_dim step is two vector loads
//   kt[d][kBK]    fp16  the key tile, transposed (converted once per call): the kKT keys of a
//                       head_dim step are adjacent, one pointer serves a register block
//   vt[kBK][dv]   fp16  the tile's V rows (converted once per call, or the fp16 operand)
//   st[kBK][kQ]   fp32  scores: fp16 partial sums over kDChunk head_dim steps, widened and added
//   pt[kBK][kQ]   fp16  probabilities exp(s - m) of the tile
//   ot[dv][kQ]    fp32  unnormalised output: the tile's fp16 P.V partial sums widened and added
//                       once per tile (<= kBK keys), with the online-softmax rescale
// Every multiply-add broadcasts one fp16 element from memory ({1to32}), so no shuffle port is
// spent on broadcasts. Compiled with -mavx512fp16 only; nothing here is inline in a header
// shared with other translation units (ODR safety, as the other kernels).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention.hpp"
#include "kernel.hpp"

#if defined(__AVX512FP16__)
#include <immintrin.h>
#endif

namespace attn {
namespace core {

#if defined(__AVX512FP16__)
namespace {

constexpr size_t kQ = 64;      // queries per item (two fp16 vectors)
constexpr size_t kBK = 64;     // keys per tile
constexpr size_t kKT = 16;     // keys per Q.K^T register block (16 independent accumulators)
constexpr size_t kDT = 16;     // head_dim_v values per P.V register block
constexpr size_t kDChunk = 32; // head_dim steps summed in fp16 before widening
constexpr long long kFar = 1LL << 40;

struct Scratch {
    _Float16 *qt, *pt;
    float *st, *ot;
    const _Float16 *kt, *vt; // key tile: kt[dd * kBK + x], vt[x * vr + c]
    size_t vr;
};

size_t round64(size_t x) {
    return (x + 63) / 64 * 64;
}

size_t layout(const Params &p, unsigned char *base, Scratch *s) {
    const size_t d = p.shape.head_dim, dv = p.shape.head_dim_v;
    size_t off = 0;
    auto take = [&](size_t bytes) {
        unsigned char *ptr = base ? base + off : nullptr;
        off += round64(bytes);
        return ptr;
    };
    Scratch x;
    x.qt = reinterpret_cast<_Float16 *>(take(2 * d * kQ));
    x.kt = x.vt = nullptr;
    x.vr = 0;
    x.pt = reinterpret_cast<_Float16 *>(take(2 * kBK * kQ));
    x.st = reinterpret_cast<float *>(take(4 * kBK * kQ));
    x.ot = reinterpret_cast<float *>(take(4 * dv * kQ));
    if (s) *s = x;
    return off;
}

// exp of 16 floats: 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), p of degree
// 6 (relative error < 2e-7 on the reduced range); -inf gives +0, inputs are <= 0 here.
__m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-104.0f);
    const __m512 xc = _mm512_max_ps(x, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.0f / 720.0f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 120.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 24.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 6.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.5f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    const __m512 e = _mm512_scalef_ps(y, n);
    // exp(-inf) and anything below the clamp: exactly +0
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), e);
}

// 2^t of 32 values t <= 0 (two halves of fp32) in fp16: t = n + f, f in [-1/2, 1/2], 2^f by a
// degree-4 polynomial (about 2^-13 relative in exact arithmetic; fp16 rounds to 2^-11), times 2^n
// by vscalefph. t below -25 (or -inf: hidden keys) gives exactly +0.
__m512h exp2_ph(__m512 t0, __m512 t1) {
    const __m512 lo = _mm512_set1_ps(-25.0f);
    const __mmask32 keep = static_cast<__mmask32>(_mm512_cmp_ps_mask(t0, lo, _CMP_GT_OQ)) |
                           (static_cast<__mmask32>(_mm512_cmp_ps_mask(t1, lo, _CMP_GT_OQ)) << 16);
    const __m256i h0 = _mm512_cvtps_ph(_mm512_max_ps(t0, lo), _MM_FROUND_TO_NEAREST_INT);
    const __m256i h1 = _mm512_cvtps_ph(_mm512_max_ps(t1, lo), _MM_FROUND_TO_NEAREST_INT);
    const __m512h t = _mm512_castsi512_ph(_mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1));
    const __m512h n = _mm512_roundscale_ph(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512h f = _mm512_sub_ph(t, n);
    __m512h y = _mm512_set1_ph(static_cast<_Float16>(0.0096181291f));
    y = _mm512_fmadd_ph(y, f, _mm512_set1_ph(static_cast<_Float16>(0.0555041087f)));
    y = _mm512_fmadd_ph(y, f, _mm512_set1_ph(static_cast<_Float16>(0.2402265070f)));
    y = _mm512_fmadd_ph(y, f, _mm512_set1_ph(static_cast<_Float16>(0.6931471806f)));
    y = _mm512_fmadd_ph(y, f, _mm512_set1_ph(static_cast<_Float16>(1.0f)));
    return _mm512_castsi512_ph(
        _mm512_maskz_mov_epi16(keep, _mm512_castph_si512(_mm512_scalef_ph(y, n))));
}

float value_f32(const void *base, DType type, size_t idx) {
    if (type == DType::F16) {
        uint16_t h;
        std::memcpy(&h, static_cast<const unsigned char *>(base) + 2 * idx, 2);
        _Float16 f;
        std::memcpy(&f, &h, 2);
        return static_cast<float>(f);
    }
    return static_cast<const float *>(base)[idx];
}

// 16 values at element idx of a row in storage type F32 or F16, as fp32
__m512 load16(const void *base, DType type, size_t idx) {
    if (type == DType::F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(static_cast<const unsigned char *>(base) + 2 * idx)));
    return _mm512_loadu_ps(static_cast<const float *>(base) + idx);
}

// The 32 fp16 lanes of a as two vectors of 16 floats
inline void widen_ph(__m512h a, __m512 *lo, __m512 *hi) {
    const __m512i bits = _mm512_castph_si512(a);
    *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(bits));
    *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(bits, 1));
}

// n values of a row (storage type) to fp16
void row_to_f16(const void *base, DType type, size_t idx, size_t n, _Float16 *dst) {
    if (type == DType::F16) {
        std::memcpy(dst, static_cast<const unsigned char *>(base) + 2 * idx, 2 * n);
        return;
    }
    const float *src = static_cast<const float *>(base) + idx;
    size_t x = 0;
    for (; x + 16 <= n; x += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + x),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + x), _MM_FROUND_TO_NEAREST_INT));
    for (; x < n; ++x) dst[x] = static_cast<_Float16>(src[x]);
}

// st[x][32 v ..) = sum over head_dim of qt[dd][32 v ..] * kt[dd][x], x in [x0, x0 + kKT): fp16
// multiply-adds over kDChunk steps, each partial sum then widened and added in fp32. Each
// broadcast feeds one multiply-add, so it stays a load ({1to32}), not a shuffle.
inline void qk_block(const Scratch &s, size_t d, size_t x0, size_t v) {
    const _Float16 *kb = s.kt + x0;
    for (size_t d0 = 0; d0 < d; d0 += kDChunk) {
        const size_t d1 = d0 + kDChunk < d ? d0 + kDChunk : d;
        // sixteen named accumulators: GCC 12 splits an array of them into two passes of eight,
        // which leaves the loop waiting on the multiply-add latency
        __m512h a0 = _mm512_setzero_ph(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
                a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0,
                a15 = a0;
        const _Float16 *kr = kb + d0 * kBK;
        const _Float16 *qr = s.qt + d0 * kQ + 32 * v;
        for (size_t dd = d0; dd < d1; ++dd, kr += kBK, qr += kQ) {
            const __m512h q = _mm512_loadu_ph(qr);
#define ATTN_QK(n) a##n = _mm512_fmadd_ph(q, _mm512_set1_ph(kr[n]), a##n)
            ATTN_QK(0);
            ATTN_QK(1);
            ATTN_QK(2);
            ATTN_QK(3);
            ATTN_QK(4);
            ATTN_QK(5);
            ATTN_QK(6);
            ATTN_QK(7);
            ATTN_QK(8);
            ATTN_QK(9);
            ATTN_QK(10);
            ATTN_QK(11);
            ATTN_QK(12);
            ATTN_QK(13);
            ATTN_QK(14);
            ATTN_QK(15);
#undef ATTN_QK
        }
        const __m512h acc[kKT] = {a0, a1, a2,  a3,  a4,  a5,  a6,  a7,
                                  a8, a9, a10, a11, a12, a13, a14, a15};
#pragma GCC unroll 16
        for (size_t u = 0; u < kKT; ++u) {
            float *dst = s.st + (x0 + u) * kQ + 32 * v;
            __m512 lo, hi;
            widen_ph(acc[u], &lo, &hi);
            if (d0) {
                lo = _mm512_add_ps(_mm512_loadu_ps(dst), lo);
                hi = _mm512_add_ps(_mm512_loadu_ps(dst + 16), hi);
            }
            _mm512_storeu_ps(dst, lo);
            _mm512_storeu_ps(dst + 16, hi);
        }
    }
}

// ot[c0 + c][32 v ..] = ot * alpha + sum over the tile's keys of pt[x][32 v ..] * v_x[c0 + c]
template <size_t C>
inline void pv_block(const Scratch &s, size_t nk, size_t c0, size_t v, const __m512 *alpha) {
    __m512h acc[C];
    if (C == 16) { // named accumulators, as in qk_block
        __m512h a0 = _mm512_setzero_ph(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
                a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0,
                a15 = a0;
        const _Float16 *vr = s.vt + c0;
        const _Float16 *pr = s.pt + 32 * v;
        for (size_t x = 0; x < nk; ++x, vr += s.vr, pr += kQ) {
            const __m512h pv = _mm512_loadu_ph(pr);
#define ATTN_PV(n) a##n = _mm512_fmadd_ph(pv, _mm512_set1_ph(vr[n]), a##n)
            ATTN_PV(0);
            ATTN_PV(1);
            ATTN_PV(2);
            ATTN_PV(3);
            ATTN_PV(4);
            ATTN_PV(5);
            ATTN_PV(6);
            ATTN_PV(7);
            ATTN_PV(8);
            ATTN_PV(9);
            ATTN_PV(10);
            ATTN_PV(11);
            ATTN_PV(12);
            ATTN_PV(13);
            ATTN_PV(14);
            ATTN_PV(15);
#undef ATTN_PV
        }
        const __m512h all[16] = {a0, a1, a2,  a3,  a4,  a5,  a6,  a7,
                                 a8, a9, a10, a11, a12, a13, a14, a15};
        for (size_t c = 0; c < C; ++c) acc[c] = all[c];
    } else {
        for (size_t c = 0; c < C; ++c) acc[c] = _mm512_setzero_ph();
        for (size_t x = 0; x < nk; ++x) {
            const __m512h pv = _mm512_loadu_ph(s.pt + x * kQ + 32 * v);
            const _Float16 *vr = s.vt + x * s.vr + c0;
            for (size_t c = 0; c < C; ++c)
                acc[c] = _mm512_fmadd_ph(pv, _mm512_set1_ph(vr[c]), acc[c]);
        }
    }
    for (size_t c = 0; c < C; ++c) {
        float *dst = s.ot + (c0 + c) * kQ + 32 * v;
        __m512 lo, hi;
        widen_ph(acc[c], &lo, &hi);
        _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_loadu_ps(dst), alpha[2 * v], lo));
        _mm512_storeu_ps(dst + 16,
                         _mm512_fmadd_ps(_mm512_loadu_ps(dst + 16), alpha[2 * v + 1], hi));
    }
}

size_t fp16_scratch_bytes(const Params &p) {
    return layout(p, nullptr, nullptr);
}
// max |x| over n values of a row (NaN or Inf: +inf)
float row_absmax(const void *base, DType type, size_t idx, size_t n, float acc) {
    __m512 mx = _mm512_set1_ps(acc);
    const __m512 inf = _mm512_set1_ps(INFINITY);
    size_t x = 0;
    for (; x + 16 <= n; x += 16) {
        const __m512 a = _mm512_abs_ps(load16(base, type, idx + x));
        // NaN compares false: count it as inf
        mx = _mm512_mask_mov_ps(_mm512_max_ps(mx, a), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), inf);
    }
    float m = _mm512_reduce_max_ps(mx);
    for (; x < n; ++x) {
        const float a = std::fabs(value_f32(base, type, idx + x));
        if (!(a <= m)) m = a != a ? INFINITY : a;
    }
    return m;
}

// Whether no fp16 value or partial sum of this call can overflow: |scale q|, |k|, |v| and the
// partial sums (kDChunk products of scale q and k; kBK probabilities times v) stay below 2^15.
bool fp16_in_range(const Params &p, const Tensors &t) {
    const Shape &sh = p.shape;
    float mq = 0.0f, mk = 0.0f, mv = 0.0f;
    for (size_t b = 0; b < sh.batch; ++b) {
        for (size_t h = 0; h < sh.heads_q; ++h)
            for (size_t i = 0; i < sh.seq_q; ++i)
                mq = row_absmax(p.q_type == DType::F16 ? static_cast<const void *>(t.q16) : t.q,
                                p.q_type, q_index(p, t, b, h, i), sh.head_dim, mq);
        const size_t klen = key_len(p, t, b);
        for (size_t h = 0; h < sh.heads_kv; ++h)
            for (size_t j = 0; j < klen; ++j) {
                mk = row_absmax(t.k, p.k_type, b * p.k.batch + h * p.k.head + j * p.k.row,
                                sh.head_dim, mk);
                mv = row_absmax(t.v, p.v_type, b * p.v.batch + h * p.v.head + j * p.v.row,
                                sh.head_dim_v, mv);
            }
    }
    const double lim = 32768.0, sq = static_cast<double>(mq) * std::fabs(p.scale);
    return sq < lim && mk < lim && sq * mk * kDChunk < lim && static_cast<double>(mv) * kBK < lim;
}

void fp16_convert_rows(const Params &p, const Tensors &t, bool value, size_t b, size_t kvh,
                       uint16_t *dst) {
    const size_t dim = value ? p.shape.head_dim_v : p.shape.head_dim, klen = key_len(p, t, b);
    const Layout &lay = value ? p.v : p.k;
    const DType type = value ? p.v_type : p.k_type;
    const void *src = value ? t.v : t.k;
    _Float16 *out = reinterpret_cast<_Float16 *>(dst);
    if (value) {
        for (size_t j = 0; j < klen; ++j)
            row_to_f16(src, type, b * lay.batch + kvh * lay.head + j * lay.row, dim, out + j * dim);
        return;
    }
    // K: tiles of kBK keys, each [dim][kBK]; keys past klen are 0 (never visible)
    _Float16 row[1024];
    const size_t tiles = (p.shape.seq_k + kBK - 1) / kBK;
    for (size_t tl = 0; tl < tiles; ++tl) {
        _Float16 *tile = out + tl * dim * kBK;
        for (size_t x = 0; x < kBK; ++x) {
            const size_t j = tl * kBK + x;
            if (j < klen)
                row_to_f16(src, type, b * lay.batch + kvh * lay.head + j * lay.row, dim, row);
            for (size_t dd = 0; dd < dim; ++dd)
                tile[dd * kBK + x] = j < klen ? row[dd] : static_cast<_Float16>(0.0f);
        }
    }
}

size_t fp16_k_elems(const Params &p) {
    return (p.shape.seq_k + kBK - 1) / kBK * kBK * p.shape.head_dim;
}

void fp16_item(const Params &p, const Tensors &t, size_t b, size_t h, size_t q0,
               const uint16_t *k16, const uint16_t *v16, void *scratch) {
    Scratch s;
    layout(p, static_cast<unsigned char *>(scratch), &s);
    const Shape &sh = p.shape;
    const size_t d = sh.head_dim, dv = sh.head_dim_v, group = sh.heads_q / sh.heads_kv;
    const size_t kvh = h / group, klen = key_len(p, t, b);
    const size_t rows = sh.seq_q - q0 < kQ ? sh.seq_q - q0 : kQ;
    const Diags dg = diag_offsets(p, t, b);
    // per lane: visible keys [lo, hi)
    int32_t lo[kQ], hi[kQ];
    long long kb = kFar, ke = -kFar;
    for (size_t l = 0; l < kQ; ++l) {
        const long long i = static_cast<long long>(q0 + (l < rows ? l : rows - 1));
        long long h1 = static_cast<long long>(klen), l1 = 0;
        clip_to_visible(p, i, dg, &l1, &h1);
        if (l1 > static_cast<long long>(klen)) l1 = static_cast<long long>(klen);
        if (h1 < l1) h1 = l1; // [lo, hi) within [0, klen): padding keys are never read
        lo[l] = static_cast<int32_t>(l1);
        hi[l] = static_cast<int32_t>(h1);
        if (l1 < kb) kb = l1;
        if (h1 > ke) ke = h1;
    }
    const size_t kbeg = static_cast<size_t>(kb), kend = ke > kb ? static_cast<size_t>(ke) : kbeg;
    long long lomax = 0, himin = kFar;
    for (size_t l = 0; l < rows; ++l) {
        if (lo[l] > lomax) lomax = lo[l];
        if (hi[l] < himin) himin = hi[l];
    }
    // Q (scale folded in) transposed to fp16; lanes past the block are 0
    {
        // each row: scale * q to fp16 with vector conversions (into pt, free until the first
        // tile), then its values transposed into qt
        _Float16 *row = s.pt;
        const __m512 sc = _mm512_set1_ps(p.scale);
        const void *qbase = p.q_type == DType::F16 ? static_cast<const void *>(t.q16) : t.q;
        for (size_t l = 0; l < kQ; ++l) {
            if (l >= rows) {
                for (size_t dd = 0; dd < d; ++dd) s.qt[dd * kQ + l] = static_cast<_Float16>(0.0f);
                continue;
            }
            const size_t base = q_index(p, t, b, h, q0 + l);
            size_t dd = 0;
            for (; dd + 16 <= d; dd += 16)
                _mm256_storeu_si256(
                    reinterpret_cast<__m256i *>(row + dd),
                    _mm512_cvtps_ph(_mm512_mul_ps(load16(qbase, p.q_type, base + dd), sc),
                                    _MM_FROUND_TO_NEAREST_INT));
            for (; dd < d; ++dd)
                row[dd] = static_cast<_Float16>(value_f32(qbase, p.q_type, base + dd) * p.scale);
            for (dd = 0; dd < d; ++dd) s.qt[dd * kQ + l] = row[dd];
        }
    }
    for (size_t x = 0; x < dv * kQ; ++x) s.ot[x] = 0.0f;
    __m512 m[4], lsum[4];
    for (size_t v = 0; v < 4; ++v) {
        m[v] = _mm512_set1_ps(-INFINITY);
        lsum[v] = _mm512_setzero_ps();
    }
    // K tiles (converted, transposed) and V rows (converted, or the fp16 operand)
    const _Float16 *kall =
        reinterpret_cast<const _Float16 *>(k16) + (b * sh.heads_kv + kvh) * fp16_k_elems(p);
    const _Float16 *vall;
    if (v16) {
        vall = reinterpret_cast<const _Float16 *>(v16) + (b * sh.heads_kv + kvh) * sh.seq_k * dv;
        s.vr = dv;
    } else {
        vall = static_cast<const _Float16 *>(t.v) + b * p.v.batch + kvh * p.v.head;
        s.vr = p.v.row;
    }
    for (size_t j0 = kbeg / kBK * kBK; j0 < kend; j0 += kBK) {
        const size_t nk = kend - j0 < kBK ? kend - j0 : kBK;
        s.kt = kall + j0 * d; // tile j0 / kBK: [d][kBK]
        s.vt = vall + j0 * s.vr;
        for (size_t v = 0; v < 2; ++v)
            for (size_t x0 = 0; x0 < nk; x0 += kKT) qk_block(s, d, x0, v);
        // masks: a key outside a lane's [lo, hi) scores -inf
        const bool full =
            static_cast<long long>(j0) >= lomax && static_cast<long long>(j0 + nk) <= himin;
        if (!full) {
            __m512i vlo[4], vhi[4];
            for (size_t v = 0; v < 4; ++v) {
                vlo[v] = _mm512_loadu_si512(lo + 16 * v);
                vhi[v] = _mm512_loadu_si512(hi + 16 * v);
            }
            for (size_t x = 0; x < nk; ++x) {
                const __m512i jv = _mm512_set1_epi32(static_cast<int32_t>(j0 + x));
                for (size_t v = 0; v < 4; ++v) {
                    const __mmask16 ok = _mm512_cmp_epi32_mask(vlo[v], jv, _MM_CMPINT_LE) &
                                         _mm512_cmp_epi32_mask(jv, vhi[v], _MM_CMPINT_LT);
                    float *sp = s.st + x * kQ + 16 * v;
                    _mm512_storeu_ps(
                        sp, _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), ok, _mm512_loadu_ps(sp)));
                }
            }
        }
        // online softmax: max, rescale and sum in fp32; the probabilities exp(s - m) themselves
        // are evaluated in fp16 (32 lanes a step), the precision P.V takes them in anyway, and
        // the sum adds exactly those fp16 values
        __m512 alpha[4], msafe[4];
        for (size_t v = 0; v < 4; ++v) {
            __m512 mt = m[v];
            for (size_t x = 0; x < nk; ++x)
                mt = _mm512_max_ps(mt, _mm512_loadu_ps(s.st + x * kQ + 16 * v));
            const __mmask16 ninf = _mm512_cmp_ps_mask(mt, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
            msafe[v] = _mm512_mask_mov_ps(mt, ninf, _mm512_setzero_ps());
            alpha[v] = exp16(_mm512_sub_ps(m[v], msafe[v]));
            m[v] = mt;
        }
        const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
        for (size_t v = 0; v < 2; ++v) {
            const __m512 m0 = _mm512_mul_ps(msafe[2 * v], log2e);
            const __m512 m1 = _mm512_mul_ps(msafe[2 * v + 1], log2e);
            __m512 l0 = _mm512_setzero_ps(), l1 = l0;
            for (size_t x = 0; x < nk; ++x) {
                const float *sp = s.st + x * kQ + 32 * v;
                // t = (s - m) log2(e) <= 0, in fp16
                const __m512 t0 = _mm512_fmsub_ps(_mm512_loadu_ps(sp), log2e, m0);
                const __m512 t1 = _mm512_fmsub_ps(_mm512_loadu_ps(sp + 16), log2e, m1);
                const __m512h e = exp2_ph(t0, t1);
                _mm512_storeu_ph(s.pt + x * kQ + 32 * v, e);
                __m512 e0, e1;
                widen_ph(e, &e0, &e1);
                l0 = _mm512_add_ps(l0, e0);
                l1 = _mm512_add_ps(l1, e1);
            }
            lsum[2 * v] = _mm512_fmadd_ps(lsum[2 * v], alpha[2 * v], l0);
            lsum[2 * v + 1] = _mm512_fmadd_ps(lsum[2 * v + 1], alpha[2 * v + 1], l1);
        }
        for (size_t v = 0; v < 2; ++v) {
            size_t c0 = 0;
            for (; c0 + kDT <= dv; c0 += kDT) pv_block<kDT>(s, nk, c0, v, alpha);
            for (; c0 + 4 <= dv; c0 += 4) pv_block<4>(s, nk, c0, v, alpha);
            for (; c0 < dv; ++c0) pv_block<1>(s, nk, c0, v, alpha);
        }
    }
    // out = ot / l; rows with no visible key: 0 and lse -inf
    float ml[kQ], ll[kQ];
    for (size_t v = 0; v < 4; ++v) {
        _mm512_storeu_ps(ml + 16 * v, m[v]);
        _mm512_storeu_ps(ll + 16 * v, lsum[v]);
    }
    float inv[kQ];
    for (size_t l = 0; l < kQ; ++l) {
        const bool vis = ml[l] != -INFINITY && ll[l] > 0.0f;
        inv[l] = vis ? 1.0f / ll[l] : 0.0f; // a multiply per value, not a division
    }
    for (size_t dd = 0; dd < dv; ++dd) // normalise in place, a vector of lanes at a time
        for (size_t v = 0; v < 4; ++v) {
            float *op = s.ot + dd * kQ + 16 * v;
            _mm512_storeu_ps(op, _mm512_mul_ps(_mm512_loadu_ps(op), _mm512_loadu_ps(inv + 16 * v)));
        }
    for (size_t l = 0; l < rows; ++l) {
        float *o = t.out + out_index(p, t, b, h, q0 + l);
        for (size_t dd = 0; dd < dv; ++dd) o[dd] = s.ot[dd * kQ + l];
        if (t.lse)
            t.lse[lse_index(p, t, b, h, q0 + l)] =
                inv[l] != 0.0f ? ml[l] + std::log(ll[l]) : -INFINITY;
    }
}

} // namespace

const Fp16Kernel *fp16_kernel() {
    // block_rows, in_range, scratch_bytes, k_elems, convert_rows, item
    static const Fp16Kernel table = {
        kQ, &fp16_in_range, &fp16_scratch_bytes, &fp16_k_elems, &fp16_convert_rows, &fp16_item,
    };
    return &table;
}

#else // no AVX512-FP16 in this compiler: FP16 requests run in exact mode

const Fp16Kernel *fp16_kernel() {
    return nullptr;
}

#endif

} // namespace core
} // namespace attn
