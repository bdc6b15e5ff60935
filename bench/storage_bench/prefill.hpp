// The prefill part of attn_storage_bench: n 2048, H 8, d 128 and 64, causal and not, 1 thread,
// hot: f16 / bf16 / int8 K/V (widened on load, exact mode) against fp32 K/V, and the cost of
// ATTN_PARAM_BATCH_INVARIANT on the causal d 128 fp32 prefill. Every configuration once per
// round, interleaved; a figure is the median over rounds of the best of `reps` calls.
#pragma once

#include <vector>

#include "../attn_bench/records.hpp"

namespace attn_bench {

void prefill_section(int rounds, int reps, std::vector<Record> &records);

} // namespace attn_bench
