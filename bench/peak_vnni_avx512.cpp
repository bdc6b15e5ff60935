// AVX512-VNNI vpdpbusd loop (u8 x s8 dot products of 4, into int32); compiled with its own flags
// only (see peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_vnni_avx512(long iters) {
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
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
        c0 = _mm512_dpbusd_epi32(c0, a, b);
        c1 = _mm512_dpbusd_epi32(c1, a, b);
        c2 = _mm512_dpbusd_epi32(c2, a, b);
        c3 = _mm512_dpbusd_epi32(c3, a, b);
        c4 = _mm512_dpbusd_epi32(c4, a, b);
        c5 = _mm512_dpbusd_epi32(c5, a, b);
        c6 = _mm512_dpbusd_epi32(c6, a, b);
        c7 = _mm512_dpbusd_epi32(c7, a, b);
        c8 = _mm512_dpbusd_epi32(c8, a, b);
        c9 = _mm512_dpbusd_epi32(c9, a, b);
        c10 = _mm512_dpbusd_epi32(c10, a, b);
        c11 = _mm512_dpbusd_epi32(c11, a, b);
        c12 = _mm512_dpbusd_epi32(c12, a, b);
        c13 = _mm512_dpbusd_epi32(c13, a, b);
        c14 = _mm512_dpbusd_epi32(c14, a, b);
        c15 = _mm512_dpbusd_epi32(c15, a, b);
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
