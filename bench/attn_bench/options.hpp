// attn_bench's command line: the options (see main.cpp for what each section measures), the
// sections --only picks, and the sequence lengths of the sweep.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attn_bench {

struct Options {
    bool quick = false;
    bool sweep_only = false;
    bool no_sweep = false;
    bool peak_only = false; // FMA peaks and stream only
    std::string only;       // comma-separated sections to run besides peak and stream ("": all)
    std::string json = "bench_results.json";
    size_t n = 2048;               // prefill sequence length
    size_t scalar_max_n = 1024;    // the scalar reference runs only up to this n (at H=8, d=128)
    std::string coretype = "auto"; // forced OPENBLAS_CORETYPE for the second baseline
    double patience = -1;          // seconds the run may wait for a quiet machine (-1: default)
    // child modes (internal)
    std::string child;     // "openblas" or "mem"
    std::string child_out; // file the child writes its records to
    std::string isa;       // mem child
    size_t threads = 1;    // mem child
};

// Parses argv; prints the usage and exits (status 2) on --help or a bad argument.
Options parse_options(int argc, char **argv);

// Prints `msg` and the usage to stderr and exits with status 2.
[[noreturn]] void usage(const char *msg);

// Whether --only (if given) names section `sec`.
bool wanted(const Options &o, const char *sec);

// The sequence lengths of the sweep (libattn, OpenBLAS and the scalar reference), shorter with
// --quick.
std::vector<size_t> sweep_sizes(const Options &o);

} // namespace attn_bench
