// AVX2 pmaddwd + paddd loop (the INT8 mode's unit on AVX2); compiled with its own flags only (see
// peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_madd_avx2(long iters) {
    const __m256i y = _mm256_set1_epi16(3);
    __m256i c0 = _mm256_set1_epi32(1);
    __m256i c1 = _mm256_set1_epi32(2);
    __m256i c2 = _mm256_set1_epi32(3);
    __m256i c3 = _mm256_set1_epi32(4);
    __m256i c4 = _mm256_set1_epi32(5);
    __m256i c5 = _mm256_set1_epi32(6);
    __m256i c6 = _mm256_set1_epi32(7);
    __m256i c7 = _mm256_set1_epi32(8);
    __m256i c8 = _mm256_set1_epi32(9);
    __m256i c9 = _mm256_set1_epi32(10);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(c0, y));
        c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(c1, y));
        c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(c2, y));
        c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(c3, y));
        c4 = _mm256_add_epi32(c4, _mm256_madd_epi16(c4, y));
        c5 = _mm256_add_epi32(c5, _mm256_madd_epi16(c5, y));
        c6 = _mm256_add_epi32(c6, _mm256_madd_epi16(c6, y));
        c7 = _mm256_add_epi32(c7, _mm256_madd_epi16(c7, y));
        c8 = _mm256_add_epi32(c8, _mm256_madd_epi16(c8, y));
        c9 = _mm256_add_epi32(c9, _mm256_madd_epi16(c9, y));
    }
    __m256i s = c0;
    s = _mm256_xor_si256(s, c1);
    s = _mm256_xor_si256(s, c2);
    s = _mm256_xor_si256(s, c3);
    s = _mm256_xor_si256(s, c4);
    s = _mm256_xor_si256(s, c5);
    s = _mm256_xor_si256(s, c6);
    s = _mm256_xor_si256(s, c7);
    s = _mm256_xor_si256(s, c8);
    s = _mm256_xor_si256(s, c9);
    return static_cast<float>(_mm256_extract_epi32(s, 0));
}

} // namespace attn_bench
