// Baselines: unfused OpenBLAS attention and the plain scalar reference (see baselines.hpp).
#include "baselines.hpp"

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

namespace attn_bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool visible(const Problem &p, size_t i, size_t j) {
    if (p.causal && j > i) return false;
    if (p.key_valid && !p.key_valid[j]) return false;
    if (p.allowed && !p.allowed[i * p.seq_k + j]) return false;
    return true;
}

bool has_mask(const Problem &p) {
    return p.causal || p.key_valid || p.allowed;
}

// Softmax of one row of scores in place; hidden keys get 0. Returns false when the row has no
// visible key (the row is then all 0).
bool softmax_row(const Problem &p, size_t i, float *s) {
    const size_t n = p.seq_k;
    const float ninf = -std::numeric_limits<float>::infinity();
    float m = ninf;
    if (has_mask(p)) {
        for (size_t j = 0; j < n; ++j) {
            if (!visible(p, i, j)) s[j] = ninf;
            m = s[j] > m ? s[j] : m;
        }
    } else {
        for (size_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
    }
    if (m == ninf) {
        std::memset(s, 0, n * sizeof(float));
        return false;
    }
    float sum = 0.0f;
    for (size_t j = 0; j < n; ++j) {
        const float e = std::exp(s[j] - m); // exp(-inf) = 0 for hidden keys
        s[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (size_t j = 0; j < n; ++j) s[j] *= inv;
    return true;
}

} // namespace

void unfused_openblas(const Problem &p, const float *q, const float *k, const float *v, float *out,
                      float *scores, double *gemm_s, double *softmax_s) {
    const int sq = static_cast<int>(p.seq_q), sk = static_cast<int>(p.seq_k);
    const int d = static_cast<int>(p.head_dim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    for (size_t h = 0; h < p.heads; ++h) {
        const float *qh = q + h * p.seq_q * p.head_dim;
        const float *kh = k + h * p.seq_k * p.head_dim;
        const float *vh = v + h * p.seq_k * p.head_dim;
        float *oh = out + h * p.seq_q * p.head_dim;
        auto t0 = std::chrono::steady_clock::now();
        // S[sq][sk] = scale * Q[sq][d] K[sk][d]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sq, sk, d, scale, qh, d, kh, d, 0.0f,
                    scores, sk);
        *gemm_s += seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < p.seq_q; ++i) softmax_row(p, i, scores + i * p.seq_k);
        *softmax_s += seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        // O[sq][d] = P[sq][sk] V[sk][d]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sq, d, sk, 1.0f, scores, sk, vh, d,
                    0.0f, oh, d);
        *gemm_s += seconds_since(t0);
    }
}

void scalar_reference(const Problem &p, const float *q, const float *k, const float *v, float *out,
                      float *row) {
    const size_t n = p.seq_k, d = p.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const float ninf = -std::numeric_limits<float>::infinity();
    for (size_t h = 0; h < p.heads; ++h) {
        const float *kh = k + h * n * d, *vh = v + h * n * d;
        for (size_t i = 0; i < p.seq_q; ++i) {
            const float *qi = q + (h * p.seq_q + i) * d;
            float *oi = out + (h * p.seq_q + i) * d;
            float m = ninf;
            for (size_t j = 0; j < n; ++j) {
                float s = ninf;
                if (visible(p, i, j)) {
                    s = 0.0f;
                    for (size_t c = 0; c < d; ++c) s += qi[c] * kh[j * d + c];
                    s *= scale;
                }
                row[j] = s;
                m = s > m ? s : m;
            }
            for (size_t c = 0; c < d; ++c) oi[c] = 0.0f;
            if (m == ninf) continue;
            float sum = 0.0f;
            for (size_t j = 0; j < n; ++j) {
                if (row[j] == ninf) continue;
                const float e = std::exp(row[j] - m);
                sum += e;
                for (size_t c = 0; c < d; ++c) oi[c] += e * vh[j * d + c];
            }
            const float inv = 1.0f / sum;
            for (size_t c = 0; c < d; ++c) oi[c] *= inv;
        }
    }
}

const char *openblas_corename() {
    return openblas_get_corename();
}

void openblas_threads(int n) {
    openblas_set_num_threads(n);
}

} // namespace attn_bench
