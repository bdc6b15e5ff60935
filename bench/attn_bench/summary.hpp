// The summary of a run: the performance targets, each a ratio of two figures of the same run,
// printed with PASS / MISS (section "targets"), and the headline against OpenBLAS.
#pragma once

#include <string>

#include "limits.hpp"
#include "options.hpp"
#include "records.hpp"

namespace attn_bench {

void summarize(Results &res, const Peaks &pk, const Stream &st, const std::string &default_isa,
               const Options &o);

} // namespace attn_bench
