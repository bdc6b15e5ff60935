// The libattn sections: prefill, decode, small shapes, memory (main.cpp's file comment says what
// each measures), and libattn's line of the sweep.
#pragma once

#include <string>
#include <vector>

#include "../evict.hpp"
#include "limits.hpp"
#include "options.hpp"
#include "records.hpp"

namespace attn_bench {

// The ISAs libattn can run on this CPU, widest first (its default ISA is restored).
std::vector<std::string> supported_isas();

void run_prefill(Results &res, const Options &o, const Peaks &pk,
                 const std::vector<std::string> &isas);
// `ev`'s eviction read runs before each cold call.
void run_decode(Results &res, const Options &o, const Stream &st,
                const std::vector<std::string> &isas, Evictor &ev);
void run_small(Results &res, const Options &o, const std::string &default_isa);
// Runs child_mem in a fresh child process, 1 and 2 threads.
void run_memory(Results &res, const std::string &default_isa);
// The child process of run_memory (--child=mem).
int child_mem(const Options &o);
// libattn in the sweep (section "sweep"): the default ISA, AVX-512 and AVX2, 1 thread.
void run_sweep_libattn(Results &res, const Options &o, const std::vector<std::string> &isas);

} // namespace attn_bench
