// See prefill.hpp.
#include "prefill.hpp"

#include <attn.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "../timing.hpp"
#include "../widen.hpp"

namespace attn_bench {

namespace {

// One K/V pair in every storage type (converted by the library's helpers), and a call of it.
struct Problem {
    size_t hq, hkv, sq, sk, d;
    std::vector<float> q, out, lse;
    std::vector<float> k32, v32, ks, vs;
    std::vector<uint16_t> k16, v16, kb, vb;
    std::vector<int8_t> k8, v8;
    attn_desc *desc = nullptr;

    Problem(size_t h, size_t n, size_t d_, int causal, bool invariant)
        : hq(h), hkv(h), sq(n), sk(n), d(d_) {
        check(attn_desc_create(&desc, 1, hq, hkv, sq, sk, d), "desc");
        check(attn_desc_set_int(desc, ATTN_PARAM_CAUSAL, causal), "causal");
        check(attn_desc_set_int(desc, ATTN_PARAM_BATCH_INVARIANT, invariant), "invariant");
        std::mt19937 g(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        q.resize(hq * sq * d);
        for (auto &x : q) x = u(g);
        const size_t n_kv = hkv * sk * d, rows = hkv * sk;
        k32.resize(n_kv);
        v32.resize(n_kv);
        for (auto &x : k32) x = u(g);
        for (auto &x : v32) x = u(g);
        k16.resize(n_kv), v16.resize(n_kv), kb.resize(n_kv), vb.resize(n_kv);
        k8.resize(n_kv), v8.resize(n_kv), ks.resize(rows), vs.resize(rows);
        check(attn_convert_f32_to_f16(k32.data(), k16.data(), n_kv), "f16");
        check(attn_convert_f32_to_f16(v32.data(), v16.data(), n_kv), "f16");
        check(attn_convert_f32_to_bf16(k32.data(), kb.data(), n_kv), "bf16");
        check(attn_convert_f32_to_bf16(v32.data(), vb.data(), n_kv), "bf16");
        check(attn_quantize_i8(k32.data(), rows, d, k8.data(), ks.data()), "i8");
        check(attn_quantize_i8(v32.data(), rows, d, v8.data(), vs.data()), "i8");
        out.resize(hq * sq * d);
        lse.resize(hq * sq);
    }
    ~Problem() { attn_desc_destroy(desc); }

    void run(int s) {
        attn_args *a = nullptr;
        check(attn_args_create(&a), "args");
        const size_t n = k32.size();
        check(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()), "q");
        switch (s) {
        case F32:
            check(attn_args_set_f32(a, ATTN_K, k32.data(), n), "k");
            check(attn_args_set_f32(a, ATTN_V, v32.data(), n), "v");
            break;
        case F16:
            check(attn_args_set_f16(a, ATTN_K, k16.data(), n), "k");
            check(attn_args_set_f16(a, ATTN_V, v16.data(), n), "v");
            break;
        case BF16:
            check(attn_args_set_bf16(a, ATTN_K, kb.data(), n), "k");
            check(attn_args_set_bf16(a, ATTN_V, vb.data(), n), "v");
            break;
        default:
            check(attn_args_set_i8(a, ATTN_K, k8.data(), n), "k");
            check(attn_args_set_i8(a, ATTN_V, v8.data(), n), "v");
            check(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size()), "k_scale");
            check(attn_args_set_f32(a, ATTN_V_SCALE, vs.data(), vs.size()), "v_scale");
        }
        check(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()), "out");
        check(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()), "lse");
        check(attn_run(desc, ATTN_OP_FORWARD, a), "run");
        attn_args_destroy(a);
    }
};

double best_of(Problem &p, int s, int reps) {
    double best = 1e30;
    for (int x = 0; x < reps; ++x) {
        const double t0 = now();
        p.run(s);
        best = std::min(best, now() - t0);
    }
    return best;
}

Record prefill_record(const char *kind, int s, double seconds, double gflops) {
    return Record()
        .str("kind", kind)
        .str("dtype", kStoreName[s])
        .str("layout", "bhsd")
        .integer("threads", 1)
        .boolean("cold", false)
        .num("seconds", seconds)
        .num("gbs", NAN)
        .num("gflops", gflops);
}

} // namespace

void prefill_section(int rounds, int reps, std::vector<Record> &records) {
    check(attn_set_num_threads(1), "threads");
    const size_t n = 2048, H = 8;
    std::printf("\nprefill: B 1, H %zu, n %zu, 1 thread, hot; f32 time / stored time (>= 0.95 "
                "means the widening is hidden)\n",
                H, n);
    for (size_t d : {128, 64})
        for (int causal : {0, 1}) {
            Problem p(H, n, d, causal ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE, false);
            std::vector<double> t[4];
            for (int s = 0; s < 4; ++s) p.run(s);
            for (int r = 0; r < rounds; ++r)
                for (int s = 0; s < 4; ++s) t[s].push_back(best_of(p, s, reps));
            const double f32 = median(t[F32]);
            const double flops = 4.0 * H * d * n * (causal ? (n + 1) / 2.0 : double(n));
            std::printf("  d %3zu %-10s f32 %7.2f ms (%6.1f GFLOP/s)", d,
                        causal ? "causal" : "non-causal", f32 * 1e3, flops / f32 / 1e9);
            for (int s = 0; s < 4; ++s) {
                const double m = median(t[s]);
                if (s) std::printf("  %s %.3f", kStoreName[s], f32 / m);
                records.push_back(prefill_record("prefill", s, m, flops / m / 1e9)
                                      .integer("head_dim", static_cast<long long>(d))
                                      .integer("n", static_cast<long long>(n))
                                      .boolean("causal", causal != 0)
                                      .str("limit_name", "f32 time")
                                      .num("limit_gbs", NAN)
                                      .num("fraction", f32 / m));
            }
            std::printf("\n");
        }
    // batch invariance on prefill: the same call with the parameter 1 and 0, interleaved
    Problem plain(H, n, 128, ATTN_CAUSAL_TOP_LEFT, false),
        inv(H, n, 128, ATTN_CAUSAL_TOP_LEFT, true);
    plain.run(F32);
    inv.run(F32);
    std::vector<double> ratio, tp, ti;
    for (int r = 0; r < rounds; ++r) {
        tp.push_back(best_of(plain, F32, reps));
        ti.push_back(best_of(inv, F32, reps));
        ratio.push_back(ti.back() / tp.back());
    }
    const double flops = 4.0 * H * 128 * n * ((n + 1) / 2.0), r = median(ratio);
    std::printf("  batch invariance, f32 d 128 causal: %.2f ms, time with "
                "ATTN_PARAM_BATCH_INVARIANT 1 / 0: %.3f\n",
                median(ti) * 1e3, r);
    records.push_back(prefill_record("invariance", F32, median(ti), flops / median(ti) / 1e9)
                          .str("shape", "prefill")
                          .integer("head_dim", 128)
                          .integer("n", static_cast<long long>(n))
                          .boolean("causal", true)
                          .str("limit_name", "")
                          .num("limit_gbs", NAN)
                          .num("fraction", NAN)
                          .num("ratio", r));
}

} // namespace attn_bench
