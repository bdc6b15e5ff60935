// Float64 reference of the backward pass, written plainly from the definition: for each row the
// full softmax (with the sink) is formed, then dP = dO V^T, dS = P (dP - rowsum(P dP)), and the
// chain rule back through ALiBi (constant), the bias, the softcap and the scale. Checked itself
// against central finite differences of ref::compute_v (tests/core/test_backward.cpp).
#pragma once

#include "reference.hpp"

namespace ref {

struct VGrads {
    std::vector<double> dq, dk, dv, dbias, dsinks; // in the layouts (strides) of q, k, v, bias
};

inline VGrads backward_v(const VProblem &p, const VInputs &in, const float *dout /* OUT layout */,
                         size_t bias_len) {
    const double ninf = -std::numeric_limits<double>::infinity();
    const size_t D = p.head_dim, DV = p.head_dim_v, SK = p.seq_k, group = p.heads_q / p.heads_kv;
    VGrads g;
    g.dq.assign(p.len(0), 0.0);
    g.dk.assign(p.len(1), 0.0);
    g.dv.assign(p.len(2), 0.0);
    g.dbias.assign(bias_len, 0.0);
    g.dsinks.assign(p.heads_q, 0.0);
    const std::vector<double> std_slopes = standard_slopes(p.heads_q);
    std::vector<double> s(SK), pre(SK), w(SK), dp(SK);
    std::vector<char> vis(SK);
    for (size_t b = 0; b < p.batch; ++b) {
        const long long klen = in.seq_lens_k ? in.seq_lens_k[b] : static_cast<long long>(SK);
        for (size_t h = 0; h < p.heads_q; ++h) {
            const size_t kvh = h / group;
            for (size_t i = 0; i < p.seq_q; ++i) {
                if (in.query_valid && !in.query_valid[b * p.seq_q + i]) continue;
                const long long diag = static_cast<long long>(i) +
                                       (p.causal == 2 ? klen - static_cast<long long>(p.seq_q) : 0);
                bool any = false;
                double m = ninf;
                for (size_t j = 0; j < SK; ++j) {
                    const long long jj = static_cast<long long>(j);
                    vis[j] = 0;
                    const bool ok = jj < klen && (!in.key_valid || in.key_valid[b * SK + j]) &&
                                    (!in.allowed || in.allowed[i * SK + j]) &&
                                    (p.causal == 0 || jj <= diag) &&
                                    (p.window_left < 0 || jj >= diag - p.window_left) &&
                                    (p.window_right < 0 || jj <= diag + p.window_right);
                    if (!ok) continue;
                    double dot = 0.0;
                    for (size_t d = 0; d < D; ++d)
                        dot += static_cast<double>(in.q[p.at(0, b, h, i) + d]) *
                               static_cast<double>(in.k[p.at(1, b, kvh, j) + d]);
                    const double x0 = dot * p.eff_scale();
                    double x = x0, capin = x0; // capin: the softcap's argument
                    if (!p.bias_first) x = softcap_of(x0, p.softcap);
                    if (in.bias) {
                        const double bv = static_cast<double>(in.bias[p.at(4, b, h, i) + j]);
                        if (bv == ninf) continue;
                        x += bv;
                    }
                    if (p.bias_first) { // the softcap after the (optional) bias
                        capin = x;
                        x = softcap_of(x, p.softcap);
                    }
                    if (p.alibi) {
                        const double slope =
                            p.alibi == 1 ? static_cast<double>(in.slopes[h]) : std_slopes[h];
                        x += -slope * static_cast<double>(diag - jj);
                    }
                    s[j] = x;
                    pre[j] = capin;
                    vis[j] = 1;
                    if (!any || x > m) m = x;
                    any = true;
                }
                if (!any) continue;
                const bool has_sink = in.sinks || p.plus_one;
                const double sink = in.sinks ? static_cast<double>(in.sinks[h]) : 0.0;
                double M = m;
                if (has_sink && sink > M) M = sink;
                double sum = has_sink ? std::exp(sink - M) : 0.0;
                for (size_t j = 0; j < SK; ++j)
                    if (vis[j]) sum += std::exp(s[j] - M);
                const float *dO = dout + p.at(3, b, h, i);
                double Drow = 0.0;
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    w[j] = std::exp(s[j] - M) / sum;
                    double x = 0.0;
                    for (size_t d = 0; d < DV; ++d)
                        x += static_cast<double>(dO[d]) *
                             static_cast<double>(in.v[p.at(2, b, kvh, j) + d]);
                    dp[j] = x;
                    Drow += w[j] * x;
                }
                if (in.sinks) g.dsinks[h] -= std::exp(sink - M) / sum * Drow;
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    const double ds = w[j] * (dp[j] - Drow); // d loss / d final logit
                    double dcap = ds;
                    if (p.softcap > 0) {
                        const double t = std::tanh(pre[j] / p.softcap);
                        dcap = ds * (1.0 - t * t);
                    }
                    if (in.bias) g.dbias[p.at(4, b, h, i) + j] += p.bias_first ? dcap : ds;
                    const double dx = dcap * p.eff_scale();
                    for (size_t d = 0; d < D; ++d) {
                        g.dq[p.at(0, b, h, i) + d] +=
                            dx * static_cast<double>(in.k[p.at(1, b, kvh, j) + d]);
                        g.dk[p.at(1, b, kvh, j) + d] +=
                            dx * static_cast<double>(in.q[p.at(0, b, h, i) + d]);
                    }
                    for (size_t d = 0; d < DV; ++d)
                        g.dv[p.at(2, b, kvh, j) + d] += w[j] * static_cast<double>(dO[d]);
                }
            }
        }
    }
    return g;
}

} // namespace ref
