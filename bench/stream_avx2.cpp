// AVX2 streaming read loop; compiled with -mavx2 only (see stream.hpp).
#include <immintrin.h>

#include "stream.hpp"

namespace attn_bench {

float stream_sum_avx2(const float *x, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
        a4 = _mm256_add_ps(a4, _mm256_load_ps(x + i + 32));
        a5 = _mm256_add_ps(a5, _mm256_load_ps(x + i + 40));
        a6 = _mm256_add_ps(a6, _mm256_load_ps(x + i + 48));
        a7 = _mm256_add_ps(a7, _mm256_load_ps(x + i + 56));
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    float l[8];
    _mm256_storeu_ps(l, s);
    float r = 0;
    for (float v : l) r += v;
    return r;
}

} // namespace attn_bench
