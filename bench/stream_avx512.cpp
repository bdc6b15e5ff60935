// AVX-512 streaming read loop; compiled with -mavx512f only (see stream.hpp).
#include <immintrin.h>

#include "stream.hpp"

namespace attn_bench {

float stream_sum_avx512(const float *x, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    float l[16];
    _mm512_storeu_ps(l, s);
    float r = 0;
    for (float v : l) r += v;
    return r;
}

} // namespace attn_bench
