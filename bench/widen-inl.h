// Loop body of the widening limit (widen.hpp), not a header: each widen_<isa>.cpp includes it
// inside its own namespace after defining struct V (its vector type and operations):
//   reg, L (floats per vector), zero(), loadf(const float *), widen<S>(const unsigned char *row,
//   size_t dd) (L elements of storage S from element dd, as fp32), fma(a, b, c) = a*b + c,
//   mul(a, b), bcast(float), hsum(reg)
// and a constexpr kChains (independent accumulators to keep the FMA units busy).
// No include guard on purpose.

template <int S, int G>
__attribute__((noinline)) float widen_run(const unsigned char *kv, size_t d, size_t rows,
                                          const float *scale, const float *q, size_t passes) {
    constexpr int U = kChains / G > 0 ? kChains / G : 1; // keys at a time
    const size_t row_bytes = d * kStoreBytes[S];
    V::reg acc[G][U];
    for (int g = 0; g < G; ++g)
        for (int u = 0; u < U; ++u) acc[g][u] = V::zero();
    for (size_t p = 0; p < passes; ++p)
        for (size_t r0 = 0; r0 + U <= rows; r0 += U) {
            const unsigned char *row = kv + r0 * row_bytes;
            for (size_t dd = 0; dd < d; dd += V::L) {
                V::reg qv[G];
                for (int g = 0; g < G; ++g) {
                    qv[g] = V::loadf(q + g * d + dd);
                    // each query row loaded once per step and kept in a register (as the decode
                    // kernel does), not folded into every FMA as a memory operand, where the
                    // registers allow it
                    if (U > 1) __asm__("" : "+v"(qv[g]));
                }
                for (int u = 0; u < U; ++u) {
                    const V::reg x = V::template widen<S>(row + u * row_bytes, dd);
                    for (int g = 0; g < G; ++g) acc[g][u] = V::fma(qv[g], x, acc[g][u]);
                }
            }
            if (S == I8) // each row's scale, once per query row
                for (int u = 0; u < U; ++u) {
                    const V::reg sc = V::bcast(scale[r0 + u]);
                    for (int g = 0; g < G; ++g) acc[g][u] = V::mul(acc[g][u], sc);
                }
        }
    float sum = 0;
    for (int g = 0; g < G; ++g)
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
