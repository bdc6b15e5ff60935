// See sections_libattn.hpp.
#include "sections_libattn.hpp"

#include <attn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <utility>

#include "../baselines.hpp"
#include "../timing.hpp"
#include "machine.hpp"
#include "measure.hpp"
#include "operands.hpp"
#include "process.hpp"

namespace attn_bench {
namespace {

// Exits when a libattn call fails. Not timing.hpp's check(): the same test, but this message names
// the program and says "failed" ("attn_bench: WHAT failed: STATUS (DETAIL)"), the error text
// attn_bench has always printed.
void check_call(attn_status st, const char *what) {
    if (st != ATTN_OK) {
        std::fprintf(stderr, "attn_bench: %s failed: %s (%s)\n", what, attn_status_string(st),
                     attn_last_error());
        std::exit(1);
    }
}

void use(const std::string &isa, size_t threads) {
    check_call(attn_set_isa(isa.c_str()), "attn_set_isa");
    check_call(attn_set_num_threads(threads), "attn_set_num_threads");
}

// attn_forward on a PrefillData. Returns the timing; `out` receives the output (BHSD order).
Timing time_prefill(const PrefillData &pd, bool causal, const std::string &layout,
                    const std::string &mask, const Budget &b, Array<float> &out_bhsd) {
    attn_desc *desc = nullptr;
    check_call(attn_desc_create(&desc, 1, pd.h, pd.h, pd.n, pd.n, pd.d), "attn_desc_create");
    check_call(attn_desc_set_causal(desc, causal ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE),
               "attn_desc_set_causal");
    const bool bshd = layout == "bshd";
    if (bshd)
        for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT})
            check_call(attn_desc_set_strides(desc, w, pd.n * pd.h * pd.d, pd.d, pd.h * pd.d),
                       "attn_desc_set_strides");
    Array<float> out(pd.h * pd.n * pd.d);
    const float *q = bshd ? pd.qs.data() : pd.q.data();
    const float *k = bshd ? pd.ks.data() : pd.k.data();
    const float *v = bshd ? pd.vs.data() : pd.v.data();
    const bool *kv = reinterpret_cast<const bool *>(pd.valid_for(mask));
    const bool *al = reinterpret_cast<const bool *>(pd.allowed_for(mask));
    const Timing t = measure(
        [&] {
            check_call(attn_forward(desc, q, k, v, kv, al, out.data(), nullptr), "attn_forward");
        },
        b);
    attn_desc_destroy(desc);
    if (bshd)
        pd.from_bshd(out, out_bhsd);
    else
        std::memcpy(out_bhsd.data(), out.data(), out.len * sizeof(float));
    return t;
}

// Reference outputs (OpenBLAS unfused, 1 thread) per (head_dim, causal, mask), computed once.
struct References {
    std::map<std::string, Array<float>> outs;
    const Array<float> &get(const PrefillData &pd, bool causal, const std::string &mask) {
        const std::string m = mask == "ones" ? "none" : mask; // all-true masks change nothing
        const std::string key = std::to_string(pd.d) + "/" + std::to_string(causal) + "/" + m;
        auto it = outs.find(key);
        if (it != outs.end()) return it->second;
        Problem p;
        p.heads = pd.h;
        p.seq_q = p.seq_k = pd.n;
        p.head_dim = pd.d;
        p.causal = causal;
        p.key_valid = pd.valid_for(m);
        p.allowed = pd.allowed_for(m);
        Array<float> out(pd.h * pd.n * pd.d), scores(pd.n * pd.n);
        double g = 0, s = 0;
        openblas_threads(1);
        unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(), scores.data(), &g,
                         &s);
        return outs.emplace(key, std::move(out)).first->second;
    }
};

} // namespace

std::vector<std::string> supported_isas() {
    std::vector<std::string> r;
    for (const char *isa : {"avx512", "avx2", "sse2", "scalar"})
        if (attn_set_isa(isa) == ATTN_OK) r.push_back(isa);
    check_call(attn_set_isa(nullptr), "attn_set_isa(NULL)");
    return r;
}

void run_prefill(Results &res, const Options &o, const Peaks &pk,
                 const std::vector<std::string> &isas) {
    const size_t H = 8, n = o.n;
    std::printf("\n== Prefill: libattn attn_forward, B=1, H=%zu, n=%zu (FLOPs = 4*B*H*n*n*d, "
                "causal: visible half) ==\n",
                H, n);
    const Budget big = o.quick ? Budget{0.0, 1, 1, 0.0} : Budget{1.2, 3, 15, 0.0};
    const Budget slow = Budget{0.0, 1, 0, 0.0}; // scalar/sse2 kernels: a single call
    References refs;
    for (size_t d : {size_t(128), size_t(64)}) {
        PrefillData pd(H, n, d);
        std::printf("  [head_dim %zu; masked = last 10%% of keys padded + block `allowed`: %.1f%% "
                    "of (i,j) visible before causal]\n",
                    d, 100.0 * pd.visible_fraction_masked);
        for (const std::string &isa : isas) {
            const bool full = isa == isas.front() || isa == "avx2"; // the default ISA and AVX2
            const bool fast = isa == "avx512" || isa == "avx2";
            if (o.quick && !fast) continue;
            for (bool causal : {false, true}) {
                const std::vector<std::string> layouts =
                    full ? std::vector<std::string>{"bhsd", "bshd"}
                         : std::vector<std::string>{"bhsd"};
                for (const std::string &layout : layouts) {
                    std::vector<std::string> masks = {"none", "pad10_block"};
                    if (isa == isas.front() && layout == "bhsd") masks.push_back("ones");
                    for (const std::string &mask : masks) {
                        const std::vector<size_t> thread_counts = full && mask != "ones"
                                                                      ? std::vector<size_t>{1, 2}
                                                                      : std::vector<size_t>{1};
                        Array<float> out1(H * n * d), out(H * n * d);
                        const Array<float> &ref = refs.get(pd, causal, mask);
                        for (size_t threads : thread_counts) {
                            use(isa, threads);
                            Array<float> &dst = threads == 1 ? out1 : out;
                            const Timing t =
                                time_prefill(pd, causal, layout, mask, fast ? big : slow, dst);
                            const double gflop = attention_gflop(1, H, n, n, d, causal);
                            const double gflops = gflop / t.best;
                            const double peak = pk.for_isa(isa, threads);
                            const double adj = adjacent_peak(isa, threads);
                            const double err = max_abs_diff(dst.data(), ref.data(), dst.len);
                            Record r;
                            r.str("isa", isa)
                                .integer("heads", H)
                                .integer("n", n)
                                .integer("head_dim", d)
                                .boolean("causal", causal)
                                .str("layout", layout)
                                .str("mask", mask)
                                .integer("threads", threads)
                                .num("gflop", gflop)
                                .append(timing_fields(t))
                                .num("gflops", gflops)
                                .num("peak_gflops", peak) // same ISA, same thread count
                                .num("peak_ratio", gflops / peak)
                                .num("adjacent_peak_gflops", adj)
                                .num("adjacent_peak_ratio", gflops / adj)

                                .num("max_abs_err_vs_openblas", err);
                            bool same = true;
                            if (threads != 1) {
                                same = std::memcmp(out.data(), out1.data(),
                                                   out.len * sizeof(float)) == 0;
                                r.boolean("identical_to_1_thread", same);
                            }
                            res.add("prefill", r);
                            std::printf("  %-6s d=%-3zu %-10s %s %-11s t=%zu  %9.2f ms  %7.2f "
                                        "GFLOP/s",
                                        isa.c_str(), d, causal ? "causal" : "non-causal",
                                        layout.c_str(), mask.c_str(), threads, t.best * 1e3,
                                        gflops);
                            if (std::isfinite(peak))
                                std::printf("  %.3f of %zut peak (%.3f of adjacent)", gflops / peak,
                                            threads, gflops / adj);
                            std::printf("  err %.1e%s%s%s\n", err, err > 1e-4 ? " (LARGE)" : "",
                                        threads == 1 ? ""
                                        : same       ? "  ==1t"
                                                     : "  DIFFERS FROM 1t",
                                        busy_note(t.pressure).c_str());
                        }
                    }
                }
            }
        }
    }
}

void run_decode(Results &res, const Options &o, const Stream &st,
                const std::vector<std::string> &isas, Evictor &ev) {
    const size_t HQ = 32, HKV = 8, SK = 32768, D = 128;
    const double kv_bytes = 2.0 * HKV * SK * D * sizeof(float);
    std::printf("\n== Decode: seq_q=1, seq_k=%zu, heads_q=%zu, heads_kv=%zu, head_dim=%zu, "
                "BOTTOM_RIGHT; K+V = %.0f MiB per call ==\n"
                "  cold = %.0f MiB of other memory read before each timed call (not timed: K/V "
                "come from DRAM); hot = back-to-back calls\n",
                SK, HQ, HKV, D, kv_bytes / 1048576.0, ev.bytes() / 1048576.0);
    Array<float> q(HQ * D), out(HQ * D), out1(HQ * D), ref(HQ * D), row(SK);
    fill(q.data(), q.len, 21);
    Array<float> k(HKV * SK * D), v(HKV * SK * D);
    fill(k.data(), k.len, 22);
    fill(v.data(), v.len, 23);
    // Reference: the plain scalar loop per query head (its KV head is h / (HQ / HKV)).
    for (size_t h = 0; h < HQ; ++h) {
        Problem p;
        p.heads = 1;
        p.seq_q = 1;
        p.seq_k = SK;
        p.head_dim = D;
        const size_t kvh = h / (HQ / HKV);
        scalar_reference(p, q.data() + h * D, k.data() + kvh * SK * D, v.data() + kvh * SK * D,
                         ref.data() + h * D, row.data());
    }
    attn_desc *desc = nullptr;
    check_call(attn_desc_create(&desc, 1, HQ, HKV, 1, SK, D), "attn_desc_create");
    check_call(attn_desc_set_causal(desc, ATTN_CAUSAL_BOTTOM_RIGHT), "attn_desc_set_causal");
    const Budget b = o.quick ? Budget{0.3, 3, 10, 0.0} : Budget{1.0, 5, 40, 0.0};
    // cold samples each cost an eviction read (~40-80 ms) besides the call: fewer of them
    const Budget b_cold = o.quick ? Budget{0.1, 3, 5, 0.0} : Budget{0.3, 5, 12, 0.0};
    const double gflop = attention_gflop(1, HQ, 1, SK, D, false);
    for (const std::string &isa : isas) {
        for (size_t threads : {size_t(1), size_t(2)}) {
            use(isa, threads);
            for (const char *mode : {"cold", "hot"}) {
                const bool cold = !std::strcmp(mode, "cold");
                const Timing t = measure(
                    [&] {
                        check_call(attn_forward(desc, q.data(), k.data(), v.data(), nullptr,
                                                nullptr, out.data(), nullptr),
                                   "attn_forward");
                    },
                    isa == "scalar" ? Budget{0.0, 2, 2, 0.0}
                    : cold          ? b_cold
                                    : b,
                    cold ? std::function<void()>([&] { ev.run(); }) : nullptr);
                const double gbs = kv_bytes / t.best * 1e-9;
                const double stream = threads == 1 ? st.gbs1 : st.gbs2;
                const double err = max_abs_diff(out.data(), ref.data(), out.len);
                Record r;
                r.str("isa", isa)
                    .integer("threads", threads)
                    .str("mode", mode)
                    .num("kv_bytes", kv_bytes)
                    .num("evict_bytes_before_each_call", cold ? double(ev.bytes()) : 0.0)
                    .append(timing_fields(t))
                    .num("gbs", gbs)
                    .num("stream_gbs_same_threads", stream)
                    .num("ratio_to_stream_same_threads", gbs / stream)
                    .num("ratio_to_stream_2_threads", gbs / st.gbs2)
                    .num("gflops", gflop / t.best)
                    .num("max_abs_err_vs_scalar_ref", err);
                std::printf("  %-6s t=%zu %-4s  %8.3f ms  %6.2f GB/s  %.3f of %d-thread stream "
                            "(%.3f of 2-thread)  %6.2f GFLOP/s  err %.1e",
                            isa.c_str(), threads, mode, t.best * 1e3, gbs, gbs / stream,
                            int(threads), gbs / st.gbs2, gflop / t.best, err);
                if (cold) {
                    if (threads == 1) {
                        std::memcpy(out1.data(), out.data(), out.len * sizeof(float));
                    } else {
                        const bool same =
                            std::memcmp(out.data(), out1.data(), out.len * sizeof(float)) == 0;
                        r.boolean("identical_to_1_thread", same);
                        std::printf("  %s", same ? "==1t" : "DIFFERS FROM 1t");
                    }
                }
                std::printf("%s\n", busy_note(t.pressure).c_str());
                res.add("decode", r);
            }
        }
    }
    attn_desc_destroy(desc);
}

void run_small(Results &res, const Options &o, const std::string &default_isa) {
    const size_t D = 64;
    std::printf("\n== Small shapes: B=1, H=1, head_dim %zu, non-causal, ns per call "
                "(libattn %s vs the plain scalar loop) ==\n",
                D, default_isa.c_str());
    const Budget b = o.quick ? Budget{0.1, 3, 10, 0.005} : Budget{0.4, 7, 30, 0.01};
    for (size_t n : {size_t(16), size_t(32), size_t(64), size_t(128)}) {
        Array<float> q(n * D), k(n * D), v(n * D), out(n * D), row(n);
        fill(q.data(), q.len, 31);
        fill(k.data(), k.len, 32);
        fill(v.data(), v.len, 33);
        Problem p;
        p.seq_q = p.seq_k = n;
        p.head_dim = D;
        const Timing ref = measure(
            [&] { scalar_reference(p, q.data(), k.data(), v.data(), out.data(), row.data()); }, b);
        res.add("small", Record()
                             .str("impl", "scalar_ref")
                             .integer("n", n)
                             .integer("head_dim", D)
                             .num("ns_per_call", ref.best * 1e9)
                             .num("gflops", attention_gflop(1, 1, n, n, D, false) / ref.best)
                             .num("cpu_pressure", ref.pressure));
        std::printf("  n=%-4zu scalar loop          %10.0f ns%s\n", n, ref.best * 1e9,
                    busy_note(ref.pressure).c_str());
        attn_desc *desc = nullptr;
        check_call(attn_desc_create(&desc, 1, 1, 1, n, n, D), "attn_desc_create");
        for (size_t threads : {size_t(1), size_t(2)}) {
            use(default_isa, threads);
            const Timing t = measure(
                [&] {
                    check_call(attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr,
                                            out.data(), nullptr),
                               "attn_forward");
                },
                b);
            res.add("small", Record()
                                 .str("impl", "libattn")
                                 .str("isa", default_isa)
                                 .integer("threads", threads)
                                 .integer("n", n)
                                 .integer("head_dim", D)
                                 .num("ns_per_call", t.best * 1e9)
                                 .num("ns_per_call_median", t.median * 1e9)
                                 .num("ratio_to_scalar_ref", t.best / ref.best)
                                 .num("gflops", attention_gflop(1, 1, n, n, D, false) / t.best)
                                 .num("cpu_pressure", t.pressure));
            std::printf("  n=%-4zu libattn %s t=%zu  %10.0f ns  (%.2fx the scalar loop's time)%s\n",
                        n, default_isa.c_str(), threads, t.best * 1e9, t.best / ref.best,
                        busy_note(t.pressure).c_str());
        }
        attn_desc_destroy(desc);
    }
}

// Child: peak RSS growth of one attn_forward at n=16384, d=64 beyond the operands. VmHWM of this
// fresh process is the measure; getrusage's ru_maxrss is not: after posix_spawn (vfork + exec) it
// carries the parent's peak.
int child_mem(const Options &o) {
    const size_t n = 16384, d = 64;
    Array<float> q(n * d), k(n * d), v(n * d), out(n * d);
    fill(q.data(), q.len, 41);
    fill(k.data(), k.len, 42);
    fill(v.data(), v.len, 43);
    std::memset(out.data(), 0, out.len * sizeof(float));
    attn_desc *desc = nullptr;
    check_call(attn_desc_create(&desc, 1, 1, 1, n, n, d), "attn_desc_create");
    const long h0 = vm_hwm_kib();
    use(o.isa, o.threads);
    double t = now();
    check_call(
        attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr, out.data(), nullptr),
        "attn_forward");
    t = now() - t;
    const long h1 = vm_hwm_kib();
    check_call(
        attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr, out.data(), nullptr),
        "attn_forward");
    const long h2 = vm_hwm_kib();
    attn_desc_destroy(desc);
    Record r;
    r.str("isa", o.isa)
        .integer("threads", o.threads)
        .integer("n", n)
        .integer("head_dim", d)
        .num("operands_mib", 4.0 * n * d * sizeof(float) / 1048576.0)
        .num("seq_x_seq_buffer_mib", double(n) * n * sizeof(float) / 1048576.0)
        .num("hwm_before_mib", h0 / 1024.0)
        .num("hwm_after_mib", h1 / 1024.0)
        .num("growth_mib", (h1 - h0) / 1024.0)
        .num("growth_second_call_mib", (h2 - h1) / 1024.0)
        .num("first_call_s", t)
        .num("first_call_gflops", attention_gflop(1, 1, n, n, d, false) / t);
    write_child_records(o, {r});
    return 0;
}

void run_memory(Results &res, const std::string &default_isa) {
    std::printf("\n== Memory: peak RSS (VmHWM) growth of attn_forward, B=1, H=1, n=16384, d=64, "
                "beyond its operands (fresh child process) ==\n");
    for (size_t threads : {size_t(1), size_t(2)}) {
        auto recs = run_child(
            {"--child=mem", "--isa=" + default_isa, "--threads=" + std::to_string(threads)}, {});
        for (auto &r : recs) {
            std::printf("  %s t=%zu  growth %.2f MiB (second call +%.2f MiB); operands %.0f MiB; "
                        "a seq x seq fp32 buffer would be %.0f MiB; first call %.2f s\n",
                        default_isa.c_str(), threads, r.get_num("growth_mib"),
                        r.get_num("growth_second_call_mib"), r.get_num("operands_mib"),
                        r.get_num("seq_x_seq_buffer_mib"), r.get_num("first_call_s"));
            res.add("memory", r);
        }
    }
}

void run_sweep_libattn(Results &res, const Options &o, const std::vector<std::string> &isas) {
    std::printf("\n== Sweep: GFLOP/s vs n, B=1, H=8, head_dim 128, non-causal, 1 thread ==\n");
    for (const std::string &isa : isas) {
        if (isa != "avx512" && isa != "avx2" && isa != isas.front()) continue;
        use(isa, 1);
        for (size_t n : sweep_sizes(o)) {
            PrefillData pd(8, n, 128);
            Array<float> out(8 * n * 128);
            const Timing t =
                time_prefill(pd, false, "bhsd", "none",
                             o.quick ? Budget{0.1, 1, 3, 0.0} : Budget{1.0, 3, 20, 0.01}, out);
            const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
            std::printf("  sweep libattn %-6s n=%-5zu %7.2f GFLOP/s%s\n", isa.c_str(), n, gflops,
                        busy_note(t.pressure).c_str());
            res.add("sweep", Record()
                                 .str("impl", "libattn")
                                 .str("label", "libattn " + isa)
                                 .str("isa", isa)
                                 .integer("n", n)
                                 .num("best_s", t.best)
                                 .num("gflops", gflops)
                                 .num("cpu_pressure", t.pressure));
        }
    }
}

} // namespace attn_bench
