// See summary.hpp.
#include "summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include "measure.hpp"

namespace attn_bench {
namespace {

std::string fmt3(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", x);
    return buf;
}

} // namespace

void summarize(Results &res, const Peaks &pk, const Stream &st, const std::string &default_isa,
               const Options &o) {
    std::printf("\n== Targets (ratios measured in this run; n=%zu) ==\n", o.n);
    auto prefill = [&](const std::string &isa, size_t d, bool causal, const std::string &layout,
                       const std::string &mask, size_t threads) -> const Record * {
        return res.find("prefill", [&](const Record &r) {
            return r.get_str("isa") == isa && size_t(r.get_num("head_dim")) == d &&
                   (*r.find("causal") == "true") == causal && r.get_str("layout") == layout &&
                   r.get_str("mask") == mask && size_t(r.get_num("threads")) == threads;
        });
    };
    // Largest CPU stall share among the figures a target is made of (NaN-safe).
    auto pressure = [](std::initializer_list<const Record *> rs) {
        double m = 0;
        for (const Record *r : rs) {
            const double x = r ? r->get_num("cpu_pressure") : NAN;
            if (x > m) m = x;
        }
        return m;
    };
    auto target = [&](const std::string &name, const std::string &isa, double value, double goal,
                      bool at_least, const std::string &ref, double busy) {
        const bool pass = std::isfinite(value) && (at_least ? value >= goal : value <= goal);
        std::printf("  %-46s %-6s %8.3f  target %s %.2f  %s   (%s)%s\n", name.c_str(), isa.c_str(),
                    value, at_least ? ">=" : "<=", goal, pass ? "PASS" : "MISS", ref.c_str(),
                    busy_note(busy).c_str());
        res.add("targets", Record()
                               .str("target", name)
                               .str("isa", isa)
                               .num("value", value)
                               .num("goal", goal)
                               .str("comparison", at_least ? ">=" : "<=")
                               .boolean("pass", pass)
                               .str("reference", ref)
                               .num("cpu_pressure", busy));
    };
    std::vector<std::string> isas = {default_isa};
    if (default_isa != "avx2" && std::isfinite(pk.for_isa("avx2"))) isas.push_back("avx2");
    for (const std::string &isa : isas) {
        const double peak = pk.for_isa(isa);
        char ref[96];
        std::snprintf(ref, sizeof ref, "%s FMA peak %.1f GFLOP/s", isa.c_str(), peak);
        // "d=128 causal", "d=64 non-causal"
        auto shape = [](size_t d, bool causal) {
            return "d=" + std::to_string(d) + (causal ? " causal" : " non-causal");
        };
        // A target on the time ratio of two prefill records of this ISA (none without both).
        auto time_ratio = [&](const std::string &name, const Record *num, const Record *den,
                              double goal, bool at_least, const char *reference) {
            if (!num || !den) return;
            target(name, isa, num->get_num("best_s") / den->get_num("best_s"), goal, at_least,
                   reference, pressure({num, den}));
        };
        for (size_t d : {size_t(128), size_t(64)}) {
            for (bool causal : {false, true}) {
                const Record *r = prefill(isa, d, causal, "bhsd", "none", 1);
                if (!r) continue;
                const double goal = causal ? 0.60 : d == 128 ? 0.70 : 0.60;
                target("prefill " + shape(d, causal) + " 1t: of FMA peak", isa,
                       r->get_num("peak_ratio"), goal, true,
                       std::string(ref) + "; " + fmt3(r->get_num("adjacent_peak_ratio")) +
                           " of the adjacent peak",
                       pressure({r}));
            }
        }
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true})
                for (const char *layout : {"bhsd", "bshd"})
                    time_ratio("mask time / no-mask time " + shape(d, causal) + " " + layout,
                               prefill(isa, d, causal, layout, "pad10_block", 1),
                               prefill(isa, d, causal, layout, "none", 1), 1.10, false,
                               "same run, no mask");
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true})
                time_ratio("all-true masks / no-mask time " + shape(d, causal),
                           prefill(isa, d, causal, "bhsd", "ones", 1),
                           prefill(isa, d, causal, "bhsd", "none", 1), 1.10, false,
                           "same run, no mask");
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true})
                for (const char *layout : {"bhsd", "bshd"})
                    time_ratio("2-thread speedup " + shape(d, causal) + " " + layout,
                               prefill(isa, d, causal, layout, "none", 1),
                               prefill(isa, d, causal, layout, "none", 2), 1.8, true,
                               "same run, 1 thread");
        for (size_t d : {size_t(128), size_t(64)})
            time_ratio("causal time / non-causal time d=" + std::to_string(d),
                       prefill(isa, d, true, "bhsd", "none", 1),
                       prefill(isa, d, false, "bhsd", "none", 1), 0.55, false,
                       "same run, non-causal");
        const Record *dec = res.find("decode", [&](const Record &r) {
            return r.get_str("isa") == isa && r.get_num("threads") == 2 &&
                   r.get_str("mode") == "cold";
        });
        if (dec) {
            char sref[64];
            std::snprintf(sref, sizeof sref, "2-thread stream %.2f GB/s", st.gbs2);
            target("decode 2t K+V GB/s / stream GB/s (cold)", isa,
                   dec->get_num("ratio_to_stream_2_threads"), 0.80, true, sref,
                   std::max(pressure({dec}), st.pressure2 > 0 ? st.pressure2 : 0.0));
        }
    }
    for (auto &r : res.section("small"))
        if (r.get_str("impl") == "libattn")
            target("small n=" + std::to_string(size_t(r.get_num("n"))) + " t=" +
                       std::to_string(size_t(r.get_num("threads"))) + ": time / scalar loop",
                   r.get_str("isa"), r.get_num("ratio_to_scalar_ref"), 1.0, false,
                   "same run, plain scalar loop", pressure({&r}));
    for (auto &r : res.section("memory"))
        target("memory growth MiB n=16384 t=" + std::to_string(size_t(r.get_num("threads"))),
               r.get_str("isa"), r.get_num("growth_mib"), 64.0, false, "VmHWM before the call",
               0.0);
    // Bit identity across thread counts: every 2-thread run against its 1-thread run.
    size_t compared = 0, same = 0;
    for (const char *sec : {"prefill", "decode"})
        for (auto &r : res.section(sec))
            if (const std::string *v = r.find("identical_to_1_thread")) {
                ++compared;
                same += *v == "true";
            }
    if (compared)
        target("2-thread outputs bit-identical to 1 thread (share)", "all",
               double(same) / double(compared), 1.0, true,
               std::to_string(compared) + " configurations", 0.0);
    // For the reader: the baselines next to libattn at the headline shape.
    const Record *lib = prefill(default_isa, 128, false, "bhsd", "none", 1);
    for (auto &r : res.section("openblas"))
        if (lib && r.get_num("head_dim") == 128 && *r.find("causal") == "false" &&
            r.get_num("threads") == 1)
            std::printf("  headline d=128 non-causal 1t: libattn %s %.1f GFLOP/s = %.2fx OpenBLAS "
                        "%s unfused (%.1f GFLOP/s; its GEMMs alone %.1f)\n",
                        default_isa.c_str(), lib->get_num("gflops"),
                        lib->get_num("gflops") / r.get_num("gflops"), r.get_str("corename").c_str(),
                        r.get_num("gflops"), r.get_num("gemm_only_gflops"));
}

} // namespace attn_bench
