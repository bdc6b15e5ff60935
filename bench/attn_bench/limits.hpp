// The machine's limits, measured in the run: the register-only FMA peak per ISA (peak_*.cpp) and
// the streaming read bandwidth (stream_*.cpp), each on 1 and 2 threads. Every libattn figure is
// quoted as a fraction of one of them.
#pragma once

#include <cmath>
#include <string>

#include "../evict.hpp"
#include "options.hpp"
#include "records.hpp"

namespace attn_bench {

// FMA peaks per ISA with 1 and 2 threads (each thread runs the loop on its own core).
struct Peaks {
    double avx512[2] = {NAN, NAN}, avx2[2] = {NAN, NAN}, sse2[2] = {NAN, NAN};
    double for_isa(const std::string &isa, size_t threads = 1) const {
        const size_t t = threads >= 2 ? 1 : 0;
        // avx512fp16 runs the avx512 kernels (fp32); its fp16 path has its own bench
        if (isa == "avx512" || isa == "avx512fp16") return avx512[t];
        if (isa == "avx2") return avx2[t];
        if (isa == "sse2") return sse2[t];
        return NAN; // no meaningful peak for the scalar kernel
    }
};

struct Stream {
    double gbs1 = NAN, gbs2 = NAN, pressure1 = NAN, pressure2 = NAN;
    std::string isa1, isa2; // the loop that read fastest
};

// Section "peak": every FMA loop the CPU has, 1 and 2 threads at once.
Peaks run_peaks(Results &res, const Options &o);

// Every read loop the CPU has (stream_*.cpp), 1 and 2 threads, over the 1 GiB buffer `ev` holds
// (the eviction buffer of the decode section: its contents do not matter). "stream" is the
// fastest loop at each thread count.
Stream run_stream(Results &res, const Options &o, const Evictor &ev);

// The FMA peak of `isa` on `threads` threads, measured briefly (~0.1 s) right now: the reference
// next to each prefill figure. On a shared host the speed of a core drifts during a run (other
// guests on its sibling hyperthread, clock changes); a ratio to a peak measured a second earlier
// is immune to that drift. NaN for the scalar kernel.
double adjacent_peak(const std::string &isa, size_t threads);

} // namespace attn_bench
