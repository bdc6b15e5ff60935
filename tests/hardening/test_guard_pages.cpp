// Guard-page test: every buffer of attn_forward / attn_weights (q, k, v, key_valid,
// allowed, out, lse, weights) is placed so that it ENDS exactly at a PROT_NONE page, and in a
// second call so that it STARTS right after one. A read or write one element past (or before)
// attn_desc_required_len faults; the SIGSEGV handler names the buffer and the case. Inputs are
// mapped read-only; outputs are surrounded by canary bytes, and the gaps of a strided OUT must
// keep their canary. Values are checked against the float64 reference.
//
// Sizes: head_dim 1..67 and seq_q / seq_k 1..67 (not multiples of any lane count), sampled
// (ATTN_GUARD_FULL=1 runs the full head_dim x seq grid), plus tile-boundary and decode (key split)
// shapes, on every ISA this CPU supports.
#include <signal.h>

#include <cinttypes>
#include <ctime>

#include "hardening.hpp"

using hard::GuardBuf;
using hard::Place;
using hard::Problem;
using hard::Rng;

namespace {

char *const g_case = hard::guard_case();

struct Options {
    bool key_valid = false, allowed = false, lse = true;
    int threads = 1;
};

struct Inputs {
    std::vector<float> q, k, v;
    std::vector<uint8_t> key_valid, allowed;
};

// Fills inputs: random values, NaN in every K/V element that no valid key addresses (padded
// keys and stride gaps: must never reach an output), masks with arbitrary nonzero bytes.
Inputs make_inputs(const Problem &p, const Options &o, Rng &rng) {
    Inputs in;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (o.key_valid) {
        in.key_valid.resize(p.batch * p.seq_k);
        const bool all_padded_batch = rng.chance(0.15);
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t j = 0; j < p.seq_k; ++j) {
                uint8_t v = rng.chance(0.7) ? static_cast<uint8_t>(rng.range(1, 255)) : 0;
                if (all_padded_batch && b == p.batch - 1) v = 0;
                in.key_valid[b * p.seq_k + j] = v;
            }
    }
    if (o.allowed) {
        in.allowed.resize(p.seq_q * p.seq_k);
        const size_t dead_row = rng.chance(0.3) ? rng.below(p.seq_q) : p.seq_q;
        for (size_t i = 0; i < p.seq_q; ++i)
            for (size_t j = 0; j < p.seq_k; ++j)
                in.allowed[i * p.seq_k + j] =
                    i != dead_row && rng.chance(0.75) ? static_cast<uint8_t>(rng.range(1, 255)) : 0;
    }
    in.q.assign(p.len(0), nan);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t d = 0; d < p.head_dim; ++d)
                    in.q[p.at(0, b, h, i) + d] = rng.value(-1.0f, 1.0f);
    for (int w = 1; w <= 2; ++w) {
        std::vector<float> &x = w == 1 ? in.k : in.v;
        x.assign(p.len(w), nan);
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_kv; ++h)
                for (size_t j = 0; j < p.seq_k; ++j) {
                    if (o.key_valid && !in.key_valid[b * p.seq_k + j]) continue;
                    for (size_t d = 0; d < p.head_dim; ++d) {
                        float &e = x[p.at(w, b, h, j) + d];
                        if (std::isnan(e)) e = rng.value(-1.0f, 1.0f); // broadcast: write once
                    }
                }
    }
    return in;
}

// Random strides for operand w: 0 default, 1 BSHD, 2 padded rows, 3 broadcast (K/V only).
void pick_strides(Problem &p, int w, Rng &rng) {
    const size_t H = p.heads(w), S = p.seq(w), D = p.head_dim;
    switch (rng.below(w == 1 || w == 2 ? 5 : 3)) {
    case 1:
        p.set_strides(w, S * H * D, D, H * D);
        break;
    case 2: {
        const size_t row = D + rng.range(1, 5);
        p.set_strides(w, H * S * row + rng.below(3), S * row, row);
        break;
    }
    case 3: // every kv head reads head 0's rows
        p.set_strides(w, S * D, 0, D);
        break;
    case 4: // every batch reads batch 0
        p.set_strides(w, 0, S * D, D);
        break;
    default:
        break;
    }
}

struct Stats {
    size_t cases = 0, calls = 0, failed_cases = 0;
};

// Places every buffer per `place`, runs forward and weights, checks values, canaries and gaps.
void run_placement(const Problem &p, const Options &o, const Inputs &in, const ref::VResult &r64,
                   Place place, Stats &stats, const char *isa) {
    const char *where = place == Place::EndAtGuard ? "end-at-guard" : "start-after-guard";
    std::snprintf(g_case, hard::kGuardCaseLen,
                  "isa=%s %s threads=%d key_valid=%d allowed=%d lse=%d %s", isa, where, o.threads,
                  o.key_valid, o.allowed, o.lse, p.describe().c_str());
    attn_desc *desc = p.make();
    if (!desc) return;
    const size_t lq = attn_desc_required_len(desc, ATTN_Q),
                 lk = attn_desc_required_len(desc, ATTN_K),
                 lv = attn_desc_required_len(desc, ATTN_V),
                 lo = attn_desc_required_len(desc, ATTN_OUT),
                 ll = attn_desc_required_len(desc, ATTN_LSE),
                 lw = attn_desc_required_len(desc, ATTN_WEIGHTS),
                 lkv = attn_desc_required_len(desc, ATTN_KEY_VALID),
                 lal = attn_desc_required_len(desc, ATTN_ALLOWED);
    HARD_CHECK(lq == p.len(0) && lk == p.len(1) && lv == p.len(2) && lo == p.len(3) &&
                   ll == p.lse_len() && lw == p.weights_len() && lkv == p.batch * p.seq_k &&
                   lal == p.seq_q * p.seq_k,
               "required_len disagrees with the documented formula: %s", g_case);

    GuardBuf q(lq * 4, place, "q"), k(lk * 4, place, "k"), v(lv * 4, place, "v"),
        kv(o.key_valid ? lkv : 1, place, "key_valid"), al(o.allowed ? lal : 1, place, "allowed"),
        out(lo * 4, place, "out"), lse(ll * 4, place, "lse"), w(lw * 4, place, "weights");
    std::memcpy(q.as<float>(), in.q.data(), lq * 4);
    std::memcpy(k.as<float>(), in.k.data(), lk * 4);
    std::memcpy(v.as<float>(), in.v.data(), lv * 4);
    if (o.key_valid) std::memcpy(kv.as<uint8_t>(), in.key_valid.data(), lkv);
    if (o.allowed) std::memcpy(al.as<uint8_t>(), in.allowed.data(), lal);
    q.read_only();
    k.read_only();
    v.read_only();
    kv.read_only();
    al.read_only();
    const bool *kvp = o.key_valid ? kv.as<bool>() : nullptr;
    const bool *alp = o.allowed ? al.as<bool>() : nullptr;

    size_t bad = 0;
    const int before = hard::failures();
    attn_status s = attn_forward(desc, q.as<float>(), k.as<float>(), v.as<float>(), kvp, alp,
                                 out.as<float>(), o.lse ? lse.as<float>() : nullptr);
    ++stats.calls;
    HARD_CHECK(s == ATTN_OK, "attn_forward: %s (%s) %s", attn_status_string(s), attn_last_error(),
               g_case);
    s = attn_weights(desc, q.as<float>(), k.as<float>(), kvp, alp, w.as<float>());
    ++stats.calls;
    HARD_CHECK(s == ATTN_OK, "attn_weights: %s (%s) %s", attn_status_string(s), attn_last_error(),
               g_case);
    bad += hard::compare(p, r64, out.as<float>(), o.lse ? lse.as<float>() : nullptr, w.as<float>(),
                         1e-5, g_case);

    // Canaries around every output, and OUT elements the strides do not address untouched.
    const GuardBuf *outs[] = {&out, &lse, &w};
    const char *names[] = {"out", "lse", "weights"};
    for (int x = 0; x < 3; ++x) {
        const long dmg = outs[x]->canary_damage();
        HARD_CHECK(dmg < 0, "%s: canary byte at offset %ld changed: %s", names[x], dmg, g_case);
    }
    if (!o.lse) {
        const uint8_t *l = lse.as<uint8_t>();
        for (size_t x = 0; x < ll * 4; ++x)
            if (l[x] != hard::kCanary) {
                hard::fail("lse written although NULL was passed: %s", g_case);
                break;
            }
    }
    std::vector<char> addressed(lo, 0);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t d = 0; d < p.head_dim; ++d) addressed[p.at(3, b, h, i) + d] = 1;
    const uint8_t *ob = out.as<uint8_t>();
    for (size_t e = 0; e < lo; ++e) {
        if (addressed[e]) continue;
        bool intact = true;
        for (int y = 0; y < 4; ++y) intact &= ob[e * 4 + y] == hard::kCanary;
        if (!intact) {
            hard::fail("out gap element %zu (not addressed by the OUT strides) was written: %s", e,
                       g_case);
            break;
        }
    }
    attn_desc_destroy(desc);
    if (bad || hard::failures() != before) ++stats.failed_cases;
}

// huge_rows: an operand with one row (seq 1) gets a row stride just below 2^62 (in bytes 2^64 -
// 4 (w + 1)). It never addresses anything, so any value is valid, and the values must be right
// and nothing read or written past the buffers. A pointer stepped by it once too often wraps:
// clang's UBSan sees that (fuzz_attn found one, kept in fuzz/corpus), gcc's does not.
void run_case(const Problem &p0, Rng &rng, Stats &stats, const char *isa, bool huge_rows = false) {
    Problem p = p0;
    for (int w = 0; w < 4; ++w)
        if (rng.chance(0.5)) pick_strides(p, w, rng);
    p.set_default_strides();
    for (int w = 0; w < 4 && huge_rows; ++w)
        if (p.seq(w) == 1)
            p.set_strides(w, p.strides[w][0], p.strides[w][1], (size_t(1) << 62) - 1 - w);
    Options o;
    o.key_valid = rng.chance(0.5);
    o.allowed = rng.chance(0.4);
    o.lse = rng.chance(0.8);
    o.threads = static_cast<int>(rng.range(1, 3));
    attn_set_num_threads(static_cast<size_t>(o.threads));
    const Inputs in = make_inputs(p, o, rng);
    const ref::VResult r64 = ref::compute(p, in.q.data(), in.k.data(), in.v.data(),
                                          o.key_valid ? in.key_valid.data() : nullptr,
                                          o.allowed ? in.allowed.data() : nullptr);
    ++stats.cases;
    run_placement(p, o, in, r64, Place::EndAtGuard, stats, isa);
    run_placement(p, o, in, r64, Place::StartAfterGuard, stats, isa);
}

Problem shape(Rng &rng, size_t sq, size_t sk, size_t d) {
    static const size_t heads[][2] = {{1, 1}, {1, 1}, {2, 1}, {2, 2}, {3, 1}, {4, 2}};
    Problem p;
    const size_t hx = rng.below(6);
    p.batch = rng.chance(0.3) ? 2 : 1;
    p.heads_q = heads[hx][0];
    p.heads_kv = heads[hx][1];
    p.seq_q = sq;
    p.seq_k = sk;
    p.head_dim = d;
    p.causal = static_cast<int>(rng.below(3));
    if (rng.chance(0.4)) {
        p.has_scale = true;
        p.scale = rng.value(-1.5f, 1.5f);
    }
    return p;
}

// seq values biased towards lane-count edges.
size_t pick_seq(Rng &rng) {
    static const size_t edges[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 67};
    return rng.chance(0.5) ? edges[rng.below(sizeof edges / sizeof edges[0])] : rng.range(1, 67);
}

struct Ctx {
    bool full;
    size_t total_cases = 0, total_calls = 0, failed_cases = 0;
};

void run_isa(const char *isa, void *vctx) {
    Ctx &ctx = *static_cast<Ctx *>(vctx);
    Rng rng(0x5eed0000u + static_cast<uint64_t>(std::strlen(isa)) * 7919u + isa[0]);
    Stats st;
    const clock_t t0 = clock();
    if (ctx.full) {
        for (size_t d = 1; d <= 67; ++d)
            for (size_t s = 1; s <= 67; ++s)
                run_case(shape(rng, s, pick_seq(rng), d), rng, st, isa);
    } else {
        for (size_t d = 1; d <= 67; ++d)
            for (int x = 0; x < 3; ++x)
                run_case(shape(rng, pick_seq(rng), pick_seq(rng), d), rng, st, isa);
        for (size_t s = 1; s <= 67; ++s)
            for (int x = 0; x < 2; ++x) {
                run_case(shape(rng, s, pick_seq(rng), rng.range(1, 67)), rng, st, isa);
                run_case(shape(rng, pick_seq(rng), s, rng.range(1, 67)), rng, st, isa);
            }
    }
    // Key tiles (64 / 96 / 128 keys per tile) and their boundaries.
    static const size_t long_k[] = {95, 96, 97, 127, 128, 129, 191, 193, 300};
    for (size_t sk : long_k)
        run_case(shape(rng, rng.range(1, 40), sk, rng.range(1, 67)), rng, st, isa);
    // Decode: one query row block and >= 4096 keys takes the key-split + merge path.
    static const size_t decode[][2] = {{4096, 1}, {4099, 17}, {5000, 67}, {8191, 3}};
    for (const auto &c : decode) {
        Problem p = shape(rng, 1, c[0], c[1]);
        p.batch = 1;
        if (rng.chance(0.5)) { // GQA decode: 4 query heads on 1 kv head
            p.heads_q = 4;
            p.heads_kv = 1;
        }
        run_case(p, rng, st, isa);
    }
    // One key (and one query) with huge row strides: the decode path (1-4 rows per KV head,
    // head_dim >= the lane count) and the row blocks.
    static const size_t one_key[][2] = {{1, 8}, {1, 16}, {1, 64}, {1, 67}, {4, 32}, {9, 24}};
    for (const auto &c : one_key)
        for (int x = 0; x < 2; ++x) {
            Problem p = shape(rng, c[0], 1, c[1]);
            if (x) { // GQA decode: 4 query heads on 1 kv head
                p.heads_q = 4;
                p.heads_kv = 1;
            }
            run_case(p, rng, st, isa, true);
        }
    std::printf("  %-6s %5zu cases, %6zu calls, %zu failed runs, %.1f s cpu\n", isa, st.cases,
                st.calls, st.failed_cases, double(clock() - t0) / CLOCKS_PER_SEC);
    ctx.total_cases += st.cases;
    ctx.total_calls += st.calls;
    ctx.failed_cases += st.failed_cases;
}

} // namespace

int main() {
    hard::install_guard_handler();

    Ctx ctx;
    const char *full = std::getenv("ATTN_GUARD_FULL");
    ctx.full = full && *full && *full != '0';
    const int isas = hard::for_each_isa("hardening_guard_pages", run_isa, &ctx);
    attn_set_num_threads(0);
    std::printf("guard pages: %d ISAs, %zu cases, %zu calls, each buffer ending at and starting "
                "after a PROT_NONE page; %zu failed runs, %d failures\n",
                isas, ctx.total_cases, ctx.total_calls, ctx.failed_cases, hard::failures());
    return hard::failures() ? 1 : 0;
}
