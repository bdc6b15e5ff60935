// AVX-512 FMA peak loop; compiled with -mavx512f only (see peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_avx512(long iters) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f);
    __m512 c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f);
    __m512 c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f);
    __m512 c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f);
    __m512 c12 = _mm512_set1_ps(1.2f), c13 = _mm512_set1_ps(1.3f), c14 = _mm512_set1_ps(1.4f);
    __m512 c15 = _mm512_set1_ps(1.5f);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm512_fmadd_ps(c0, a, b);
        c1 = _mm512_fmadd_ps(c1, a, b);
        c2 = _mm512_fmadd_ps(c2, a, b);
        c3 = _mm512_fmadd_ps(c3, a, b);
        c4 = _mm512_fmadd_ps(c4, a, b);
        c5 = _mm512_fmadd_ps(c5, a, b);
        c6 = _mm512_fmadd_ps(c6, a, b);
        c7 = _mm512_fmadd_ps(c7, a, b);
        c8 = _mm512_fmadd_ps(c8, a, b);
        c9 = _mm512_fmadd_ps(c9, a, b);
        c10 = _mm512_fmadd_ps(c10, a, b);
        c11 = _mm512_fmadd_ps(c11, a, b);
        c12 = _mm512_fmadd_ps(c12, a, b);
        c13 = _mm512_fmadd_ps(c13, a, b);
        c14 = _mm512_fmadd_ps(c14, a, b);
        c15 = _mm512_fmadd_ps(c15, a, b);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(
        s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                         _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    float lanes[16];
    _mm512_storeu_ps(lanes, s);
    float sum = 0.0f;
    for (float x : lanes) sum += x;
    return sum;
}

} // namespace attn_bench
