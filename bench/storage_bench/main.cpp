// attn_storage_bench: decode against this machine's limits, per storage type and layout, in one
// run (bench/README.md, "Storage types"). One part a file:
//   main.cpp     the options, the cases, the interleaved rounds, the JSON file
//   cases.hpp    the options and the cases (read loop, widening loop, decode line)
//   report.cpp   the decode report: read loops, widening loops, decode lines with their limits,
//                batch invariance; and their records
//   kv.cpp       the K/V caches in each storage type and layout, and the decode calls
//   prefill.cpp  prefill with 16-bit / int8 K/V against fp32, and batch invariance on prefill
// The limits come from bench/stream.hpp (read loops, every ISA this CPU has, on a 1 GiB buffer)
// and bench/widen.hpp (register-only widening loops). A decode line's limit is the lower of the
// fastest read loop on its thread count and the widening loop of the library's kernel ISA times
// its thread count (that loop is per core).
//
// Every case (read loop, widening loop, decode line) runs once per round, the cases rotated
// between rounds; a figure is the median over rounds. A cold decode sample is one call after a
// 1 GiB eviction read (bench/evict.hpp); a hot one the best of --reps calls after a warm call.
#include <attn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../attn_bench/records.hpp"
#include "../evict.hpp"
#include "../stream.hpp"
#include "../timing.hpp"
#include "../widen.hpp"
#include "cases.hpp"
#include "kv.hpp"
#include "prefill.hpp"

using namespace attn_bench;

namespace {

const char *const kUsage =
    "usage: %s [--rounds N] [--reps N] [--threads 1|2] [--seq-k N] [--hot | --cold] "
    "[--no-decode] [--no-prefill] [--sweep] [--quick] [--isa NAME] [--hugepages] [--json FILE]\n";

Options parse(int argc, char **argv) {
    Options o;
    bool rounds = false, reps = false, seq_k = false;
    for (int x = 1; x < argc; ++x) {
        const char *a = argv[x];
        const bool value = x + 1 < argc;
        if (!std::strcmp(a, "--rounds") && value)
            o.rounds = std::atoi(argv[++x]), rounds = true;
        else if (!std::strcmp(a, "--reps") && value)
            o.reps = std::atoi(argv[++x]), reps = true;
        else if (!std::strcmp(a, "--threads") && value)
            o.threads = std::atoi(argv[++x]);
        else if (!std::strcmp(a, "--seq-k") && value)
            o.seq_k = std::strtoull(argv[++x], nullptr, 10), seq_k = true;
        else if (!std::strcmp(a, "--json") && value)
            o.json = argv[++x];
        else if (!std::strcmp(a, "--isa") && value)
            o.isa = argv[++x];
        else if (!std::strcmp(a, "--hot"))
            o.cold = false;
        else if (!std::strcmp(a, "--cold"))
            o.hot = false;
        else if (!std::strcmp(a, "--no-decode"))
            o.decode = false;
        else if (!std::strcmp(a, "--no-prefill"))
            o.prefill = false;
        else if (!std::strcmp(a, "--sweep"))
            o.sweep = true;
        else if (!std::strcmp(a, "--quick"))
            o.quick = true;
        else if (!std::strcmp(a, "--hugepages"))
            default_pages() = Pages::huge;
        else {
            std::fprintf(stderr, kUsage, argv[0]);
            std::exit(2);
        }
    }
    if (o.quick) {
        if (!rounds) o.rounds = 3;
        if (!reps) o.reps = 1;
        if (!seq_k) o.seq_k = 8192;
    }
    if (o.rounds < 1 || o.reps < 1 || o.threads < 0 || o.threads > 2 || o.seq_k < 128 ||
        o.seq_k % 128 || (!o.cold && !o.hot)) {
        std::fprintf(stderr,
                     "%s: --rounds and --reps >= 1, --threads 1 or 2, --seq-k a multiple of 128, "
                     "not both --hot and --cold\n",
                     argv[0]);
        std::exit(2);
    }
    return o;
}

std::string cpu_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (!line.compare(0, 10, "model name")) {
            const size_t c = line.find(": ");
            return c == std::string::npos ? line : line.substr(c + 2);
        }
    return "unknown";
}

} // namespace

int main(int argc, char **argv) {
    const Options o = parse(argc, argv);
    if (!o.isa.empty()) check(attn_set_isa(o.isa.c_str()), "--isa");
    const std::string isa = attn_isa(), cpu = cpu_name();
    std::printf("storage_bench: libattn %s, isa %s, CPU %s, %d rounds, %d reps\n",
                attn_version_string(), isa.c_str(), cpu.c_str(), o.rounds, o.reps);
    std::vector<Record> records;
    records.push_back(Record()
                          .str("kind", "run")
                          .str("version", attn_version_string())
                          .str("isa", isa)
                          .str("cpu", cpu)
                          .integer("rounds", o.rounds)
                          .integer("reps", o.reps)
                          .integer("seq_k", static_cast<long long>(o.seq_k))
                          .boolean("sweep", o.sweep));
    if (o.decode) {
        std::vector<int> threads;
        for (int t = 1; t <= 2; ++t)
            if (!o.threads || o.threads == t) threads.push_back(t);
        Evictor ev;
        std::vector<Case> cases;
        // ---- the read loops: every loop of every ISA, each thread count ----
        const std::vector<StreamLoop> loops = available_stream_loops();
        for (const StreamLoop &l : loops)
            for (int t : threads) {
                Case c(READ);
                c.threads = t;
                c.loop = &l;
                c.bytes = static_cast<double>(ev.bytes());
                c.sample = [&ev, &l, t] {
                    const double g =
                        stream_read_gbs(l, ev.data(), ev.bytes() / sizeof(float), t, 1);
                    return static_cast<double>(ev.bytes()) / (g * 1e9);
                };
                cases.push_back(c);
            }
        // ---- the decode lines: (d, layout, store, group, invariant) -> one call ----
        struct Shape {
            size_t group, d;
            std::vector<int> stores, layouts;
        };
        std::vector<Shape> shapes = {{4, 128, {F32, F16, BF16, I8}, {0, 1, 2, 3, 4}}};
        if (o.sweep)
            for (size_t d : {128, 64})
                for (size_t g : {1, 2, 4, 8})
                    if (g != 4 || d != 128)
                        shapes.push_back({g, d, {F32, I8}, {BHSD, PAGED_HM, PAGED_TM}});
        std::map<size_t, std::vector<std::unique_ptr<KvSet>>> sets; // by d
        for (size_t d : {128, 64}) {
            bool layouts[kLayouts] = {}, stores[4] = {};
            for (const Shape &s : shapes)
                if (s.d == d) {
                    for (int l : s.layouts) layouts[l] = true;
                    for (int x : s.stores) stores[x] = true;
                }
            if (std::find(std::begin(layouts), std::end(layouts), true) != std::end(layouts))
                sets[d] = make_kv_sets(o.seq_k, d, layouts, stores);
        }
        auto kv_set = [&](size_t d, int layout) -> const KvSet & {
            for (const auto &s : sets[d])
                if (s->layout == layout) return *s;
            std::abort();
        };
        std::map<std::tuple<size_t, int, int, size_t, bool>, std::unique_ptr<DecodeCall>> calls;
        auto call = [&](size_t d, int layout, int store, size_t g, bool inv) -> DecodeCall & {
            auto &c = calls[std::make_tuple(d, layout, store, g, inv)];
            if (!c) c = std::make_unique<DecodeCall>(kv_set(d, layout), store, g, inv);
            return *c;
        };
        auto add_decode = [&](size_t g, size_t d, int store, int layout, bool inv) {
            for (int t : threads)
                for (int cold = 1; cold >= 0; --cold) {
                    if (cold ? !o.cold : !o.hot) continue;
                    if (!cold && o.sweep && (g != 4 || d != 128)) continue; // sweep: cold only
                    Case c(DECODE);
                    c.threads = t;
                    c.store = store;
                    c.layout = layout;
                    c.cold = cold;
                    c.invariant = inv;
                    c.group = g;
                    c.d = d;
                    c.bytes = kv_set(d, layout).kv_bytes(store);
                    const DecodeCall *dc = &call(d, layout, store, g, inv);
                    const int reps = o.reps;
                    c.sample = [&ev, dc, t, cold, reps] {
                        check(attn_set_num_threads(static_cast<size_t>(t)), "threads");
                        if (cold) {
                            ev.run();
                            const double t0 = now();
                            dc->run();
                            return now() - t0;
                        }
                        dc->run();
                        double best = 1e30;
                        for (int x = 0; x < reps; ++x) {
                            const double t0 = now();
                            dc->run();
                            best = std::min(best, now() - t0);
                        }
                        return best;
                    };
                    cases.push_back(c);
                }
        };
        for (const Shape &s : shapes)
            for (int l : s.layouts)
                for (int st : s.stores) add_decode(s.group, s.d, st, l, false);
        for (int l = 0; l < kLayouts; ++l) add_decode(4, 128, F32, l, true); // invariance
        // ---- the widening loops: every ISA, each (store, group, d) of a decode line ----
        const std::vector<WidenLoop> wloops = available_widen_loops();
        const double wsec = o.quick ? 0.01 : 0.05;
        for (const WidenLoop &w : wloops)
            for (const Shape &s : shapes)
                for (int st : s.stores) {
                    Case c(WIDEN);
                    c.store = st;
                    c.group = s.group;
                    c.d = s.d;
                    c.cold = false;
                    c.wloop = &w;
                    c.bytes = 1e9;
                    const int g = static_cast<int>(s.group);
                    const size_t d = s.d;
                    auto passes = std::make_shared<size_t>(0); // calibrated by the first sample
                    c.sample = [&w, st, g, d, wsec, passes] {
                        return 1.0 / widen_gbs(w, st, g, d, wsec, passes.get());
                    };
                    cases.push_back(c);
                }
        // every read loop's sum, and every widening loop's arithmetic against a float64 sum of
        // the same products
        double rerr = 0;
        for (const StreamLoop &l : loops) rerr = std::max(rerr, stream_check(l));
        std::printf("read loops checked against exact sums: max |difference| %g%s\n", rerr,
                    rerr > 0 ? "  WARNING: a read loop skips or repeats data" : "");
        double werr = 0;
        for (const WidenLoop &w : wloops)
            for (const Shape &s : shapes)
                for (int st : s.stores)
                    werr = std::max(werr, widen_check(w, st, static_cast<int>(s.group), s.d));
        std::printf("widening loops checked against float64: max |difference| / sum |products| "
                    "%.2g%s\n",
                    werr, werr > 1e-5 ? "  WARNING: a widening loop computes something else" : "");
        // warm-up (page faults, the thread pool) and a check that every layout computes what
        // the dense BHSD cache does (varlen has other sequences: not compared)
        check(attn_set_num_threads(2), "threads");
        double worst = 0;
        for (auto &kv : calls) kv.second->run();
        for (auto &kv : calls) {
            const int layout = std::get<1>(kv.first);
            if (layout == BHSD || layout == VARLEN) continue;
            const auto &ref = call(std::get<0>(kv.first), BHSD, std::get<2>(kv.first),
                                   std::get<3>(kv.first), false)
                                  .out();
            const auto &out = kv.second->out();
            for (size_t x = 0; x < ref.size(); ++x)
                worst = std::max(worst, static_cast<double>(std::fabs(out[x] - ref[x])));
        }
        std::printf("layouts checked against dense BHSD: max |difference| %.3g%s\n", worst,
                    worst > 1e-4 ? "  WARNING: the layouts disagree" : "");
        // ---- the rounds ----
        for (int r = 0; r < o.rounds; ++r) {
            std::fprintf(stderr, "\rround %d/%d", r + 1, o.rounds);
            for (size_t x = 0; x < cases.size(); ++x) {
                Case &c = cases[(x + static_cast<size_t>(r)) % cases.size()];
                c.t.push_back(c.sample());
            }
        }
        std::fprintf(stderr, "\n");
        report_decode(o, isa, cases, records);
    }
    if (o.prefill) prefill_section(o.rounds, o.reps, records);
    if (!o.json.empty()) {
        std::ofstream f(o.json);
        f << "[\n";
        for (size_t i = 0; i < records.size(); ++i)
            f << "  " << records[i].json() << (i + 1 < records.size() ? ",\n" : "\n");
        f << "]\n";
        if (!f) {
            std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
            return 1;
        }
        std::printf("\nwrote %zu records to %s\n", records.size(), o.json.c_str());
    }
    return 0;
}
