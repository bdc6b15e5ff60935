// Independent float64 reference for the tests, written plainly: one (batch, head, query) row at a
// time, visible keys = causal rule AND key_valid AND allowed, softmax over the visible keys.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "attn.h"

namespace ref {

struct Problem {
    size_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 1;
    attn_causal causal = ATTN_CAUSAL_NONE;
    bool has_scale = false;
    float scale = 1.0f;
    size_t strides[4][3] = {}; // Q, K, V, OUT: batch, head, row
    bool custom_strides[4] = {false, false, false, false};

    void set_default_strides() {
        for (int w = 0; w < 4; ++w) {
            if (custom_strides[w]) continue;
            const bool is_q = w == 0 || w == 3;
            const size_t h = is_q ? heads_q : heads_kv, s = is_q ? seq_q : seq_k;
            strides[w][0] = h * s * head_dim;
            strides[w][1] = s * head_dim;
            strides[w][2] = head_dim;
        }
    }
    size_t len(int w) const {
        const bool is_q = w == 0 || w == 3;
        const size_t h = is_q ? heads_q : heads_kv, s = is_q ? seq_q : seq_k;
        return (batch - 1) * strides[w][0] + (h - 1) * strides[w][1] + (s - 1) * strides[w][2] +
               head_dim;
    }
    size_t at(int w, size_t b, size_t h, size_t s) const {
        return b * strides[w][0] + h * strides[w][1] + s * strides[w][2];
    }
    double eff_scale() const {
        return has_scale ? static_cast<double>(scale)
                         : 1.0 / std::sqrt(static_cast<double>(head_dim));
    }
    bool visible(size_t b, size_t i, size_t j, const uint8_t *key_valid,
                 const uint8_t *allowed) const {
        const long long off = causal == ATTN_CAUSAL_BOTTOM_RIGHT
                                  ? static_cast<long long>(seq_k) - static_cast<long long>(seq_q)
                                  : 0;
        if (causal != ATTN_CAUSAL_NONE &&
            static_cast<long long>(j) > static_cast<long long>(i) + off)
            return false;
        if (key_valid && !key_valid[b * seq_k + j]) return false;
        if (allowed && !allowed[i * seq_k + j]) return false;
        return true;
    }
};

struct Result {
    std::vector<double> out; // [b][hq][sq][d] dense
    std::vector<double> lse; // [b][hq][sq]
    std::vector<double> w;   // [b][hq][sq][sk]
};

inline Result compute(const Problem &p, const float *q, const float *k, const float *v,
                      const uint8_t *key_valid, const uint8_t *allowed) {
    Result r;
    const size_t D = p.head_dim, group = p.heads_q / p.heads_kv;
    r.out.assign(p.batch * p.heads_q * p.seq_q * D, 0.0);
    r.lse.assign(p.batch * p.heads_q * p.seq_q, -std::numeric_limits<double>::infinity());
    r.w.assign(p.batch * p.heads_q * p.seq_q * p.seq_k, 0.0);
    std::vector<double> s(p.seq_k);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                const size_t kvh = h / group;
                double m = -std::numeric_limits<double>::infinity();
                bool any = false;
                for (size_t j = 0; j < p.seq_k; ++j) {
                    if (!p.visible(b, i, j, key_valid, allowed)) continue;
                    double dot = 0.0;
                    for (size_t d = 0; d < D; ++d)
                        dot += static_cast<double>(q[p.at(0, b, h, i) + d]) *
                               static_cast<double>(k[p.at(1, b, kvh, j) + d]);
                    s[j] = dot * p.eff_scale();
                    if (!any || s[j] > m) m = s[j];
                    any = true;
                }
                if (!any) continue;
                double sum = 0.0;
                for (size_t j = 0; j < p.seq_k; ++j)
                    if (p.visible(b, i, j, key_valid, allowed)) sum += std::exp(s[j] - m);
                r.lse[row] = m + std::log(sum);
                for (size_t j = 0; j < p.seq_k; ++j) {
                    if (!p.visible(b, i, j, key_valid, allowed)) continue;
                    const double wj = std::exp(s[j] - m) / sum;
                    r.w[row * p.seq_k + j] = wj;
                    for (size_t d = 0; d < D; ++d)
                        r.out[row * D + d] += wj * static_cast<double>(v[p.at(2, b, kvh, j) + d]);
                }
            }
    return r;
}

} // namespace ref
