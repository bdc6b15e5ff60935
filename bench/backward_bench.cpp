// Backward against forward, ratios in one run (target: <= 2.5x the forward's time): B = 1, H = 8,
// n = 2048, head_dim 128 and 64, causal and not (--hq / --hkv: other head counts, e.g. batch-1
// MQA, whose keys the backward splits into chunks to use every thread). Rounds interleave the
// forward and the backward of each shape; each figure is the median over rounds of the fastest of R
// runs. GFLOP/s count the visible pairs: forward 4 d flops per pair (Q.K^T and P.V), backward 10 d
// (Q.K^T and dO.V^T recomputed, dV, dK, dQ). On x86-64 each figure is also given as a fraction of
// the FMA peak: threads x the register-only peak of one thread (bench/peak_*.cpp) of the ISA in
// use, measured in the same run.
//
//   build/bench/attn_backward_bench [--rounds N] [--reps R] [--threads T] [--n N] [--hq H]
//                                   [--hkv H]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"

#include "timing.hpp"
#ifdef ATTN_BENCH_PEAK
#include "peak.hpp"
#endif

using attn_bench::check;
using attn_bench::median;
using attn_bench::now;

int main(int argc, char **argv) {
    int rounds = 5, reps = 2;
    size_t threads = 1, n = 2048, H = 8, Hkv = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
        if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
        if (!std::strcmp(argv[i], "--threads")) threads = std::strtoul(argv[i + 1], nullptr, 10);
        if (!std::strcmp(argv[i], "--n")) n = std::strtoul(argv[i + 1], nullptr, 10);
        if (!std::strcmp(argv[i], "--hq")) H = std::strtoul(argv[i + 1], nullptr, 10);
        if (!std::strcmp(argv[i], "--hkv")) Hkv = std::strtoul(argv[i + 1], nullptr, 10);
    }
    if (H == 0 || Hkv == 0 || H % Hkv != 0) {
        std::fprintf(stderr, "--hq must be a positive multiple of --hkv\n");
        return 2;
    }
    check(attn_set_num_threads(threads), "threads");
    std::printf("libattn %s, isa %s, %zu threads, n %zu, heads %zu / %zu\n", attn_version_string(),
                attn_isa(), attn_get_num_threads(), n, H, Hkv);
    double peak = 0; // GFLOP/s of all threads, 0 = unknown
#ifdef ATTN_BENCH_PEAK
    const std::string isa = attn_isa();
    if (isa.rfind("avx512", 0) == 0)
        peak =
            attn_bench::peak_gflops(attn_bench::peak_loop_avx512, attn_bench::kFlopsPerIterAvx512);
    else if (isa == "avx2")
        peak = attn_bench::peak_gflops(attn_bench::peak_loop_avx2, attn_bench::kFlopsPerIterAvx2);
    else if (isa == "sse2")
        peak = attn_bench::peak_gflops(attn_bench::peak_loop_sse2, attn_bench::kFlopsPerIterSse2);
    peak *= static_cast<double>(attn_get_num_threads());
    if (peak > 0)
        std::printf("FMA peak (%s, %zu x one thread's register-only loop): %.1f GFLOP/s\n",
                    isa.c_str(), attn_get_num_threads(), peak);
#endif
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    for (size_t d : {128, 64})
        for (int causal : {0, 1}) {
            std::vector<float> q(H * n * d), k(Hkv * n * d), v(k.size()), out(q.size()), lse(H * n),
                dout(q.size()), dq(q.size()), dk(k.size()), dv(k.size());
            for (auto *x : {&q, &k, &v, &dout})
                for (float &e : *x) e = u(g);
            attn_desc *desc = nullptr;
            check(attn_desc_create(&desc, 1, H, Hkv, n, n, d), "desc");
            check(attn_desc_set_int(desc, ATTN_PARAM_CAUSAL, causal), "causal");
            attn_args *a = nullptr;
            check(attn_args_create(&a), "args");
            attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
            attn_args_set_f32(a, ATTN_K, k.data(), k.size());
            attn_args_set_f32(a, ATTN_V, v.data(), v.size());
            attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
            attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size());
            attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size());
            attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size());
            attn_args_set_out_f32(a, ATTN_DK, dk.data(), dk.size());
            attn_args_set_out_f32(a, ATTN_DV, dv.data(), dv.size());
            check(attn_run(desc, ATTN_OP_FORWARD, a), "forward");
            std::vector<double> tf, tb, ratio;
            for (int r = 0; r < rounds; ++r) {
                double bf = 1e30, bb = 1e30;
                for (int i = 0; i < reps; ++i) {
                    double t0 = now();
                    check(attn_run(desc, ATTN_OP_FORWARD, a), "forward");
                    bf = std::min(bf, now() - t0);
                    t0 = now();
                    check(attn_run(desc, ATTN_OP_BACKWARD, a), "backward");
                    bb = std::min(bb, now() - t0);
                }
                tf.push_back(bf);
                tb.push_back(bb);
                ratio.push_back(bb / bf);
            }
            const double pairs = causal ? n * (n + 1) / 2.0 : double(n) * n;
            const double f = median(tf), b = median(tb);
            const double gf = H * pairs * 4 * d / f / 1e9, gb = H * pairs * 10 * d / b / 1e9;
            std::printf("d %3zu %-10s forward %8.2f ms (%6.1f GFLOP/s", d,
                        causal ? "causal" : "non-causal", f * 1e3, gf);
            if (peak > 0) std::printf(", %.2f of peak", gf / peak);
            std::printf(")  backward %8.2f ms (%6.1f GFLOP/s", b * 1e3, gb);
            if (peak > 0) std::printf(", %.2f of peak", gb / peak);
            std::printf(")  backward/forward %.2f  [<= 2.5]\n", median(ratio));
            attn_args_destroy(a);
            attn_desc_destroy(desc);
        }
    return 0;
}
