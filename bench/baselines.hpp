// Baselines the benchmark compares libattn with, on contiguous BHSD operands
// (q, out: [heads][seq_q][head_dim], k, v: [heads][seq_k][head_dim], batch 1, heads_q == heads_kv).
// Both apply the same visibility rule as libattn: causal TOP_LEFT (j <= i) when causal is true,
// key_valid: [seq_k] bytes (NULL = all real), allowed: [seq_q][seq_k] bytes (NULL = all allowed).
// A row with no visible key gets output 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn_bench {

struct Problem {
    size_t heads = 1, seq_q = 1, seq_k = 1, head_dim = 1;
    bool causal = false;
    const uint8_t *key_valid = nullptr, *allowed = nullptr;
};

// Unfused attention as a numpy user writes it, per head: S = scale * Q K^T (cblas_sgemm, a
// seq_q x seq_k buffer), a plain row softmax (max, exp, sum, divide; std::exp), O = P V
// (cblas_sgemm). `scores` must hold seq_q * seq_k floats. Adds the time spent in the two GEMMs
// and in the softmax to *gemm_s and *softmax_s.
void unfused_openblas(const Problem &p, const float *q, const float *k, const float *v, float *out,
                      float *scores, double *gemm_s, double *softmax_s);

// The plain scalar reference: a naive loop per (head, query): scores for the visible keys, max,
// exp and sum, then the weighted sum of V rows. No seq x seq buffer (one row of scores,
// `row` must hold seq_k floats). Compiled with the x86-64 baseline flags and without
// -ffast-math: this is "what a plain loop would be".
void scalar_reference(const Problem &p, const float *q, const float *k, const float *v, float *out,
                      float *row);

// OpenBLAS facts for the report.
const char *openblas_corename();
void openblas_threads(int n);

} // namespace attn_bench
