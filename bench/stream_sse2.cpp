// SSE2 streaming read loop; compiled with the x86-64 baseline flags only (see stream.hpp).
#include <emmintrin.h>

#include "stream.hpp"

namespace attn_bench {

float stream_sum_sse2(const float *x, size_t n) {
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 32) {
        a0 = _mm_add_ps(a0, _mm_load_ps(x + i));
        a1 = _mm_add_ps(a1, _mm_load_ps(x + i + 4));
        a2 = _mm_add_ps(a2, _mm_load_ps(x + i + 8));
        a3 = _mm_add_ps(a3, _mm_load_ps(x + i + 12));
        a4 = _mm_add_ps(a4, _mm_load_ps(x + i + 16));
        a5 = _mm_add_ps(a5, _mm_load_ps(x + i + 20));
        a6 = _mm_add_ps(a6, _mm_load_ps(x + i + 24));
        a7 = _mm_add_ps(a7, _mm_load_ps(x + i + 28));
    }
    const __m128 s = _mm_add_ps(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)),
                                _mm_add_ps(_mm_add_ps(a4, a5), _mm_add_ps(a6, a7)));
    float l[4];
    _mm_storeu_ps(l, s);
    return l[0] + l[1] + l[2] + l[3];
}

} // namespace attn_bench
