// attn_bench's own processes: the environment it measures in (re-executing itself without the
// variables that change what is measured), and the child processes of /proc/self/exe that run the
// forced-OpenBLAS baseline and the memory figure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "options.hpp"
#include "records.hpp"

namespace attn_bench {

// Re-executes without OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, the thread-count variables, ATTN_ISA
// and ATTN_NUM_THREADS when any is set (once: ATTN_BENCH_CLEAN_ENV marks the clean process).
void clean_environment(char **argv);

// Runs /proc/self/exe with `args`, the current environment plus `env_set`; returns the records
// the child wrote to its --child-out file (empty on failure).
std::vector<Record> run_child(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>> &env_set);

// In a child: writes `recs` to the --child-out file, one line each.
void write_child_records(const Options &o, const std::vector<Record> &recs);

} // namespace attn_bench
