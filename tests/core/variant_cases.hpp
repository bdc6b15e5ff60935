// Random problems of every 0.2 variant, their run through attn_args / attn_run, and the check
// against the float64 pipeline of tests/reference/reference.hpp (ref::compute_v). Shared by
// core_variants and core_storage (which binds Q, K and V in 16-bit or int8 storage: VCase::store).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

namespace vcases {

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kInf = std::numeric_limits<float>::infinity();
inline const float kSentinel = 777.0f;

inline std::vector<std::string> isas() {
    std::vector<std::string> out;
    for (const char *name : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(name) == ATTN_OK) out.push_back(name);
    attn_set_isa(nullptr);
    return out;
}

struct VCase {
    ref::VProblem p;
    std::vector<float> q, k, v, bias, slopes, sinks, q_scale;
    std::vector<uint8_t> key_valid, allowed, query_valid;
    std::vector<int32_t> seq_lens;
    bool mass = false;
    int weights_mode = ATTN_WEIGHTS_SOFTMAX;
    // Storage of Q, K, V (index 0..2): 0 = f32 (q/k/v above), 1 = f16, 2 = bf16 (bits16[w]),
    // 3 = int8 (bits8[w] with scales[w], strided by scale_strides[w] when custom_scale[w]),
    // 4 / 5 = fp8 E4M3 / E5M2 (bits8[w] as bytes; scales[w] as for int8, or none bound when empty).
    int store[3] = {0, 0, 0};
    bool invariant = false; // ATTN_PARAM_BATCH_INVARIANT
    std::vector<uint16_t> bits16[3];
    std::vector<int8_t> bits8[3];
    std::vector<float> scales[3];
    bool custom_scale[3] = {};
    size_t scale_strides[3][3] = {};

    ref::VInputs inputs() const {
        ref::VInputs in;
        in.q = q.data();
        in.k = k.data();
        in.v = v.data();
        in.bias = bias.empty() ? nullptr : bias.data();
        in.slopes = slopes.empty() ? nullptr : slopes.data();
        in.sinks = sinks.empty() ? nullptr : sinks.data();
        in.q_scale = q_scale.empty() ? nullptr : q_scale.data();
        in.key_valid = key_valid.empty() ? nullptr : key_valid.data();
        in.allowed = allowed.empty() ? nullptr : allowed.data();
        in.query_valid = query_valid.empty() ? nullptr : query_valid.data();
        in.seq_lens_k = seq_lens.empty() ? nullptr : seq_lens.data();
        return in;
    }
};

struct VRun {
    std::vector<float> out, lse, w, mass;
};

inline attn_desc *make_desc(const VCase &c) {
    const ref::VProblem &p = c.p;
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim) ==
            ATTN_OK);
    auto seti = [&](attn_param k, int64_t v) {
        REQUIRE_MESSAGE(attn_desc_set_int(d, k, v) == ATTN_OK, attn_last_error());
    };
    seti(ATTN_PARAM_CAUSAL, p.causal);
    if (p.has_scale)
        REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SCALE, static_cast<double>(p.scale)) == ATTN_OK);
    seti(ATTN_PARAM_WINDOW_LEFT, p.window_left);
    seti(ATTN_PARAM_WINDOW_RIGHT, p.window_right);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, static_cast<double>(p.softcap)) == ATTN_OK);
    seti(ATTN_PARAM_BIAS_FIRST, p.bias_first);
    seti(ATTN_PARAM_ALIBI, p.alibi);
    seti(ATTN_PARAM_DIAGONAL, p.diagonal);
    seti(ATTN_PARAM_ALIBI_FORM, p.alibi_form);
    if (p.slopes_batch) {
        REQUIRE_MESSAGE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, p.slopes_batch, 1, 0) ==
                            ATTN_OK,
                        attn_last_error());
        REQUIRE(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) ==
                (p.batch - 1) * p.slopes_batch + p.heads_q);
    }
    seti(ATTN_PARAM_SOFTMAX_PLUS_ONE, p.plus_one);
    seti(ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v));
    seti(ATTN_PARAM_BATCH_INVARIANT, c.invariant);
    seti(ATTN_PARAM_WEIGHTS_MODE, c.weights_mode);
    const attn_operand ops[5] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT, ATTN_BIAS};
    for (int w = 0; w < 5; ++w) {
        if (p.custom_strides[w])
            REQUIRE_MESSAGE(attn_desc_set_strides(d, ops[w], p.strides[w][0], p.strides[w][1],
                                                  p.strides[w][2]) == ATTN_OK,
                            attn_last_error());
        REQUIRE(attn_desc_required_len(d, ops[w]) == p.len(w));
    }
    for (int w = 1; w < 3; ++w)
        if (c.custom_scale[w])
            REQUIRE_MESSAGE(attn_desc_set_strides(d, w == 1 ? ATTN_K_SCALE : ATTN_V_SCALE,
                                                  c.scale_strides[w][0], c.scale_strides[w][1],
                                                  c.scale_strides[w][2]) == ATTN_OK,
                            attn_last_error());
    return d;
}

inline VRun run(const VCase &c) {
    VRun r;
    attn_desc *d = make_desc(c);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    auto f32 = [&](attn_operand w, const std::vector<float> &x) {
        if (!x.empty()) REQUIRE(attn_args_set_f32(a, w, x.data(), x.size()) == ATTN_OK);
    };
    auto u8 = [&](attn_operand w, const std::vector<uint8_t> &x) {
        if (!x.empty()) REQUIRE(attn_args_set_u8(a, w, x.data(), x.size()) == ATTN_OK);
    };
    const attn_operand qkv[3] = {ATTN_Q, ATTN_K, ATTN_V};
    const std::vector<float> *vals[3] = {&c.q, &c.k, &c.v};
    for (int w = 0; w < 3; ++w) {
        const attn_operand op = qkv[w];
        attn_status st = ATTN_OK;
        if (c.store[w] == 0)
            st = attn_args_set_f32(a, op, vals[w]->data(), vals[w]->size());
        else if (c.store[w] == 1)
            st = attn_args_set_f16(a, op, c.bits16[w].data(), c.bits16[w].size());
        else if (c.store[w] == 2)
            st = attn_args_set_bf16(a, op, c.bits16[w].data(), c.bits16[w].size());
        else if (c.store[w] == 3)
            st = attn_args_set_i8(a, op, c.bits8[w].data(), c.bits8[w].size());
        else
            st = attn_args_set_fp8(
                a, op, c.store[w] == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2,
                reinterpret_cast<const uint8_t *>(c.bits8[w].data()), c.bits8[w].size());
        REQUIRE_MESSAGE(st == ATTN_OK, attn_last_error());
        if (c.store[w] >= 3 && !c.scales[w].empty())
            REQUIRE(attn_args_set_f32(a, w == 1 ? ATTN_K_SCALE : ATTN_V_SCALE, c.scales[w].data(),
                                      c.scales[w].size()) == ATTN_OK);
    }
    f32(ATTN_BIAS, c.bias);
    f32(ATTN_ALIBI_SLOPES, c.slopes);
    f32(ATTN_SINKS, c.sinks);
    f32(ATTN_Q_SCALE, c.q_scale);
    u8(ATTN_KEY_VALID, c.key_valid);
    u8(ATTN_ALLOWED, c.allowed);
    u8(ATTN_QUERY_VALID, c.query_valid);
    if (!c.seq_lens.empty())
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    r.out.assign(c.p.len(3), kSentinel);
    r.lse.assign(attn_desc_required_len(d, ATTN_LSE), kSentinel);
    r.w.assign(attn_desc_required_len(d, ATTN_WEIGHTS), kSentinel);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, r.out.data(), r.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, r.lse.data(), r.lse.size()) == ATTN_OK);
    if (c.mass) {
        r.mass.assign(attn_desc_required_len(d, ATTN_KEY_MASS), kSentinel);
        REQUIRE(attn_args_set_out_f32(a, ATTN_KEY_MASS, r.mass.data(), r.mass.size()) == ATTN_OK);
    }
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    REQUIRE(attn_args_set_out_f32(a, ATTN_WEIGHTS, r.w.data(), r.w.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_WEIGHTS, a) == ATTN_OK, attn_last_error());
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return r;
}

// The condition of the case's logits: max over (query, key) of |scale| * sum_d |q_d k_d|. An fp32
// dot product is exact to within about sqrt(d) * 2^-24 of that sum (rounding of the partial
// sums), so a case whose logits are ill-conditioned beyond ~50 carries an fp32 error above 1e-5
// however it is computed; its tolerance grows in proportion (core_storage, core_storage_fp8).
inline double max_logit(const VCase &c) {
    const ref::VProblem &p = c.p;
    const double sc = std::fabs(p.eff_scale());
    const size_t group = p.heads_q / p.heads_kv;
    double L = 0.0;
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t j = 0; j < p.seq_k; ++j) {
                    const float *q = c.q.data() + p.at(0, b, h, i);
                    const float *k = c.k.data() + p.at(1, b, h / group, j);
                    double dot = 0.0;
                    for (size_t d = 0; d < p.head_dim; ++d)
                        dot += std::fabs(static_cast<double>(q[d]) * static_cast<double>(k[d]));
                    if (!std::isnan(dot)) L = std::max(L, dot * sc);
                }
    return L;
}

// The case on 1 thread, checked bit for bit (out, lse) against 2 threads (the ISA set by the
// caller); the thread count is left at 2.
inline VRun run_on_1_and_2_threads(const VCase &c) {
    REQUIRE(attn_set_num_threads(1) == ATTN_OK);
    VRun a = run(c);
    REQUIRE(attn_set_num_threads(2) == ATTN_OK);
    const VRun b = run(c);
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
    CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
    return a;
}

// Max error relative to max(1, |reference|); hidden weights must be exactly +0.
inline double check(const VCase &c, const VRun &r, const std::string &what) {
    const ref::VProblem &p = c.p;
    const ref::VResult e = ref::compute_v(p, c.inputs());
    double worst = 0.0;
    std::vector<char> addressed(r.out.size(), 0);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                for (size_t d = 0; d < p.head_dim_v; ++d) {
                    const size_t at = p.at(3, b, h, i) + d;
                    addressed[at] = 1;
                    worst = std::max(worst, ref::rel_err(r.out[at], e.out[row * p.head_dim_v + d]));
                }
                worst = std::max(worst, ref::rel_err(r.lse[row], e.lse[row]));
                for (size_t j = 0; j < p.seq_k; ++j) {
                    const float got = r.w[row * p.seq_k + j];
                    if (e.hidden[row * p.seq_k + j]) {
                        if (got != 0.0f || std::signbit(got)) {
                            FAIL_CHECK(what << ": hidden weight (" << b << "," << h << "," << i
                                            << "," << j << ") = " << got);
                            return 1e30;
                        }
                        continue;
                    }
                    worst = std::max(worst, ref::rel_err(got, e.w[row * p.seq_k + j]));
                }
            }
    for (size_t x = 0; x < r.out.size(); ++x)
        if (!addressed[x] && r.out[x] != kSentinel) {
            FAIL_CHECK(what << ": out[" << x << "] outside the strided rows was written");
            return 1e30;
        }
    if (c.mass)
        for (size_t x = 0; x < e.mass.size(); ++x)
            worst = std::max(worst, ref::rel_err(r.mass[x], e.mass[x]));
    return worst;
}

inline float uni(std::mt19937 &g, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(g);
}

// Inputs for c.p and its masks. Elements the strides skip and padded K/V rows hold NaN.
inline void fill(VCase &c, std::mt19937 &g) {
    const ref::VProblem &p = c.p;
    c.q.assign(p.len(0), kNaN);
    c.k.assign(p.len(1), kNaN);
    c.v.assign(p.len(2), kNaN);
    for (size_t b = 0; b < p.batch; ++b) {
        const size_t klen = c.seq_lens.empty() ? p.seq_k : static_cast<size_t>(c.seq_lens[b]);
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t d = 0; d < p.head_dim; ++d) c.q[p.at(0, b, h, i) + d] = uni(g, -1, 1);
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                const bool pad =
                    j >= klen || (!c.key_valid.empty() && !c.key_valid[b * p.seq_k + j]);
                for (size_t d = 0; d < p.head_dim; ++d)
                    c.k[p.at(1, b, h, j) + d] = pad ? kNaN : uni(g, -1, 1);
                for (size_t d = 0; d < p.head_dim_v; ++d)
                    c.v[p.at(2, b, h, j) + d] = pad ? kNaN : uni(g, -2, 2);
            }
    }
}

inline size_t pick(std::mt19937 &g, size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(g);
}

// A random combination of every variant; `decode` makes seq_q tiny (the decode kernel path).
inline VCase random_vcase(std::mt19937 &g, size_t max_seq, bool decode) {
    VCase c;
    ref::VProblem &p = c.p;
    p.batch = pick(g, 1, 3);
    p.heads_kv = pick(g, 1, 3);
    p.heads_q = p.heads_kv * pick(g, 1, 4);
    p.seq_q = decode ? pick(g, 1, 2) : pick(g, 1, max_seq);
    p.seq_k = pick(g, 1, max_seq);
    p.head_dim = pick(g, 0, 3) == 0 ? pick(g, 1, 140) : pick(g, 1, 40);
    p.head_dim_v = pick(g, 0, 2) == 0 ? pick(g, 1, 72) : p.head_dim;
    p.causal = static_cast<int>(pick(g, 0, 2));
    if (pick(g, 0, 3) == 0) {
        p.has_scale = true;
        p.scale = pick(g, 0, 4) == 0 ? uni(g, 1.5f, 4.0f) : uni(g, -1.0f, 1.0f);
    }
    if (pick(g, 0, 2) == 0) p.window_left = static_cast<long long>(pick(g, 0, max_seq / 2));
    if (pick(g, 0, 3) == 0) p.window_right = static_cast<long long>(pick(g, 0, max_seq / 3));
    if (pick(g, 0, 3) == 0) p.softcap = uni(g, 0.3f, 5.0f);
    p.bias_first = pick(g, 0, 1) != 0;
    p.alibi = pick(g, 0, 3) == 0 ? static_cast<int>(pick(g, 1, 2)) : 0;
    const size_t sink_kind = pick(g, 0, 4); // 0 sinks operand, 1 plus one
    p.plus_one = sink_kind == 1;
    for (int w = 0; w < 5; ++w) {
        const size_t kind = pick(g, 0, 3);
        const size_t H = p.heads(w), S = p.seq(w), D = p.dim(w);
        if (w == 4) { // bias: broadcast batch and/or head, or gaps
            if (kind == 1) {
                p.custom_strides[w] = true;
                p.strides[w][0] = 0;
                p.strides[w][1] = pick(g, 0, 1) ? 0 : S * D;
                p.strides[w][2] = D;
            } else if (kind == 2) {
                p.custom_strides[w] = true;
                p.strides[w][2] = D + pick(g, 0, 3);
                p.strides[w][1] = S * p.strides[w][2] + pick(g, 0, 2);
                p.strides[w][0] = H * p.strides[w][1];
            }
            continue;
        }
        if (kind == 1) { // BSHD
            p.custom_strides[w] = true;
            p.strides[w][0] = S * H * D;
            p.strides[w][1] = D;
            p.strides[w][2] = H * D;
        } else if (kind == 2) { // padded rows
            const size_t rs = D + pick(g, 1, 5);
            p.custom_strides[w] = true;
            p.strides[w][2] = rs;
            p.strides[w][1] = S * rs + pick(g, 0, 3);
            p.strides[w][0] = H * p.strides[w][1] + pick(g, 0, 3);
        }
    }
    p.set_default_strides();
    if (pick(g, 0, 2) == 0) {
        c.key_valid.resize(p.batch * p.seq_k);
        for (auto &x : c.key_valid) x = pick(g, 0, 4) != 0 ? 1 : 0;
    }
    if (pick(g, 0, 3) == 0) {
        c.allowed.resize(p.seq_q * p.seq_k);
        const size_t density = pick(g, 0, 4);
        for (auto &x : c.allowed) x = pick(g, 0, 4) < density + 1 ? 1 : 0;
    }
    if (pick(g, 0, 3) == 0) {
        c.query_valid.resize(p.batch * p.seq_q);
        for (auto &x : c.query_valid) x = pick(g, 0, 3) != 0 ? 1 : 0;
    }
    if (pick(g, 0, 2) == 0) {
        c.seq_lens.resize(p.batch);
        for (auto &x : c.seq_lens) x = static_cast<int32_t>(pick(g, 0, p.seq_k));
    }
    if (pick(g, 0, 2) == 0) {
        c.bias.assign(p.len(4), kNaN);
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_q; ++h)
                for (size_t i = 0; i < p.seq_q; ++i)
                    for (size_t j = 0; j < p.seq_k; ++j)
                        c.bias[p.at(4, b, h, i) + j] = pick(g, 0, 9) == 0 ? -kInf : uni(g, -2, 2);
    }
    if (p.alibi == 1) {
        c.slopes.resize(p.heads_q);
        for (auto &x : c.slopes) x = uni(g, 0.0f, 0.5f);
    }
    if (sink_kind == 0) {
        c.sinks.resize(p.heads_q);
        for (auto &x : c.sinks) x = uni(g, -3, 3);
    }
    c.mass = pick(g, 0, 2) == 0;
    fill(c, g);
    if (pick(g, 0, 3) == 0) { // a per-head factor on Q, negative too
        c.q_scale.resize(p.heads_q);
        for (auto &x : c.q_scale) x = uni(g, -2, 2);
    }
    return c;
}

// A GQA decode step over 9000 keys (the key split), d 128, bottom-right causal, filled (key
// lengths {9000, 5000} when `short_second`), in fp32: the caller picks the storage.
inline VCase long_decode_case(std::mt19937 &g, bool short_second) {
    VCase c;
    ref::VProblem &p = c.p;
    p.batch = 2, p.heads_kv = 2, p.heads_q = 8, p.seq_q = 1, p.seq_k = 9000;
    p.head_dim = 128, p.head_dim_v = 128, p.causal = 2;
    p.set_default_strides();
    if (short_second) c.seq_lens = {9000, 5000};
    fill(c, g);
    return c;
}

// The status and message of one call, for the error cases.
inline bool fails(attn_status got, attn_status want, const char *needle) {
    const char *msg = attn_last_error();
    if (got != want || !std::strstr(msg, needle)) {
        MESSAGE("status " << got << " (want " << want << "), message \"" << std::string(msg)
                          << "\" (want it to contain \"" << std::string(needle) << "\")");
        return false;
    }
    return true;
}

} // namespace vcases
