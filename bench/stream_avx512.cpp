// AVX-512 streaming read loops; compiled with -mavx512f only (see stream.hpp).
#include <immintrin.h>

#include "stream.hpp"

namespace attn_bench {

namespace {
float hsum16(__m512 s) {
    float l[16];
    _mm512_storeu_ps(l, s);
    float r = 0;
    for (float v : l) r += v;
    return r;
}
} // namespace

float stream_sum_avx512(const float *x, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// 8 accumulators, 8 cache lines per iteration; a 4-line tail.
float stream_sum_avx512_x8(const float *x, size_t n) {
    __m512 a[8];
    for (auto &v : a) v = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 128 <= n; i += 128)
        for (int u = 0; u < 8; ++u) a[u] = _mm512_add_ps(a[u], _mm512_load_ps(x + i + 16 * u));
    for (; i < n; i += 64)
        for (int u = 0; u < 4; ++u) a[u] = _mm512_add_ps(a[u], _mm512_load_ps(x + i + 16 * u));
    for (int u = 1; u < 8; ++u) a[0] = _mm512_add_ps(a[0], a[u]);
    return hsum16(a[0]);
}

// Two streams: the halves of x read side by side (4 lines of each per iteration, 8
// accumulators in all), then the tail.
float stream_sum_avx512_2s(const float *x, size_t n) {
    const size_t h = n / 2 / kStreamBlock * kStreamBlock;
    const float *y = x + h;
    __m512 a[8];
    for (auto &v : a) v = _mm512_setzero_ps();
    for (size_t i = 0; i < h; i += 64)
        for (int u = 0; u < 4; ++u) {
            a[u] = _mm512_add_ps(a[u], _mm512_load_ps(x + i + 16 * u));
            a[4 + u] = _mm512_add_ps(a[4 + u], _mm512_load_ps(y + i + 16 * u));
        }
    for (size_t i = 2 * h; i < n; i += 16) a[0] = _mm512_add_ps(a[0], _mm512_load_ps(x + i));
    for (int u = 1; u < 8; ++u) a[0] = _mm512_add_ps(a[0], a[u]);
    return hsum16(a[0]);
}

} // namespace attn_bench
