// Float64 reference of the backward pass, written plainly from the definition: for each row the
// forward's scores and softmax (with the sink) are formed by the same steps as ref::compute_v
// (row_scores, row_softmax), then dP = dO V^T, dS = P (dP - rowsum(P dP)), and the chain rule back
// through ALiBi (constant), the bias, the softcap and the scale. Checked itself against central
// finite differences of ref::compute_v (tests/core/test_backward.cpp).
#pragma once

#include "reference.hpp"

namespace ref {

struct VGrads {
    std::vector<double> dq, dk, dv, dbias, dsinks; // in the layouts (strides) of q, k, v, bias
};

inline VGrads backward_v(const VProblem &p, const VInputs &in, const float *dout /* OUT layout */,
                         size_t bias_len) {
    const size_t D = p.head_dim, DV = p.head_dim_v, SK = p.seq_k, group = p.heads_q / p.heads_kv;
    VGrads g;
    g.dq.assign(p.len(0), 0.0);
    g.dk.assign(p.len(1), 0.0);
    g.dv.assign(p.len(2), 0.0);
    g.dbias.assign(bias_len, 0.0);
    g.dsinks.assign(p.heads_q, 0.0);
    std::vector<double> s(SK), pre(SK), w(SK), dp(SK); // pre: the softcap's argument
    std::vector<char> vis(SK);
    for (size_t b = 0; b < p.batch; ++b) {
        for (size_t h = 0; h < p.heads_q; ++h) {
            const size_t kvh = h / group;
            for (size_t i = 0; i < p.seq_q; ++i) {
                if (in.query_valid && !in.query_valid[b * p.seq_q + i]) continue;
                if (!row_scores(p, in, b, h, i, s, vis, &pre)) continue;
                const RowSoftmax sm = row_softmax(p, in, h, s, vis);
                const float *dO = dout + p.at(3, b, h, i);
                double Drow = 0.0;
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    w[j] = sm.weight(s[j]);
                    double x = 0.0;
                    for (size_t d = 0; d < DV; ++d)
                        x += static_cast<double>(dO[d]) *
                             static_cast<double>(in.v[p.at(2, b, kvh, j) + d]);
                    dp[j] = x;
                    Drow += w[j] * x;
                }
                if (in.sinks) g.dsinks[h] -= sm.sink_weight() * Drow;
                for (size_t j = 0; j < SK; ++j) {
                    if (!vis[j]) continue;
                    const double ds = w[j] * (dp[j] - Drow); // d loss / d final logit
                    double dcap = ds;
                    if (p.softcap > 0) {
                        const double t = std::tanh(pre[j] / p.softcap);
                        dcap = ds * (1.0 - t * t);
                    }
                    if (in.bias) g.dbias[p.at(4, b, h, i) + j] += p.bias_first ? dcap : ds;
                    // d logit / d q = scale q_scale[h] k_j, d logit / d k_j = scale q_scale[h] q
                    const double dx = dcap * p.eff_scale() * q_factor(in, h);
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
