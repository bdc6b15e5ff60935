// Shared preamble of the xsimd kernels: one translation unit per ISA defines
//   ATTN_ISA_NS (namespace), ATTN_XSIMD_ARCH (xsimd arch), ATTN_KERNEL_FN (accessor name) and
//   the blocking ATTN_NV, ATTN_KT, ATTN_DT, ATTN_BK (optionally ATTN_NARROW_KT / _DT for the
//   one-vector kernel and ATTN_MID_NV / _KT / _DT for a middle kernel),
// then includes this file. Everything lands in attn::core::ATTN_ISA_NS. Kernel fragment, not a
// header: included once per xsimd ISA translation unit (sse2.cpp, avx2.cpp, avx512.cpp), each
// compiled with its own flags; no include guard, since no TU includes it twice and nothing else
// may include it.
#include <xsimd/xsimd.hpp>
#include <immintrin.h>

#include "convert.hpp"
#include "kernel.hpp"

namespace attn {
namespace core {
namespace ATTN_ISA_NS {

using arch = ATTN_XSIMD_ARCH;
using vf = xsimd::batch<float, arch>;
using vm = xsimd::batch_bool<float, arch>;
constexpr size_t kL = vf::size;

static inline vf vload(const float *p) {
    return vf::load_unaligned(p);
}
static inline void vstore(float *p, const vf &x) {
    x.store_unaligned(p);
}
static inline vf vbcast(float x) {
    return vf(x);
}
static inline vf vzero() {
    return vf(0.0f);
}
// a * b + c rounded once. xsimd has no AVX-512 fma (its generic a * b + c is contracted, or not,
// at the compiler's discretion), so AVX-512 states it: every vfma of the kernel then rounds alike.
static inline vf vfma(const vf &a, const vf &b, const vf &c) {
#if defined(__AVX512F__)
    return _mm512_fmadd_ps(a, b, c);
#else
    return xsimd::fma(a, b, c);
#endif
}
// x, kept in a register: the compiler may not fold its load into each instruction that uses it
// (GCC turned decode_qk_tile's 4 query loads per head_dim step into 4 x kQB memory operands of
// the FMAs: more loads than the load ports serve beside the K rows and the prefetches).
static inline vf vin_register(const vf &x) {
    auto r = static_cast<typename vf::register_type>(x);
    __asm__("" : "+v"(r));
    return vf(r);
}
static inline vf vmax(const vf &a, const vf &b) {
    return xsimd::max(a, b);
}
static inline vf vexp(const vf &x) {
    return xsimd::exp(x);
}
// exp(x) for the softmax's arguments: x <= 0 (a score minus a running max that is at least the
// score), -inf (-> +0) or NaN (-> NaN); larger x is outside its domain. xsimd::exp's reduction
// and polynomial (Cephes: x = k ln2 + r, |r| <= ln2 / 2, exp(r) = 1 + r + r^2 P(r)), so the same
// accuracy, but cheaper around them: k rounded by adding 1.5 * 2^23 + 127 in the FMA (k + 127
// then sits in the low mantissa bits, so 2^k is one shift, instead of a round, a conversion, an
// add and a shift), and one compare-and-select for the underflow (x <= ln(2^-126): 0) instead of
// xsimd's two for both ends. The x <= 0 domain keeps k in [-126, 0], where the shift is exact.
static inline vf vexp_nonpos(const vf &x) {
    using vi = xsimd::batch<int32_t, arch>;
    const vf magic = vbcast(12582912.0f + 127.0f); // 1.5 * 2^23 + the exponent bias
    const vf t = vfma(x, vbcast(1.44269504088896341f), magic);
    const vf k = t - magic;                   // round(x / ln2), exactly
    vf r = vfma(k, vbcast(-0.693359375f), x); // xsimd's log_2hi / log_2lo
    r = vfma(k, vbcast(2.12194440e-4f), r);
    vf y = vbcast(1.3997796e-03f);
    y = vfma(y, r, vbcast(8.3955629e-03f));
    y = vfma(y, r, vbcast(4.1665401e-02f));
    y = vfma(y, r, vbcast(1.6666277e-01f));
    y = vfma(y, r, vbcast(5.0000000e-01f));
    const vf e = vfma(y, r * r, r) + vbcast(1.0f);
    const vf scale = xsimd::bitwise_cast<vf>(xsimd::bitwise_cast<vi>(t) << 23); // 2^k
    // NaN compares false, so it keeps its (NaN) value; -inf and deep underflow become +0
    return xsimd::select(x <= vbcast(-87.3365478515625f), vzero(), e * scale);
}
static inline vf vlog(const vf &x) {
    return xsimd::log(x);
}
static inline vf vtanh(const vf &x) {
    return xsimd::tanh(x);
}
static inline vf vsel(const vm &m, const vf &a, const vf &b) {
    return xsimd::select(m, a, b);
}
static inline vm vlt(const vf &a, const vf &b) {
    return a < b;
}
static inline vm veq(const vf &a, const vf &b) {
    return a == b;
}
static inline vm vne(const vf &a, const vf &b) {
    return a != b;
}
static inline vm vand(const vm &a, const vm &b) {
    return a && b;
}
static inline bool vany(const vm &m) {
    return xsimd::any(m);
}
static inline float vhsum(const vf &x) {
    return xsimd::hadd(x);
}

// int32 lanes beside vf for the integer products (int8-inl.h): a word holds two int16, the even
// one low; vi_madd is pmaddwd (each lane: a0 b0 + a1 b1, exact in int32) and an add.
#if defined(__AVX512F__)
using vi = __m512i;
static inline vi vi_zero() {
    return _mm512_setzero_si512();
}
static inline vi vi_load(const int32_t *p) {
    return _mm512_loadu_si512(p);
}
static inline vi vi_bcast(int32_t x) {
    return _mm512_set1_epi32(x);
}
static inline vi vi_madd(const vi &acc, const vi &a, const vi &b) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}
static inline vf vi_to_f(const vi &a) {
    return _mm512_cvtepi32_ps(a);
}
static inline void vi_store(int32_t *p, const vi &a) {
    _mm512_storeu_si512(p, a);
}
// x rounded to the nearest int32 (ties to even), for |x| < 2^31
static inline vi vi_from_f(const vf &x) {
    return _mm512_cvtps_epi32(x);
}
// (lo & 0xFFFF) | (hi << 16) per lane: two int16 codes in a word, lo first
static inline vi vi_pack_lohi(const vi &lo, const vi &hi) {
    return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xFFFF)),
                           _mm512_slli_epi32(hi, 16));
}
#elif defined(__AVX2__)
using vi = __m256i;
static inline vi vi_zero() {
    return _mm256_setzero_si256();
}
static inline vi vi_load(const int32_t *p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}
static inline vi vi_bcast(int32_t x) {
    return _mm256_set1_epi32(x);
}
// (In asm so that the sum lands in acc's register: GCC 12 wrote it to a new register and copied
// it back, a register move per multiply-add that took dispatch slots.)
static inline vi vi_madd(vi acc, const vi &a, const vi &b) {
    vi t;
    __asm__("vpmaddwd %[b], %[a], %[t]\n\tvpaddd %[t], %[acc], %[acc]"
            : [acc] "+x"(acc), [t] "=&x"(t)
            : [a] "x"(a), [b] "x"(b));
    return acc;
}
static inline vf vi_to_f(const vi &a) {
    return _mm256_cvtepi32_ps(a);
}
static inline void vi_store(int32_t *p, const vi &a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), a);
}
// x rounded to the nearest int32 (ties to even), for |x| < 2^31
static inline vi vi_from_f(const vf &x) {
    return _mm256_cvtps_epi32(x);
}
// (lo & 0xFFFF) | (hi << 16) per lane: two int16 codes in a word, lo first
static inline vi vi_pack_lohi(const vi &lo, const vi &hi) {
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xFFFF)),
                           _mm256_slli_epi32(hi, 16));
}
#else
using vi = __m128i;
static inline vi vi_zero() {
    return _mm_setzero_si128();
}
static inline vi vi_load(const int32_t *p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
}
static inline vi vi_bcast(int32_t x) {
    return _mm_set1_epi32(x);
}
static inline vi vi_madd(const vi &acc, const vi &a, const vi &b) {
    return _mm_add_epi32(acc, _mm_madd_epi16(a, b));
}
static inline vf vi_to_f(const vi &a) {
    return _mm_cvtepi32_ps(a);
}
static inline void vi_store(int32_t *p, const vi &a) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(p), a);
}
// x rounded to the nearest int32 (ties to even), for |x| < 2^31
static inline vi vi_from_f(const vf &x) {
    return _mm_cvtps_epi32(x);
}
// (lo & 0xFFFF) | (hi << 16) per lane: two int16 codes in a word, lo first
static inline vi vi_pack_lohi(const vi &lo, const vi &hi) {
    return _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi32(0xFFFF)), _mm_slli_epi32(hi, 16));
}
#endif

// The largest lane of x (no NaN lanes).
static inline float vhmax(const vf &x) {
#if defined(__AVX512F__)
    return _mm512_reduce_max_ps(x);
#elif defined(__AVX2__)
    const __m256 v = x;
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_shuffle_ps(a, a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_max_ps(a, _mm_shuffle_ps(a, a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(a);
#else
    float t[kL];
    vstore(t, x);
    float m = t[0];
    for (size_t c = 1; c < kL; ++c) m = t[c] > m ? t[c] : m;
    return m;
#endif
}

// The lane sums of kL vectors at once: lane c of the result = the sum of the lanes of a[c]
// (a transpose-and-add tree: 45 shuffles and adds for 16 sums on AVX-512, 21 for 8 on AVX2,
// against 13 per 4 sums for a shared 4-way reduction), so the sums leave in one register.
__attribute__((always_inline)) static inline vf vhsum_all(const vf *a) {
#if defined(__AVX512F__)
    __m512 t[8], u[4], w[2];
    for (int i = 0; i < 8; ++i) { // per 128-bit chunk: [a0 0+2, a1 0+2, a0 1+3, a1 1+3]
        const __m512 x = a[2 * i], y = a[2 * i + 1];
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));
    }
    for (int i = 0; i < 4; ++i) // per chunk: the chunk's sums of a[4i .. 4i + 3]
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 2; ++i) // chunks 0+1 and 2+3 of u[2i], then of u[2i + 1]
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xDD));
    return vf(_mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88),
                            _mm512_shuffle_f32x4(w[0], w[1], 0xDD)));
#elif defined(__AVX2__)
    __m256 t[4], u[2];
    for (int i = 0; i < 4; ++i) {
        const __m256 x = a[2 * i], y = a[2 * i + 1];
        t[i] = _mm256_add_ps(_mm256_unpacklo_ps(x, y), _mm256_unpackhi_ps(x, y));
    }
    for (int i = 0; i < 2; ++i)
        u[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return vf(_mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                            _mm256_permute2f128_ps(u[0], u[1], 0x31)));
#else
    float s[kL];
    for (size_t c = 0; c < kL; ++c) s[c] = vhsum(a[c]);
    return vload(s);
#endif
}

// kL x kL transposes in registers where the ISA has them (gathers are slow on CPUs with the
// gather-data-sampling mitigation), else element by element. With r_l = rows[l] + c0:
//   vtranspose_add(st, ld, rows, c0):           st[c * ld + l] += r_l[c], or = -inf where
//                                               r_l[c] is -inf (a -inf bias hides its key
//                                               whatever the score: +inf + -inf is not NaN here)
//   vtranspose_pack(dst, ld, rows, c0, scale):  dst[c * ld + l] = r_l[c] * scale
//   vtranspose_unpack(src, ld, rows, c0):       r_l[c] = src[c * ld + l]
// for c, l < kL (the bias rows and the query rows run along head_dim or keys, the score tile and
// the packed queries along queries).
#if defined(ATTN_TRANSPOSE_AVX512)
static inline void vtranspose_regs(__m512 *r) { // r[l][c] -> r[c][l], 16 x 16
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
    }
}
static inline void vtranspose_add(float *st, size_t ld, const float *const *rows, size_t c0) {
    __m512 r[16];
    for (int l = 0; l < 16; ++l) r[l] = _mm512_loadu_ps(rows[l] + c0);
    vtranspose_regs(r);
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    for (int c = 0; c < 16; ++c) {
        const __m512 sum = _mm512_add_ps(_mm512_loadu_ps(st + c * ld), r[c]);
        const __mmask16 hide = _mm512_cmp_ps_mask(r[c], ninf, _CMP_EQ_OQ);
        _mm512_storeu_ps(st + c * ld, _mm512_mask_mov_ps(sum, hide, ninf));
    }
}
static inline void vtranspose_pack(float *dst, size_t ld, const float *const *rows, size_t c0,
                                   float scale) {
    __m512 r[16];
    const __m512 f = _mm512_set1_ps(scale);
    for (int l = 0; l < 16; ++l) r[l] = _mm512_mul_ps(_mm512_loadu_ps(rows[l] + c0), f);
    vtranspose_regs(r);
    for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + c * ld, r[c]);
}
static inline void vtranspose_unpack(const float *src, size_t ld, float *const *rows, size_t c0) {
    __m512 r[16];
    for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_ps(src + c * ld);
    vtranspose_regs(r);
    for (int l = 0; l < 16; ++l) _mm512_storeu_ps(rows[l] + c0, r[l]);
}
#elif defined(ATTN_TRANSPOSE_AVX2)
static inline void vtranspose_regs(__m256 *r) { // r[l][c] -> r[c][l], 8 x 8
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}
static inline void vtranspose_add(float *st, size_t ld, const float *const *rows, size_t c0) {
    __m256 r[8];
    for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(rows[l] + c0);
    vtranspose_regs(r);
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    for (int c = 0; c < 8; ++c) {
        const __m256 sum = _mm256_add_ps(_mm256_loadu_ps(st + c * ld), r[c]);
        const __m256 hide = _mm256_cmp_ps(r[c], ninf, _CMP_EQ_OQ);
        _mm256_storeu_ps(st + c * ld, _mm256_blendv_ps(sum, ninf, hide));
    }
}
static inline void vtranspose_pack(float *dst, size_t ld, const float *const *rows, size_t c0,
                                   float scale) {
    __m256 r[8];
    const __m256 f = _mm256_set1_ps(scale);
    for (int l = 0; l < 8; ++l) r[l] = _mm256_mul_ps(_mm256_loadu_ps(rows[l] + c0), f);
    vtranspose_regs(r);
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(dst + c * ld, r[c]);
}
static inline void vtranspose_unpack(const float *src, size_t ld, float *const *rows, size_t c0) {
    __m256 r[8];
    for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(src + c * ld);
    vtranspose_regs(r);
    for (int l = 0; l < 8; ++l) _mm256_storeu_ps(rows[l] + c0, r[l]);
}
#else
static inline void vtranspose_add(float *st, size_t ld, const float *const *rows, size_t c0) {
    for (size_t c = 0; c < kL; ++c)
        for (size_t l = 0; l < kL; ++l) {
            const float b = rows[l][c0 + c];
            st[c * ld + l] = b == -__builtin_inff() ? b : st[c * ld + l] + b;
        }
}
static inline void vtranspose_pack(float *dst, size_t ld, const float *const *rows, size_t c0,
                                   float scale) {
    for (size_t c = 0; c < kL; ++c)
        for (size_t l = 0; l < kL; ++l) dst[c * ld + l] = rows[l][c0 + c] * scale;
}
static inline void vtranspose_unpack(const float *src, size_t ld, float *const *rows, size_t c0) {
    for (size_t c = 0; c < kL; ++c)
        for (size_t l = 0; l < kL; ++l) rows[l][c0 + c] = src[c * ld + l];
}
#endif

// The main kernel: ATTN_NV query vectors per item.
namespace wide {
constexpr size_t kNV = ATTN_NV, kKT = ATTN_KT, kDT = ATTN_DT, kBK = ATTN_BK;
#include "body-inl.h"
} // namespace wide

// One query vector per item, for calls with few query rows per KV head (decode). Its own key and
// head_dim blocking where the ISA gives one (a single query vector needs more of each to fill
// the FMA pipes).
#ifndef ATTN_NARROW_KT
#define ATTN_NARROW_KT ATTN_KT
#define ATTN_NARROW_DT ATTN_DT
#endif
namespace narrow {
constexpr size_t kNV = 1, kKT = ATTN_NARROW_KT, kDT = ATTN_NARROW_DT, kBK = ATTN_BK;
#include "body-inl.h"
} // namespace narrow

// A middle kernel, where the ISA's main blocking is wide (ATTN_MID_NV, _KT, _DT): it takes the
// calls whose query rows per KV head fit its items (so no wider item computes lanes in vain),
// and the backward.
#ifdef ATTN_MID_NV
namespace mid {
constexpr size_t kNV = ATTN_MID_NV, kKT = ATTN_MID_KT, kDT = ATTN_MID_DT, kBK = ATTN_BK;
#include "body-inl.h"
} // namespace mid
#endif

} // namespace ATTN_ISA_NS

const KernelInfo &ATTN_KERNEL_FN() {
    static const KernelInfo narrow = ATTN_ISA_NS::narrow::make_info(nullptr);
#ifdef ATTN_MID_NV
    static const KernelInfo mid = ATTN_ISA_NS::mid::make_info(&narrow);
    static const KernelInfo wide = [] {
        KernelInfo k = ATTN_ISA_NS::wide::make_info(&mid);
        k.backward_scratch = mid.backward_scratch;
        k.backward = mid.backward;
        return k;
    }();
#else
    static const KernelInfo wide = ATTN_ISA_NS::wide::make_info(&narrow);
#endif
    return wide;
}

} // namespace core
} // namespace attn
