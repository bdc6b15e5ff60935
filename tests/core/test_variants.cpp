// The 0.2 variants (window, softcap, bias, ALiBi, sinks, "+1", query padding, per-batch key
// lengths, head_dim_v, key mass) through attn_args / attn_run, on every ISA this CPU supports,
// against the float64 pipeline of tests/reference/reference.hpp (ref::compute_v).
#include <doctest/doctest.h>

#include "variant_cases.hpp"

using namespace vcases;

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
                FAIL_CHECK("case "
                           << n << " on " << isa << ": max rel error " << err << " (b " << p.batch
                           << " hq " << p.heads_q << " hkv " << p.heads_kv << " sq " << p.seq_q
                           << " sk " << p.seq_k << " d " << p.head_dim << " dv " << p.head_dim_v
                           << " causal " << p.causal << " window " << p.window_left << ","
                           << p.window_right << " softcap " << p.softcap << " alibi " << p.alibi
                           << " bias " << !c.bias.empty() << " sinks " << !c.sinks.empty()
                           << " q_scale " << !c.q_scale.empty() << " +1 " << p.plus_one << " qv "
                           << !c.query_valid.empty() << " lens " << !c.seq_lens.empty() << ")");
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

// A power of two times q is exact in fp32, so q_scale = +-2^e must give the bits of a Q the
// caller scaled by hand: on the decode and prefill kernels, heads walking together, the key
// split and every ISA (the factor enters in one place, before the rest of the pipeline).
TEST_CASE("q_scale of powers of two gives the bits of Q scaled by hand, on every path and ISA") {
    std::mt19937 g(29);
    for (int n = 0; n < 90; ++n) {
        VCase c;
        if (n < 84) {
            c = random_vcase(g, n % 4 == 0 ? 300 : 60, n % 2 == 0);
        } else { // decode over 9000 keys: the key split, GQA heads walking together
            ref::VProblem &p = c.p;
            p.batch = 2, p.heads_kv = 2, p.heads_q = 8, p.seq_q = 1, p.seq_k = 9000;
            p.head_dim = p.head_dim_v = 64;
            if (n % 2) { // BSHD K and V: token-major, the heads walk the tiles together
                for (int w = 1; w < 3; ++w) {
                    p.custom_strides[w] = true;
                    p.strides[w][0] = p.seq_k * p.heads_kv * 64;
                    p.strides[w][1] = 64;
                    p.strides[w][2] = p.heads_kv * 64;
                }
            }
            p.set_default_strides();
            fill(c, g);
        }
        const ref::VProblem &p = c.p;
        c.q_scale.resize(p.heads_q);
        for (auto &x : c.q_scale)
            x = std::ldexp(pick(g, 0, 1) ? 1.0f : -1.0f, static_cast<int>(pick(g, 0, 4)) - 2);
        VCase h = c;
        h.q_scale.clear();
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t hh = 0; hh < p.heads_q; ++hh)
                for (size_t i = 0; i < p.seq_q; ++i)
                    for (size_t d = 0; d < p.head_dim; ++d)
                        h.q[p.at(0, b, hh, i) + d] *= c.q_scale[hh];
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun a = run(c), e = run(h);
            const std::string what = "case " + std::to_string(n) + " on " + isa;
            CHECK_MESSAGE(std::memcmp(a.out.data(), e.out.data(), a.out.size() * 4) == 0, what);
            CHECK_MESSAGE(std::memcmp(a.lse.data(), e.lse.data(), a.lse.size() * 4) == 0, what);
            CHECK_MESSAGE(std::memcmp(a.w.data(), e.w.data(), a.w.size() * 4) == 0, what);
            if (n >= 84) CHECK(check(c, a, what) <= 1e-5);
        }
    }
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
            const ref::VInputs in = c.inputs();
            for (size_t b = 0; b < 2; ++b)
                for (size_t h = 0; h < 2; ++h)
                    for (size_t i = 0; i < 5; ++i)
                        for (size_t j = 0; j < 7; ++j) {
                            double want = ref::scaled_dot(p, in, b, h, i, j);
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

// Visible keys of each query of a one-head problem, from the weights (hidden keys weigh 0).
static std::vector<std::vector<size_t>> visible_keys(const VCase &c, const VRun &r) {
    std::vector<std::vector<size_t>> keys(c.p.seq_q);
    for (size_t i = 0; i < c.p.seq_q; ++i)
        for (size_t j = 0; j < c.p.seq_k; ++j)
            if (r.w[i * c.p.seq_k + j] != 0.0f) keys[i].push_back(j);
    return keys;
}

TEST_CASE("ATTN_PARAM_DIAGONAL: the window of seq_q 3, seq_k 7, (1, 1) without a causal rule") {
    // FlashAttention's rule (bottom-right): i + sk - sq - 1 <= j <= i + sk - sq + 1.
    VCase c;
    ref::VProblem &p = c.p;
    p.seq_q = 3, p.seq_k = 7, p.head_dim = 4, p.head_dim_v = 4;
    p.window_left = p.window_right = 1;
    p.set_default_strides();
    std::mt19937 g(12);
    fill(c, g);
    const std::vector<std::vector<size_t>> top_left = {{0, 1}, {0, 1, 2}, {1, 2, 3}};
    const std::vector<std::vector<size_t>> bottom_right = {{3, 4, 5}, {4, 5, 6}, {5, 6}};
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int diagonal :
             {ATTN_DIAGONAL_CAUSAL, ATTN_DIAGONAL_TOP_LEFT, ATTN_DIAGONAL_BOTTOM_RIGHT}) {
            p.diagonal = diagonal;
            const VRun r = run(c);
            CHECK_MESSAGE(visible_keys(c, r) ==
                              (diagonal == ATTN_DIAGONAL_BOTTOM_RIGHT ? bottom_right : top_left),
                          isa << " diagonal " << diagonal);
            CHECK_MESSAGE(check(c, r, isa) <= 1e-5, isa << " diagonal " << diagonal);
        }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("ATTN_PARAM_DIAGONAL keeps the causal rule's own diagonal") {
    // causal TOP_LEFT (j <= i) with a bottom-right window (1, 0) around i + 4: query i sees
    // j <= i and i + 3 <= j, so nothing; with window (5, 0): i + 4 - 5 <= j <= i.
    VCase c;
    ref::VProblem &p = c.p;
    p.seq_q = 3, p.seq_k = 7, p.head_dim = 4, p.head_dim_v = 4, p.causal = ATTN_CAUSAL_TOP_LEFT;
    p.diagonal = ATTN_DIAGONAL_BOTTOM_RIGHT, p.window_left = 5, p.window_right = 0;
    p.set_default_strides();
    std::mt19937 g(13);
    fill(c, g);
    const std::vector<std::vector<size_t>> want = {{0}, {0, 1}, {1, 2}};
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        const VRun r = run(c);
        CHECK_MESSAGE(visible_keys(c, r) == want, isa);
        CHECK(check(c, r, isa) <= 1e-5);
    }
    attn_set_isa(nullptr);
}

TEST_CASE("ATTN_PARAM_ALIBI_FORM: linear -slope (diag - j), symmetric -slope |diag - j|") {
    // One query, seq_k 5, q = 0 (every q.k is 0): the scores are the ALiBi terms alone; the
    // top-left diagonal puts diag(0) at key 0.
    VCase c;
    ref::VProblem &p = c.p;
    p.seq_q = 1, p.seq_k = 5, p.head_dim = 4, p.head_dim_v = 4, p.alibi = ATTN_ALIBI_OPERAND;
    p.diagonal = ATTN_DIAGONAL_TOP_LEFT;
    p.set_default_strides();
    std::mt19937 g(14);
    fill(c, g);
    std::fill(c.q.begin(), c.q.end(), 0.0f);
    c.slopes = {0.5f};
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int form : {ATTN_ALIBI_LINEAR, ATTN_ALIBI_SYMMETRIC}) {
            p.alibi_form = form;
            const VRun r = run(c);
            // diag(0) = 0: linear scores 0.5 j grow to the right; symmetric -0.5 j fall.
            for (size_t j = 0; j + 1 < 5; ++j) {
                const double ratio = static_cast<double>(r.w[j + 1]) / r.w[j];
                CHECK_MESSAGE(ratio == doctest::Approx(std::exp(form ? -0.5 : 0.5)).epsilon(1e-5),
                              isa << " form " << form << " j " << j);
            }
            CHECK(check(c, r, isa) <= 1e-5);
        }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("diagonal, ALiBi form and per-batch slopes: random combinations match float64 on "
          "every ISA") {
    std::mt19937 g(20261206);
    const auto list = isas();
    double worst = 0.0;
    size_t runs = 0, asym = 0;
    for (int n = 0; n < 400; ++n) {
        VCase c = random_vcase(g, n % 8 == 0 ? 150 : 40, n % 3 == 0);
        ref::VProblem &p = c.p;
        p.diagonal = static_cast<int>(pick(g, 0, 2));
        p.alibi_form = static_cast<int>(pick(g, 0, 1));
        if (pick(g, 0, 1)) p.alibi = static_cast<int>(pick(g, 1, 2));
        if (p.alibi == ATTN_ALIBI_OPERAND) {
            p.slopes_batch = pick(g, 0, 1) ? p.heads_q + pick(g, 0, 2) : 0;
            c.slopes.resize((p.batch - 1) * p.slopes_batch + p.heads_q);
            for (auto &x : c.slopes) x = uni(g, 0.0f, 0.5f);
        } else {
            c.slopes.clear();
        }
        asym += p.seq_q != p.seq_k;
        for (const std::string &isa : list) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun r = run(c);
            const double err = check(c, r, "case " + std::to_string(n) + " on " + isa);
            worst = std::max(worst, err);
            ++runs;
            if (err > 1e-5) {
                FAIL_CHECK("case " << n << " on " << isa << ": max rel error " << err << " (b "
                                   << p.batch << " hq " << p.heads_q << " sq " << p.seq_q << " sk "
                                   << p.seq_k << " causal " << p.causal << " diagonal "
                                   << p.diagonal << " window " << p.window_left << ","
                                   << p.window_right << " alibi " << p.alibi << " form "
                                   << p.alibi_form << " slopes_batch " << p.slopes_batch << ")");
                break;
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(runs << " runs (" << asym << " cases with seq_q != seq_k), max rel error " << worst);
    CHECK(asym > 300);
    CHECK(worst <= 1e-5);
}

TEST_CASE("ATTN_PARAM_DIAGONAL / ALIBI_FORM bounds and the slopes' strides") {
    int is_float = -1;
    double lo = -1, hi = -1;
    REQUIRE(attn_param_bounds(ATTN_PARAM_DIAGONAL, &is_float, &lo, &hi) == ATTN_OK);
    CHECK((is_float == 0 && lo == 0 && hi == 2));
    REQUIRE(attn_param_bounds(ATTN_PARAM_ALIBI_FORM, &is_float, &lo, &hi) == ATTN_OK);
    CHECK((is_float == 0 && lo == 0 && hi == 1));
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 3, 4, 2, 5, 6, 8) == ATTN_OK);
    int64_t v = -1;
    REQUIRE(attn_desc_get_int(d, ATTN_PARAM_DIAGONAL, &v) == ATTN_OK);
    CHECK(v == ATTN_DIAGONAL_CAUSAL);
    REQUIRE(attn_desc_get_int(d, ATTN_PARAM_ALIBI_FORM, &v) == ATTN_OK);
    CHECK(v == ATTN_ALIBI_LINEAR);
    CHECK(attn_desc_set_int(d, ATTN_PARAM_DIAGONAL, 3) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(attn_desc_set_int(d, ATTN_PARAM_ALIBI_FORM, 2) == ATTN_ERR_INVALID_ARGUMENT);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_DIAGONAL, ATTN_DIAGONAL_BOTTOM_RIGHT) == ATTN_OK);
    REQUIRE(attn_desc_get_int(d, ATTN_PARAM_DIAGONAL, &v) == ATTN_OK);
    CHECK(v == ATTN_DIAGONAL_BOTTOM_RIGHT);
    CHECK(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) == 4);
    CHECK(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, 4, 1, 1) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("alibi_slopes row_stride") != std::string::npos);
    CHECK(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) == 4); // unchanged by the failure
    REQUIRE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, 4, 1, 0) == ATTN_OK);
    CHECK(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) == 12);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1) == ATTN_OK); // relayout keeps it
    CHECK(attn_desc_required_len(d, ATTN_ALIBI_SLOPES) == 12);
    attn_desc_destroy(d);
}
