// AVX2 widening loop (widen.hpp); compiled with -mavx2 -mfma -mf16c only.
#include <immintrin.h>

#include "widen.hpp"

namespace attn_bench {
namespace widen_avx2_impl {

struct V {
    using reg = __m256;
    static constexpr int kRegs = 16;
    // keys per step for g query rows: 12 accumulators where they fit (the decode kernel's int8 4 x
    // 3), else 8
    static constexpr int keys(int g) { return g == 1 ? 12 : g == 2 ? 6 : g == 4 ? 3 : 1; }
    static constexpr size_t L = 8;
    static reg zero() { return _mm256_setzero_ps(); }
    static reg loadf(const float *p) { return _mm256_loadu_ps(p); }
    template <int S> static reg widen(const unsigned char *row, size_t dd) {
        if (S == F32) return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + dd);
        if (S == F16)
            return _mm256_cvtph_ps(
                _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * dd)));
        if (S == BF16)
            return _mm256_castsi256_ps(
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i *>(row + 2 * dd))),
                                  16));
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + dd))));
    }
    static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
    static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
    static reg bcast(float x) { return _mm256_set1_ps(x); }
    static float hsum(reg x) {
        float l[8];
        _mm256_storeu_ps(l, x);
        float r = 0;
        for (float v : l) r += v;
        return r;
    }
};
#include "widen-inl.h"

} // namespace widen_avx2_impl

float widen_avx2(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                 const float *q, size_t passes) {
    return widen_avx2_impl::widen_any(s, group, kv, d, rows, scale, q, passes);
}

} // namespace attn_bench
