// AVX2 streaming read loops; compiled with -mavx2 only (see stream.hpp).
#include <immintrin.h>

#include "stream.hpp"

namespace attn_bench {

namespace {
float hsum8(__m256 s) {
    float l[8];
    _mm256_storeu_ps(l, s);
    float r = 0;
    for (float v : l) r += v;
    return r;
}
} // namespace

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
    return hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                               _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))));
}

// 12 accumulators (16 ymm registers), 6 cache lines per iteration; the tail 4 lines at a time.
float stream_sum_avx2_x12(const float *x, size_t n) {
    __m256 a[12];
    for (auto &v : a) v = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 96 <= n; i += 96)
        for (int u = 0; u < 12; ++u) a[u] = _mm256_add_ps(a[u], _mm256_load_ps(x + i + 8 * u));
    for (; i < n; i += 32)
        for (int u = 0; u < 4; ++u) a[u] = _mm256_add_ps(a[u], _mm256_load_ps(x + i + 8 * u));
    for (int u = 1; u < 12; ++u) a[0] = _mm256_add_ps(a[0], a[u]);
    return hsum8(a[0]);
}

// Two streams: the halves of x read side by side (2 lines of each per iteration, 8
// accumulators in all), then the tail.
float stream_sum_avx2_2s(const float *x, size_t n) {
    const size_t h = n / 2 / kStreamBlock * kStreamBlock;
    const float *y = x + h;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < h; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
        a4 = _mm256_add_ps(a4, _mm256_load_ps(y + i));
        a5 = _mm256_add_ps(a5, _mm256_load_ps(y + i + 8));
        a6 = _mm256_add_ps(a6, _mm256_load_ps(y + i + 16));
        a7 = _mm256_add_ps(a7, _mm256_load_ps(y + i + 24));
    }
    for (size_t i = 2 * h; i < n; i += 8) a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
    return hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                               _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))));
}

} // namespace attn_bench
