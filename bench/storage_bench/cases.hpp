// What attn_storage_bench measures: its options and its cases (one read loop, widening loop or
// decode line each, with its samples), shared by main.cpp (which runs them) and report.cpp
// (which prints them and writes their records).
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "../attn_bench/records.hpp"
#include "../stream.hpp"
#include "../timing.hpp"
#include "../widen.hpp"

namespace attn_bench {

struct Options {
    int rounds = 9, reps = 3, threads = 0; // threads 0: both 1 and 2
    size_t seq_k = 32768;
    bool decode = true, prefill = true, cold = true, hot = true, sweep = false, quick = false;
    std::string json, isa;
};

enum Kind { READ, WIDEN, DECODE };

struct Case {
    explicit Case(Kind k) : kind(k) {}
    Kind kind;
    int threads = 1, store = F32, layout = -1;
    bool cold = true, invariant = false;
    size_t group = 4, d = 128;
    const StreamLoop *loop = nullptr;
    const WidenLoop *wloop = nullptr;
    double bytes = 0;               // per sample
    std::function<double()> sample; // seconds of one sample
    std::vector<double> t;          // per round
    double gbs() const { return bytes / median(t) / 1e9; }
};

// Prints the read loops, the widening loops, the decode lines (with their limits) and the
// invariance ratios of a finished run, and appends their records.
void report_decode(const Options &o, const std::string &isa, const std::vector<Case> &cases,
                   std::vector<Record> &records);

} // namespace attn_bench
