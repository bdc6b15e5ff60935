// AVX-512BW vpmaddwd + vpaddd loop (the INT8 mode's unit on AVX-512 without VNNI); compiled with
// its own flags only (see peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_madd_avx512(long iters) {
    const __m512i y = _mm512_set1_epi16(3);
    __m512i c0 = _mm512_set1_epi32(1);
    __m512i c1 = _mm512_set1_epi32(2);
    __m512i c2 = _mm512_set1_epi32(3);
    __m512i c3 = _mm512_set1_epi32(4);
    __m512i c4 = _mm512_set1_epi32(5);
    __m512i c5 = _mm512_set1_epi32(6);
    __m512i c6 = _mm512_set1_epi32(7);
    __m512i c7 = _mm512_set1_epi32(8);
    __m512i c8 = _mm512_set1_epi32(9);
    __m512i c9 = _mm512_set1_epi32(10);
    __m512i c10 = _mm512_set1_epi32(11);
    __m512i c11 = _mm512_set1_epi32(12);
    __m512i c12 = _mm512_set1_epi32(13);
    __m512i c13 = _mm512_set1_epi32(14);
    __m512i c14 = _mm512_set1_epi32(15);
    __m512i c15 = _mm512_set1_epi32(16);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm512_add_epi32(c0, _mm512_madd_epi16(c0, y));
        c1 = _mm512_add_epi32(c1, _mm512_madd_epi16(c1, y));
        c2 = _mm512_add_epi32(c2, _mm512_madd_epi16(c2, y));
        c3 = _mm512_add_epi32(c3, _mm512_madd_epi16(c3, y));
        c4 = _mm512_add_epi32(c4, _mm512_madd_epi16(c4, y));
        c5 = _mm512_add_epi32(c5, _mm512_madd_epi16(c5, y));
        c6 = _mm512_add_epi32(c6, _mm512_madd_epi16(c6, y));
        c7 = _mm512_add_epi32(c7, _mm512_madd_epi16(c7, y));
        c8 = _mm512_add_epi32(c8, _mm512_madd_epi16(c8, y));
        c9 = _mm512_add_epi32(c9, _mm512_madd_epi16(c9, y));
        c10 = _mm512_add_epi32(c10, _mm512_madd_epi16(c10, y));
        c11 = _mm512_add_epi32(c11, _mm512_madd_epi16(c11, y));
        c12 = _mm512_add_epi32(c12, _mm512_madd_epi16(c12, y));
        c13 = _mm512_add_epi32(c13, _mm512_madd_epi16(c13, y));
        c14 = _mm512_add_epi32(c14, _mm512_madd_epi16(c14, y));
        c15 = _mm512_add_epi32(c15, _mm512_madd_epi16(c15, y));
    }
    __m512i s = c0;
    s = _mm512_xor_si512(s, c1);
    s = _mm512_xor_si512(s, c2);
    s = _mm512_xor_si512(s, c3);
    s = _mm512_xor_si512(s, c4);
    s = _mm512_xor_si512(s, c5);
    s = _mm512_xor_si512(s, c6);
    s = _mm512_xor_si512(s, c7);
    s = _mm512_xor_si512(s, c8);
    s = _mm512_xor_si512(s, c9);
    s = _mm512_xor_si512(s, c10);
    s = _mm512_xor_si512(s, c11);
    s = _mm512_xor_si512(s, c12);
    s = _mm512_xor_si512(s, c13);
    s = _mm512_xor_si512(s, c14);
    s = _mm512_xor_si512(s, c15);
    return static_cast<float>(_mm512_reduce_add_epi32(s));
}

} // namespace attn_bench
