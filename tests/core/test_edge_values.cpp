// Edge values through every path on every ISA this CPU supports, against the float64 reference
// (tests/reference): a -inf bias over a key whose fp32 score overflows (+inf or NaN), NaN in the
// backward's dOUT or OUT, subnormal softcaps, and dBias rows that alias through their strides.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference_backward.hpp"
#include "variant_cases.hpp"

namespace {

using vcases::isas;
using vcases::kNaN;
using vcases::pick;
using vcases::uni;

constexpr float kNInf = -std::numeric_limits<float>::infinity();

// Forward (out, lse) and then the backward of c with dout; gradients start as NaN so that an
// element the call leaves unwritten shows. dbias when c has a bias.
struct Grads {
    std::vector<float> out, lse, dq, dk, dv, dbias;
};

Grads run_backward(const vcases::VCase &c, const std::vector<float> &dout,
                   const std::vector<float> *out_override = nullptr) {
    attn_desc *d = vcases::make_desc(c);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    auto f32 = [&](attn_operand w, const std::vector<float> &x) {
        if (!x.empty()) REQUIRE(attn_args_set_f32(a, w, x.data(), x.size()) == ATTN_OK);
    };
    f32(ATTN_Q, c.q);
    f32(ATTN_K, c.k);
    f32(ATTN_V, c.v);
    f32(ATTN_BIAS, c.bias);
    f32(ATTN_ALIBI_SLOPES, c.slopes);
    f32(ATTN_SINKS, c.sinks);
    Grads g;
    g.out.assign(c.p.len(3), 0.0f);
    g.lse.assign(attn_desc_required_len(d, ATTN_LSE), 0.0f);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, g.out.data(), g.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, g.lse.data(), g.lse.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    if (out_override) {
        g.out = *out_override;
        REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, g.out.data(), g.out.size()) == ATTN_OK);
    }
    f32(ATTN_DOUT, dout);
    g.dq.assign(c.q.size(), kNaN);
    g.dk.assign(c.k.size(), kNaN);
    g.dv.assign(c.v.size(), kNaN);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DQ, g.dq.data(), g.dq.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DK, g.dk.data(), g.dk.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DV, g.dv.data(), g.dv.size()) == ATTN_OK);
    if (!c.bias.empty()) {
        g.dbias.assign(c.bias.size(), kNaN);
        REQUIRE(attn_args_set_out_f32(a, ATTN_DBIAS, g.dbias.data(), g.dbias.size()) == ATTN_OK);
    }
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK, attn_last_error());
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return g;
}

// max |got - want| / max(max |want|, floor) over the elements where want is not NaN; an element
// where exactly one of got and want is NaN counts as 1e30. Elements the layout skips (want is
// then 0 and got NaN, the fill) are left out through `used`.
double normwise_nan(const std::vector<float> &got, const std::vector<double> &want,
                    const std::vector<char> *used = nullptr, double floor = 2e-2) {
    double scale = floor, err = 0.0;
    for (size_t x = 0; x < want.size(); ++x)
        if ((!used || (*used)[x]) && !std::isnan(want[x]))
            scale = std::max(scale, std::fabs(want[x]));
    for (size_t x = 0; x < want.size(); ++x) {
        if (used && !(*used)[x]) continue;
        const bool gn = std::isnan(got[x]), wn = std::isnan(want[x]);
        if (gn != wn) return 1e30;
        if (wn) continue;
        const double e = std::fabs(static_cast<double>(got[x]) - want[x]);
        if (!(e <= err)) err = e;
    }
    return err / scale;
}

bool all_finite(const std::vector<float> &x) {
    for (float e : x)
        if (!std::isfinite(e)) return false;
    return true;
}

std::string describe(const ref::VProblem &p) {
    return "b " + std::to_string(p.batch) + " hq " + std::to_string(p.heads_q) + " hkv " +
           std::to_string(p.heads_kv) + " sq " + std::to_string(p.seq_q) + " sk " +
           std::to_string(p.seq_k) + " d " + std::to_string(p.head_dim) + " softcap " +
           std::to_string(p.softcap) + " bias_first " + std::to_string(p.bias_first);
}

// A case where every key with j % 3 == 1 has a -inf bias and a K row that makes its fp32 score
// overflow: q and k hold +-1e20 in their first two elements (kind 0: +inf, kind 1: the two
// products of opposite sign, +inf - inf = NaN where a path rounds them apart), while the other
// keys have 0 there, so that their scores stay small and finite. Query rows hold values of
// [-1, 1] elsewhere; bias values of the other keys are in [-1, 1].
vcases::VCase overflow_case(size_t batch, size_t hq, size_t hkv, size_t sq, size_t sk, size_t d,
                            float softcap, bool bias_first, unsigned seed, bool bshd_kv = false) {
    std::mt19937 g(seed);
    vcases::VCase c;
    ref::VProblem &p = c.p;
    p.batch = batch;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.seq_q = sq;
    p.seq_k = sk;
    p.head_dim = p.head_dim_v = d;
    p.softcap = softcap;
    p.bias_first = bias_first;
    if (bshd_kv) // token-major K and V: decode walks the KV heads of a token together
        for (int w = 1; w < 3; ++w) {
            p.custom_strides[w] = true;
            p.strides[w][0] = sk * hkv * d;
            p.strides[w][1] = d;
            p.strides[w][2] = hkv * d;
        }
    p.set_default_strides();
    c.q.resize(p.len(0));
    c.k.resize(p.len(1));
    c.v.resize(p.len(2));
    c.bias.resize(p.len(4));
    for (float &x : c.q) x = uni(g, -1, 1);
    for (float &x : c.v) x = uni(g, -2, 2);
    for (size_t b = 0; b < batch; ++b) {
        for (size_t h = 0; h < hq; ++h)
            for (size_t i = 0; i < sq; ++i) {
                float *q = c.q.data() + p.at(0, b, h, i);
                q[0] = 1e20f;
                if (d > 1) q[1] = 1e20f;
                for (size_t j = 0; j < sk; ++j)
                    c.bias[p.at(4, b, h, i) + j] = j % 3 == 1 ? kNInf : uni(g, -1, 1);
            }
        for (size_t h = 0; h < hkv; ++h)
            for (size_t j = 0; j < sk; ++j) {
                float *k = c.k.data() + p.at(1, b, h, j);
                for (size_t e = 0; e < d; ++e) k[e] = uni(g, -1, 1);
                if (j % 3 == 1) {
                    k[0] = 1e20f;
                    if (d > 1) k[1] = j % 2 ? 1e20f : -1e20f;
                } else {
                    k[0] = 0.0f;
                    if (d > 1) k[1] = 0.0f;
                }
            }
    }
    return c;
}

} // namespace

TEST_CASE("a -inf bias hides a key whose score overflows: the smallest case") {
    // q = [1e20], k = [1e-20, 1e20], v = [1, 2], bias = [0, -inf]: key 1's score is +inf in fp32
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int first = 0; first < 2; ++first)
            for (float cap : {0.0f, 3.0f}) {
                vcases::VCase c;
                c.p.seq_k = 2;
                c.p.softcap = cap;
                c.p.bias_first = first != 0;
                c.p.set_default_strides();
                c.q = {1e20f};
                c.k = {1e-20f, 1e20f};
                c.v = {1.0f, 2.0f};
                c.bias = {0.0f, kNInf};
                const vcases::VRun r = vcases::run(c);
                INFO(isa << " bias_first " << first << " softcap " << cap);
                const float s0 = cap > 0.0f ? cap * std::tanh(1.0f / cap) : 1.0f;
                CHECK(r.out[0] == 1.0f);
                CHECK(r.lse[0] == doctest::Approx(s0).epsilon(1e-6));
                CHECK(r.w[0] == 1.0f);
                CHECK(r.w[1] == 0.0f);
                const Grads gr = run_backward(c, {1.0f});
                CHECK(gr.dq[0] == 0.0f); // one visible key: dS = P (dP - D) = 0
                CHECK(gr.dk[0] == 0.0f);
                CHECK(gr.dk[1] == 0.0f);
                CHECK(gr.dv[0] == 1.0f);
                CHECK(gr.dv[1] == 0.0f);
                CHECK(gr.dbias[0] == 0.0f);
                CHECK(gr.dbias[1] == 0.0f);
            }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("a -inf bias hides a key whose score overflows: prefill and decode shapes, forward, "
          "weights and backward, every ISA") {
    struct Shape {
        size_t b, hq, hkv, sq, sk, d;
        bool bshd_kv;
    };
    // prefill-like (many query rows, several key tiles), decode-like (seq_q 1, head_dim a
    // multiple of every vector width: the decode path; with token-major K/V the KV heads walk
    // the keys together), and the row-block path at seq_q 1
    const Shape shapes[] = {{1, 2, 1, 37, 150, 8, false},
                            {2, 4, 2, 1, 150, 32, false},
                            {2, 8, 4, 1, 150, 32, true},
                            {1, 1, 1, 70, 40, 3, false},
                            {2, 2, 2, 1, 130, 2, false}};
    double worst = 0.0;
    unsigned seed = 1;
    for (const Shape &s : shapes)
        for (int first = 0; first < 2; ++first)
            for (float cap : {0.0f, 2.5f}) {
                const vcases::VCase c = overflow_case(s.b, s.hq, s.hkv, s.sq, s.sk, s.d, cap,
                                                      first != 0, seed++, s.bshd_kv);
                std::mt19937 g(seed);
                std::vector<float> dout(c.p.len(3));
                for (float &x : dout) x = uni(g, -1, 1);
                const ref::VGrads e = ref::backward_v(c.p, c.inputs(), dout.data(), c.bias.size());
                for (const std::string &isa : isas()) {
                    REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
                    const std::string what = isa + ": " + describe(c.p);
                    const vcases::VRun r = vcases::run(c);
                    const double fe = vcases::check(c, r, what);
                    CHECK_MESSAGE(fe <= 1e-4, what << ": forward/weights error " << fe);
                    CHECK_MESSAGE(all_finite(r.out), what);
                    CHECK_MESSAGE(all_finite(r.lse), what);
                    CHECK_MESSAGE(all_finite(r.w), what);
                    const Grads gr = run_backward(c, dout);
                    const double errs[4] = {normwise_nan(gr.dq, e.dq), normwise_nan(gr.dk, e.dk),
                                            normwise_nan(gr.dv, e.dv),
                                            normwise_nan(gr.dbias, e.dbias)};
                    for (int x = 0; x < 4; ++x) {
                        worst = std::max(worst, errs[x]);
                        CHECK_MESSAGE(errs[x] <= 1e-4,
                                      what << ": gradient " << x << " error " << errs[x]);
                    }
                    CHECK_MESSAGE(all_finite(gr.dq), what);
                    CHECK_MESSAGE(all_finite(gr.dk), what);
                    CHECK_MESSAGE(all_finite(gr.dbias), what);
                }
            }
    attn_set_isa(nullptr);
    MESSAGE("-inf bias over overflowing scores: max error " << worst);
}

TEST_CASE("a -inf bias hides a key whose score overflows: bf16 Q and K, every ISA") {
    double worst = 0.0;
    unsigned seed = 100;
    for (size_t sq : {size_t(1), size_t(29)})
        for (int first = 0; first < 2; ++first) {
            vcases::VCase c =
                overflow_case(1, 2, 1, sq, 100, 16, first ? 2.0f : 0.0f, first != 0, seed++);
            // Q and K stored in bf16 (1e20 is representable there, not in fp16); the reference
            // sees the widened values
            for (int w = 0; w < 2; ++w) {
                std::vector<float> &x = w == 0 ? c.q : c.k;
                c.store[w] = 2;
                c.bits16[w].resize(x.size());
                REQUIRE(attn_convert_f32_to_bf16(x.data(), c.bits16[w].data(), x.size()) ==
                        ATTN_OK);
                REQUIRE(attn_convert_bf16_to_f32(c.bits16[w].data(), x.data(), x.size()) ==
                        ATTN_OK);
            }
            for (const std::string &isa : isas()) {
                REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
                const std::string what = isa + " bf16: " + describe(c.p);
                const vcases::VRun r = vcases::run(c);
                const double fe = vcases::check(c, r, what);
                worst = std::max(worst, fe);
                CHECK_MESSAGE(fe <= 1e-4, what << ": error " << fe);
                CHECK_MESSAGE(all_finite(r.out), what);
                CHECK_MESSAGE(all_finite(r.lse), what);
            }
        }
    attn_set_isa(nullptr);
    MESSAGE("bf16, -inf bias over overflowing scores: max error " << worst);
}

TEST_CASE("NaN in dout propagates into the gradients as IEEE arithmetic says: the smallest case") {
    // q = (.3, -.2), k = ((.5, .1), (-.4, .2)), v = ((1, 2), (3, 4)), dout = (NaN, 1):
    // dV = (NaN, p0, NaN, p1), dQ and dK NaN
    vcases::VCase c;
    c.p.seq_k = 2;
    c.p.head_dim = c.p.head_dim_v = 2;
    c.p.set_default_strides();
    c.q = {0.3f, -0.2f};
    c.k = {0.5f, 0.1f, -0.4f, 0.2f};
    c.v = {1.0f, 2.0f, 3.0f, 4.0f};
    const std::vector<float> dout = {kNaN, 1.0f};
    const ref::VGrads e = ref::backward_v(c.p, c.inputs(), dout.data(), 0);
    const ref::VResult f = ref::compute_v(c.p, c.inputs());
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        INFO(isa);
        const Grads gr = run_backward(c, dout);
        CHECK(std::isnan(gr.dv[0]));
        CHECK(gr.dv[1] == doctest::Approx(f.w[0]).epsilon(1e-6));
        CHECK(std::isnan(gr.dv[2]));
        CHECK(gr.dv[3] == doctest::Approx(f.w[1]).epsilon(1e-6));
        for (float x : gr.dq) CHECK(std::isnan(x));
        for (float x : gr.dk) CHECK(std::isnan(x));
        CHECK(normwise_nan(gr.dq, e.dq) <= 1e-5);
        CHECK(normwise_nan(gr.dk, e.dk) <= 1e-5);
        CHECK(normwise_nan(gr.dv, e.dv) <= 1e-5);
    }
    attn_set_isa(nullptr);
}

TEST_CASE("NaN in dout or out propagates into the gradients: prefill and decode shapes, masks, "
          "every ISA") {
    double worst = 0.0;
    for (int n = 0; n < 8; ++n) {
        std::mt19937 g(500 + n);
        vcases::VCase c;
        ref::VProblem &p = c.p;
        const bool decode = n % 2 == 1;
        p.batch = 1 + n % 2;
        p.heads_kv = 1 + n / 4;
        p.heads_q = p.heads_kv * 2;
        p.seq_q = decode ? 1 : 70 + n;
        p.seq_k = 100 + 30 * n;
        p.head_dim = decode ? 32 : 8 + n;
        p.head_dim_v = p.head_dim;
        p.causal = n % 3 == 2 ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_BOTTOM_RIGHT;
        if (n >= 4) p.window_left = 40;
        p.softcap = n % 4 == 3 ? 3.0f : 0.0f;
        p.set_default_strides();
        vcases::fill(c, g);
        if (n % 2 == 0) {
            c.bias.resize(p.len(4));
            for (float &x : c.bias) x = pick(g, 0, 9) == 0 ? kNInf : uni(g, -1, 1);
        }
        std::vector<float> dout(p.len(3));
        for (float &x : dout) x = uni(g, -1, 1);
        // one NaN in a few rows of dout (the first element of one, the last of another)
        const size_t rows = p.batch * p.heads_q * p.seq_q;
        for (size_t r = 0; r < rows; r += 7)
            dout[r * p.head_dim_v + (r % 2 ? p.head_dim_v - 1 : 0)] = kNaN;
        const ref::VGrads e = ref::backward_v(p, c.inputs(), dout.data(), c.bias.size());
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const std::string what = isa + ": " + describe(p) + " case " + std::to_string(n);
            const Grads gr = run_backward(c, dout);
            const double errs[4] = {normwise_nan(gr.dq, e.dq), normwise_nan(gr.dk, e.dk),
                                    normwise_nan(gr.dv, e.dv), normwise_nan(gr.dbias, e.dbias)};
            for (int x = 0; x < 4; ++x) {
                worst = std::max(worst, errs[x]);
                CHECK_MESSAGE(errs[x] <= 1e-4, what << ": gradient " << x << " error " << errs[x]);
            }
            // a NaN in the forward's out of one row: that row's dQ is NaN (D = dO . O), dV does
            // not involve D (bit-identical to the run with a clean out), and every other row's
            // dQ is as in the run with a clean out
            const std::vector<float> clean(dout.size(), 0.25f);
            const Grads base = run_backward(c, clean);
            std::vector<float> out_nan = base.out;
            const size_t row = rows / 2; // a row with a visible key (causal bottom-right / tl)
            out_nan[row * p.head_dim_v] = kNaN;
            const Grads gn = run_backward(c, clean, &out_nan);
            CHECK_MESSAGE(std::memcmp(gn.dv.data(), base.dv.data(), gn.dv.size() * 4) == 0, what);
            const size_t b = row / (p.heads_q * p.seq_q), h = row / p.seq_q % p.heads_q,
                         i = row % p.seq_q;
            const size_t q0 = p.at(0, b, h, i);
            bool row_nan = true, others_same = true;
            for (size_t x = 0; x < gn.dq.size(); ++x) {
                const bool in_row = x >= q0 && x < q0 + p.head_dim;
                if (in_row)
                    row_nan &= std::isnan(gn.dq[x]);
                else
                    others_same &= std::memcmp(&gn.dq[x], &base.dq[x], 4) == 0;
            }
            CHECK_MESSAGE(row_nan, what);
            CHECK_MESSAGE(others_same, what);
        }
    }
    attn_set_isa(nullptr);
    MESSAGE("NaN in dout: max error of the non-NaN gradients " << worst);
}

TEST_CASE("a subnormal softcap: q = 0 gives uniform weights and finite gradients, every path and "
          "ISA") {
    struct Shape {
        size_t sq, sk, d;
    };
    const Shape shapes[] = {{20, 30, 8}, {1, 40, 32}, {1, 40, 3}};
    for (float cap : {1.4e-45f, 1e-39f})
        for (const Shape &s : shapes)
            for (int with_bias = 0; with_bias < 3; ++with_bias) {
                std::mt19937 g(7);
                vcases::VCase c;
                ref::VProblem &p = c.p;
                p.heads_q = 2;
                p.seq_q = s.sq;
                p.seq_k = s.sk;
                p.head_dim = p.head_dim_v = s.d;
                p.softcap = cap;
                p.bias_first = with_bias == 2;
                p.set_default_strides();
                vcases::fill(c, g);
                std::fill(c.q.begin(), c.q.end(), 0.0f);
                if (with_bias) { // tiny bias values: the weights stay uniform
                    c.bias.resize(p.len(4));
                    for (float &x : c.bias) x = uni(g, -1e-39f, 1e-39f);
                }
                std::vector<float> dout(p.len(3));
                for (float &x : dout) x = uni(g, -1, 1);
                const ref::VGrads e = ref::backward_v(p, c.inputs(), dout.data(), c.bias.size());
                for (const std::string &isa : isas()) {
                    REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
                    const std::string what = isa + ": softcap " + std::to_string(cap) + " " +
                                             describe(p) + " bias " + std::to_string(with_bias);
                    const vcases::VRun r = vcases::run(c);
                    CHECK_MESSAGE(all_finite(r.out), what);
                    CHECK_MESSAGE(all_finite(r.lse), what);
                    bool uniform = true;
                    for (float w : r.w)
                        uniform &= std::fabs(w - 1.0f / static_cast<float>(s.sk)) <= 1e-6f;
                    CHECK_MESSAGE(uniform, what);
                    const double fe = vcases::check(c, r, what);
                    CHECK_MESSAGE(fe <= 1e-5, what << ": error " << fe);
                    const Grads gr = run_backward(c, dout);
                    CHECK_MESSAGE(all_finite(gr.dq), what);
                    CHECK_MESSAGE(all_finite(gr.dk), what);
                    CHECK_MESSAGE(all_finite(gr.dv), what);
                    CHECK_MESSAGE(normwise_nan(gr.dq, e.dq) <= 1e-4, what);
                    CHECK_MESSAGE(normwise_nan(gr.dk, e.dk) <= 1e-4, what);
                    CHECK_MESSAGE(normwise_nan(gr.dv, e.dv) <= 1e-4, what);
                    if (with_bias) CHECK_MESSAGE(all_finite(gr.dbias), what);
                }
            }
    attn_set_isa(nullptr);
}

TEST_CASE("dbias rows that alias through non-zero strides: bit-identical for 1, 2 and 4 threads, "
          "equal to the float64 sum") {
    struct Alias {
        size_t batch, hq, hkv, sq, sk, d;
        size_t strides[3];
    };
    // heads overlapping by a key (head stride 1), batch entries overlapping (batch stride 1),
    // and one KV head whose keys are split into chunks with rows one key apart (row stride 1)
    const Alias cases[] = {{1, 8, 8, 64, 128, 16, {0, 1, 128}},
                           {8, 1, 1, 64, 128, 16, {1, 0, 128}},
                           {1, 2, 1, 40, 2100, 8, {0, 0, 1}}};
    for (const Alias &a : cases) {
        std::mt19937 g(11);
        vcases::VCase c;
        ref::VProblem &p = c.p;
        p.batch = a.batch;
        p.heads_q = a.hq;
        p.heads_kv = a.hkv;
        p.seq_q = a.sq;
        p.seq_k = a.sk;
        p.head_dim = p.head_dim_v = a.d;
        p.custom_strides[4] = true;
        for (int x = 0; x < 3; ++x) p.strides[4][x] = a.strides[x];
        p.set_default_strides();
        vcases::fill(c, g);
        c.bias.resize(p.len(4));
        for (float &x : c.bias) x = uni(g, -1, 1);
        std::vector<float> dout(p.len(3));
        for (float &x : dout) x = uni(g, -1, 1);
        const ref::VGrads e = ref::backward_v(p, c.inputs(), dout.data(), c.bias.size());
        const std::string what = describe(p) + " bias strides (" + std::to_string(a.strides[0]) +
                                 ", " + std::to_string(a.strides[1]) + ", " +
                                 std::to_string(a.strides[2]) + ")";
        REQUIRE(attn_set_num_threads(1) == ATTN_OK);
        const Grads one = run_backward(c, dout);
        const double err = normwise_nan(one.dbias, e.dbias);
        CHECK_MESSAGE(err <= 1e-4, what << ": dbias error " << err);
        int differ = 0, runs = 0;
        for (size_t threads : {2u, 4u}) {
            REQUIRE(attn_set_num_threads(threads) == ATTN_OK);
            for (int n = 0; n < 50; ++n, ++runs) {
                const Grads m = run_backward(c, dout);
                differ += std::memcmp(m.dbias.data(), one.dbias.data(), m.dbias.size() * 4) != 0 ||
                          std::memcmp(m.dk.data(), one.dk.data(), m.dk.size() * 4) != 0 ||
                          std::memcmp(m.dq.data(), one.dq.data(), m.dq.size() * 4) != 0;
            }
        }
        CHECK_MESSAGE(differ == 0, what << ": " << differ << " of " << runs
                                        << " runs on 2 and 4 threads differ from 1 thread");
    }
    attn_set_num_threads(0);
}
