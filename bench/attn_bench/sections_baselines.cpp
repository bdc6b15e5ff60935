// See sections_baselines.hpp.
#include "sections_baselines.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "../baselines.hpp"
#include "machine.hpp"
#include "measure.hpp"
#include "operands.hpp"
#include "process.hpp"

namespace attn_bench {
namespace {

bool iequals(const std::string &a, const std::string &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

// The OpenBLAS unfused baseline at the prefill shapes, with the kernels OpenBLAS runs in this
// process. Returns records (section "openblas").
std::vector<Record> openblas_prefill(const Options &o, bool forced, const std::string &pfx) {
    std::vector<Record> recs;
    const std::string core = openblas_corename();
    const size_t H = 8, n = o.n;
    const Budget b = o.quick ? Budget{0.0, 1, 1, 0.0} : Budget{2.0, 2, 5, 0.0};
    Array<float> scores(n * n);
    for (size_t d : {size_t(128), size_t(64)}) {
        if (o.quick && d != 128) continue;
        PrefillData pd(H, n, d);
        Array<float> out(H * n * d);
        for (bool causal : {false, true}) {
            if (o.quick && causal) continue;
            const std::vector<int> thread_counts =
                d == 128 && !causal && !o.quick ? std::vector<int>{1, 2} : std::vector<int>{1};
            for (int threads : thread_counts) {
                openblas_threads(threads);
                Problem p;
                p.heads = H;
                p.seq_q = p.seq_k = n;
                p.head_dim = d;
                p.causal = causal;
                double gemm = 0, soft = 0;
                long calls = 0;
                const Timing t = measure(
                    [&] {
                        unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(),
                                         scores.data(), &gemm, &soft);
                        ++calls;
                    },
                    b);
                const double gflop = attention_gflop(1, H, n, n, d, causal);
                const double full_gflop = attention_gflop(1, H, n, n, d, false);
                Record r;
                r.str("corename", core)
                    .boolean("forced", forced)
                    .integer("heads", H)
                    .integer("n", n)
                    .integer("head_dim", d)
                    .boolean("causal", causal)
                    .integer("threads", threads)
                    .num("gflop", gflop)
                    .append(timing_fields(t))
                    .num("gflops", gflop / t.best)
                    .num("gemm_share", gemm / (gemm + soft))
                    .num("gemm_only_gflops", full_gflop / (gemm / calls))
                    .num("softmax_s_per_call", soft / calls);
                std::printf("  %sOpenBLAS %-9s d=%-3zu %-10s t=%d  %9.2f ms  %7.2f GFLOP/s "
                            "end to end; GEMMs alone %7.2f GFLOP/s, softmax %.0f%% of the time%s\n",
                            pfx.c_str(), core.c_str(), d, causal ? "causal" : "non-causal", threads,
                            t.best * 1e3, gflop / t.best, full_gflop / (gemm / calls),
                            100.0 * soft / (gemm + soft), busy_note(t.pressure).c_str());
                recs.push_back(r);
            }
        }
    }
    openblas_threads(1);
    return recs;
}

// The OpenBLAS baseline on the sweep shapes (H=8, d=128, non-causal, 1 thread).
std::vector<Record> openblas_sweep(const Options &o, bool forced) {
    std::vector<Record> recs;
    const std::string core = openblas_corename();
    openblas_threads(1);
    for (size_t n : sweep_sizes(o)) {
        PrefillData pd(8, n, 128);
        Array<float> out(8 * n * 128), scores(n * n);
        Problem p;
        p.heads = 8;
        p.seq_q = p.seq_k = n;
        p.head_dim = 128;
        double g = 0, s = 0;
        const Timing t = measure(
            [&] {
                unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(),
                                 scores.data(), &g, &s);
            },
            o.quick ? Budget{0.1, 1, 3, 0.0} : Budget{1.0, 2, 10, 0.01});
        const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
        std::printf("  sweep OpenBLAS %-9s n=%-5zu %7.2f GFLOP/s%s\n", core.c_str(), n, gflops,
                    busy_note(t.pressure).c_str());
        recs.push_back(Record()
                           .str("impl", "openblas")
                           .str("label", "OpenBLAS " + core + " unfused" +
                                             (forced ? " (CORETYPE forced)" : " (default pick)"))
                           .str("corename", core)
                           .boolean("forced", forced)
                           .integer("n", n)
                           .num("best_s", t.best)
                           .num("gflops", gflops)
                           .num("cpu_pressure", t.pressure));
    }
    return recs;
}

std::string forced_coretype(const Options &o) {
    if (o.coretype == "none") return "";
    if (o.coretype != "auto") return o.coretype;
    if (cpu_has("avx512f")) return "SkylakeX";
    if (cpu_has("avx2")) return "Haswell";
    return "";
}

} // namespace

// Child: the OpenBLAS baselines with OPENBLAS_CORETYPE as set in this process' environment.
int child_openblas(const Options &o) {
    std::vector<Record> recs;
    if (!o.sweep_only)
        for (auto &r : openblas_prefill(o, true, "[child] "))
            recs.push_back(r.str("section", "openblas"));
    if (!o.no_sweep)
        for (auto &r : openblas_sweep(o, true)) recs.push_back(r.str("section", "sweep"));
    write_child_records(o, recs);
    return 0;
}

void run_openblas(Results &res, const Options &o) {
    const std::string core = openblas_corename();
    std::printf("\n== Baseline: unfused attention on OpenBLAS cblas_sgemm + plain softmax, B=1, "
                "H=8 ==\n  (a) as OpenBLAS picks its kernels on this CPU: corename %s\n",
                core.c_str());
    if (!o.sweep_only)
        for (auto &r : openblas_prefill(o, false, "")) res.add("openblas", r);
    if (!o.no_sweep)
        for (auto &r : openblas_sweep(o, false)) res.add("sweep", r);
    const std::string forced = forced_coretype(o);
    if (forced.empty() || iequals(forced, core)) {
        std::printf("  (b) forced kernels: skipped (%s)\n",
                    forced.empty() ? "none requested" : "the default pick already");
        return;
    }
    std::printf("  (b) child process with OPENBLAS_CORETYPE=%s\n", forced.c_str());
    std::vector<std::string> args = {"--child=openblas", "--n=" + std::to_string(o.n),
                                     "--patience=" + std::to_string(std::max(0.0, g_patience_s))};
    if (o.quick) args.push_back("--quick");
    if (o.no_sweep) args.push_back("--no-sweep");
    if (o.sweep_only) args.push_back("--sweep-only");
    for (auto &r : run_child(args, {{"OPENBLAS_CORETYPE", forced}})) {
        const std::string sec = r.get_str("section");
        Record c;
        for (auto &kv : r.kv)
            if (kv.first != "section") c.raw(kv.first, kv.second);
        c.str("requested_coretype", forced);
        res.add(sec, c);
    }
}

void run_scalar(Results &res, const Options &o) {
    std::printf("\n== Baseline: the plain scalar reference (naive loops), H=8, head_dim 128, "
                "non-causal, only n <= %zu ==\n",
                o.scalar_max_n);
    for (size_t n : sweep_sizes(o)) {
        if (n > o.scalar_max_n) break;
        PrefillData pd(8, n, 128);
        Array<float> out(8 * n * 128), row(n);
        Problem p;
        p.heads = 8;
        p.seq_q = p.seq_k = n;
        p.head_dim = 128;
        const Timing t = measure(
            [&] {
                scalar_reference(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(), row.data());
            },
            Budget{0.0, 1, 0, 0.0});
        const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
        std::printf("  scalar reference n=%-5zu %9.2f ms  %6.2f GFLOP/s%s\n", n, t.best * 1e3,
                    gflops, busy_note(t.pressure).c_str());
        res.add("sweep", Record()
                             .str("impl", "scalar_ref")
                             .str("label", "scalar reference (plain loops)")
                             .integer("n", n)
                             .num("best_s", t.best)
                             .num("gflops", gflops)
                             .num("cpu_pressure", t.pressure));
    }
}

} // namespace attn_bench
