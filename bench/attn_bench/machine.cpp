// See machine.hpp.
#include "machine.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

namespace attn_bench {
namespace {

std::string read_first_line_matching(const char *path, const char *prefix) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(prefix, 0) == 0) return line;
    return "";
}

// "1-min 5-min 15-min" load averages.
std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}

// Share of the last 10 s in which some runnable task waited for a CPU (PSI), or NaN.
double cpu_pressure_avg10() {
    const std::string l = read_first_line_matching("/proc/pressure/cpu", "some");
    const size_t p = l.find("avg10=");
    return p == std::string::npos ? NAN : std::atof(l.c_str() + p + 6) / 100.0;
}

} // namespace

std::string cpu_model() {
    std::string l = read_first_line_matching("/proc/cpuinfo", "model name");
    const size_t c = l.find(':');
    return c == std::string::npos ? "unknown" : l.substr(c + 2);
}

// VmHWM (peak resident set) of this process, in KiB.
long vm_hwm_kib() {
    const std::string l = read_first_line_matching("/proc/self/status", "VmHWM:");
    return l.empty() ? -1 : std::atol(l.c_str() + 6);
}

bool cpu_has(const char *feature) {
    __builtin_cpu_init();
    if (!std::strcmp(feature, "avx512f")) return __builtin_cpu_supports("avx512f");
    if (!std::strcmp(feature, "avx2")) return __builtin_cpu_supports("avx2");
    if (!std::strcmp(feature, "fma")) return __builtin_cpu_supports("fma");
    if (!std::strcmp(feature, "sse2")) return __builtin_cpu_supports("sse2");
    return false;
}

// Cumulative CPU stall time in microseconds, or NaN without PSI.
double psi_some_total_us() {
    std::ifstream f("/proc/pressure/cpu");
    std::string word;
    while (f >> word)
        if (word.rfind("total=", 0) == 0) return std::atof(word.c_str() + 6);
    return NAN;
}

// Warns when other work competes for the CPUs: every figure here assumes an idle machine.
void note_load(Record &machine, const char *when) {
    const std::string la = load_average();
    const double psi = cpu_pressure_avg10();
    machine.str(std::string("load_average_") + when, la)
        .num(std::string("cpu_pressure_avg10_") + when, psi);
    // The load average counts this benchmark itself; only the stall share says "competing".
    if (psi > 0.10)
        std::printf("attn_bench: WARNING (%s): the machine is busy (load average %s, CPU pressure "
                    "%.0f%%); figures will be low and noisy\n",
                    when, la.c_str(), 100.0 * psi);
}

std::string utc_now() {
    char buf[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

} // namespace attn_bench
