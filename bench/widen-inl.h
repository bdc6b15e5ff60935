// Loop body of the widening limit (widen.hpp), not a header: each widen_<isa>.cpp includes it
// inside its own namespace after defining struct V (its vector type and operations):
//   reg, L (floats per vector), kRegs (vector registers), keys(G) (keys per step for G query
//   rows: enough independent accumulators G x keys(G) to keep the FMA units busy, a divisor of
//   24), zero(), loadf(const float *), widen<S>(const unsigned char *row, size_t dd) (L
//   elements of storage S from element dd, as fp32), fma(a, b, c) = a*b + c, mul(a, b),
//   bcast(float), hsum(reg)
// No include guard on purpose.

template <int S, int G>
__attribute__((noinline)) float widen_run(const unsigned char *kv, size_t d, size_t rows,
                                          const float *scale, const float *q, size_t passes) {
    constexpr int U = V::keys(G); // keys per step
    // Where the accumulators, the G rows of q and a key fit in the registers, q is loaded once
    // per step and the keys are widened one at a time; else (AVX2's 4 rows x 3 keys, as the
    // decode kernel does it) the U keys are widened first and q is loaded one row at a time.
    constexpr bool q_first = G * U + G + 1 <= V::kRegs;
    // (every loop over rows of q or keys is unrolled completely, so that acc is registers, not
    // an array on the stack)
    const size_t row_bytes = d * kStoreBytes[S];
    V::reg acc[G][U];
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
        for (int u = 0; u < U; ++u) acc[g][u] = V::zero();
    for (size_t p = 0; p < passes; ++p)
        for (size_t r0 = 0; r0 + U <= rows; r0 += U) {
            const unsigned char *row = kv + r0 * row_bytes;
            for (size_t dd = 0; dd < d; dd += V::L) {
                if (q_first) {
                    V::reg qv[G];
#pragma GCC unroll 32
                    for (int g = 0; g < G; ++g) {
                        qv[g] = V::loadf(q + g * d + dd);
                        // kept in a register, not folded into each FMA as a memory operand
                        __asm__("" : "+v"(qv[g]));
                    }
#pragma GCC unroll 32
                    for (int u = 0; u < U; ++u) {
                        const V::reg x = V::template widen<S>(row + u * row_bytes, dd);
#pragma GCC unroll 32
                        for (int g = 0; g < G; ++g) acc[g][u] = V::fma(qv[g], x, acc[g][u]);
                    }
                } else {
                    V::reg x[U];
#pragma GCC unroll 32
                    for (int u = 0; u < U; ++u)
                        x[u] = V::template widen<S>(row + u * row_bytes, dd);
#pragma GCC unroll 32
                    for (int g = 0; g < G; ++g) {
                        V::reg qg = V::loadf(q + g * d + dd);
                        __asm__("" : "+v"(qg));
#pragma GCC unroll 32
                        for (int u = 0; u < U; ++u) acc[g][u] = V::fma(qg, x[u], acc[g][u]);
                    }
                }
            }
            if (S == I8) // each row's scale, once per query row
#pragma GCC unroll 32
                for (int u = 0; u < U; ++u) {
                    const V::reg sc = V::bcast(scale[r0 + u]);
#pragma GCC unroll 32
                    for (int g = 0; g < G; ++g) acc[g][u] = V::mul(acc[g][u], sc);
                }
        }
    float sum = 0;
#pragma GCC unroll 32
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
        for (int u = 0; u < U; ++u) sum += V::hsum(acc[g][u]);
    return sum;
}

template <int S>
float widen_group(int group, const unsigned char *kv, size_t d, size_t rows, const float *scale,
                  const float *q, size_t passes) {
    switch (group) {
    case 1:
        return widen_run<S, 1>(kv, d, rows, scale, q, passes);
    case 2:
        return widen_run<S, 2>(kv, d, rows, scale, q, passes);
    case 4:
        return widen_run<S, 4>(kv, d, rows, scale, q, passes);
    default:
        return widen_run<S, 8>(kv, d, rows, scale, q, passes);
    }
}

float widen_any(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                const float *q, size_t passes) {
    const auto *b = static_cast<const unsigned char *>(kv);
    switch (s) {
    case F32:
        return widen_group<F32>(group, b, d, rows, scale, q, passes);
    case F16:
        return widen_group<F16>(group, b, d, rows, scale, q, passes);
    case BF16:
        return widen_group<BF16>(group, b, d, rows, scale, q, passes);
    default:
        return widen_group<I8>(group, b, d, rows, scale, q, passes);
    }
}
