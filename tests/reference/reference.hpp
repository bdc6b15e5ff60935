// The float64 reference of the C and C++ tests (tests/core, tests/hardening, fuzz/): one forward,
// compute_v, the score pipeline of capi/attn.h ("Extensible call (0.2)") written plainly, one
// (batch, head, query) row at a time. The 0.1 calls (attn_forward, attn_weights) are the special
// case without variants: compute() only builds that general problem. reference_backward.hpp
// differentiates the same pipeline; tests/reference/attn_ref.py is the Python family's twin.
//
// What the tests rely on:
//   - key j is visible to query i iff it is not padding (key_valid, seq_lens_k), passes the causal
//     rule, the window and `allowed`, and its final score is not -inf (a -inf bias hides it);
//     every other key has weight exactly 0 (VResult::hidden marks them);
//   - a row without a visible key, or a padded query (query_valid), has out 0, weights 0 and
//     lse -inf (VResult::any is 0 for it), with or without a sink;
//   - NaN and Inf in visible keys' values propagate as IEEE arithmetic says: a NaN or +inf score
//     enters the normaliser, so out, lse and every visible weight of its row come out NaN;
//   - the default scale is the library's, 1.0f / sqrtf(head_dim) rounded to float.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "attn.h"

namespace ref {

// The scale the library applies: the explicit one, or 1 / sqrt(head_dim) computed in float.
inline double scale_of(bool has_scale, float scale, size_t head_dim) {
    return has_scale ? static_cast<double>(scale)
                     : static_cast<double>(1.0f / std::sqrt(static_cast<float>(head_dim)));
}

struct VProblem {
    size_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 1, head_dim_v = 1;
    int causal = 0; // attn_causal
    bool has_scale = false;
    float scale = 1.0f;
    long long window_left = -1, window_right = -1;
    float softcap = 0.0f;
    bool bias_first = false;
    int alibi = 0;           // attn_alibi
    int diagonal = 0;        // attn_diagonal: of the window and ALiBi
    int alibi_form = 0;      // attn_alibi_form
    size_t slopes_batch = 0; // slope of (b, h) at slopes[b * slopes_batch + h]
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
    double eff_scale() const { return scale_of(has_scale, scale, head_dim); }
};

struct VInputs {
    const float *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr, *slopes = nullptr,
                *sinks = nullptr, *q_scale = nullptr;
    const uint8_t *key_valid = nullptr, *allowed = nullptr, *query_valid = nullptr;
    const int32_t *seq_lens_k = nullptr;
};

struct VResult {
    std::vector<double> out;  // [b][hq][sq][dv] dense
    std::vector<double> lse;  // [b][hq][sq]
    std::vector<double> w;    // [b][hq][sq][sk]
    std::vector<double> mass; // [b][hq][sk]
    std::vector<char> hidden; // [b][hq][sq][sk]: weight must be exactly 0
    std::vector<char> any;    // [b][hq][sq]: the row has a visible key (else out 0, lse -inf)
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

// The closeness measures of the fast compute modes over one (batch, head)'s outputs, accumulated
// element by element: cosine similarity and relative L1 (sum |got - want| / sum |want|).
struct Closeness {
    double cos = 1.0, l1 = 0.0; // the worst so far
    double dot = 0, gg = 0, ww = 0, diff = 0, norm = 0;
    void add(double got, double want) {
        dot += got * want;
        gg += got * got;
        ww += want * want;
        diff += std::fabs(got - want);
        norm += std::fabs(want);
    }
    // Folds the (batch, head) just added into the worst and starts the next one (a (batch, head)
    // whose reference is all zeros is skipped).
    void next() {
        if (norm != 0) {
            const double cs = gg > 0 ? dot / std::sqrt(gg * ww) : 0.0;
            cos = std::min(cos, std::isnan(cs) ? -1.0 : cs);
            l1 = std::max(l1, std::isnan(diff) ? 1e30 : diff / norm);
        }
        dot = gg = ww = diff = norm = 0;
    }
};

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

// ---- The steps of the pipeline, shared by compute_v and backward_v -------------------------

// The number of real keys of batch b: seq_lens_k[b], else seq_k.
inline long long len_k(const VProblem &p, const VInputs &in, size_t b) {
    return in.seq_lens_k ? in.seq_lens_k[b] : static_cast<long long>(p.seq_k);
}

// The causal rule's diagonal of query i: i, or i + len_k(b) - seq_q for ATTN_CAUSAL_BOTTOM_RIGHT.
inline long long causal_diag_of(const VProblem &p, const VInputs &in, size_t b, size_t i) {
    const long long sq = static_cast<long long>(p.seq_q);
    return static_cast<long long>(i) +
           (p.causal == ATTN_CAUSAL_BOTTOM_RIGHT ? len_k(p, in, b) - sq : 0);
}

// diag(i), the diagonal of the window and ALiBi (ATTN_PARAM_DIAGONAL): the causal rule's, i
// (top-left) or i + len_k(b) - seq_q (bottom-right).
inline long long diag_of(const VProblem &p, const VInputs &in, size_t b, size_t i) {
    const long long ii = static_cast<long long>(i), sq = static_cast<long long>(p.seq_q);
    if (p.diagonal == ATTN_DIAGONAL_TOP_LEFT) return ii;
    if (p.diagonal == ATTN_DIAGONAL_BOTTOM_RIGHT) return ii + len_k(p, in, b) - sq;
    return causal_diag_of(p, in, b, i);
}

// Whether the masks let query i of batch b see key j: not padding (seq_lens_k, key_valid), the
// causal rule, the window, `allowed`. (The score can still hide it: see row_scores.)
inline bool key_visible(const VProblem &p, const VInputs &in, size_t b, size_t i, size_t j) {
    const long long jj = static_cast<long long>(j), diag = diag_of(p, in, b, i);
    return jj < len_k(p, in, b) && (!in.key_valid || in.key_valid[b * p.seq_k + j]) &&
           (!in.allowed || in.allowed[i * p.seq_k + j]) &&
           (p.causal == ATTN_CAUSAL_NONE || jj <= causal_diag_of(p, in, b, i)) &&
           (p.window_left < 0 || jj >= diag - p.window_left) &&
           (p.window_right < 0 || jj <= diag + p.window_right);
}

// The factor ATTN_Q_SCALE puts on query head h's Q (1 without it).
inline double q_factor(const VInputs &in, size_t h) {
    return in.q_scale ? static_cast<double>(in.q_scale[h]) : 1.0;
}

// scale * (q_scale[h] q_i) . k_j for query head h (its KV head is h / (heads_q / heads_kv)).
inline double scaled_dot(const VProblem &p, const VInputs &in, size_t b, size_t h, size_t i,
                         size_t j) {
    const size_t kvh = h / (p.heads_q / p.heads_kv);
    double dot = 0.0;
    for (size_t d = 0; d < p.head_dim; ++d)
        dot += static_cast<double>(in.q[p.at(0, b, h, i) + d]) *
               static_cast<double>(in.k[p.at(1, b, kvh, j) + d]);
    return dot * q_factor(in, h) * p.eff_scale();
}

// The final scores of row (b, h, i): s[j] for each visible key (vis[j] = 1; s[j] is not written
// for the others). cap_in, when given, receives each visible key's softcap argument (the
// backward's chain rule needs it). Returns whether the row has a visible key.
inline bool row_scores(const VProblem &p, const VInputs &in, size_t b, size_t h, size_t i,
                       std::vector<double> &s, std::vector<char> &vis,
                       std::vector<double> *cap_in = nullptr) {
    const double ninf = -std::numeric_limits<double>::infinity();
    const long long diag = diag_of(p, in, b, i);
    const double slope = p.alibi == 0   ? 0.0
                         : p.alibi == 1 ? static_cast<double>(in.slopes[b * p.slopes_batch + h])
                                        : standard_slopes(p.heads_q)[h];
    bool any = false;
    for (size_t j = 0; j < p.seq_k; ++j) {
        vis[j] = 0;
        if (!key_visible(p, in, b, i, j)) continue;
        const double x0 = scaled_dot(p, in, b, h, i, j);
        double x = p.bias_first ? x0 : softcap_of(x0, p.softcap), pre = x0;
        if (in.bias) {
            const double bj = static_cast<double>(in.bias[p.at(4, b, h, i) + j]);
            if (bj == ninf) continue; // a -inf bias hides the key, whatever its score
            x += bj;
        }
        if (p.bias_first && x != ninf) { // the softcap after the bias; -inf still hides
            pre = x;
            x = softcap_of(x, p.softcap);
        }
        if (p.alibi) {
            const double rel = static_cast<double>(diag - static_cast<long long>(j));
            x += -slope * (p.alibi_form == ATTN_ALIBI_SYMMETRIC ? std::fabs(rel) : rel);
        }
        if (x == ninf) continue; // a -inf bias (or score) hides the key
        s[j] = x;
        vis[j] = 1;
        if (cap_in) (*cap_in)[j] = pre;
        any = true;
    }
    return any;
}

// The softmax of a row with a visible key: M is the largest score (the sink's included; a NaN
// score leaves it alone but makes sum NaN), sum = exp(sink - M) + sum_j exp(s_j - M) over the
// visible keys, the sink term only with ATTN_SINKS or softmax plus one (sink logit 0).
struct RowSoftmax {
    double M = 0.0, sum = 0.0, sink = 0.0;
    bool has_sink = false;
    double lse() const { return M + std::log(sum); }
    double weight(double s) const { return std::exp(s - M) / sum; }
    double sink_weight() const { return has_sink ? std::exp(sink - M) / sum : 0.0; }
};

inline RowSoftmax row_softmax(const VProblem &p, const VInputs &in, size_t h,
                              const std::vector<double> &s, const std::vector<char> &vis) {
    RowSoftmax r;
    bool first = true;
    for (size_t j = 0; j < p.seq_k; ++j)
        if (vis[j] && (first || s[j] > r.M)) {
            r.M = s[j];
            first = false;
        }
    r.has_sink = in.sinks || p.plus_one;
    r.sink = in.sinks ? static_cast<double>(in.sinks[h]) : 0.0;
    if (r.has_sink && r.sink > r.M) r.M = r.sink;
    r.sum = r.has_sink ? std::exp(r.sink - r.M) : 0.0;
    for (size_t j = 0; j < p.seq_k; ++j)
        if (vis[j]) r.sum += std::exp(s[j] - r.M);
    return r;
}

// ---- The reference ---------------------------------------------------------------------------

inline VResult compute_v(const VProblem &p, const VInputs &in) {
    VResult r;
    const size_t DV = p.head_dim_v, SK = p.seq_k, group = p.heads_q / p.heads_kv;
    const size_t rows = p.batch * p.heads_q * p.seq_q;
    r.out.assign(rows * DV, 0.0);
    r.lse.assign(rows, -std::numeric_limits<double>::infinity());
    r.w.assign(rows * SK, 0.0);
    r.mass.assign(p.batch * p.heads_q * SK, 0.0);
    r.hidden.assign(r.w.size(), 1);
    r.any.assign(rows, 0);
    std::vector<double> s(SK);
    std::vector<char> vis(SK);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h) {
            const size_t kvh = h / group;
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                if (in.query_valid && !in.query_valid[b * p.seq_q + i]) continue;
                if (!row_scores(p, in, b, h, i, s, vis)) continue;
                const RowSoftmax sm = row_softmax(p, in, h, s, vis);
                r.any[row] = 1;
                r.lse[row] = sm.lse();
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    const double wj = sm.weight(s[j]);
                    r.w[row * SK + j] = wj;
                    r.hidden[row * SK + j] = 0;
                    r.mass[(b * p.heads_q + h) * SK + j] += wj;
                    for (size_t d = 0; d < DV; ++d)
                        r.out[row * DV + d] +=
                            wj * static_cast<double>(in.v[p.at(2, b, kvh, j) + d]);
                }
            }
        }
    return r;
}

// ---- The 0.1 problem (attn_forward, attn_weights): no variants, head_dim_v = head_dim --------

struct Problem {
    size_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 1;
    int causal = ATTN_CAUSAL_NONE; // attn_causal
    bool has_scale = false;
    float scale = 1.0f;
    size_t strides[4][3] = {}; // Q, K, V, OUT: batch, head, row
    bool custom_strides[4] = {false, false, false, false};

    size_t heads(int w) const { return w == 0 || w == 3 ? heads_q : heads_kv; }
    size_t seq(int w) const { return w == 0 || w == 3 ? seq_q : seq_k; }
    void set_default_strides() {
        for (int w = 0; w < 4; ++w) {
            if (custom_strides[w]) continue;
            strides[w][0] = heads(w) * seq(w) * head_dim;
            strides[w][1] = seq(w) * head_dim;
            strides[w][2] = head_dim;
        }
    }
    size_t len(int w) const {
        return (batch - 1) * strides[w][0] + (heads(w) - 1) * strides[w][1] +
               (seq(w) - 1) * strides[w][2] + head_dim;
    }
    size_t at(int w, size_t b, size_t h, size_t s) const {
        return b * strides[w][0] + h * strides[w][1] + s * strides[w][2];
    }
    double eff_scale() const { return scale_of(has_scale, scale, head_dim); }
    // The same problem for compute_v.
    VProblem general() const {
        VProblem g;
        g.batch = batch, g.heads_q = heads_q, g.heads_kv = heads_kv, g.seq_q = seq_q;
        g.seq_k = seq_k, g.head_dim = g.head_dim_v = head_dim;
        g.causal = causal, g.has_scale = has_scale, g.scale = scale;
        for (int w = 0; w < 4; ++w) {
            g.custom_strides[w] = true;
            for (int x = 0; x < 3; ++x) g.strides[w][x] = strides[w][x];
        }
        g.set_default_strides(); // BIAS: unused
        return g;
    }
};

inline VInputs inputs(const float *q, const float *k, const float *v, const uint8_t *key_valid,
                      const uint8_t *allowed) {
    VInputs in;
    in.q = q, in.k = k, in.v = v, in.key_valid = key_valid, in.allowed = allowed;
    return in;
}

// The 0.1 calls' reference: compute_v of the general problem.
inline VResult compute(const Problem &p, const float *q, const float *k, const float *v,
                       const uint8_t *key_valid, const uint8_t *allowed) {
    return compute_v(p.general(), inputs(q, k, v, key_valid, allowed));
}

} // namespace ref
