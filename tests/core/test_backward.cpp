// The backward pass (ATTN_OP_BACKWARD) on every ISA this CPU supports, against the float64
// reference backward of tests/reference/reference_backward.hpp, which is itself checked against
// central finite differences of the float64 forward (ref::compute_v).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

// A variants case (tests/core/variant_cases.hpp) plus the gradient of OUT.
struct Case : vcases::VCase {
    std::vector<float> dout;
    bool want_dsinks = false;
};

Case random_case(std::mt19937 &g) {
    Case c;
    ref::VProblem &p = c.p;
    p.batch = pick(g, 1, 2);
    p.heads_kv = pick(g, 1, 2);
    p.heads_q = p.heads_kv * pick(g, 1, 3);
    p.seq_q = pick(g, 0, 4) == 0 ? 1 : pick(g, 1, 40);
    p.seq_k = pick(g, 1, 50);
    p.head_dim = pick(g, 0, 3) == 0 ? pick(g, 1, 7) : pick(g, 8, 70);
    if (pick(g, 0, 5) == 0) { // several key blocks (128) and query blocks (64) of the kernel
        p.batch = 1;
        p.heads_kv = 1;
        p.heads_q = pick(g, 1, 2);
        p.seq_q = pick(g, 1, 4) == 1 ? pick(g, 1, 3) : pick(g, 50, 150);
        p.seq_k = pick(g, 100, 300);
        p.head_dim = pick(g, 1, 40);
    }
    if (pick(g, 0, 4) == 0) { // a scale of its own, |scale| > 1 (not folded into q) or negative
        p.has_scale = true;
        p.scale = pick(g, 0, 1) == 0 ? uni(g, 1.5f, 3.0f) * (pick(g, 0, 1) ? 1.0f : -1.0f)
                                     : uni(g, -1.0f, 1.0f);
    }
    p.head_dim_v = pick(g, 0, 2) == 0 ? pick(g, 1, 40) : p.head_dim;
    p.causal = static_cast<int>(pick(g, 0, 2));
    if (pick(g, 0, 3) == 0) p.window_left = static_cast<long long>(pick(g, 0, 15));
    if (pick(g, 0, 4) == 0) p.window_right = static_cast<long long>(pick(g, 0, 10));
    if (pick(g, 0, 3) == 0) p.softcap = uni(g, 0.5f, 5.0f);
    p.bias_first = pick(g, 0, 1) == 1;
    p.alibi = pick(g, 0, 4) == 0 ? static_cast<int>(pick(g, 1, 2)) : 0;
    const bool bias = pick(g, 0, 2) == 0;
    if (bias && pick(g, 0, 2) == 0) { // broadcast over batch (and heads)
        p.custom_strides[4] = true;
        p.strides[4][0] = 0;
        p.strides[4][1] = pick(g, 0, 1) ? 0 : p.seq_q * p.seq_k;
        p.strides[4][2] = p.seq_k;
    }
    p.set_default_strides();
    if (p.custom_strides[4] && p.strides[4][1] == 0) p.strides[4][0] = 0;
    const size_t sink_kind = pick(g, 0, 4);
    p.plus_one = sink_kind == 1;
    c.q.resize(p.len(0));
    c.k.resize(p.len(1));
    c.v.resize(p.len(2));
    c.dout.resize(p.len(3));
    // a scale above 1 gets queries as much smaller: the logits stay as well-conditioned as
    // with the default scale (what is tested is the path that does not fold it into q)
    const float qmax = p.has_scale && std::fabs(p.scale) > 1.0f ? 1.5f / std::fabs(p.scale) : 1.5f;
    for (float &x : c.q) x = uni(g, -qmax, qmax);
    for (float &x : c.k) x = uni(g, -1.5f, 1.5f);
    for (float &x : c.v) x = uni(g, -2, 2);
    for (float &x : c.dout) x = uni(g, -1, 1);
    if (bias) {
        c.bias.resize(p.len(4));
        for (float &x : c.bias) x = pick(g, 0, 15) == 0 ? -INFINITY : uni(g, -1, 1);
    }
    if (p.alibi == 1) {
        c.slopes.resize(p.heads_q);
        for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
    }
    if (sink_kind == 0) {
        c.sinks.resize(p.heads_q);
        for (float &x : c.sinks) x = uni(g, -2, 2);
        c.want_dsinks = true;
    }
    if (pick(g, 0, 2) == 0) {
        c.key_valid.resize(p.batch * p.seq_k);
        for (auto &x : c.key_valid) x = pick(g, 0, 4) != 0;
    }
    if (pick(g, 0, 3) == 0) {
        c.allowed.resize(p.seq_q * p.seq_k);
        for (auto &x : c.allowed) x = pick(g, 0, 5) != 0;
    }
    if (pick(g, 0, 3) == 0) {
        c.query_valid.resize(p.batch * p.seq_q);
        for (auto &x : c.query_valid) x = pick(g, 0, 3) != 0;
    }
    if (pick(g, 0, 2) == 0) {
        c.seq_lens.resize(p.batch);
        for (auto &x : c.seq_lens) x = static_cast<int32_t>(pick(g, 0, p.seq_k));
    }
    // padded keys hold NaN: never read
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                const bool pad = (!c.seq_lens.empty() && j >= static_cast<size_t>(c.seq_lens[b])) ||
                                 (!c.key_valid.empty() && !c.key_valid[b * p.seq_k + j]);
                if (!pad) continue;
                for (size_t d = 0; d < p.head_dim; ++d) c.k[p.at(1, b, h, j) + d] = kNaN;
                for (size_t d = 0; d < p.head_dim_v; ++d) c.v[p.at(2, b, h, j) + d] = kNaN;
            }
    if (pick(g, 0, 3) == 0) { // a per-head factor on Q (dQ carries it)
        c.q_scale.resize(p.heads_q);
        for (float &x : c.q_scale) x = uni(g, 0.5f, 1.5f) * (pick(g, 0, 1) ? 1.0f : -1.0f);
    }
    return c;
}

// After a test has given c.p a shape of its own: default strides, finite operands of that shape
// drawn from `seed` (bias too, when the case has one), no masks or lengths.
void refill_operands(Case &c, unsigned seed) {
    c.p.custom_strides[4] = false;
    c.p.set_default_strides();
    std::mt19937 g2(seed);
    c.q.resize(c.p.len(0));
    c.k.resize(c.p.len(1));
    c.v.resize(c.p.len(2));
    c.dout.resize(c.p.len(3));
    for (auto *x : {&c.q, &c.k, &c.v, &c.dout})
        for (float &e : *x) e = uni(g2, -1, 1);
    if (!c.bias.empty()) {
        c.bias.resize(c.p.len(4));
        for (float &e : c.bias) e = uni(g2, -1, 1);
    }
    c.key_valid.clear();
    c.allowed.clear();
    c.query_valid.clear();
    c.seq_lens.clear();
}

// refill_operands, and constant ALiBi slopes and sinks (where the case has them) for the new
// head count.
void refill(Case &c, unsigned seed) {
    refill_operands(c, seed);
    if (!c.slopes.empty()) c.slopes.assign(c.p.heads_q, 0.125f);
    if (!c.sinks.empty()) c.sinks.assign(c.p.heads_q, 0.5f);
    if (!c.q_scale.empty()) {
        c.q_scale.resize(c.p.heads_q);
        for (size_t h = 0; h < c.p.heads_q; ++h) c.q_scale[h] = h % 2 ? -0.75f : 1.25f;
    }
}

attn_desc *make_desc(const Case &c) {
    const ref::VProblem &p = c.p;
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim) ==
            ATTN_OK);
    attn_desc_set_int(d, ATTN_PARAM_CAUSAL, p.causal);
    attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, p.window_left);
    attn_desc_set_int(d, ATTN_PARAM_WINDOW_RIGHT, p.window_right);
    attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, static_cast<double>(p.softcap));
    attn_desc_set_int(d, ATTN_PARAM_BIAS_FIRST, p.bias_first);
    attn_desc_set_int(d, ATTN_PARAM_ALIBI, p.alibi);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_DIAGONAL, p.diagonal) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_ALIBI_FORM, p.alibi_form) == ATTN_OK);
    if (p.slopes_batch)
        REQUIRE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, p.slopes_batch, 1, 0) == ATTN_OK);
    attn_desc_set_int(d, ATTN_PARAM_SOFTMAX_PLUS_ONE, p.plus_one);
    if (p.has_scale)
        REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SCALE, static_cast<double>(p.scale)) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v)) ==
            ATTN_OK);
    if (p.custom_strides[4])
        REQUIRE(attn_desc_set_strides(d, ATTN_BIAS, p.strides[4][0], p.strides[4][1],
                                      p.strides[4][2]) == ATTN_OK);
    return d;
}

struct Grads {
    std::vector<float> dq, dk, dv, dbias, dsinks;
};

// Q, K, V and DOUT stored in 16 bits: type[x] 0 = fp32 (c's values), 1 = f16, 2 = bf16 bits in
// bits[x] (x: 0 Q, 1 K, 2 V, 3 DOUT).
struct Storage16 {
    int type[4] = {0, 0, 0, 0};
    std::vector<uint16_t> bits[4];
};

Grads run_backward(const Case &c, const Storage16 *st = nullptr) {
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
    // the forward runs on the fp32 values (c's are the widened 16-bit ones); the backward binds
    // the 16-bit operands below
    f32(ATTN_BIAS, c.bias);
    f32(ATTN_ALIBI_SLOPES, c.slopes);
    f32(ATTN_SINKS, c.sinks);
    f32(ATTN_Q_SCALE, c.q_scale);
    f32(ATTN_DOUT, c.dout);
    u8(ATTN_KEY_VALID, c.key_valid);
    u8(ATTN_ALLOWED, c.allowed);
    u8(ATTN_QUERY_VALID, c.query_valid);
    if (!c.seq_lens.empty())
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    std::vector<float> out(c.p.len(3)), lse(attn_desc_required_len(d, ATTN_LSE));
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, std::string(attn_last_error()));
    Grads gr;
    gr.dq.assign(c.q.size(), kNaN);
    gr.dk.assign(c.k.size(), kNaN);
    gr.dv.assign(c.v.size(), kNaN);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DQ, gr.dq.data(), gr.dq.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DK, gr.dk.data(), gr.dk.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DV, gr.dv.data(), gr.dv.size()) == ATTN_OK);
    if (!c.bias.empty()) {
        gr.dbias.assign(c.bias.size(), kNaN);
        REQUIRE(attn_args_set_out_f32(a, ATTN_DBIAS, gr.dbias.data(), gr.dbias.size()) == ATTN_OK);
    }
    if (c.want_dsinks) {
        gr.dsinks.assign(c.p.heads_q, kNaN);
        REQUIRE(attn_args_set_out_f32(a, ATTN_DSINKS, gr.dsinks.data(), gr.dsinks.size()) ==
                ATTN_OK);
    }
    const attn_operand ops[4] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_DOUT};
    for (int x = 0; st && x < 4; ++x) {
        const std::vector<uint16_t> &h = st->bits[x];
        if (st->type[x] == 1) REQUIRE(attn_args_set_f16(a, ops[x], h.data(), h.size()) == ATTN_OK);
        if (st->type[x] == 2) REQUIRE(attn_args_set_bf16(a, ops[x], h.data(), h.size()) == ATTN_OK);
    }
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK, std::string(attn_last_error()));
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return gr;
}

// The gradients of c on 1 thread, CHECKed bit-identical (memcmp) to those on 2 threads.
Grads run_1_and_2_threads(const Case &c) {
    REQUIRE(attn_set_num_threads(1) == ATTN_OK);
    const Grads a = run_backward(c);
    REQUIRE(attn_set_num_threads(2) == ATTN_OK);
    const Grads b = run_backward(c);
    auto same = [](const std::vector<float> &x, const std::vector<float> &y) {
        return x.size() == y.size() &&
               (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    };
    CHECK(same(a.dq, b.dq));
    CHECK(same(a.dk, b.dk));
    CHECK(same(a.dv, b.dv));
    CHECK(same(a.dbias, b.dbias));
    CHECK(same(a.dsinks, b.dsinks));
    return a;
}

// Normwise relative error: max |got - want| / max(max |want|, 2e-2). The floor keeps a
// gradient that is ~0 by cancellation (a row with one visible key has dS = P (dP - D) = 0) from
// turning fp32 rounding noise (~1e-7 absolute) into a large "relative" error.
double normwise(const std::vector<float> &got, const std::vector<double> &want) {
    double scale = 2e-2, err = 0.0;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    for (size_t x = 0; x < want.size(); ++x) {
        const double e = std::fabs(static_cast<double>(got[x]) - want[x]);
        if (!(e <= err)) err = e; // NaN counts
    }
    return err / scale;
}

} // namespace

TEST_CASE("the float64 reference backward matches central finite differences") {
    std::mt19937 g(3);
    double worst = 0.0;
    for (int n = 0; n < 25; ++n) {
        Case c = random_case(g);
        c.p.seq_q = std::min<size_t>(c.p.seq_q, 6);
        c.p.seq_k = std::min<size_t>(c.p.seq_k, 7);
        c.p.head_dim = std::min<size_t>(c.p.head_dim, 5);
        c.p.head_dim_v = std::min<size_t>(c.p.head_dim_v, 4);
        // rebuild the small case's buffers (no padding NaN: finite differences need them finite)
        refill_operands(c, static_cast<unsigned>(n));
        const bool bias = !c.bias.empty(), sinks = !c.sinks.empty();
        const ref::VGrads gr = ref::backward_v(c.p, c.inputs(), c.dout.data(), c.bias.size());
        auto loss = [&](const Case &x) {
            const ref::VResult r = ref::compute_v(x.p, x.inputs());
            double l = 0.0;
            for (size_t b = 0; b < x.p.batch; ++b)
                for (size_t h = 0; h < x.p.heads_q; ++h)
                    for (size_t i = 0; i < x.p.seq_q; ++i)
                        for (size_t d = 0; d < x.p.head_dim_v; ++d)
                            l += r.out[((b * x.p.heads_q + h) * x.p.seq_q + i) * x.p.head_dim_v +
                                       d] *
                                 static_cast<double>(x.dout[x.p.at(3, b, h, i) + d]);
            return l;
        };
        auto fd = [&](std::vector<float> Case::*field, const std::vector<double> &want) {
            double scale = 1e-3, err = 0.0;
            for (double w : want) scale = std::max(scale, std::fabs(w));
            for (size_t x = 0; x < (c.*field).size(); ++x) {
                Case up = c, dn = c;
                const float h = 1e-2f;
                (up.*field)[x] += h;
                (dn.*field)[x] -= h;
                const double delta = static_cast<double>((up.*field)[x]) - (dn.*field)[x];
                const double num = (loss(up) - loss(dn)) / delta;
                err = std::max(err, std::fabs(num - want[x]));
            }
            return err / scale;
        };
        worst = std::max(worst, fd(&Case::q, gr.dq));
        worst = std::max(worst, fd(&Case::k, gr.dk));
        worst = std::max(worst, fd(&Case::v, gr.dv));
        if (bias) worst = std::max(worst, fd(&Case::bias, gr.dbias));
        if (sinks) worst = std::max(worst, fd(&Case::sinks, gr.dsinks));
    }
    MESSAGE("reference backward vs central differences (h = 1e-2): max normwise error " << worst);
    CHECK(worst <= 1e-3);
}

TEST_CASE("backward matches the float64 reference on every ISA, hidden keys get exactly 0") {
    std::mt19937 g(20261201);
    const std::vector<std::string> names = isas();
    double worst[5] = {0, 0, 0, 0, 0};
    size_t runs = 0;
    const int kCases = 520;
    for (int n = 0; n < kCases; ++n) {
        const Case c = random_case(g);
        const ref::VGrads e = ref::backward_v(c.p, c.inputs(), c.dout.data(), c.bias.size());
        // keys no query sees: their dK / dV rows must be exactly +0
        std::vector<char> seen(c.p.len(1), 0);
        for (size_t x = 0; x < e.dk.size(); ++x) seen[x] = e.dk[x] != 0.0;
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Grads gr = run_backward(c);
            const double errs[5] = {normwise(gr.dq, e.dq), normwise(gr.dk, e.dk),
                                    normwise(gr.dv, e.dv),
                                    c.bias.empty() ? 0.0 : normwise(gr.dbias, e.dbias),
                                    c.want_dsinks ? normwise(gr.dsinks, e.dsinks) : 0.0};
            for (int x = 0; x < 5; ++x) {
                worst[x] = std::max(worst[x], errs[x]);
                if (!(errs[x] <= 1e-4))
                    FAIL_CHECK("case " << n << " on " << isa << ": gradient " << x << " error "
                                       << errs[x] << " (b " << c.p.batch << " hq " << c.p.heads_q
                                       << " hkv " << c.p.heads_kv << " sq " << c.p.seq_q << " sk "
                                       << c.p.seq_k << " d " << c.p.head_dim << "/"
                                       << c.p.head_dim_v << " causal " << c.p.causal << " window "
                                       << c.p.window_left << "," << c.p.window_right << " softcap "
                                       << c.p.softcap << " bias " << c.bias.size() << " first "
                                       << c.p.bias_first << " alibi " << c.p.alibi << " sinks "
                                       << c.sinks.size() << " +1 " << c.p.plus_one << " kv "
                                       << c.key_valid.size() << " al " << c.allowed.size() << " qv "
                                       << c.query_valid.size() << " lens " << c.seq_lens.size()
                                       << ")");
            }
            for (size_t b = 0; b < c.p.batch; ++b)
                for (size_t h = 0; h < c.p.heads_kv; ++h)
                    for (size_t j = 0; j < c.p.seq_k; ++j) {
                        bool any = false;
                        for (size_t d = 0; d < c.p.head_dim_v; ++d)
                            any |= e.dv[c.p.at(2, b, h, j) + d] != 0.0;
                        if (any) continue; // a key some query sees
                        for (size_t d = 0; d < c.p.head_dim; ++d) {
                            const float x = gr.dk[c.p.at(1, b, h, j) + d];
                            if (x != 0.0f || std::signbit(x))
                                FAIL_CHECK("case " << n << ": hidden key " << j << " dK = " << x);
                        }
                        for (size_t d = 0; d < c.p.head_dim_v; ++d) {
                            const float x = gr.dv[c.p.at(2, b, h, j) + d];
                            if (x != 0.0f || std::signbit(x))
                                FAIL_CHECK("case " << n << ": hidden key " << j << " dV = " << x);
                        }
                    }
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kCases << " cases x " << names.size() << " ISAs = " << runs
                   << " runs; max normwise error dQ " << worst[0] << ", dK " << worst[1] << ", dV "
                   << worst[2] << ", dBias " << worst[3] << ", dSinks " << worst[4]);
}

TEST_CASE("backward gradients are bit-identical on 1 and 2 threads") {
    std::mt19937 g(8);
    for (int n = 0; n < 10; ++n) {
        Case c = random_case(g);
        // big enough to be spread over the pool
        c.p.batch = 2;
        c.p.heads_kv = 2;
        c.p.heads_q = 4;
        c.p.seq_q = 150 + 13 * n;
        c.p.seq_k = 170 + 7 * n;
        refill(c, static_cast<unsigned>(n));
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            run_1_and_2_threads(c);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE(
    "backward of one KV head split into key chunks: exact, bit-identical on 1 and 2 threads") {
    // batch 1 x 1 KV head: the scheduler splits the keys into chunks of 1024 (dQ partials summed
    // in chunk order) so that the call uses every thread
    std::mt19937 g(31);
    double worst = 0;
    for (int n = 0; n < 6; ++n) {
        Case c = random_case(g);
        c.p.batch = 1;
        c.p.heads_kv = 1;
        c.p.heads_q = 1 + n % 2;
        c.p.seq_q = n == 5 ? 1 : 40 + 11 * n;
        c.p.seq_k = 1100 + 450 * n; // 2 to 4 chunks
        c.p.head_dim = 8 + 5 * n;
        c.p.head_dim_v = n % 3 == 0 ? 5 + n : c.p.head_dim;
        refill(c, static_cast<unsigned>(100 + n));
        const ref::VGrads e = ref::backward_v(c.p, c.inputs(), c.dout.data(), c.bias.size());
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Grads a = run_1_and_2_threads(c);
            const double errs[3] = {normwise(a.dq, e.dq), normwise(a.dk, e.dk),
                                    normwise(a.dv, e.dv)};
            for (double x : errs) {
                worst = std::max(worst, x);
                CHECK_MESSAGE(x <= 1e-4, "case " << n << " on " << isa << ": error " << x);
            }
            if (!a.dsinks.empty()) CHECK(normwise(a.dsinks, e.dsinks) <= 1e-4);
            if (!a.dbias.empty()) CHECK(normwise(a.dbias, e.dbias) <= 1e-4);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
    MESSAGE("key-chunked backward: max normwise error " << worst);
}

TEST_CASE("backward refuses missing and overlapping operands, naming them") {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 2, 1, 3, 4, 8) == ATTN_OK);
    std::vector<float> q(2 * 3 * 8, 0.5f), k(4 * 8, 0.25f), v(4 * 8, 1.0f), out(q.size()), lse(6),
        dout(q.size(), 1.0f), dq(q.size()), dk(k.size());
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
    attn_args_set_f32(a, ATTN_K, k.data(), k.size());
    attn_args_set_f32(a, ATTN_V, v.data(), v.size());
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
    auto expect = [&](attn_status st, const char *msg) {
        CHECK(attn_run(d, ATTN_OP_BACKWARD, a) == st);
        CHECK_MESSAGE(std::string(attn_last_error()).find(msg) != std::string::npos,
                      attn_last_error());
    };
    expect(ATTN_ERR_NULL_POINTER, "dout is NULL");
    attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size());
    expect(ATTN_ERR_NULL_POINTER, "lse is NULL: ATTN_OP_BACKWARD needs the lse");
    attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size());
    expect(ATTN_ERR_NULL_POINTER, "nothing to compute");
    attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size() - 1);
    expect(ATTN_ERR_INVALID_ARGUMENT, "dq has 47 elements, needs at least 48");
    attn_args_set_out_f32(a, ATTN_DQ, q.data(), q.size());
    expect(ATTN_ERR_INVALID_ARGUMENT, "dq overlaps q");
    attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size());
    attn_args_set_f32(a, ATTN_DOUT, dout.data(), 5);
    expect(ATTN_ERR_INVALID_ARGUMENT, "dout has 5 elements");
    attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size());
    attn_args_set_out_f32(a, ATTN_DK, out.data(), 32);
    expect(ATTN_ERR_INVALID_ARGUMENT, "overlaps");
    attn_args_set_out_f32(a, ATTN_DK, dk.data(), dk.size());
    std::vector<float> dsinks(2);
    attn_args_set_out_f32(a, ATTN_DSINKS, dsinks.data(), 2);
    expect(ATTN_ERR_INVALID_ARGUMENT, "dsinks is bound but sinks is not");
    attn_args_set_out_f32(a, ATTN_DSINKS, nullptr, 0);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK); // a valid forward, then its backward
    CHECK(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK);
    attn_args_destroy(a);
    attn_desc_destroy(d);

    // Q broadcast over its two heads (head stride 0): dq would be a sum over the heads.
    REQUIRE(attn_desc_create(&d, 1, 2, 1, 3, 4, 8) == ATTN_OK);
    REQUIRE(attn_desc_set_strides(d, ATTN_Q, 24, 0, 8) == ATTN_OK);
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_Q, q.data(), 24);
    attn_args_set_f32(a, ATTN_K, k.data(), k.size());
    attn_args_set_f32(a, ATTN_V, v.data(), v.size());
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
    attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size());
    attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size());
    attn_args_set_out_f32(a, ATTN_DQ, dq.data(), 24);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    expect(ATTN_ERR_INVALID_ARGUMENT, "dq is bound but the q strides (24, 0, 8) overlap rows");
    attn_args_set_out_f32(a, ATTN_DQ, nullptr, 0);
    attn_args_set_out_f32(a, ATTN_DK, dk.data(), dk.size());
    CHECK(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK); // dk of a broadcast q is fine
    attn_args_destroy(a);
    attn_desc_destroy(d);
}

TEST_CASE("backward with f16 / bf16 Q, K, V and DOUT matches float64 over the widened values, "
          "gradients in fp32") {
    std::mt19937 g(16);
    const std::vector<std::string> names = isas();
    double worst = 0;
    size_t runs = 0, typed[3] = {0, 0, 0};
    const int kCases = 160;
    for (int n = 0; n < kCases; ++n) {
        Case c = random_case(g);
        Storage16 st;
        std::vector<float> *vals[4] = {&c.q, &c.k, &c.v, &c.dout};
        for (int x = 0; x < 4; ++x) {
            // every operand 16-bit in most cases, one type for all in some
            st.type[x] = n % 3 == 0 ? 1 + n % 2 : static_cast<int>(pick(g, 0, 2));
            ++typed[st.type[x]];
            if (st.type[x] == 0) continue;
            std::vector<float> &v = *vals[x];
            st.bits[x].resize(v.size());
            if (st.type[x] == 1) {
                REQUIRE(attn_convert_f32_to_f16(v.data(), st.bits[x].data(), v.size()) == ATTN_OK);
                REQUIRE(attn_convert_f16_to_f32(st.bits[x].data(), v.data(), v.size()) == ATTN_OK);
            } else {
                // bf16 by truncation to the upper half (exactly representable; NaN kept)
                for (size_t e = 0; e < v.size(); ++e) {
                    uint32_t w;
                    std::memcpy(&w, &v[e], 4);
                    st.bits[x][e] = static_cast<uint16_t>(w >> 16);
                    w &= 0xffff0000u;
                    std::memcpy(&v[e], &w, 4);
                }
            }
        }
        // the reference runs on the widened values (c now holds them)
        const ref::VGrads e = ref::backward_v(c.p, c.inputs(), c.dout.data(), c.bias.size());
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Grads gr = run_backward(c, &st);
            const Grads g32 = run_backward(c); // the same widened values bound as fp32
            const double errs[3] = {normwise(gr.dq, e.dq), normwise(gr.dk, e.dk),
                                    normwise(gr.dv, e.dv)};
            for (int x = 0; x < 3; ++x) {
                worst = std::max(worst, errs[x]);
                if (!(errs[x] <= 1e-4))
                    FAIL_CHECK("case " << n << " on " << isa << ": gradient " << x << " error "
                                       << errs[x] << " (types q " << st.type[0] << " k "
                                       << st.type[1] << " v " << st.type[2] << " dout "
                                       << st.type[3] << ")");
            }
            // widening is exact: bit-identical to fp32 operands holding the widened values
            auto same = [](const std::vector<float> &x, const std::vector<float> &y) {
                return x.size() == y.size() &&
                       (x.empty() || std::memcmp(x.data(), y.data(), x.size() * 4) == 0);
            };
            CHECK(same(gr.dq, g32.dq));
            CHECK(same(gr.dk, g32.dk));
            CHECK(same(gr.dv, g32.dv));
            CHECK(same(gr.dbias, g32.dbias));
            CHECK(same(gr.dsinks, g32.dsinks));
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kCases << " cases x " << names.size() << " ISAs = " << runs << " runs (operands fp32 "
                   << typed[0] << ", f16 " << typed[1] << ", bf16 " << typed[2]
                   << "); max normwise error " << worst);
}

TEST_CASE("backward with the window / ALiBi diagonal, the ALiBi form and per-batch slopes matches "
          "the float64 reference on every ISA") {
    std::mt19937 g(20261206);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t asym = 0;
    const int kCases = 200;
    for (int n = 0; n < kCases; ++n) {
        Case c = random_case(g);
        ref::VProblem &p = c.p;
        p.diagonal = static_cast<int>(pick(g, 0, 2));
        p.alibi_form = static_cast<int>(pick(g, 0, 1));
        if (pick(g, 0, 1)) p.window_left = static_cast<long long>(pick(g, 0, 15));
        if (pick(g, 0, 1)) p.window_right = static_cast<long long>(pick(g, 0, 10));
        p.alibi = pick(g, 0, 3) == 0 ? ATTN_ALIBI_STANDARD : ATTN_ALIBI_OPERAND;
        p.slopes_batch = 0;
        c.slopes.clear();
        if (p.alibi == ATTN_ALIBI_OPERAND) {
            if (pick(g, 0, 1)) p.slopes_batch = p.heads_q + pick(g, 0, 2);
            c.slopes.resize((p.batch - 1) * p.slopes_batch + p.heads_q);
            for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
        }
        asym += p.seq_q != p.seq_k;
        const ref::VGrads e = ref::backward_v(p, c.inputs(), c.dout.data(), c.bias.size());
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Grads gr = run_backward(c);
            const double errs[4] = {normwise(gr.dq, e.dq), normwise(gr.dk, e.dk),
                                    normwise(gr.dv, e.dv),
                                    c.bias.empty() ? 0.0 : normwise(gr.dbias, e.dbias)};
            for (int x = 0; x < 4; ++x) {
                worst = std::max(worst, errs[x]);
                if (!(errs[x] <= 1e-4))
                    FAIL_CHECK("case " << n << " on " << isa << ": gradient " << x << " error "
                                       << errs[x] << " (sq " << p.seq_q << " sk " << p.seq_k
                                       << " causal " << p.causal << " diagonal " << p.diagonal
                                       << " window " << p.window_left << "," << p.window_right
                                       << " alibi " << p.alibi << " form " << p.alibi_form
                                       << " slopes_batch " << p.slopes_batch << ")");
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kCases << " cases (" << asym << " with seq_q != seq_k) x " << names.size()
                   << " ISAs; max normwise error " << worst);
    CHECK(asym > kCases / 2);
}

TEST_CASE("varlen backward with the window / ALiBi diagonal, the ALiBi form and per-sequence "
          "slopes matches the float64 reference of each sequence on every ISA") {
    std::mt19937 g(20261207);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t seqs = 0, asym = 0;
    for (int n = 0; n < 60; ++n) {
        const size_t B = pick(g, 1, 4), HKV = pick(g, 1, 2), HQ = HKV * pick(g, 1, 2);
        const size_t D = pick(g, 0, 2) == 0 ? pick(g, 1, 7) : pick(g, 8, 40);
        const int causal = static_cast<int>(pick(g, 0, 2)),
                  diagonal = static_cast<int>(pick(g, 0, 2));
        const int form = static_cast<int>(pick(g, 0, 1));
        const long long wl = pick(g, 0, 1) ? static_cast<long long>(pick(g, 0, 12)) : -1;
        const long long wr = pick(g, 0, 1) ? static_cast<long long>(pick(g, 0, 8)) : -1;
        const size_t sb = pick(g, 0, 1) ? HQ + pick(g, 0, 2) : 0; // slopes' batch stride
        std::vector<size_t> lq(B), lk(B);
        for (size_t b = 0; b < B; ++b) {
            lq[b] = pick(g, 1, 20);
            lk[b] = pick(g, 0, 1) ? lq[b] + pick(g, 0, 25) : pick(g, 1, 30);
        }
        const size_t maxq = *std::max_element(lq.begin(), lq.end());
        const size_t maxk = *std::max_element(lk.begin(), lk.end());
        std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
        for (size_t b = 0; b < B; ++b) {
            cu_q[b + 1] = cu_q[b] + static_cast<int32_t>(lq[b]);
            cu_k[b + 1] = cu_k[b] + static_cast<int32_t>(lk[b]);
        }
        const size_t TQ = static_cast<size_t>(cu_q[B]), TK = static_cast<size_t>(cu_k[B]);
        // token-major packs: q, out, dout [TQ][HQ][D], k, v [TK][HKV][D]
        std::vector<float> q(TQ * HQ * D), k(TK * HKV * D), v(TK * HKV * D), dout(TQ * HQ * D);
        for (float &x : q) x = uni(g, -1, 1);
        for (float &x : k) x = uni(g, -1, 1);
        for (float &x : v) x = uni(g, -2, 2);
        for (float &x : dout) x = uni(g, -1, 1);
        std::vector<float> slopes((B - 1) * sb + HQ, kNaN);
        for (size_t b = 0; b < (sb ? B : 1); ++b)
            for (size_t h = 0; h < HQ; ++h) slopes[b * sb + h] = uni(g, 0.01f, 0.5f);

        attn_desc *d = nullptr;
        REQUIRE(attn_desc_create(&d, B, HQ, HKV, maxq, maxk, D) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, causal) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, wl) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_RIGHT, wr) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_ALIBI, ATTN_ALIBI_OPERAND) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_DIAGONAL, diagonal) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_ALIBI_FORM, form) == ATTN_OK);
        if (sb) REQUIRE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, sb, 1, 0) == ATTN_OK);
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            std::vector<float> out(q.size()), lse(HQ * TQ), dq(q.size(), kNaN), dk(k.size(), kNaN),
                dv(v.size(), kNaN);
            attn_args *a = nullptr;
            REQUIRE(attn_args_create(&a) == ATTN_OK);
            REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
            REQUIRE(attn_args_set_f32(a, ATTN_K, k.data(), k.size()) == ATTN_OK);
            REQUIRE(attn_args_set_f32(a, ATTN_V, v.data(), v.size()) == ATTN_OK);
            REQUIRE(attn_args_set_f32(a, ATTN_ALIBI_SLOPES, slopes.data(), slopes.size()) ==
                    ATTN_OK);
            REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu_q.data(), cu_q.size()) == ATTN_OK);
            REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_K, cu_k.data(), cu_k.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()) == ATTN_OK);
            REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
            REQUIRE(attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ATTN_DK, dk.data(), dk.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ATTN_DV, dv.data(), dv.size()) == ATTN_OK);
            REQUIRE_MESSAGE(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK, attn_last_error());
            attn_args_destroy(a);
            // each sequence alone: a dense [1][H][len][D] problem for the reference
            for (size_t b = 0; b < B; ++b) {
                ref::VProblem p;
                p.heads_q = HQ, p.heads_kv = HKV, p.seq_q = lq[b], p.seq_k = lk[b];
                p.head_dim = p.head_dim_v = D, p.causal = causal;
                p.window_left = wl, p.window_right = wr, p.alibi = ATTN_ALIBI_OPERAND;
                p.diagonal = diagonal, p.alibi_form = form;
                p.set_default_strides();
                auto gather = [&](const std::vector<float> &pack, size_t heads, size_t len,
                                  int32_t start) {
                    std::vector<float> dense(heads * len * D);
                    for (size_t h = 0; h < heads; ++h)
                        for (size_t t = 0; t < len; ++t)
                            std::memcpy(&dense[(h * len + t) * D],
                                        &pack[((start + t) * heads + h) * D], D * sizeof(float));
                    return dense;
                };
                const std::vector<float> qb = gather(q, HQ, lq[b], cu_q[b]),
                                         kb = gather(k, HKV, lk[b], cu_k[b]),
                                         vb = gather(v, HKV, lk[b], cu_k[b]),
                                         dob = gather(dout, HQ, lq[b], cu_q[b]);
                ref::VInputs in;
                in.q = qb.data(), in.k = kb.data(), in.v = vb.data();
                in.slopes = slopes.data() + b * sb;
                const ref::VGrads e = ref::backward_v(p, in, dob.data(), 0);
                const double errs[3] = {normwise(gather(dq, HQ, lq[b], cu_q[b]), e.dq),
                                        normwise(gather(dk, HKV, lk[b], cu_k[b]), e.dk),
                                        normwise(gather(dv, HKV, lk[b], cu_k[b]), e.dv)};
                for (int x = 0; x < 3; ++x) {
                    worst = std::max(worst, errs[x]);
                    if (!(errs[x] <= 1e-4))
                        FAIL_CHECK("case " << n << " seq " << b << " on " << isa << ": gradient "
                                           << x << " error " << errs[x] << " (lq " << lq[b]
                                           << " lk " << lk[b] << " causal " << causal
                                           << " diagonal " << diagonal << " window " << wl << ","
                                           << wr << " form " << form << " slopes_batch " << sb
                                           << ")");
                }
                if (isa == names[0]) {
                    ++seqs;
                    asym += lq[b] != lk[b];
                }
            }
        }
        attn_desc_destroy(d);
    }
    attn_set_isa(nullptr);
    MESSAGE(seqs << " sequences (" << asym << " with len_q != len_k) x " << names.size()
                 << " ISAs; max normwise error " << worst);
    CHECK(asym * 2 > seqs);
    CHECK(worst <= 1e-4);
}
