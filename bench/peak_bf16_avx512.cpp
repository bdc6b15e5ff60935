// AVX512-BF16 vdpbf16ps loop (bf16 pairs, fp32 accumulation); compiled with its own flags only (see
// peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_bf16_avx512(long iters) {
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    __m512 c0 = _mm512_set1_ps(0.0f);
    __m512 c1 = _mm512_set1_ps(1.0f);
    __m512 c2 = _mm512_set1_ps(2.0f);
    __m512 c3 = _mm512_set1_ps(3.0f);
    __m512 c4 = _mm512_set1_ps(4.0f);
    __m512 c5 = _mm512_set1_ps(5.0f);
    __m512 c6 = _mm512_set1_ps(6.0f);
    __m512 c7 = _mm512_set1_ps(7.0f);
    __m512 c8 = _mm512_set1_ps(8.0f);
    __m512 c9 = _mm512_set1_ps(9.0f);
    __m512 c10 = _mm512_set1_ps(10.0f);
    __m512 c11 = _mm512_set1_ps(11.0f);
    __m512 c12 = _mm512_set1_ps(12.0f);
    __m512 c13 = _mm512_set1_ps(13.0f);
    __m512 c14 = _mm512_set1_ps(14.0f);
    __m512 c15 = _mm512_set1_ps(15.0f);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm512_dpbf16_ps(c0, a, a);
        c1 = _mm512_dpbf16_ps(c1, a, a);
        c2 = _mm512_dpbf16_ps(c2, a, a);
        c3 = _mm512_dpbf16_ps(c3, a, a);
        c4 = _mm512_dpbf16_ps(c4, a, a);
        c5 = _mm512_dpbf16_ps(c5, a, a);
        c6 = _mm512_dpbf16_ps(c6, a, a);
        c7 = _mm512_dpbf16_ps(c7, a, a);
        c8 = _mm512_dpbf16_ps(c8, a, a);
        c9 = _mm512_dpbf16_ps(c9, a, a);
        c10 = _mm512_dpbf16_ps(c10, a, a);
        c11 = _mm512_dpbf16_ps(c11, a, a);
        c12 = _mm512_dpbf16_ps(c12, a, a);
        c13 = _mm512_dpbf16_ps(c13, a, a);
        c14 = _mm512_dpbf16_ps(c14, a, a);
        c15 = _mm512_dpbf16_ps(c15, a, a);
    }
    __m512 s = c0;
    s = _mm512_add_ps(s, c1);
    s = _mm512_add_ps(s, c2);
    s = _mm512_add_ps(s, c3);
    s = _mm512_add_ps(s, c4);
    s = _mm512_add_ps(s, c5);
    s = _mm512_add_ps(s, c6);
    s = _mm512_add_ps(s, c7);
    s = _mm512_add_ps(s, c8);
    s = _mm512_add_ps(s, c9);
    s = _mm512_add_ps(s, c10);
    s = _mm512_add_ps(s, c11);
    s = _mm512_add_ps(s, c12);
    s = _mm512_add_ps(s, c13);
    s = _mm512_add_ps(s, c14);
    s = _mm512_add_ps(s, c15);
    return _mm512_reduce_add_ps(s);
}

} // namespace attn_bench
