// See measure.hpp.
#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "../timing.hpp"
#include "machine.hpp"

namespace attn_bench {

double g_patience_s = 300.0;

namespace {

// Waits (at most 30 s, within the run's patience) until one second passes without stalls.
void wait_for_quiet() {
    const double t0 = now();
    while (g_patience_s > 0 && now() - t0 < 30.0) {
        const double p0 = psi_some_total_us(), w0 = now();
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const double share = (psi_some_total_us() - p0) / ((now() - w0) * 1e6);
        g_patience_s -= now() - w0;
        if (!(share > 0.01)) break;
    }
}

} // namespace

double run_quiet(const std::function<void()> &f) {
    double share = NAN;
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (attempt) wait_for_quiet();
        const double p0 = psi_some_total_us(), t0 = now();
        f();
        share = (psi_some_total_us() - p0) / ((now() - t0) * 1e6);
        if (!(share > kBusy) || g_patience_s <= 0) break;
    }
    return share;
}

std::string busy_note(double share) {
    if (!(share > kBusy)) return "";
    char buf[48];
    std::snprintf(buf, sizeof buf, "  [busy %.0f%%]", 100.0 * share);
    return buf;
}

Timing measure(const std::function<void()> &f, const Budget &b,
               const std::function<void()> &before) {
    Timing r;
    if (b.max_samples == 0) { // slow configurations: one call is the figure
        r.pressure = run_quiet([&] {
            if (before) before();
            const double t = now();
            f();
            r.best = r.median = now() - t;
        });
        r.samples = 1;
        return r;
    }
    if (before) before();
    double t = now();
    f(); // warm-up: thread pool, scratch, page faults, caches
    double once = now() - t;
    if (once < 0.05) { // short call: a second, warm estimate
        if (before) before();
        t = now();
        f();
        once = std::min(once, now() - t);
    }
    once = std::max(once, 1e-9);
    r.inner = before ? 1 : std::max(1L, static_cast<long>(std::ceil(b.min_sample_s / once)));
    const double per_sample = once * static_cast<double>(r.inner);
    r.samples = static_cast<int>(
        std::clamp(b.seconds / per_sample, double(b.min_samples), double(b.max_samples)));
    std::vector<double> v;
    r.pressure = run_quiet([&] {
        v.clear();
        for (int s = 0; s < r.samples; ++s) {
            if (before) before();
            t = now();
            for (long i = 0; i < r.inner; ++i) f();
            v.push_back((now() - t) / static_cast<double>(r.inner));
        }
    });
    r.best = *std::min_element(v.begin(), v.end());
    r.median = median(v);
    return r;
}

Record timing_fields(const Timing &t) {
    return Record()
        .num("best_s", t.best)
        .num("median_s", t.median)
        .num("cpu_pressure", t.pressure)
        .integer("samples", t.samples);
}

double attention_gflop(size_t b, size_t h, size_t sq, size_t sk, size_t d, bool causal_square) {
    const double pairs =
        causal_square ? double(sq) * double(sq + 1) / 2.0 : double(sq) * double(sk);
    return 4.0 * double(b) * double(h) * double(d) * pairs * 1e-9;
}

} // namespace attn_bench
