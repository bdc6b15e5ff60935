// SSE2 peak loop (mulps + addps, SSE2 has no FMA); x86-64 baseline flags (see peak.hpp).
#include <emmintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_sse2(long iters) {
    const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
    __m128 c0 = _mm_set1_ps(0.0f), c1 = _mm_set1_ps(0.1f), c2 = _mm_set1_ps(0.2f);
    __m128 c3 = _mm_set1_ps(0.3f), c4 = _mm_set1_ps(0.4f), c5 = _mm_set1_ps(0.5f);
    __m128 c6 = _mm_set1_ps(0.6f), c7 = _mm_set1_ps(0.7f), c8 = _mm_set1_ps(0.8f);
    __m128 c9 = _mm_set1_ps(0.9f), c10 = _mm_set1_ps(1.0f), c11 = _mm_set1_ps(1.1f);
    for (long i = 0; i < iters; ++i) {
        c0 = _mm_add_ps(_mm_mul_ps(c0, a), b);
        c1 = _mm_add_ps(_mm_mul_ps(c1, a), b);
        c2 = _mm_add_ps(_mm_mul_ps(c2, a), b);
        c3 = _mm_add_ps(_mm_mul_ps(c3, a), b);
        c4 = _mm_add_ps(_mm_mul_ps(c4, a), b);
        c5 = _mm_add_ps(_mm_mul_ps(c5, a), b);
        c6 = _mm_add_ps(_mm_mul_ps(c6, a), b);
        c7 = _mm_add_ps(_mm_mul_ps(c7, a), b);
        c8 = _mm_add_ps(_mm_mul_ps(c8, a), b);
        c9 = _mm_add_ps(_mm_mul_ps(c9, a), b);
        c10 = _mm_add_ps(_mm_mul_ps(c10, a), b);
        c11 = _mm_add_ps(_mm_mul_ps(c11, a), b);
    }
    __m128 s = _mm_add_ps(_mm_add_ps(_mm_add_ps(c0, c1), _mm_add_ps(c2, c3)),
                          _mm_add_ps(_mm_add_ps(c4, c5), _mm_add_ps(c6, c7)));
    s = _mm_add_ps(s, _mm_add_ps(_mm_add_ps(c8, c9), _mm_add_ps(c10, c11)));
    float lanes[4];
    _mm_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

} // namespace attn_bench
