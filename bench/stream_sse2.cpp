// SSE2 streaming read loops; compiled with the x86-64 baseline flags only (see stream.hpp).
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

// 16 accumulators (all 16 xmm registers but the loads' own), 4 cache lines per iteration.
float stream_sum_sse2_x16(const float *x, size_t n) {
    __m128 a[16];
    for (auto &v : a) v = _mm_setzero_ps();
    for (size_t i = 0; i < n; i += 64)
        for (int u = 0; u < 16; ++u) a[u] = _mm_add_ps(a[u], _mm_load_ps(x + i + 4 * u));
    for (int u = 1; u < 16; ++u) a[0] = _mm_add_ps(a[0], a[u]);
    float l[4];
    _mm_storeu_ps(l, a[0]);
    return l[0] + l[1] + l[2] + l[3];
}

// Two streams: the halves of x read side by side (2 lines of each per iteration, 8
// accumulators in all), then the tail.
float stream_sum_sse2_2s(const float *x, size_t n) {
    const size_t h = n / 2 / kStreamBlock * kStreamBlock;
    const float *y = x + h;
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < h; i += 16) {
        a0 = _mm_add_ps(a0, _mm_load_ps(x + i));
        a1 = _mm_add_ps(a1, _mm_load_ps(x + i + 4));
        a2 = _mm_add_ps(a2, _mm_load_ps(x + i + 8));
        a3 = _mm_add_ps(a3, _mm_load_ps(x + i + 12));
        a4 = _mm_add_ps(a4, _mm_load_ps(y + i));
        a5 = _mm_add_ps(a5, _mm_load_ps(y + i + 4));
        a6 = _mm_add_ps(a6, _mm_load_ps(y + i + 8));
        a7 = _mm_add_ps(a7, _mm_load_ps(y + i + 12));
    }
    for (size_t i = 2 * h; i < n; i += 4) a0 = _mm_add_ps(a0, _mm_load_ps(x + i));
    const __m128 s = _mm_add_ps(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)),
                                _mm_add_ps(_mm_add_ps(a4, a5), _mm_add_ps(a6, a7)));
    float l[4];
    _mm_storeu_ps(l, s);
    return l[0] + l[1] + l[2] + l[3];
}

} // namespace attn_bench
