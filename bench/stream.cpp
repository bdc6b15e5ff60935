// The harness of the streaming read loops (see stream.hpp). Baseline flags only: it names no
// vector type and calls a loop only after checking that the CPU has its ISA.
#include "stream.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "threads.hpp"

namespace attn_bench {

std::vector<StreamLoop> available_stream_loops() {
    __builtin_cpu_init();
    std::vector<StreamLoop> r;
    if (__builtin_cpu_supports("avx512f")) {
        r.push_back({"avx512", "4 x zmm accumulators", stream_sum_avx512});
        r.push_back({"avx512", "8 x zmm accumulators", stream_sum_avx512_x8});
        r.push_back({"avx512", "2 streams x 4 zmm", stream_sum_avx512_2s});
    }
    if (__builtin_cpu_supports("avx2")) {
        r.push_back({"avx2", "8 x ymm accumulators", stream_sum_avx2});
        r.push_back({"avx2", "12 x ymm accumulators", stream_sum_avx2_x12});
        r.push_back({"avx2", "2 streams x 4 ymm", stream_sum_avx2_2s});
    }
    r.push_back({"sse2", "8 x xmm accumulators", stream_sum_sse2});
    r.push_back({"sse2", "16 x xmm accumulators", stream_sum_sse2_x16});
    r.push_back({"sse2", "2 streams x 4 xmm", stream_sum_sse2_2s});
    return r;
}

double stream_check(const StreamLoop &loop) {
    const size_t most = kStreamBlock * 67;
    auto *x = static_cast<float *>(std::aligned_alloc(64, most * sizeof(float)));
    for (size_t i = 0; i < most; ++i) x[i] = static_cast<float>(i % 7); // small integers: exact
    double worst = 0;
    for (size_t n = kStreamBlock; n <= most; n += 3 * kStreamBlock) {
        double want = 0;
        for (size_t i = 0; i < n; ++i) want += x[i];
        worst = std::max(worst, std::fabs(static_cast<double>(loop.fn(x, n)) - want));
    }
    std::free(x);
    return worst;
}

double stream_read_gbs(const StreamLoop &loop, const float *x, size_t n, int threads, int reps) {
    threads = std::max(1, threads);
    const size_t chunk = (n / threads) / kStreamBlock * kStreamBlock;
    const size_t total = chunk * threads; // the floats actually read (a tail < 64 x threads is not)
    double best = 0;
    volatile float sink = 0;
    for (int r = 0; r < reps; ++r) {
        std::vector<float> sums(threads);
        const double dt =
            run_together(threads, [&](int t) { sums[t] = loop.fn(x + chunk * t, chunk); });
        for (float s : sums) sink = sink + s;
        best = std::max(best, double(total) * sizeof(float) / dt * 1e-9);
    }
    return best;
}

} // namespace attn_bench
