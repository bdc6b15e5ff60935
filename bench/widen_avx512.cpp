// AVX-512 widening loop (widen.hpp); compiled with -mavx512f only.
#include <immintrin.h>

#include "widen.hpp"

namespace attn_bench {
namespace widen_avx512_impl {

struct V {
    using reg = __m512;
    static constexpr int kRegs = 32;
    // keys per step for g query rows: 16 accumulators at 4 rows and more (the decode kernel's 4 x
    // 4), 12 below
    static constexpr int keys(int g) { return g == 1 ? 12 : g == 2 ? 6 : 16 / g; }
    static constexpr size_t L = 16;
    static reg zero() { return _mm512_setzero_ps(); }
    static reg loadf(const float *p) { return _mm512_loadu_ps(p); }
    template <int S> static reg widen(const unsigned char *row, size_t dd) {
        if (S == F32) return _mm512_loadu_ps(reinterpret_cast<const float *>(row) + dd);
        if (S == F16)
            return _mm512_cvtph_ps(
                _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + 2 * dd)));
        if (S == BF16)
            return _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                      reinterpret_cast<const __m256i *>(row + 2 * dd))),
                                  16));
        return _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + dd))));
    }
    static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
    static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
    static reg bcast(float x) { return _mm512_set1_ps(x); }
    static float hsum(reg x) {
        float l[16];
        _mm512_storeu_ps(l, x);
        float r = 0;
        for (float v : l) r += v;
        return r;
    }
};
#include "widen-inl.h"

} // namespace widen_avx512_impl

float widen_avx512(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                   const float *q, size_t passes) {
    return widen_avx512_impl::widen_any(s, group, kv, d, rows, scale, q, passes);
}

} // namespace attn_bench
