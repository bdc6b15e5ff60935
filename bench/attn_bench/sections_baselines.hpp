// The baselines: unfused attention on OpenBLAS (as OpenBLAS picks its kernels, then in a child
// process with OPENBLAS_CORETYPE forced) and the plain scalar reference, at the prefill shapes and
// in the sweep (baselines.hpp has the implementations).
#pragma once

#include "options.hpp"
#include "records.hpp"

namespace attn_bench {

// OpenBLAS baselines: (a) in this process, as OpenBLAS picks its kernels; (b) in a child process
// with OPENBLAS_CORETYPE forced to the CPU's best kernels (OpenBLAS reads it only at load time).
// Sections "openblas" and "sweep".
void run_openblas(Results &res, const Options &o);

// The child process of run_openblas (--child=openblas).
int child_openblas(const Options &o);

// The plain scalar reference in the sweep, only at n <= --scalar-max-n.
void run_scalar(Results &res, const Options &o);

} // namespace attn_bench
