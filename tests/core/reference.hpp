// Independent float64 reference for the tests, written plainly: one (batch, head, query) row at a
// time, visible keys = causal rule AND key_valid AND allowed, softmax over the visible keys.
#pragma once

#include <algorithm>
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

// ---- The 0.2 score pipeline, written plainly (capi/attn.h "Extensible call (0.2)") ----------
namespace ref {

struct VProblem {
    size_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 1, head_dim_v = 1;
    int causal = 0; // attn_causal
    bool has_scale = false;
    float scale = 1.0f;
    long long window_left = -1, window_right = -1;
    float softcap = 0.0f;
    bool bias_first = false;
    int alibi = 0; // attn_alibi
    bool plus_one = false;
    // Q, K, V, OUT, BIAS: batch, head, row element strides
    size_t strides[5][3] = {};
    bool custom_strides[5] = {};

    size_t heads(int w) const { return w == 1 || w == 2 ? heads_kv : heads_q; }
    size_t seq(int w) const { return w == 1 || w == 2 ? seq_k : seq_q; }
    size_t dim(int w) const { return w == 4 ? seq_k : w == 2 || w == 3 ? head_dim_v : head_dim; }
    void set_default_strides() {
        for (int w = 0; w < 5; ++w) {
            if (custom_strides[w]) continue;
            strides[w][0] = heads(w) * seq(w) * dim(w);
            strides[w][1] = seq(w) * dim(w);
            strides[w][2] = dim(w);
        }
    }
    size_t len(int w) const {
        return (batch - 1) * strides[w][0] + (heads(w) - 1) * strides[w][1] +
               (seq(w) - 1) * strides[w][2] + dim(w);
    }
    size_t at(int w, size_t b, size_t h, size_t s) const {
        return b * strides[w][0] + h * strides[w][1] + s * strides[w][2];
    }
    double eff_scale() const {
        return has_scale ? static_cast<double>(scale)
                         : static_cast<double>(1.0f / std::sqrt(static_cast<float>(head_dim)));
    }
};

struct VInputs {
    const float *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr, *slopes = nullptr,
                *sinks = nullptr;
    const uint8_t *key_valid = nullptr, *allowed = nullptr, *query_valid = nullptr;
    const int32_t *seq_lens_k = nullptr;
};

struct VResult {
    std::vector<double> out;  // [b][hq][sq][dv] dense
    std::vector<double> lse;  // [b][hq][sq]
    std::vector<double> w;    // [b][hq][sq][sk]
    std::vector<double> mass; // [b][hq][sk]
    std::vector<char> hidden; // [b][hq][sq][sk]: weight must be exactly 0
};

// Standard ALiBi slopes (Press et al.; BLOOM's rule when n is not a power of two).
inline std::vector<double> standard_slopes(size_t n) {
    size_t m = 1;
    while (m * 2 <= n) m *= 2;
    std::vector<double> s;
    for (size_t h = 1; h <= m; ++h) s.push_back(std::pow(2.0, -8.0 * h / m));
    for (size_t x = 0; s.size() < n; ++x) s.push_back(std::pow(2.0, -8.0 * (2 * x + 1) / (2 * m)));
    return s;
}

// |got - want| / max(1, |want|): the error measure of every variant test (inf must match exactly,
// NaN never does).
inline double rel_err(double got, double want) {
    if (std::isinf(want)) return got == want ? 0.0 : 1e30;
    if (std::isnan(got)) return 1e30;
    return std::fabs(got - want) / std::max(1.0, std::fabs(want));
}

inline double softcap_of(double s, double c) {
    return c > 0 ? c * std::tanh(s / c) : s;
}

inline VResult compute_v(const VProblem &p, const VInputs &in) {
    const double ninf = -std::numeric_limits<double>::infinity();
    VResult r;
    const size_t D = p.head_dim, DV = p.head_dim_v, SK = p.seq_k, group = p.heads_q / p.heads_kv;
    r.out.assign(p.batch * p.heads_q * p.seq_q * DV, 0.0);
    r.lse.assign(p.batch * p.heads_q * p.seq_q, ninf);
    r.w.assign(p.batch * p.heads_q * p.seq_q * SK, 0.0);
    r.mass.assign(p.batch * p.heads_q * SK, 0.0);
    r.hidden.assign(r.w.size(), 1);
    const std::vector<double> std_slopes = standard_slopes(p.heads_q);
    std::vector<double> s(SK);
    std::vector<char> vis(SK);
    for (size_t b = 0; b < p.batch; ++b) {
        const long long klen = in.seq_lens_k ? in.seq_lens_k[b] : static_cast<long long>(SK);
        for (size_t h = 0; h < p.heads_q; ++h) {
            const size_t kvh = h / group;
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                if (in.query_valid && !in.query_valid[b * p.seq_q + i]) continue;
                const long long diag = static_cast<long long>(i) +
                                       (p.causal == 2 ? klen - static_cast<long long>(p.seq_q) : 0);
                bool any = false;
                double m = ninf;
                for (size_t j = 0; j < SK; ++j) {
                    const long long jj = static_cast<long long>(j);
                    bool ok = jj < klen && (!in.key_valid || in.key_valid[b * SK + j]) &&
                              (!in.allowed || in.allowed[i * SK + j]) &&
                              (p.causal == 0 || jj <= diag) &&
                              (p.window_left < 0 || jj >= diag - p.window_left) &&
                              (p.window_right < 0 || jj <= diag + p.window_right);
                    vis[j] = 0;
                    if (!ok) continue;
                    double dot = 0.0;
                    for (size_t d = 0; d < D; ++d)
                        dot += static_cast<double>(in.q[p.at(0, b, h, i) + d]) *
                               static_cast<double>(in.k[p.at(1, b, kvh, j) + d]);
                    double x = dot * p.eff_scale();
                    if (!p.bias_first) x = softcap_of(x, p.softcap);
                    if (in.bias) x += static_cast<double>(in.bias[p.at(4, b, h, i) + j]);
                    if (p.bias_first && x != ninf) x = softcap_of(x, p.softcap); // -inf hides
                    if (p.alibi) {
                        const double slope =
                            p.alibi == 1 ? static_cast<double>(in.slopes[h]) : std_slopes[h];
                        x += -slope * static_cast<double>(diag - jj);
                    }
                    if (x == ninf) continue; // a -inf bias hides the key
                    s[j] = x;
                    vis[j] = 1;
                    if (!any || x > m) m = x;
                    any = true;
                }
                if (!any) continue;
                double M = m;
                const bool has_sink = in.sinks || p.plus_one;
                const double sink = in.sinks ? static_cast<double>(in.sinks[h]) : 0.0;
                if (has_sink && sink > M) M = sink;
                double sum = has_sink ? std::exp(sink - M) : 0.0;
                for (size_t j = 0; j < SK; ++j)
                    if (vis[j]) sum += std::exp(s[j] - M);
                r.lse[row] = M + std::log(sum);
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    const double wj = std::exp(s[j] - M) / sum;
                    r.w[row * SK + j] = wj;
                    r.hidden[row * SK + j] = 0;
                    r.mass[(b * p.heads_q + h) * SK + j] += wj;
                    for (size_t d = 0; d < DV; ++d)
                        r.out[row * DV + d] +=
                            wj * static_cast<double>(in.v[p.at(2, b, kvh, j) + d]);
                }
            }
        }
    }
    return r;
}

} // namespace ref
