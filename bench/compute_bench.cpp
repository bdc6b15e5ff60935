// The compute modes against each other, in one run: prefill n = 2048, H = 8, head_dim 128 and 64,
// causal and not, fp32 Q/K/V, 1 thread, ATTN_COMPUTE_EXACT, FP16, INT8 and BF16, next to the
// register-only rates of every multiply-add unit this CPU has (fp32 FMA, 16-bit pmaddwd, and
// where present AVX512-FP16, AVX512-VNNI, AVX512-BF16: bench/peak*.cpp), the unit each mode ran
// on (attn_compute_unit), and each mode's error against a float64 reference (query head 0,
// every query): max |o - ref| / max|v| and the relative L1 sum |o - ref| / sum |ref|.
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

constexpr int kModes = 4;
const int kMode[kModes] = {ATTN_COMPUTE_EXACT, ATTN_COMPUTE_FP16, ATTN_COMPUTE_INT8,
                           ATTN_COMPUTE_BF16};
const char *const kModeName[kModes] = {"exact", "fp16", "int8", "bf16"};

// cpuid leaf 7: EDX bit 23 AVX512-FP16, ECX bit 11 AVX512-VNNI; leaf 7 sub-leaf 1: EAX bit 5
// AVX512-BF16
bool cpu_bit(unsigned leaf, unsigned sub, int reg, int bit) {
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1u;
}

struct Problem {
    size_t n, h, d;
    int causal;
    std::vector<float> q, k, v, out[kModes];
    attn_desc *desc[kModes] = {};
    attn_args *args[kModes] = {};
    Problem(size_t n_, size_t h_, size_t d_, int causal_) : n(n_), h(h_), d(d_), causal(causal_) {
        std::mt19937 g(static_cast<unsigned>(n * 31 + d * 7 + causal));
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        const size_t len = h * n * d;
        q.resize(len);
        k.resize(len);
        v.resize(len);
        for (auto *x : {&q, &k, &v})
            for (float &e : *x) e = u(g);
        for (int m = 0; m < kModes; ++m) {
            out[m].assign(len, 0.0f);
            check(attn_desc_create(&desc[m], 1, h, h, n, n, d), "desc");
            check(attn_desc_set_int(desc[m], ATTN_PARAM_CAUSAL, causal), "causal");
            check(attn_desc_set_int(desc[m], ATTN_PARAM_COMPUTE, kMode[m]), "compute");
            check(attn_args_create(&args[m]), "args");
            check(attn_args_set_f32(args[m], ATTN_Q, q.data(), len), "q");
            check(attn_args_set_f32(args[m], ATTN_K, k.data(), len), "k");
            check(attn_args_set_f32(args[m], ATTN_V, v.data(), len), "v");
            check(attn_args_set_out_f32(args[m], ATTN_OUT, out[m].data(), len), "out");
        }
    }
    ~Problem() {
        for (int m = 0; m < kModes; ++m) {
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
    // max |out[m] - float64| / max|v| and sum |out[m] - float64| / sum |float64| over query head 0
    void error(int m, double *max_rel, double *l1) const {
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        double worst = 0, vmax = 0, diff = 0, norm = 0;
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
            for (size_t x = 0; x < d; ++x) {
                const double e = std::fabs(out[m][i * d + x] - o[x] / l);
                worst = std::max(worst, e);
                diff += e;
                norm += std::fabs(o[x] / l);
            }
        }
        *max_rel = worst / vmax;
        *l1 = diff / norm;
    }
};

struct Unit {
    const char *name;
    double gops;
};

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
    check(attn_set_num_threads(1), "threads");
    // the register-only rates of this CPU's units, GFLOP/s or GOP/s (2 per multiply-add)
    std::vector<Unit> units;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (avx512) {
        units.push_back({"fp32 vfmadd zmm", peak_gflops(attn_bench::peak_loop_avx512,
                                                        attn_bench::kFlopsPerIterAvx512)});
        units.push_back({"int16 vpmaddwd zmm", peak_gflops(attn_bench::peak_loop_madd_avx512,
                                                           attn_bench::kOpsPerIterMaddAvx512)});
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        units.push_back({"fp32 vfmadd ymm",
                         peak_gflops(attn_bench::peak_loop_avx2, attn_bench::kFlopsPerIterAvx2)});
        units.push_back({"int16 vpmaddwd ymm", peak_gflops(attn_bench::peak_loop_madd_avx2,
                                                           attn_bench::kOpsPerIterMaddAvx2)});
    }
#if defined(ATTN_BENCH_FP16)
    if (avx512 && cpu_bit(7, 0, 3, 23))
        units.push_back({"fp16 vfmadd*ph zmm", peak_gflops(attn_bench::peak_loop_avx512fp16,
                                                           attn_bench::kFlopsPerIterAvx512Fp16)});
#endif
#if defined(ATTN_BENCH_VNNI)
    if (avx512 && cpu_bit(7, 0, 2, 11))
        units.push_back({"u8s8 vpdpbusd zmm", peak_gflops(attn_bench::peak_loop_vnni_avx512,
                                                          attn_bench::kOpsPerIterVnniAvx512)});
#endif
#if defined(ATTN_BENCH_BF16)
    if (avx512 && cpu_bit(7, 1, 0, 5))
        units.push_back({"bf16 vdpbf16ps zmm", peak_gflops(attn_bench::peak_loop_bf16_avx512,
                                                           attn_bench::kOpsPerIterBf16Avx512)});
#endif
    if (units.empty())
        units.push_back({"fp32 mulps + addps xmm",
                         peak_gflops(attn_bench::peak_loop_sse2, attn_bench::kFlopsPerIterSse2)});
    std::printf("compute_bench: libattn %s, isa %s, 1 thread, B 1, H 8, n %zu, rounds %d, reps %d\n"
                "  register-only rates, 1 core (GFLOP/s or GOP/s, 2 per multiply-add; x = over the "
                "first):\n",
                attn_version_string(), attn_isa(), n, rounds, reps);
    for (const Unit &u : units)
        std::printf("    %-22s %8.1f  %.2fx\n", u.name, u.gops, u.gops / units[0].gops);
    std::printf("  the units the modes run on (attn_compute_unit):");
    for (int m = 0; m < kModes; ++m)
        std::printf("%s %s: %s", m ? "," : "", kModeName[m], attn_compute_unit(kMode[m]));
    std::printf("\n");
    for (size_t d : {128, 64})
        for (int causal : {0, 1}) {
            Problem pr(n, 8, d, causal);
            std::vector<double> t[kModes];
            for (int m = 0; m < kModes; ++m) pr.run(m); // warm-up
            for (int r = 0; r < rounds; ++r)
                for (int m = 0; m < kModes; ++m) {
                    double best = 1e30;
                    for (int i = 0; i < reps; ++i) {
                        const double t0 = now();
                        pr.run(m);
                        best = std::min(best, now() - t0);
                    }
                    t[m].push_back(best);
                }
            const double te = median(t[0]), f = pr.flops();
            std::printf("  d %3zu %-10s", d, causal ? "causal" : "non-causal");
            for (int m = 0; m < kModes; ++m) {
                const double tm = median(t[m]);
                double err, l1;
                pr.error(m, &err, &l1);
                std::printf("  %s %7.2f ms %6.1f GFLOP/s %.2fx (err %.1e, L1 %.1e)", kModeName[m],
                            tm * 1e3, f / tm / 1e9, te / tm, err, l1);
            }
            std::printf("\n");
        }
    return 0;
}
