// AVX512-FP16 multiply-add peak loop; compiled with -mavx512fp16 only (see peak.hpp): 16 chains of
// vfmadd*ph on zmm (32 fp16 lanes), 16 * 32 * 2 = 1024 flops per iteration. With a = 0.999 and
// b = 0.001 every chain converges to 1: no overflow, no subnormals.
#include <immintrin.h>

#include "peak.hpp"

namespace attn_bench {

float peak_loop_avx512fp16(long iters) {
    const __m512h a = _mm512_set1_ph(static_cast<_Float16>(0.999f));
    const __m512h b = _mm512_set1_ph(static_cast<_Float16>(0.001f));
    __m512h c[16];
    for (int x = 0; x < 16; ++x) c[x] = _mm512_set1_ph(static_cast<_Float16>(0.05f * x));
    __m512h c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3], c4 = c[4], c5 = c[5], c6 = c[6], c7 = c[7];
    __m512h c8 = c[8], c9 = c[9], c10 = c[10], c11 = c[11], c12 = c[12], c13 = c[13];
    __m512h c14 = c[14], c15 = c[15];
    for (long i = 0; i < iters; ++i) {
        c0 = _mm512_fmadd_ph(c0, a, b);
        c1 = _mm512_fmadd_ph(c1, a, b);
        c2 = _mm512_fmadd_ph(c2, a, b);
        c3 = _mm512_fmadd_ph(c3, a, b);
        c4 = _mm512_fmadd_ph(c4, a, b);
        c5 = _mm512_fmadd_ph(c5, a, b);
        c6 = _mm512_fmadd_ph(c6, a, b);
        c7 = _mm512_fmadd_ph(c7, a, b);
        c8 = _mm512_fmadd_ph(c8, a, b);
        c9 = _mm512_fmadd_ph(c9, a, b);
        c10 = _mm512_fmadd_ph(c10, a, b);
        c11 = _mm512_fmadd_ph(c11, a, b);
        c12 = _mm512_fmadd_ph(c12, a, b);
        c13 = _mm512_fmadd_ph(c13, a, b);
        c14 = _mm512_fmadd_ph(c14, a, b);
        c15 = _mm512_fmadd_ph(c15, a, b);
    }
    const __m512h s = _mm512_add_ph(
        _mm512_add_ph(_mm512_add_ph(_mm512_add_ph(c0, c1), _mm512_add_ph(c2, c3)),
                      _mm512_add_ph(_mm512_add_ph(c4, c5), _mm512_add_ph(c6, c7))),
        _mm512_add_ph(_mm512_add_ph(_mm512_add_ph(c8, c9), _mm512_add_ph(c10, c11)),
                      _mm512_add_ph(_mm512_add_ph(c12, c13), _mm512_add_ph(c14, c15))));
    return static_cast<float>(_mm512_reduce_add_ph(s));
}

} // namespace attn_bench
