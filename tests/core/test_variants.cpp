// The 0.2 variants (window, softcap, bias, ALiBi, sinks, "+1", query padding, per-batch key
// lengths, head_dim_v, key mass) through attn_args / attn_run, on every ISA this CPU supports,
// against the float64 pipeline of reference.hpp (ref::compute_v).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kSentinel = 777.0f;

std::vector<std::string> isas() {
    std::vector<std::string> out;
    for (const char *name : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(name) == ATTN_OK) out.push_back(name);
    attn_set_isa(nullptr);
    return out;
}

struct VCase {
    ref::VProblem p;
    std::vector<float> q, k, v, bias, slopes, sinks;
    std::vector<uint8_t> key_valid, allowed, query_valid;
    std::vector<int32_t> seq_lens;
    bool mass = false;
    int weights_mode = ATTN_WEIGHTS_SOFTMAX;

    ref::VInputs inputs() const {
        ref::VInputs in;
        in.q = q.data();
        in.k = k.data();
        in.v = v.data();
        in.bias = bias.empty() ? nullptr : bias.data();
        in.slopes = slopes.empty() ? nullptr : slopes.data();
        in.sinks = sinks.empty() ? nullptr : sinks.data();
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

attn_desc *make_desc(const VCase &c) {
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
    seti(ATTN_PARAM_SOFTMAX_PLUS_ONE, p.plus_one);
    seti(ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v));
    seti(ATTN_PARAM_WEIGHTS_MODE, c.weights_mode);
    const attn_operand ops[5] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT, ATTN_BIAS};
    for (int w = 0; w < 5; ++w) {
        if (p.custom_strides[w])
            REQUIRE_MESSAGE(attn_desc_set_strides(d, ops[w], p.strides[w][0], p.strides[w][1],
                                                  p.strides[w][2]) == ATTN_OK,
                            attn_last_error());
        REQUIRE(attn_desc_required_len(d, ops[w]) == p.len(w));
    }
    return d;
}

VRun run(const VCase &c) {
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
    f32(ATTN_Q, c.q);
    f32(ATTN_K, c.k);
    f32(ATTN_V, c.v);
    f32(ATTN_BIAS, c.bias);
    f32(ATTN_ALIBI_SLOPES, c.slopes);
    f32(ATTN_SINKS, c.sinks);
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

// Max error relative to max(1, |reference|); hidden weights must be exactly +0.
double check(const VCase &c, const VRun &r, const std::string &what) {
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

float uni(std::mt19937 &g, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(g);
}

// Inputs for c.p and its masks. Elements the strides skip and padded K/V rows hold NaN.
void fill(VCase &c, std::mt19937 &g) {
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

size_t pick(std::mt19937 &g, size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(g);
}

// A random combination of every variant; `decode` makes seq_q tiny (the decode kernel path).
VCase random_vcase(std::mt19937 &g, size_t max_seq, bool decode) {
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
    return c;
}

} // namespace

TEST_CASE("1000+ random combinations of every variant match the float64 reference on every ISA") {
    std::mt19937 g(20261201);
    const auto list = isas();
    double worst = 0.0;
    size_t runs = 0;
    for (int n = 0; n < 1100; ++n) {
        const VCase c = random_vcase(g, n % 10 == 0 ? 150 : 40, n % 4 == 0);
        for (const std::string &isa : list) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun r = run(c);
            const double err = check(c, r, "case " + std::to_string(n) + " on " + isa);
            worst = std::max(worst, err);
            ++runs;
            if (err > 1e-5) {
                const ref::VProblem &p = c.p;
                FAIL_CHECK("case " << n << " on " << isa << ": max rel error " << err << " (b "
                                   << p.batch << " hq " << p.heads_q << " hkv " << p.heads_kv
                                   << " sq " << p.seq_q << " sk " << p.seq_k << " d " << p.head_dim
                                   << " dv " << p.head_dim_v << " causal " << p.causal << " window "
                                   << p.window_left << "," << p.window_right << " softcap "
                                   << p.softcap << " alibi " << p.alibi << " bias "
                                   << !c.bias.empty() << " sinks " << !c.sinks.empty() << " +1 "
                                   << p.plus_one << " qv " << !c.query_valid.empty() << " lens "
                                   << !c.seq_lens.empty() << ")");
                break;
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(runs << " runs, max rel error " << worst);
    CHECK(worst <= 1e-5);
}

TEST_CASE("variants: 1 and 2 threads give bit-identical results") {
    std::mt19937 g(7);
    for (int n = 0; n < 60; ++n) {
        const VCase c = random_vcase(g, n % 3 == 0 ? 300 : 70, n % 5 == 0);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
            const VRun a = run(c);
            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
            const VRun b = run(c);
            CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
            CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
            CHECK(std::memcmp(a.w.data(), b.w.data(), a.w.size() * 4) == 0);
            if (c.mass) CHECK(std::memcmp(a.mass.data(), b.mass.data(), a.mass.size() * 4) == 0);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("decode with a key split (seq_k 9000) merges sinks, windows and lengths exactly") {
    std::mt19937 g(11);
    for (int n = 0; n < 6; ++n) {
        VCase c;
        ref::VProblem &p = c.p;
        p.batch = 2, p.heads_kv = 2, p.heads_q = 4, p.seq_q = 1, p.seq_k = 9000;
        p.head_dim = 64, p.head_dim_v = n % 2 ? 48 : 64, p.causal = 2;
        if (n >= 2) p.window_left = 3000;
        if (n >= 4) p.softcap = 2.0f;
        p.set_default_strides();
        c.sinks = {0.5f, -1.0f, 2.0f, 0.0f};
        if (n % 3 == 0) c.seq_lens = {9000, 6100};
        fill(c, g);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
            const VRun a = run(c);
            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
            const VRun b = run(c);
            CHECK(check(c, a, "split decode " + isa) <= 1e-5);
            CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
            CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("the window rule of the header: diag(i) - left <= j <= diag(i) + right") {
    // seq_q 4, seq_k 6, BOTTOM_RIGHT (diag = i + 2), window (1, 0): query i sees keys i+1..i+2.
    VCase c;
    ref::VProblem &p = c.p;
    p.seq_q = 4, p.seq_k = 6, p.head_dim = 4, p.head_dim_v = 4, p.causal = 2, p.window_left = 1;
    p.set_default_strides();
    std::mt19937 g(3);
    fill(c, g);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        const VRun r = run(c);
        for (size_t i = 0; i < 4; ++i)
            for (size_t j = 0; j < 6; ++j) {
                const bool vis = j == i + 1 || j == i + 2;
                CHECK_MESSAGE((r.w[i * 6 + j] != 0.0f) == vis, isa << " q" << i << " k" << j);
            }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("sinks: a fully masked row stays zero; the sink only joins the denominator") {
    VCase c;
    ref::VProblem &p = c.p;
    p.seq_q = 3, p.seq_k = 5, p.head_dim = 8, p.head_dim_v = 8;
    p.set_default_strides();
    c.allowed.assign(15, 1);
    for (size_t j = 0; j < 5; ++j) c.allowed[5 + j] = 0; // query 1 sees nothing
    c.sinks = {1.5f};
    std::mt19937 g(4);
    fill(c, g);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        const VRun r = run(c);
        CHECK(check(c, r, isa) <= 1e-5);
        for (size_t d = 0; d < 8; ++d) CHECK(r.out[8 + d] == 0.0f);
        CHECK(r.lse[1] == -kInf);
        double sum = 0;
        for (size_t j = 0; j < 5; ++j) sum += r.w[j];
        CHECK(sum < 0.999); // part of the mass went to the sink
    }
    attn_set_isa(nullptr);
}

TEST_CASE("weights modes write the score stages (ONNX qk_matmul_output_mode 0..2)") {
    // bias_first = 1 here: the CAPPED stage is softcap(s + bias), masked.
    std::mt19937 g(5);
    for (int mode :
         {ATTN_WEIGHTS_SCORES, ATTN_WEIGHTS_MASKED, ATTN_WEIGHTS_CAPPED, ATTN_WEIGHTS_SOFTCAPPED}) {
        VCase c;
        ref::VProblem &p = c.p;
        p.batch = 2, p.heads_q = 2, p.seq_q = 5, p.seq_k = 7, p.head_dim = 6, p.head_dim_v = 6;
        p.causal = 1, p.softcap = 1.5f, p.bias_first = true, p.window_left = 3;
        p.set_default_strides();
        c.weights_mode = mode;
        c.key_valid.assign(14, 1);
        c.key_valid[7 + 6] = 0;
        c.bias.resize(p.len(4));
        for (auto &x : c.bias) x = uni(g, -1, 1);
        fill(c, g);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun r = run(c);
            for (size_t b = 0; b < 2; ++b)
                for (size_t h = 0; h < 2; ++h)
                    for (size_t i = 0; i < 5; ++i)
                        for (size_t j = 0; j < 7; ++j) {
                            double dot = 0;
                            for (size_t d = 0; d < 6; ++d)
                                dot += double(c.q[p.at(0, b, h, i) + d]) *
                                       double(c.k[p.at(1, b, 0, j) + d]);
                            double want = dot * p.eff_scale();
                            const bool pad = !c.key_valid[b * 7 + j];
                            const bool hidden =
                                pad || j > i || static_cast<long long>(j) < (long long)i - 3;
                            if (mode == ATTN_WEIGHTS_SOFTCAPPED) {
                                want = pad ? -INFINITY : ref::softcap_of(want, p.softcap);
                            } else if (mode != ATTN_WEIGHTS_SCORES) {
                                want += c.bias[p.at(4, b, h, i) + j];
                                if (mode == ATTN_WEIGHTS_CAPPED)
                                    want = ref::softcap_of(want, p.softcap);
                                if (hidden) want = -INFINITY;
                            } else if (pad) {
                                want = -INFINITY; // padding is never read
                            }
                            const float got = r.w[((b * 2 + h) * 5 + i) * 7 + j];
                            CHECK_MESSAGE(ref::rel_err(got, want) <= 1e-5,
                                          isa << " mode " << mode << " (" << b << h << i << j
                                              << ") got " << got << " want " << want);
                        }
        }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("standard ALiBi slopes follow Press et al. / BLOOM") {
    for (size_t n : {1u, 2u, 3u, 8u, 12u}) {
        const std::vector<double> s = ref::standard_slopes(n);
        VCase c;
        ref::VProblem &p = c.p;
        p.heads_q = p.heads_kv = n, p.seq_q = 3, p.seq_k = 9, p.head_dim = 4, p.head_dim_v = 4;
        p.causal = 1, p.alibi = ATTN_ALIBI_STANDARD;
        p.set_default_strides();
        std::mt19937 g(6);
        fill(c, g);
        CHECK(check(c, run(c), "alibi standard") <= 1e-5);
        if (n == 8) CHECK(s[0] == 0.5);
        if (n == 8) CHECK(s[7] == std::pow(2.0, -8.0));
    }
}

TEST_CASE("large scale: scale * q.k is finite, so is the answer (no overflow of scale * q)") {
    // scale 1e30, q = [1e10], k = [1e-20, 0], v = [1, 2]: scores 1e20 and 0.
    const float q[1] = {1e10f}, k[2] = {1e-20f, 0.0f}, v[2] = {1.0f, 2.0f};
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        attn_desc *d = nullptr;
        REQUIRE(attn_desc_create(&d, 1, 1, 1, 1, 2, 1) == ATTN_OK);
        REQUIRE(attn_desc_set_scale(d, 1e30f) == ATTN_OK);
        float out = -1, lse = -1, w[2] = {-1, -1};
        REQUIRE(attn_forward(d, q, k, v, nullptr, nullptr, &out, &lse) == ATTN_OK);
        REQUIRE(attn_weights(d, q, k, nullptr, nullptr, w) == ATTN_OK);
        CHECK_MESSAGE(out == 1.0f, isa);
        CHECK(w[0] == 1.0f);
        CHECK(w[1] == 0.0f);
        CHECK(lse == doctest::Approx(1e20).epsilon(1e-6));
        attn_desc_destroy(d);
    }
    attn_set_isa(nullptr);
}
