// ATTN_PARAM_COMPUTE = ATTN_COMPUTE_FP16 through the public API: the fp16 fast path against the
// float64 reference within the bound capi/attn.h states, on random and adversarial inputs (large
// head_dim, large logits, long sequences); exact fallback (bit-identical to EXACT) wherever the
// path does not apply; masks exact; 1 vs 2 threads identical. On a CPU without AVX512-FP16 every
// FP16 request must equal EXACT bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "attn.h"
#include "reference.hpp"
#include "variant_cases.hpp"

namespace {

bool cpu_has_fp16() { // cpuid leaf 7: EDX bit 23 AVX512_FP16 (with AVX-512 itself)
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return ((d >> 23) & 1u) && attn_set_isa("avx512fp16") == ATTN_OK &&
           attn_set_isa(nullptr) == ATTN_OK;
#else
    return false;
#endif
}

using vcases::pick;
using vcases::uni;

struct Case {
    ref::VProblem p;
    bool f16 = false;     // Q, K, V stored as fp16 (the reference reads their fp32 values)
    bool lens = false;    // ATTN_SEQ_LENS_K
    float softcap = 0.0f; // a variant the fast path does not take
    std::vector<float> q, k, v;
    std::vector<uint16_t> q16, k16, v16;
    std::vector<int32_t> seq_lens;
};

void fill(Case &c, std::mt19937 &g, float qk_range, float v_range) {
    c.p.set_default_strides();
    c.q.resize(c.p.len(0));
    c.k.resize(c.p.len(1));
    c.v.resize(c.p.len(2));
    for (float &x : c.q) x = uni(g, -qk_range, qk_range);
    for (float &x : c.k) x = uni(g, -qk_range, qk_range);
    for (float &x : c.v) x = uni(g, -v_range, v_range);
    if (c.f16) { // the values the library sees are the fp16 ones
        for (auto *pair : {&c.q, &c.k, &c.v}) {
            std::vector<uint16_t> h(pair->size());
            REQUIRE(attn_convert_f32_to_f16(pair->data(), h.data(), h.size()) == ATTN_OK);
            REQUIRE(attn_convert_f16_to_f32(h.data(), pair->data(), h.size()) == ATTN_OK);
            (pair == &c.q ? c.q16 : pair == &c.k ? c.k16 : c.v16) = h;
        }
    }
    if (c.lens) {
        c.seq_lens.resize(c.p.batch);
        for (auto &l : c.seq_lens) l = static_cast<int32_t>(pick(g, 1, c.p.seq_k));
    }
}

struct Out {
    std::vector<float> out, lse;
};

Out run(const Case &c, int compute, size_t threads = 0) {
    const ref::VProblem &p = c.p;
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim) ==
            ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, p.causal) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, p.window_left) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_RIGHT, p.window_right) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_DIAGONAL, p.diagonal) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v)) ==
            ATTN_OK);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, c.softcap) == ATTN_OK);
    REQUIRE_MESSAGE(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, compute) == ATTN_OK,
                    attn_last_error());
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    if (c.f16) {
        REQUIRE(attn_args_set_f16(a, ATTN_Q, c.q16.data(), c.q16.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f16(a, ATTN_K, c.k16.data(), c.k16.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f16(a, ATTN_V, c.v16.data(), c.v16.size()) == ATTN_OK);
    } else {
        REQUIRE(attn_args_set_f32(a, ATTN_Q, c.q.data(), c.q.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_K, c.k.data(), c.k.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V, c.v.data(), c.v.size()) == ATTN_OK);
    }
    if (c.lens)
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    Out o;
    o.out.assign(p.batch * p.heads_q * p.seq_q * p.head_dim_v, 777.0f);
    o.lse.assign(p.batch * p.heads_q * p.seq_q, 777.0f);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, o.out.data(), o.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, o.lse.data(), o.lse.size()) == ATTN_OK);
    if (threads) REQUIRE(attn_set_num_threads(threads) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    if (threads) attn_set_num_threads(0);
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return o;
}

// The bound of capi/attn.h for this case: the smaller of the worst case (per score
// ds = 2^-11 * 34 * scale * |q| |k| with the largest norms, per output 2^-11 * 68 * max|v| plus
// the score error's share 2 (e^(2 ds) - 1) max|v|) and 1e-2 max|v|.
double out_bound(const Case &c) {
    const ref::VProblem &p = c.p;
    auto norm = [&](const float *row) { // Euclidean norm of a head_dim row
        double s = 0;
        for (size_t x = 0; x < p.head_dim; ++x) s += double(row[x]) * double(row[x]);
        return std::sqrt(s);
    };
    double qn = 0, kn = 0, vm = 0;
    for (size_t b = 0; b < p.batch; ++b) {
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) qn = std::max(qn, norm(&c.q[p.at(0, b, h, i)]));
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                kn = std::max(kn, norm(&c.k[p.at(1, b, h, j)]));
                for (size_t x = 0; x < p.head_dim_v; ++x)
                    vm = std::max(vm, std::fabs(static_cast<double>(c.v[p.at(2, b, h, j) + x])));
            }
    }
    const double u = std::ldexp(1.0, -11), ds = u * 34 * p.eff_scale() * qn * kn;
    // the worst case above, and what the header promises in practice: 1e-2 max|v|
    return std::min(vm * (u * 68 + 2 * (std::exp(2 * ds) - 1)), 1e-2 * vm);
}

// max |got - want| over the outputs (and whether every row without visible keys is 0 / -inf)
double max_abs_err(const Case &c, const Out &o, const ref::VResult &e) {
    double worst = 0;
    for (size_t x = 0; x < o.out.size(); ++x) {
        const double err = std::fabs(static_cast<double>(o.out[x]) - e.out[x]);
        if (!(err <= worst)) worst = std::isnan(err) ? 1e30 : err;
    }
    for (size_t x = 0; x < o.lse.size(); ++x)
        if (std::isinf(e.lse[x])) {
            if (o.lse[x] != e.lse[x]) worst = 1e30;
            for (size_t y = 0; y < c.p.head_dim_v; ++y)
                if (o.out[x * c.p.head_dim_v + y] != 0.0f) worst = 1e30;
        }
    return worst;
}

ref::VResult reference(const Case &c) {
    ref::VInputs in;
    in.q = c.q.data();
    in.k = c.k.data();
    in.v = c.v.data();
    in.seq_lens_k = c.lens ? c.seq_lens.data() : nullptr;
    ref::VProblem p = c.p;
    p.softcap = c.softcap;
    return ref::compute_v(p, in);
}

Case random_case(std::mt19937 &g) {
    Case c;
    ref::VProblem &p = c.p;
    p.batch = pick(g, 1, 2);
    p.heads_kv = pick(g, 1, 3);
    p.heads_q = p.heads_kv * pick(g, 1, 4);
    p.seq_q = pick(g, 8, 150); // >= 16 rows per KV head take the fast path
    p.seq_k = pick(g, 1, 300);
    p.head_dim = pick(g, 0, 3) == 0 ? pick(g, 1, 40) : 16 * pick(g, 1, 8);
    p.head_dim_v = pick(g, 0, 3) == 0 ? pick(g, 1, 80) : p.head_dim;
    p.causal = static_cast<int>(pick(g, 0, 2));
    if (pick(g, 0, 3) == 0) p.window_left = static_cast<long long>(pick(g, 0, 40));
    if (pick(g, 0, 4) == 0) p.window_right = static_cast<long long>(pick(g, 0, 40));
    c.f16 = pick(g, 0, 2) == 0;
    c.lens = pick(g, 0, 3) == 0;
    return c;
}

} // namespace

TEST_CASE("ATTN_PARAM_COMPUTE: default EXACT, FP16 settable, values past the last mode refused") {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 1, 1, 4, 4, 8) == ATTN_OK);
    int64_t v = -1;
    REQUIRE(attn_desc_get_int(d, ATTN_PARAM_COMPUTE, &v) == ATTN_OK);
    CHECK(v == ATTN_COMPUTE_EXACT);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, ATTN_COMPUTE_FP16) == ATTN_OK);
    REQUIRE(attn_desc_get_int(d, ATTN_PARAM_COMPUTE, &v) == ATTN_OK);
    CHECK(v == ATTN_COMPUTE_FP16);
    CHECK(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, 4) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("ATTN_PARAM_COMPUTE") != std::string::npos);
    attn_desc_destroy(d);
}

TEST_CASE("FP16 compute: random shapes within the stated bound of float64, masks exact") {
    std::mt19937 g(2026);
    const bool fast = cpu_has_fp16();
    double worst_ratio = 0, worst_abs = 0;
    int differs = 0, n = 0;
    for (int it = 0; it < 240; ++it) {
        Case c = random_case(g);
        fill(c, g, 1.0f, 2.0f);
        const ref::VResult e = reference(c);
        const Out fp = run(c, ATTN_COMPUTE_FP16), ex = run(c, ATTN_COMPUTE_EXACT);
        const double err = max_abs_err(c, fp, e), bound = out_bound(c);
        CHECK_MESSAGE(err <= bound,
                      "case " << it << ": err " << err << " > bound " << bound << " (sq "
                              << c.p.seq_q << " sk " << c.p.seq_k << " d " << c.p.head_dim << "/"
                              << c.p.head_dim_v << " heads " << c.p.heads_q << "/" << c.p.heads_kv
                              << " causal " << c.p.causal << " wl " << c.p.window_left << " wr "
                              << c.p.window_right << " f16 " << c.f16 << " lens " << c.lens << ")");
        CHECK(max_abs_err(c, ex, e) <= 1e-5 * 2.0);
        worst_ratio = std::max(worst_ratio, err / bound);
        worst_abs = std::max(worst_abs, err);
        const bool same = fp.out == ex.out && fp.lse == ex.lse;
        differs += !same;
        if (!fast)
            CHECK_MESSAGE(same, "no AVX512-FP16: FP16 must run as EXACT (case " << it << ")");
        ++n;
    }
    MESSAGE("fp16 compute: " << n << " cases, max |out - float64| " << worst_abs << ", at most "
                             << worst_ratio << " of the stated bound; " << differs
                             << " differ from EXACT (fast path taken)");
    if (fast) CHECK(differs > n / 2); // most cases have >= 16 rows per KV head
}

TEST_CASE("FP16 compute: windows on every ATTN_PARAM_DIAGONAL within the stated bound of float64") {
    std::mt19937 g(2027);
    const bool fast = cpu_has_fp16();
    int differs = 0, n = 0;
    for (int it = 0; it < 90; ++it) {
        Case c = random_case(g);
        c.p.diagonal = it % 3;
        c.p.window_left = static_cast<long long>(pick(g, 0, 40));
        if (pick(g, 0, 1)) c.p.window_right = static_cast<long long>(pick(g, 0, 40));
        fill(c, g, 1.0f, 2.0f);
        const ref::VResult e = reference(c);
        const Out fp = run(c, ATTN_COMPUTE_FP16), ex = run(c, ATTN_COMPUTE_EXACT);
        const double err = max_abs_err(c, fp, e), bound = out_bound(c);
        CHECK_MESSAGE(err <= bound, "case " << it << ": err " << err << " > bound " << bound
                                            << " (sq " << c.p.seq_q << " sk " << c.p.seq_k
                                            << " causal " << c.p.causal << " diagonal "
                                            << c.p.diagonal << " window " << c.p.window_left << ","
                                            << c.p.window_right << ")");
        CHECK(max_abs_err(c, ex, e) <= 1e-5 * 2.0);
        const bool same = fp.out == ex.out && fp.lse == ex.lse;
        differs += !same;
        if (!fast)
            CHECK_MESSAGE(same, "no AVX512-FP16: FP16 must run as EXACT (case " << it << ")");
        ++n;
    }
    MESSAGE("fp16 compute with diagonals: " << n << " cases, " << differs
                                            << " differ from EXACT (fast path taken)");
}

TEST_CASE("FP16 compute: adversarial inputs (head_dim 256, large logits, 4096 keys)") {
    std::mt19937 g(7);
    const bool fast = cpu_has_fp16();
    struct Adv {
        size_t sq, sk, d;
        float qk, v;
        int causal;
    };
    // large logits: scale * q.k up to ~ 60 (|q|, |k| ~ 2.2 at d = 256); long: 4096 keys
    for (const Adv a : {Adv{64, 300, 256, 2.2f, 1.0f, 0}, Adv{80, 4096, 64, 1.0f, 4.0f, 1},
                        Adv{128, 512, 128, 3.0f, 1.0f, 2}, Adv{33, 2000, 128, 1.5f, 100.0f, 0}}) {
        Case c;
        c.p.heads_q = 2;
        c.p.heads_kv = 1;
        c.p.seq_q = a.sq;
        c.p.seq_k = a.sk;
        c.p.head_dim = c.p.head_dim_v = a.d;
        c.p.causal = a.causal;
        fill(c, g, a.qk, a.v);
        const ref::VResult e = reference(c);
        const Out fp = run(c, ATTN_COMPUTE_FP16);
        const double err = max_abs_err(c, fp, e), bound = out_bound(c);
        CHECK_MESSAGE(err <= bound,
                      "d " << a.d << " keys " << a.sk << ": err " << err << " > bound " << bound);
        MESSAGE("adversarial d " << a.d << ", " << a.sk << " keys, |q|,|k| <= " << a.qk
                                 << ", |v| <= " << a.v << ": max |out - float64| " << err
                                 << " (bound " << bound << ")");
        if (fast) CHECK(fp.out != run(c, ATTN_COMPUTE_EXACT).out);
    }
}

TEST_CASE("FP16 compute runs as EXACT where it does not apply, and is thread-count invariant") {
    std::mt19937 g(11);
    for (int it = 0; it < 40; ++it) {
        Case c = random_case(g);
        c.p.seq_q = pick(g, 16, 100);
        const int kind = it % 4;
        if (kind == 0) c.softcap = 5.0f; // a variant the path does not take
        if (kind == 1) c.p.seq_q = 1;    // decode: fewer than 16 rows per KV head
        float range = 1.0f, vr = 1.0f;
        if (kind == 2) range = 300.0f; // fp16 partial sums could overflow
        if (kind == 3) vr = 1000.0f;   // so could the P.V sums
        fill(c, g, range, vr);
        const Out fp = run(c, ATTN_COMPUTE_FP16), ex = run(c, ATTN_COMPUTE_EXACT);
        CHECK_MESSAGE(fp.out == ex.out, "case " << it << " kind " << kind);
        CHECK(fp.lse == ex.lse);
    }
    for (int it = 0; it < 6; ++it) {
        Case c = random_case(g);
        c.p.seq_q = 200;
        c.p.seq_k = 333;
        fill(c, g, 1.0f, 1.0f);
        const Out one = run(c, ATTN_COMPUTE_FP16, 1), two = run(c, ATTN_COMPUTE_FP16, 2);
        CHECK(std::memcmp(one.out.data(), two.out.data(), one.out.size() * 4) == 0);
        CHECK(std::memcmp(one.lse.data(), two.lse.data(), one.lse.size() * 4) == 0);
    }
}
