// Numerics under hostile values, each with its expected result, on every ISA this CPU
// supports and with 1 and 2 threads:
//   large logits (scores up to +-1e4, all-negative rows), all-equal scores, seq_k = 1,
//   seq_k = 100000 with one visible key, NaN/Inf in a visible key (propagates) versus in a padded
//   key (never seen: bit-identical to zeros there) and in causal / allowed-hidden keys, rows whose
//   visible keys all score -inf (no visible key after all: out 0, lse -inf).
#include <cinttypes>

#include "hardening.hpp"

using hard::Problem;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const char *g_isa = "?";
size_t g_threads = 1;

struct Out {
    std::vector<float> out, lse, w;
};

// Runs forward (with lse) and weights on default (BHSD) strides; outputs pre-filled with a
// sentinel so an unwritten element shows.
Out run(const Problem &p, const std::vector<float> &q, const std::vector<float> &k,
        const std::vector<float> &v, const std::vector<uint8_t> &kv, const std::vector<uint8_t> &al,
        const char *what) {
    Out r;
    r.out.assign(p.len(3), -777.0f);
    r.lse.assign(p.lse_len(), -777.0f);
    r.w.assign(p.weights_len(), -777.0f);
    attn_desc *d = p.make();
    if (!d) return r;
    const bool *kvp = kv.empty() ? nullptr : reinterpret_cast<const bool *>(kv.data());
    const bool *alp = al.empty() ? nullptr : reinterpret_cast<const bool *>(al.data());
    attn_status s =
        attn_forward(d, q.data(), k.data(), v.data(), kvp, alp, r.out.data(), r.lse.data());
    HARD_CHECK(s == ATTN_OK, "[%s, %zu threads] %s: attn_forward %s (%s)", g_isa, g_threads, what,
               attn_status_string(s), attn_last_error());
    s = attn_weights(d, q.data(), k.data(), kvp, alp, r.w.data());
    HARD_CHECK(s == ATTN_OK, "[%s, %zu threads] %s: attn_weights %s (%s)", g_isa, g_threads, what,
               attn_status_string(s), attn_last_error());
    attn_desc_destroy(d);
    return r;
}

void expect_close(float got, double want, double tol, const char *what, const char *field,
                  size_t idx) {
    if (!hard::close(got, want, tol))
        hard::fail("[%s, %zu threads] %s: %s[%zu] = %.9g, expected %.9g", g_isa, g_threads, what,
                   field, idx, static_cast<double>(got), want);
}
void expect_exact(float got, float want, const char *what, const char *field, size_t idx) {
    const bool same = std::isnan(want) ? std::isnan(got) : got == want;
    if (!same)
        hard::fail("[%s, %zu threads] %s: %s[%zu] = %.9g, expected exactly %.9g", g_isa, g_threads,
                   what, field, idx, static_cast<double>(got), static_cast<double>(want));
}

Problem dims(size_t b, size_t hq, size_t hkv, size_t sq, size_t sk, size_t d) {
    Problem p;
    p.batch = b;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.seq_q = sq;
    p.seq_k = sk;
    p.head_dim = d;
    p.set_default_strides();
    return p;
}

// ---- large logits ---------------------------------------------------------------------------
void large_logits() {
    const char *what = "large logits +-1e4";
    // d = 1, scale 1: query 0 (q = 1) scores 1e4, -1e4, 9999, 9998; query 1 (q = -1) the
    // negatives; query 2 (q = 1) with key 0 hidden by `allowed` scores -1e4, 9999, 9998.
    Problem p = dims(1, 1, 1, 3, 4, 1);
    p.has_scale = true;
    p.scale = 1.0f;
    const std::vector<float> q = {1.0f, -1.0f, 1.0f}, k = {1e4f, -1e4f, 9999.0f, 9998.0f},
                             v = {1.0f, 2.0f, 3.0f, 4.0f};
    const std::vector<uint8_t> al = {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1};
    const Out r = run(p, q, k, v, {}, al, what);
    const double e1 = std::exp(-1.0), e2 = std::exp(-2.0);
    // query 0: Z = 1 + e^-1 + e^-2 relative to the max 1e4; key 1 is exp(-2e4) = 0.
    const double z0 = 1.0 + e1 + e2;
    const double w0[4] = {1.0 / z0, 0.0, e1 / z0, e2 / z0};
    // query 1: max is key 1 (1e4); the others are -1e4 - 1e4, -9999 - 1e4, -9998 - 1e4: all 0.
    const double w1[4] = {0.0, 1.0, 0.0, 0.0};
    // query 2: key 0 hidden; max 9999: Z = 1 + e^-1.
    const double z2 = 1.0 + e1;
    const double w2[4] = {0.0, 0.0, 1.0 / z2, e1 / z2};
    const double *ws[3] = {w0, w1, w2};
    const double lse[3] = {1e4 + std::log(z0), 1e4, 9999.0 + std::log(z2)};
    for (size_t i = 0; i < 3; ++i) {
        double o = 0.0;
        for (size_t j = 0; j < 4; ++j) {
            expect_close(r.w[i * 4 + j], ws[i][j], 1e-6, what, "weights", i * 4 + j);
            o += ws[i][j] * v[j];
        }
        expect_close(r.out[i], o, 1e-6, what, "out", i);
        expect_close(r.lse[i], lse[i], 1e-6, what, "lse", i);
    }
    expect_exact(r.w[0 * 4 + 1], 0.0f, what, "weights (exp(-2e4) underflows)", 1);
    expect_exact(r.w[2 * 4 + 0], 0.0f, what, "weights (hidden by allowed)", 8);

    // All visible scores hugely negative: -1e4 and -1e4 - 1. Without subtracting the running
    // max, exp would underflow to 0 / 0 = NaN.
    const char *neg = "all scores near -1e4";
    Problem pn = dims(1, 1, 1, 1, 2, 1);
    pn.has_scale = true;
    pn.scale = 1.0f;
    const Out rn = run(pn, {-1.0f}, {1e4f, 10001.0f}, {5.0f, -3.0f}, {}, {}, neg);
    const double zn = 1.0 + e1;
    expect_close(rn.w[0], 1.0 / zn, 1e-6, neg, "weights", 0);
    expect_close(rn.w[1], e1 / zn, 1e-6, neg, "weights", 1);
    expect_close(rn.out[0], (5.0 - 3.0 * e1) / zn, 1e-6, neg, "out", 0);
    expect_close(rn.lse[0], -1e4 + std::log(zn), 1e-6, neg, "lse", 0);

    // The max arrives in a later key tile (online-softmax rescale by exp(-2e4) = 0): 300 keys
    // with scores -1e4 + j / 8 (exact in float), except key 250 at +1e4. Its row must be the
    // one-hot weight of key 250; out = v[250]; lse = 1e4.
    const char *late = "max in a later tile";
    Problem pl = dims(1, 1, 1, 2, 300, 3);
    pl.has_scale = true;
    pl.scale = 1.0f;
    std::vector<float> ql = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f}, kl(300 * 3, 0.0f),
                       vl(300 * 3, 0.0f);
    for (size_t j = 0; j < 300; ++j) {
        kl[j * 3] = j == 250 ? 1e4f : -1e4f + static_cast<float>(j) / 8.0f;
        kl[j * 3 + 2] = static_cast<float>(j % 7); // query 1 sees small scores 0..6
        for (size_t d = 0; d < 3; ++d) vl[j * 3 + d] = static_cast<float>(j) + 0.25f * d;
    }
    const Out rl = run(pl, ql, kl, vl, {}, {}, late);
    for (size_t j = 0; j < 300; ++j)
        expect_exact(rl.w[j], j == 250 ? 1.0f : 0.0f, late, "weights", j);
    for (size_t d = 0; d < 3; ++d) expect_exact(rl.out[d], vl[250 * 3 + d], late, "out", d);
    expect_exact(rl.lse[0], 1e4f, late, "lse", 0);
    // Query 1 against the float64 reference (moderate scores; the big K column is not seen).
    const ref::VResult r64 = ref::compute(pl, ql.data(), kl.data(), vl.data(), nullptr, nullptr);
    for (size_t d = 0; d < 3; ++d)
        expect_close(rl.out[3 + d], r64.out[3 + d], 1e-5, late, "out", 3 + d);
    expect_close(rl.lse[1], r64.lse[1], 1e-5, late, "lse", 1);
}

// ---- all-equal scores -------------------------------------------------------------------------
void all_equal() {
    static const size_t ns[] = {1, 5, 67, 200, 1000};
    for (size_t n : ns) {
        char what[96];
        std::snprintf(what, sizeof what, "all-equal scores (scale 0, seq_k %zu)", n);
        // scale = 0 makes every score 0 whatever q and k hold: weights 1/n, out = mean of v.
        Problem p = dims(1, 2, 1, 3, n, 7);
        p.has_scale = true;
        p.scale = 0.0f;
        hard::Rng rng(n);
        std::vector<float> q(p.len(0)), k(p.len(1)), v(p.len(2));
        for (float &x : q) x = rng.value(-3, 3);
        for (float &x : k) x = rng.value(-3, 3);
        for (float &x : v) x = rng.value(-1, 1);
        const Out r = run(p, q, k, v, {}, {}, what);
        for (size_t row = 0; row < 2 * 3; ++row) {
            for (size_t j = 0; j < n; ++j)
                expect_close(r.w[row * n + j], 1.0 / static_cast<double>(n), 1e-6, what, "weights",
                             row * n + j);
            for (size_t d = 0; d < 7; ++d) {
                double mean = 0.0;
                for (size_t j = 0; j < n; ++j) mean += v[j * 7 + d];
                expect_close(r.out[row * 7 + d], mean / static_cast<double>(n), 1e-5, what, "out",
                             row * 7 + d);
            }
            expect_close(r.lse[row], std::log(static_cast<double>(n)), 1e-6, what, "lse", row);
        }
    }
    // Equal scores from identical keys, half of them padding (key_valid = 0): 1/visible.
    const char *what = "all-equal scores with padding";
    Problem p = dims(2, 1, 1, 2, 10, 4);
    std::vector<float> q(p.len(0), 0.5f), k(p.len(1), 0.25f), v(p.len(2));
    std::vector<uint8_t> kv(20);
    for (size_t x = 0; x < v.size(); ++x) v[x] = static_cast<float>(x % 13);
    for (size_t x = 0; x < 20; ++x) kv[x] = x % 2 == 0 || x >= 17; // batch 0: 5, batch 1: 7
    const Out r = run(p, q, k, v, kv, {}, what);
    for (size_t b = 0; b < 2; ++b)
        for (size_t i = 0; i < 2; ++i) {
            const size_t row = b * 2 + i;
            double nv = 0.0;
            for (size_t j = 0; j < 10; ++j) nv += kv[b * 10 + j] ? 1.0 : 0.0;
            for (size_t j = 0; j < 10; ++j) {
                const bool vis = kv[b * 10 + j] != 0;
                if (vis)
                    expect_close(r.w[row * 10 + j], 1.0 / nv, 1e-6, what, "weights", row * 10 + j);
                else
                    expect_exact(r.w[row * 10 + j], 0.0f, what, "weights", row * 10 + j);
            }
            for (size_t d = 0; d < 4; ++d) {
                double mean = 0.0;
                for (size_t j = 0; j < 10; ++j)
                    if (kv[b * 10 + j]) mean += v[(b * 10 + j) * 4 + d];
                expect_close(r.out[row * 4 + d], mean / nv, 1e-6, what, "out", row * 4 + d);
            }
        }
}

// ---- seq_k = 1 ----------------------------------------------------------------------------------
void seq_k_one() {
    const int modes[3] = {ATTN_CAUSAL_NONE, ATTN_CAUSAL_TOP_LEFT, ATTN_CAUSAL_BOTTOM_RIGHT};
    for (int causal : modes) {
        char what[64];
        std::snprintf(what, sizeof what, "seq_k = 1 (causal %d)", causal);
        Problem p = dims(2, 4, 2, 3, 1, 19);
        p.causal = causal;
        hard::Rng rng(7 + causal);
        std::vector<float> q(p.len(0)), k(p.len(1)), v(p.len(2));
        for (float &x : q) x = rng.value(-2, 2);
        for (float &x : k) x = rng.value(-2, 2);
        for (float &x : v) x = rng.value(-2, 2);
        const Out r = run(p, q, k, v, {}, {}, what);
        const ref::VResult r64 = ref::compute(p, q.data(), k.data(), v.data(), nullptr, nullptr);
        for (size_t b = 0; b < 2; ++b)
            for (size_t h = 0; h < 4; ++h)
                for (size_t i = 0; i < 3; ++i) {
                    const size_t row = (b * 4 + h) * 3 + i;
                    // BOTTOM_RIGHT with seq_q 3, seq_k 1: query i sees key 0 iff 0 <= i - 2.
                    const bool vis = causal != ATTN_CAUSAL_BOTTOM_RIGHT || i == 2;
                    expect_exact(r.w[row], vis ? 1.0f : 0.0f, what, "weights", row);
                    const float *vk = v.data() + p.at(2, b, h / 2, 0);
                    for (size_t d = 0; d < 19; ++d)
                        expect_exact(r.out[row * 19 + d], vis ? vk[d] : 0.0f, what, "out",
                                     row * 19 + d);
                    if (vis)
                        expect_close(r.lse[row], r64.lse[row], 1e-6, what, "lse", row);
                    else
                        expect_exact(r.lse[row], -kInf, what, "lse", row);
                }
    }
}

// ---- seq_k = 100000, one visible key ------------------------------------------------------------
void one_visible_of_100k() {
    const size_t SK = 100000;
    struct Variant {
        const char *what;
        size_t sq, d, key;
        int causal;
        bool via_allowed;
    };
    const Variant vars[] = {
        {"100k keys, key_valid hides all but key 77777", 1, 5, 77777, ATTN_CAUSAL_NONE, false},
        {"100k keys, 3 queries, BR causal, key 77777", 3, 67, 77777, ATTN_CAUSAL_BOTTOM_RIGHT,
         false},
        {"100k keys, BR causal, last key (hidden from queries 0, 1)", 3, 8, SK - 1,
         ATTN_CAUSAL_BOTTOM_RIGHT, false},
        {"100k keys, allowed hides all but key 12345 (others +-1e30)", 2, 9, 12345,
         ATTN_CAUSAL_NONE, true},
    };
    for (const Variant &c : vars) {
        Problem p = dims(1, 2, 1, c.sq, SK, c.d);
        p.causal = c.causal;
        std::vector<float> q(p.len(0)), k(p.len(1)), v(p.len(2));
        std::vector<uint8_t> kv, al;
        hard::Rng rng(c.key);
        for (float &x : q) x = rng.value(-1, 1);
        for (size_t j = 0; j < SK; ++j)
            for (size_t d = 0; d < c.d; ++d) {
                const bool vis = j == c.key;
                // Padding slots hold NaN (must never be read); allowed-hidden slots hold huge
                // finite values (read, but their scores are masked).
                k[j * c.d + d] = vis             ? rng.value(-1, 1)
                                 : c.via_allowed ? (d % 2 ? 1e30f : -1e30f)
                                                 : kNaN;
                v[j * c.d + d] = vis ? rng.value(-1, 1) : c.via_allowed ? 1e30f : kNaN;
            }
        if (c.via_allowed) {
            al.assign(c.sq * SK, 0);
            for (size_t i = 0; i < c.sq; ++i) al[i * SK + c.key] = 1;
        } else {
            kv.assign(SK, 0);
            kv[c.key] = 1;
        }
        const Out r = run(p, q, k, v, kv, al, c.what);
        for (size_t h = 0; h < 2; ++h)
            for (size_t i = 0; i < c.sq; ++i) {
                const size_t row = h * c.sq + i;
                const long long lim = c.causal == ATTN_CAUSAL_BOTTOM_RIGHT
                                          ? static_cast<long long>(i + SK - c.sq)
                                          : static_cast<long long>(SK);
                const bool vis = static_cast<long long>(c.key) <= lim;
                double score = 0.0;
                for (size_t d = 0; d < c.d; ++d)
                    score += double(q[row * c.d + d]) * double(k[c.key * c.d + d]);
                score *= static_cast<double>(p.eff_scale());
                size_t nonzero = 0, bad_at = SK;
                for (size_t j = 0; j < SK; ++j) {
                    const float want = vis && j == c.key ? 1.0f : 0.0f;
                    if (r.w[row * SK + j] != 0.0f) ++nonzero;
                    if (r.w[row * SK + j] != want && bad_at == SK) bad_at = j;
                }
                if (bad_at != SK)
                    hard::fail("[%s, %zu threads] %s: weights row %zu: key %zu = %g, expected a "
                               "one-hot row at key %zu (%zu nonzero)",
                               g_isa, g_threads, c.what, row, bad_at,
                               double(r.w[row * SK + bad_at]), c.key, nonzero);
                for (size_t d = 0; d < c.d; ++d)
                    expect_exact(r.out[row * c.d + d], vis ? v[c.key * c.d + d] : 0.0f, c.what,
                                 "out", row * c.d + d);
                if (vis)
                    expect_close(r.lse[row], score, 1e-6, c.what, "lse", row);
                else
                    expect_exact(r.lse[row], -kInf, c.what, "lse", row);
            }
    }
}

// ---- NaN / Inf
// ------------------------------------------------------------------------------------ One head, 6
// queries x 6 keys, d = 5, TOP_LEFT causal: key 3 is seen by queries 3..5 only.
struct Base {
    Problem p;
    std::vector<float> q, k, v;
};
Base nan_base() {
    Base b;
    b.p = dims(1, 1, 1, 6, 6, 5);
    b.p.causal = ATTN_CAUSAL_TOP_LEFT;
    hard::Rng rng(99);
    b.q.resize(b.p.len(0));
    b.k.resize(b.p.len(1));
    b.v.resize(b.p.len(2));
    for (float &x : b.q) x = rng.value(-1, 1);
    for (float &x : b.k) x = rng.value(-1, 1);
    for (float &x : b.v) x = rng.value(-1, 1);
    return b;
}

// Rows 0..2 (which do not see key 3) must match the reference of the clean inputs.
void expect_rows_clean(const Base &b, const Out &r, const char *what) {
    const ref::VResult r64 =
        ref::compute(b.p, b.q.data(), b.k.data(), b.v.data(), nullptr, nullptr);
    for (size_t i = 0; i < 3; ++i) {
        for (size_t d = 0; d < 5; ++d)
            expect_close(r.out[i * 5 + d], r64.out[i * 5 + d], 1e-5, what, "out", i * 5 + d);
        expect_close(r.lse[i], r64.lse[i], 1e-5, what, "lse", i);
        for (size_t j = 0; j < 6; ++j)
            expect_close(r.w[i * 6 + j], r64.w[i * 6 + j], 1e-5, what, "weights", i * 6 + j);
    }
}

void nan_inf() {
    const float specials[] = {kNaN, kInf, -kInf};
    const char *names[] = {"NaN", "+Inf", "-Inf"};
    for (int s = 0; s < 3; ++s) {
        char what[96];
        // (1) In a visible key's K: its score is NaN or +-Inf; rows 3..5 must not come out finite
        // (q.k = +-Inf makes exp(Inf - Inf) or the normaliser NaN), rows 0..2 are untouched.
        {
            std::snprintf(what, sizeof what, "%s in K of visible key 3", names[s]);
            Base b = nan_base();
            for (size_t d = 0; d < 5; ++d) b.k[3 * 5 + d] = specials[s];
            const Out r = run(b.p, b.q, b.k, b.v, {}, {}, what);
            expect_rows_clean(nan_base(), r, what);
            for (size_t i = 3; i < 6; ++i) {
                const ref::VResult r64 =
                    ref::compute(b.p, b.q.data(), b.k.data(), b.v.data(), nullptr, nullptr);
                // The float64 reference says what IEEE arithmetic gives for this row; the
                // library must agree on NaN-ness of out, lse and the visible weights.
                for (size_t d = 0; d < 5; ++d) {
                    const bool want_nan = std::isnan(r64.out[i * 5 + d]);
                    if (want_nan != std::isnan(r.out[i * 5 + d]))
                        hard::fail("[%s, %zu threads] %s: out[%zu][%zu] = %g, reference %g", g_isa,
                                   g_threads, what, i, d, double(r.out[i * 5 + d]),
                                   r64.out[i * 5 + d]);
                }
                if (std::isfinite(r.out[i * 5]) && std::isfinite(r.lse[i]))
                    hard::fail("[%s, %zu threads] %s: row %zu came out finite (out %g, lse %g): "
                               "a visible %s was hidden",
                               g_isa, g_threads, what, i, double(r.out[i * 5]), double(r.lse[i]),
                               names[s]);
                for (size_t j = i + 1; j < 6; ++j)
                    expect_exact(r.w[i * 6 + j], 0.0f, what, "weights (causally hidden)",
                                 i * 6 + j);
            }
        }
        // (2) In a visible key's V, one dimension: that dimension of rows 3..5 is NaN or +-Inf
        // (weight > 0 times Inf), every other dimension and all weights stay correct.
        {
            std::snprintf(what, sizeof what, "%s in V[3][2] of visible key 3", names[s]);
            Base b = nan_base();
            b.v[3 * 5 + 2] = specials[s];
            const Out r = run(b.p, b.q, b.k, b.v, {}, {}, what);
            const ref::VResult r64 =
                ref::compute(b.p, b.q.data(), b.k.data(), b.v.data(), nullptr, nullptr);
            for (size_t x = 0; x < 30; ++x)
                expect_close(r.out[x], r64.out[x], 1e-5, what, "out", x);
            for (size_t x = 0; x < 6; ++x) expect_close(r.lse[x], r64.lse[x], 1e-5, what, "lse", x);
            for (size_t x = 0; x < 36; ++x)
                expect_close(r.w[x], r64.w[x], 1e-5, what, "weights", x);
            for (size_t i = 3; i < 6; ++i)
                expect_exact(r.out[i * 5 + 2], specials[s], what, "out (dim 2)", i * 5 + 2);
        }
        // (3) In a query: that row only.
        {
            std::snprintf(what, sizeof what, "%s in Q of query 4", names[s]);
            Base b = nan_base();
            b.q[4 * 5 + 1] = specials[s];
            const Out r = run(b.p, b.q, b.k, b.v, {}, {}, what);
            expect_rows_clean(nan_base(), r, what);
            if (std::isfinite(r.lse[4]))
                hard::fail("[%s, %zu threads] %s: lse of query 4 is finite (%g)", g_isa, g_threads,
                           what, double(r.lse[4]));
        }
        // (4) In padded keys (key_valid = 0): never read. The result must be bit-identical to
        // the same call with zeros in those slots, and equal the reference without them.
        {
            std::snprintf(what, sizeof what, "%s in K and V of padded keys", names[s]);
            Base b = nan_base();
            const std::vector<uint8_t> kv = {1, 0, 1, 0, 1, 0};
            Base z = b;
            for (size_t j : {1u, 3u, 5u})
                for (size_t d = 0; d < 5; ++d) {
                    b.k[j * 5 + d] = b.v[j * 5 + d] = specials[s];
                    z.k[j * 5 + d] = z.v[j * 5 + d] = 0.0f;
                }
            const Out r = run(b.p, b.q, b.k, b.v, kv, {}, what);
            const Out rz = run(z.p, z.q, z.k, z.v, kv, {}, what);
            const bool same = std::memcmp(r.out.data(), rz.out.data(), 4 * r.out.size()) == 0 &&
                              std::memcmp(r.lse.data(), rz.lse.data(), 4 * r.lse.size()) == 0 &&
                              std::memcmp(r.w.data(), rz.w.data(), 4 * r.w.size()) == 0;
            if (!same)
                hard::fail("[%s, %zu threads] %s: results differ from zeros in the padded slots",
                           g_isa, g_threads, what);
            const ref::VResult r64 =
                ref::compute(z.p, z.q.data(), z.k.data(), z.v.data(), kv.data(), nullptr);
            hard::compare(b.p, r64, r.out.data(), r.lse.data(), r.w.data(), 1e-5, what);
        }
        // (5) In keys hidden by the causal rule or by `allowed` (not padding, so they may be
        // read): the mask must still keep them out of every output.
        {
            std::snprintf(what, sizeof what, "%s in K and V of causal/allowed-hidden keys",
                          names[s]);
            Base b = nan_base();
            std::vector<uint8_t> al(36, 1);
            for (size_t i = 0; i < 6; ++i) al[i * 6 + 2] = 0; // key 2 hidden from everyone
            Base z = b;
            for (size_t d = 0; d < 5; ++d) {
                b.k[5 * 5 + d] = b.v[5 * 5 + d] = specials[s]; // key 5: seen by query 5 only
                b.k[2 * 5 + d] = b.v[2 * 5 + d] = specials[s];
                z.k[2 * 5 + d] = z.v[2 * 5 + d] = 0.0f;
                z.k[5 * 5 + d] = z.v[5 * 5 + d] = 0.0f;
            }
            const Out r = run(b.p, b.q, b.k, b.v, {}, al, what);
            const ref::VResult r64 =
                ref::compute(z.p, z.q.data(), z.k.data(), z.v.data(), nullptr, al.data());
            // ... so rows 0..4 (which do not see key 5 causally, nor key 2) must be exact.
            for (size_t i = 0; i < 5; ++i) {
                for (size_t d = 0; d < 5; ++d)
                    expect_close(r.out[i * 5 + d], r64.out[i * 5 + d], 1e-5, what, "out",
                                 i * 5 + d);
                expect_close(r.lse[i], r64.lse[i], 1e-5, what, "lse", i);
                for (size_t j = 0; j < 6; ++j)
                    expect_close(r.w[i * 6 + j], r64.w[i * 6 + j], 1e-5, what, "weights",
                                 i * 6 + j);
            }
        }
    }
    // A fully masked row is defined by the masks, not by the values: 0 / 0 must never appear.
    const char *what = "fully masked rows with NaN everywhere else";
    Base b = nan_base();
    std::vector<uint8_t> al(36, 1);
    for (size_t j = 0; j < 6; ++j) al[1 * 6 + j] = 0; // query 1 sees nothing
    for (float &x : b.v) x = kNaN;
    const Out r = run(b.p, b.q, b.k, b.v, {}, al, what);
    for (size_t d = 0; d < 5; ++d) expect_exact(r.out[5 + d], 0.0f, what, "out", 5 + d);
    expect_exact(r.lse[1], -kInf, what, "lse", 1);
    for (size_t j = 0; j < 6; ++j) expect_exact(r.w[6 + j], 0.0f, what, "weights", 6 + j);
}

// ---- every visible key scores -inf ----------------------------------------------------------
// q.k = -inf for a key (a -inf in its K row, q > 0) hides it, as a -inf bias does: a row whose
// visible keys all score -inf has no visible key (out 0, lse -inf, weights 0), not 0 / 0. Rows
// that also see a finite key are ordinary. Prefill rows (seq_q 40), a GQA decode step (seq_q 1,
// 4 query heads per KV head) and a long decode whose keys are split into merged chunks.
void minus_inf_scores() {
    struct Shape {
        size_t hq, hkv, sq, sk;
    };
    for (const Shape sh : {Shape{2, 2, 40, 50}, Shape{4, 1, 1, 50}, Shape{4, 1, 1, 20000}}) {
        char what[96];
        std::snprintf(what, sizeof what, "-inf scores (%zu/%zu heads, seq_q %zu, seq_k %zu)", sh.hq,
                      sh.hkv, sh.sq, sh.sk);
        const size_t D = 8;
        Problem p = dims(1, sh.hq, sh.hkv, sh.sq, sh.sk, D);
        p.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        hard::Rng rng(77);
        std::vector<float> q(p.len(0)), k(p.len(1)), v(p.len(2));
        for (float &x : q) x = rng.value(0.5, 1); // positive: q.k = -inf where K holds -inf
        for (float &x : v) x = rng.value(-1, 1);
        // keys [0, sk - 10): -inf rows; the last 10 keys finite. Bottom-right causal: the first
        // sq - 10 query rows of a prefill see only -inf keys.
        for (size_t j = 0; j < p.len(1) / D; ++j)
            for (size_t d = 0; d < D; ++d)
                k[j * D + d] = j % sh.sk < sh.sk - 10 ? -kInf : rng.value(-1, 1);
        const Out r = run(p, q, k, v, {}, {}, what);
        const ref::VResult r64 = ref::compute(p, q.data(), k.data(), v.data(), nullptr, nullptr);
        size_t empty = 0;
        for (size_t row = 0; row < p.lse_len(); ++row) {
            if (!r64.any[row]) { // the reference's row without a visible key
                ++empty;
                for (size_t d = 0; d < D; ++d)
                    expect_exact(r.out[row * D + d], 0.0f, what, "out", row * D + d);
                expect_exact(r.lse[row], -kInf, what, "lse", row);
            } else {
                for (size_t d = 0; d < D; ++d)
                    expect_close(r.out[row * D + d], r64.out[row * D + d], 1e-5, what, "out",
                                 row * D + d);
                expect_close(r.lse[row], r64.lse[row], 1e-5, what, "lse", row);
            }
            for (size_t j = 0; j < sh.sk; ++j)
                expect_close(r.w[row * sh.sk + j], r64.w[row * sh.sk + j], 1e-5, what, "weights",
                             row * sh.sk + j);
        }
        const size_t want_empty = sh.sq > 10 ? sh.hq * (sh.sq - 10) : 0;
        HARD_CHECK(empty == want_empty,
                   "%s: the reference has %zu rows without a visible key, "
                   "expected %zu",
                   what, empty, want_empty);
    }
}

void run_isa(const char *isa, void *) {
    g_isa = isa;
    for (size_t threads : {1u, 2u}) {
        g_threads = threads;
        attn_set_num_threads(threads);
        const int before = hard::failures();
        large_logits();
        all_equal();
        seq_k_one();
        one_visible_of_100k();
        nan_inf();
        minus_inf_scores();
        std::printf("  %-6s %zu thread(s): %s\n", isa, threads,
                    hard::failures() == before ? "ok" : "FAILED");
    }
}

} // namespace

int main() {
    hard::for_each_isa("hardening_numerics", run_isa, nullptr);
    attn_set_num_threads(0);
    std::printf("numerics: %d failures\n", hard::failures());
    return hard::failures() ? 1 : 0;
}
