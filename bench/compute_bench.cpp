// The two compute modes against each other, in one run: prefill
// n = 2048, H = 8, head_dim 128 and 64, causal and not, fp32 Q/K/V, 1 thread, ATTN_COMPUTE_EXACT
// against ATTN_COMPUTE_FP16, next to the register-only multiply-add peaks of the same run (fp32
// vfmadd*ps and fp16 vfmadd*ph zmm, 16 chains: bench/peak_avx512*.cpp), and the max error of
// each mode against a float64 reference (query head 0, every query), in units of max|v|.
// Every configuration runs once per round, interleaved; a time is the median over rounds of the
// best of --reps calls.
//
//   compute_bench [--rounds N] [--reps N] [--n N]
#include <attn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cpuid.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "peak.hpp"

#include "timing.hpp"

using attn_bench::check;
using attn_bench::median;
using attn_bench::now;
using attn_bench::peak_gflops;

namespace {

struct Problem {
    size_t n, h, d;
    int causal;
    std::vector<float> q, k, v, out[2];
    attn_desc *desc[2] = {nullptr, nullptr};
    attn_args *args[2] = {nullptr, nullptr};
    Problem(size_t n_, size_t h_, size_t d_, int causal_) : n(n_), h(h_), d(d_), causal(causal_) {
        std::mt19937 g(static_cast<unsigned>(n * 31 + d * 7 + causal));
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        const size_t len = h * n * d;
        q.resize(len);
        k.resize(len);
        v.resize(len);
        for (auto *x : {&q, &k, &v})
            for (float &e : *x) e = u(g);
        for (int m = 0; m < 2; ++m) {
            out[m].assign(len, 0.0f);
            check(attn_desc_create(&desc[m], 1, h, h, n, n, d), "desc");
            check(attn_desc_set_int(desc[m], ATTN_PARAM_CAUSAL, causal), "causal");
            check(attn_desc_set_int(desc[m], ATTN_PARAM_COMPUTE,
                                    m ? ATTN_COMPUTE_FP16 : ATTN_COMPUTE_EXACT),
                  "compute");
            check(attn_args_create(&args[m]), "args");
            check(attn_args_set_f32(args[m], ATTN_Q, q.data(), len), "q");
            check(attn_args_set_f32(args[m], ATTN_K, k.data(), len), "k");
            check(attn_args_set_f32(args[m], ATTN_V, v.data(), len), "v");
            check(attn_args_set_out_f32(args[m], ATTN_OUT, out[m].data(), len), "out");
        }
    }
    ~Problem() {
        for (int m = 0; m < 2; ++m) {
            attn_args_destroy(args[m]);
            attn_desc_destroy(desc[m]);
        }
    }
    void run(int m) { check(attn_run(desc[m], ATTN_OP_FORWARD, args[m]), "run"); }
    // multiply-adds x 2 of the visible (query, key) pairs, both products
    double flops() const {
        double pairs = causal ? static_cast<double>(n) * (n + 1) / 2 : static_cast<double>(n) * n;
        return 4.0 * h * d * pairs;
    }
    // max |out[m] - float64| / max|v| over query head 0
    double error(int m) const {
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        double worst = 0, vmax = 0;
        for (size_t x = 0; x < n * d; ++x) vmax = std::max(vmax, std::fabs(double(v[x])));
        std::vector<double> s(n), o(d);
        for (size_t i = 0; i < n; ++i) {
            const size_t last = causal ? i + 1 : n;
            double mx = -INFINITY;
            for (size_t j = 0; j < last; ++j) {
                double dot = 0;
                for (size_t x = 0; x < d; ++x) dot += double(q[i * d + x]) * double(k[j * d + x]);
                s[j] = dot * scale;
                mx = std::max(mx, s[j]);
            }
            double l = 0;
            std::fill(o.begin(), o.end(), 0.0);
            for (size_t j = 0; j < last; ++j) {
                const double p = std::exp(s[j] - mx);
                l += p;
                for (size_t x = 0; x < d; ++x) o[x] += p * double(v[j * d + x]);
            }
            for (size_t x = 0; x < d; ++x)
                worst = std::max(worst, std::fabs(out[m][i * d + x] - o[x] / l));
        }
        return worst / vmax;
    }
};

bool cpu_fp16() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u);
}

} // namespace

int main(int argc, char **argv) {
    int rounds = 5, reps = 2;
    size_t n = 2048;
    for (int x = 1; x < argc; ++x) {
        if (!std::strcmp(argv[x], "--rounds") && x + 1 < argc)
            rounds = std::atoi(argv[++x]);
        else if (!std::strcmp(argv[x], "--reps") && x + 1 < argc)
            reps = std::atoi(argv[++x]);
        else if (!std::strcmp(argv[x], "--n") && x + 1 < argc)
            n = static_cast<size_t>(std::atol(argv[++x]));
        else {
            std::fprintf(stderr, "usage: %s [--rounds N] [--reps N] [--n N]\n", argv[0]);
            return 2;
        }
    }
    if (!cpu_fp16() || !__builtin_cpu_supports("avx512f")) {
        std::printf("compute_bench: this CPU has no AVX512-FP16: FP16 requests run as EXACT\n");
        return 0;
    }
    check(attn_set_num_threads(1), "threads");
    const double p32 = peak_gflops(attn_bench::peak_loop_avx512, attn_bench::kFlopsPerIterAvx512);
    const double p16 =
        peak_gflops(attn_bench::peak_loop_avx512fp16, attn_bench::kFlopsPerIterAvx512Fp16);
    std::printf("compute_bench: libattn %s, isa %s, 1 thread, B 1, H 8, n %zu, rounds %d, reps "
                "%d\n  register-only peaks: fp32 vfmadd*ps %.1f GFLOP/s, fp16 vfmadd*ph %.1f "
                "GFLOP/s (%.2fx)\n",
                attn_version_string(), attn_isa(), n, rounds, reps, p32, p16, p16 / p32);
    for (size_t d : {128, 64})
        for (int causal : {0, 1}) {
            Problem pr(n, 8, d, causal);
            std::vector<double> t[2];
            for (int m = 0; m < 2; ++m) pr.run(m); // warm-up
            for (int r = 0; r < rounds; ++r)
                for (int m = 0; m < 2; ++m) {
                    double best = 1e30;
                    for (int i = 0; i < reps; ++i) {
                        const double t0 = now();
                        pr.run(m);
                        best = std::min(best, now() - t0);
                    }
                    t[m].push_back(best);
                }
            const double te = median(t[0]), tf = median(t[1]), f = pr.flops();
            std::printf("  d %3zu %-10s exact %8.2f ms %6.1f GFLOP/s (%.2f of fp32 peak)  fp16 "
                        "%8.2f ms %6.1f GFLOP/s (%.2f of fp16 peak)  fp16 speed-up %.2fx   "
                        "[>= 1.5]  max err / max|v|: exact %.1e, fp16 %.1e\n",
                        d, causal ? "causal" : "non-causal", te * 1e3, f / te / 1e9,
                        f / te / 1e9 / p32, tf * 1e3, f / tf / 1e9, f / tf / 1e9 / p16, te / tf,
                        pr.error(0), pr.error(1));
        }
    return 0;
}
