// See limits.hpp.
#include "limits.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../peak.hpp"
#include "../stream.hpp"
#include "../threads.hpp"
#include "machine.hpp"
#include "measure.hpp"

namespace attn_bench {
namespace {

// Best GFLOP/s of `threads` threads each running `loop` at once (time: start signal to last join).
// Not peak.hpp's peak_gflops() (one thread, a fixed 2e7 iterations, best of 5): the figures of
// this run are divided by the peak of the same thread count, so this one also runs 2 threads at
// once, sizes its iterations to ~50 ms a run, samples for `seconds`, and repeats under
// contention (run_quiet), returning the stall share in *pressure.
double measure_peak(float (*loop)(long), double flops_per_iter, double seconds, int threads,
                    double *pressure) {
    volatile float sink = 0;
    long iters = 1 << 20;
    double t = now();
    sink = sink + loop(iters);
    double dt = now() - t;
    iters = std::max(1L << 20, static_cast<long>(double(iters) * 0.05 / std::max(dt, 1e-6)));
    double best = 0;
    const int samples = std::max(3, static_cast<int>(seconds / 0.05));
    *pressure = run_quiet([&] {
        best = 0;
        for (int s = 0; s < samples; ++s) {
            std::vector<float> sums(threads);
            dt = run_together(threads, [&](int k) { sums[k] = loop(iters); });
            for (float x : sums) sink = sink + x;
            best = std::max(best, threads * double(iters) * flops_per_iter / dt * 1e-9);
        }
    });
    return best;
}

} // namespace

double adjacent_peak(const std::string &isa, size_t threads) {
    double pr = NAN;
    const int t = threads >= 2 ? 2 : 1;
    if (isa == "avx512") return measure_peak(peak_loop_avx512, kFlopsPerIterAvx512, 0.1, t, &pr);
    if (isa == "avx2") return measure_peak(peak_loop_avx2, kFlopsPerIterAvx2, 0.1, t, &pr);
    if (isa == "sse2") return measure_peak(peak_loop_sse2, kFlopsPerIterSse2, 0.1, t, &pr);
    return NAN;
}

Peaks run_peaks(Results &res, const Options &o) {
    std::printf("\n== FMA peak (register-only loops; 1 thread, and 2 threads at once) ==\n");
    Peaks p;
    const double sec = o.quick ? 0.15 : 0.5;
    struct Loop {
        const char *isa, *what;
        float (*fn)(long);
        double flops_per_iter, flops_per_cycle; // per core, two vector ports
        double *out;
        bool available;
    };
    const Loop loops[] = {
        {"avx512", "16 chains vfmadd zmm", peak_loop_avx512, kFlopsPerIterAvx512, 64, p.avx512,
         cpu_has("avx512f")},
        {"avx2", "12 chains vfmadd ymm", peak_loop_avx2, kFlopsPerIterAvx2, 32, p.avx2,
         cpu_has("avx2") && cpu_has("fma")},
        {"sse2", "12 chains mulps+addps xmm", peak_loop_sse2, kFlopsPerIterSse2, 16, p.sse2, true},
    };
    for (const Loop &l : loops) {
        if (!l.available) continue;
        for (int threads : {1, 2}) {
            double pr = NAN;
            const double g = measure_peak(l.fn, l.flops_per_iter, sec, threads, &pr);
            l.out[threads - 1] = g;
            std::printf("  %-7s %-26s t=%d %7.1f GFLOP/s  (= %.2f GHz x %.0f flop/cycle x %d)%s\n",
                        l.isa, l.what, threads, g, g / l.flops_per_cycle / threads,
                        l.flops_per_cycle, threads, busy_note(pr).c_str());
            res.add("peak", Record()
                                .str("isa", l.isa)
                                .str("loop", l.what)
                                .integer("threads", threads)
                                .num("gflops", g)
                                .num("implied_ghz_at_2_ports", g / l.flops_per_cycle / threads)
                                .num("cpu_pressure", pr));
        }
    }
    return p;
}

Stream run_stream(Results &res, const Options &o, const Evictor &ev) {
    std::printf("\n== Streaming read (1 GiB buffer, one loop per ISA, best of several passes; the "
                "fastest loop is \"stream\") ==\n");
    const size_t bytes = ev.bytes();
    Stream s;
    const int reps = o.quick ? 3 : 8;
    for (const StreamLoop &loop : available_stream_loops()) {
        for (int t = 1; t <= 2; ++t) {
            double g = NAN;
            const double pr = run_quiet(
                [&] { g = stream_read_gbs(loop, ev.data(), bytes / sizeof(float), t, reps); });
            std::printf("  %-6s %-21s threads=%d  %6.2f GB/s%s\n", loop.isa, loop.what, t, g,
                        busy_note(pr).c_str());
            res.add("stream_loops", Record()
                                        .str("isa", loop.isa)
                                        .str("loop", loop.what)
                                        .integer("threads", t)
                                        .integer("buffer_bytes", static_cast<long long>(bytes))
                                        .num("gbs", g)
                                        .num("cpu_pressure", pr));
            double &best = t == 1 ? s.gbs1 : s.gbs2;
            if (!(g <= best)) { // NaN-safe: the first finite value wins over NaN
                best = g;
                (t == 1 ? s.pressure1 : s.pressure2) = pr;
                (t == 1 ? s.isa1 : s.isa2) = loop.isa;
            }
        }
    }
    for (int t = 1; t <= 2; ++t) {
        const double g = t == 1 ? s.gbs1 : s.gbs2, pr = t == 1 ? s.pressure1 : s.pressure2;
        const std::string &isa = t == 1 ? s.isa1 : s.isa2;
        std::printf("  stream threads=%d  %6.2f GB/s (%s loop)%s\n", t, g, isa.c_str(),
                    busy_note(pr).c_str());
        res.add("stream", Record()
                              .integer("threads", t)
                              .str("isa", isa)
                              .integer("buffer_bytes", static_cast<long long>(bytes))
                              .num("gbs", g)
                              .num("cpu_pressure", pr));
    }
    return s;
}

} // namespace attn_bench
