// AVX2 + FMA3 peak loop; compiled with -mavx2 -mfma only (see peak.hpp).
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_avx2(long iters) {
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f);
    __m256 c3 = _mm256_set1_ps(0.3f), c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f);
    __m256 c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f), c8 = _mm256_set1_ps(0.8f);
    __m256 c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm256_fmadd_ps(c0, a, b);
        c1 = _mm256_fmadd_ps(c1, a, b);
        c2 = _mm256_fmadd_ps(c2, a, b);
        c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b);
        c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b);
        c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b);
        c9 = _mm256_fmadd_ps(c9, a, b);
        c10 = _mm256_fmadd_ps(c10, a, b);
        c11 = _mm256_fmadd_ps(c11, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    float sum = 0.0f;
    for (float x : lanes) sum += x;
    return sum;
}

} // namespace attn_bench
