// Timing one call under contention. Every figure assumes the run has the CPUs to itself. Linux'
// pressure stall information (/proc/pressure/cpu, "some ... total=<us>") counts the time in which
// some runnable task waited for a CPU: over a measurement, stall time / wall time is the share of
// it spent competing with something else (our own threads never exceed the 2 CPUs we ask for).
// A measurement whose share exceeds kBusy is repeated, after waiting for a quiet machine, up to
// twice; the waiting has a budget for the whole run. Each record keeps its share (cpu_pressure).
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>

#include "records.hpp"

namespace attn_bench {

constexpr double kBusy = 0.05;
extern double g_patience_s; // total seconds the run may wait for a quiet machine (--patience)

// Runs `f` (one measurement); repeats it while the machine was busy during it. Returns the stall
// share of the attempt kept (NaN without PSI).
double run_quiet(const std::function<void()> &f);

// "  [busy NN%]" when `share` exceeds kBusy, else "".
std::string busy_note(double share);

struct Timing {
    double best = 0, median = 0;
    int samples = 0;
    long inner = 1;
    double pressure = NAN; // CPU stall share during the samples (see run_quiet)
};

struct Budget {
    double seconds;      // time to spend on samples (after warm-up), roughly
    int min_samples;     // at least this many samples
    int max_samples;     // at most; 0 = the single (cold) warm-up call is the figure
    double min_sample_s; // a sample repeats the call until it lasts this long (short calls)
};

// The fields of a timing every record of a timed call has, in this order: best_s, median_s,
// cpu_pressure, samples.
Record timing_fields(const Timing &t);

// Warm-up call, then samples of `inner` calls each; per-call best and median. With `before`
// (e.g. a cache eviction), every sample is one call preceded by before(), which is not timed.
Timing measure(const std::function<void()> &f, const Budget &b,
               const std::function<void()> &before = nullptr);

// GFLOP of attention: 4 * b * h * d * (sq * sk), or the visible half sq(sq+1)/2 for a causal
// square problem.
double attention_gflop(size_t b, size_t h, size_t sq, size_t sk, size_t d, bool causal_square);

} // namespace attn_bench
