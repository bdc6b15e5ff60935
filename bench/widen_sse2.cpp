// SSE2 widening loop (widen.hpp); compiled with the x86-64 baseline flags only. SSE2 has no
// f16 conversion instruction: f16 is widened by the exact integer method (F. Giesen's
// half_to_float_SSE2: shift the exponent and mantissa into place, one multiply rebiases normals
// and subnormals alike, infinities and NaNs get the all-ones exponent), ~10 operations per 4
// values; and no FMA: a multiply and an add.
#include <emmintrin.h>

#include "widen.hpp"

namespace attn_bench {
namespace widen_sse2_impl {

struct V {
    using reg = __m128;
    static constexpr int kRegs = 16;
    // keys per step for g query rows: 8 accumulators (a multiply and an add each: an add's latency,
    // not an FMA's, to hide)
    static constexpr int keys(int g) { return g == 8 ? 1 : 8 / g; }
    static constexpr size_t L = 4;
    static reg zero() { return _mm_setzero_ps(); }
    static reg loadf(const float *p) { return _mm_loadu_ps(p); }
    static reg half4(__m128i h) { // h: 4 lanes of 32 bits, the f16 in the low 16
        const __m128i expmant = _mm_and_si128(_mm_set1_epi32(0x7fff), h);
        const __m128i justsign = _mm_xor_si128(h, expmant);
        const __m128 scaled = _mm_mul_ps(_mm_castsi128_ps(_mm_slli_epi32(expmant, 13)),
                                         _mm_castsi128_ps(_mm_set1_epi32((254 - 15) << 23)));
        const __m128i infnan = _mm_cmpgt_epi32(expmant, _mm_set1_epi32(0x7bff));
        const __m128 inf_exp =
            _mm_and_ps(_mm_castsi128_ps(infnan), _mm_castsi128_ps(_mm_set1_epi32(255 << 23)));
        return _mm_or_ps(scaled,
                         _mm_or_ps(_mm_castsi128_ps(_mm_slli_epi32(justsign, 16)), inf_exp));
    }
    template <int S> static reg widen(const unsigned char *row, size_t dd) {
        if (S == F32) return _mm_loadu_ps(reinterpret_cast<const float *>(row) + dd);
        if (S == F16)
            return half4(
                _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + 2 * dd)),
                                   _mm_setzero_si128()));
        if (S == BF16)
            return _mm_castsi128_ps(_mm_unpacklo_epi16(
                _mm_setzero_si128(),
                _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + 2 * dd))));
        int w;
        __builtin_memcpy(&w, row + dd, 4);
        __m128i x = _mm_cvtsi32_si128(w);
        x = _mm_unpacklo_epi8(x, x);
        x = _mm_unpacklo_epi16(x, x);
        return _mm_cvtepi32_ps(_mm_srai_epi32(x, 24));
    }
    static reg fma(reg a, reg b, reg c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
    static reg mul(reg a, reg b) { return _mm_mul_ps(a, b); }
    static reg bcast(float x) { return _mm_set1_ps(x); }
    static float hsum(reg x) {
        float l[4];
        _mm_storeu_ps(l, x);
        return l[0] + l[1] + l[2] + l[3];
    }
};
#include "widen-inl.h"

} // namespace widen_sse2_impl

float widen_sse2(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                 const float *q, size_t passes) {
    return widen_sse2_impl::widen_any(s, group, kv, d, rows, scale, q, passes);
}

} // namespace attn_bench
