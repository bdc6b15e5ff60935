// What the run knows about the machine: the CPU's model and features, this process' peak memory,
// the load and Linux' CPU pressure stall information (PSI), the date.
#pragma once

#include <string>

#include "records.hpp"

namespace attn_bench {

std::string cpu_model();           // /proc/cpuinfo's "model name", or "unknown"
bool cpu_has(const char *feature); // "avx512f", "avx2", "fma" or "sse2"
long vm_hwm_kib();                 // VmHWM (peak resident set) of this process, in KiB
double psi_some_total_us();        // cumulative CPU stall time in microseconds, or NaN without PSI
std::string utc_now();             // e.g. 2026-12-02T02:03:00Z

// Warns when other work competes for the CPUs: every figure here assumes an idle machine.
// Writes load_average_<when> and cpu_pressure_avg10_<when> to `machine`.
void note_load(Record &machine, const char *when);

} // namespace attn_bench
