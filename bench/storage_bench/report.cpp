// See cases.hpp: the report of the decode part of attn_storage_bench.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cases.hpp"
#include "kv.hpp"

namespace attn_bench {

namespace {

struct Limit {
    double gbs = NAN;
    std::string name;
};

Record base(const char *kind, const Case &c, const char *layout) {
    return Record()
        .str("kind", kind)
        .str("dtype", kStoreName[c.store])
        .str("layout", layout)
        .integer("threads", c.threads)
        .boolean("cold", c.cold)
        .num("seconds", median(c.t))
        .num("gbs", c.gbs());
}

Record limits(Record r, const Limit &l, double gbs) {
    return r.str("limit_name", l.name).num("limit_gbs", l.gbs).num("fraction", gbs / l.gbs);
}

} // namespace

void report_decode(const Options &o, const std::string &isa, const std::vector<Case> &cases,
                   std::vector<Record> &records) {
    // ---- read loops: the fastest at each thread count is the read limit ----
    Limit read[3];
    std::printf("\nread loops: 1 GiB buffer (cold), GB/s, median of %d rounds\n", o.rounds);
    for (const Case &c : cases)
        if (c.kind == READ && !(c.gbs() <= read[c.threads].gbs)) {
            read[c.threads].gbs = c.gbs();
            read[c.threads].name = std::string("read ") + c.loop->isa + " " + c.loop->what;
        }
    for (const Case &c : cases) {
        if (c.kind != READ) continue;
        std::printf("  %-6s %-22s threads %d  %6.2f GB/s  %.3f of the fastest\n", c.loop->isa,
                    c.loop->what, c.threads, c.gbs(), c.gbs() / read[c.threads].gbs);
        records.push_back(limits(base("read_loop", c, "stream"), read[c.threads], c.gbs())
                              .str("isa", c.loop->isa)
                              .str("loop", c.loop->what));
    }
    // ---- widening loops (1 core) ----
    std::printf("widening loops: register-only, 1 core, GB/s of cache bytes (widen + `group` "
                "FMAs per element)\n");
    for (const Case &c : cases) {
        if (c.kind != WIDEN) continue;
        std::printf("  %-6s %-5s group %zu d %3zu  %7.2f GB/s\n", c.wloop->isa, kStoreName[c.store],
                    c.group, c.d, c.gbs());
        records.push_back(base("widen_loop", c, "registers")
                              .str("limit_name", "")
                              .num("limit_gbs", NAN)
                              .num("fraction", NAN)
                              .str("isa", c.wloop->isa)
                              .integer("group", static_cast<long long>(c.group))
                              .integer("head_dim", static_cast<long long>(c.d)));
    }
    // ---- decode lines ----
    const WidenLoop *wl = widen_loop_for(isa.c_str());
    auto widen = [&](const Case &d) -> double {
        for (const Case &c : cases)
            if (c.kind == WIDEN && wl && c.wloop->fn == wl->fn && c.store == d.store &&
                c.group == d.group && c.d == d.d)
                return c.gbs();
        return NAN;
    };
    auto limit = [&](const Case &d) {
        Limit l = read[d.threads];
        const double w = widen(d) * d.threads;
        if (w < l.gbs) {
            l.gbs = w;
            l.name = std::string("widen ") + wl->isa + " " + kStoreName[d.store] + " x" +
                     std::to_string(d.threads);
        }
        return l;
    };
    std::printf("decode: seq_q 1, seq_k %zu, heads_kv 8, heads_q = group x 8 (GQA 32/8 at group "
                "4), batch 1 (varlen: 4 sequences of %zu, %zu, %zu, %zu keys), causal "
                "bottom-right, kernel isa %s;\n  limit = min(fastest read loop of the thread "
                "count, %s widening loop x threads); x f32 = time / the f32 line's time\n",
                o.seq_k, o.seq_k / 2, o.seq_k / 4, o.seq_k / 8, o.seq_k / 8, isa.c_str(),
                wl ? wl->isa : "no");
    // the decode line of d's layout, shape, threads and temperature in storage `store`, with
    // batch invariance `inv`
    auto partner = [&](const Case &d, int store, bool inv) -> const Case * {
        for (const Case &c : cases)
            if (c.kind == DECODE && c.invariant == inv && c.store == store &&
                c.layout == d.layout && c.threads == d.threads && c.cold == d.cold &&
                c.group == d.group && c.d == d.d)
                return &c;
        return nullptr;
    };
    auto f32_time = [&](const Case &d) {
        const Case *f = partner(d, F32, false);
        return f ? median(f->t) : NAN;
    };
    auto record = [&](const char *kind, const Case &c, const Limit &l) {
        return limits(base(kind, c, kLayoutName[c.layout]), l, c.gbs())
            .str("shape", "decode")
            .str("isa", isa)
            .integer("group", static_cast<long long>(c.group))
            .integer("head_dim", static_cast<long long>(c.d))
            .integer("seq_k", static_cast<long long>(o.seq_k));
    };
    std::printf("  dtype layout    group   d thr  cold      ms   x f32     GB/s  of limit  limit "
                "(GB/s)\n");
    auto line = [&](const Case &c, const Limit &l, const char *tail) {
        std::printf("  %-5s %-9s %5zu %3zu %3d  %-4s %8.3f %7.3f %8.2f  %8.3f  %s (%.2f)%s\n",
                    kStoreName[c.store], kLayoutName[c.layout], c.group, c.d, c.threads,
                    c.cold ? "cold" : "hot", median(c.t) * 1e3, median(c.t) / f32_time(c), c.gbs(),
                    c.gbs() / l.gbs, l.name.c_str(), l.gbs, tail);
    };
    for (const Case &c : cases) {
        if (c.kind != DECODE || c.invariant) continue;
        const Limit l = limit(c);
        line(c, l, "");
        records.push_back(record("decode", c, l)
                              .num("time_vs_f32", median(c.t) / f32_time(c))
                              .num("read_gbs", read[c.threads].gbs)
                              .num("widen_gbs", widen(c) * c.threads));
    }
    // ---- batch invariance: each invariant line against its plain line, per round ----
    bool head = false;
    for (const Case &c : cases) {
        if (c.kind != DECODE || !c.invariant) continue;
        const Case *plain = partner(c, c.store, false);
        if (!plain) continue;
        std::vector<double> ratio;
        for (size_t r = 0; r < c.t.size(); ++r) ratio.push_back(c.t[r] / plain->t[r]);
        const double x = median(ratio);
        if (!head)
            std::printf("batch invariance: the decode lines with ATTN_PARAM_BATCH_INVARIANT 1; "
                        "time 1 / time 0 (median of per-round ratios)\n");
        head = true;
        char tail[64];
        std::snprintf(tail, sizeof tail, "  invariance cost %.3f", x);
        const Limit l = limit(c);
        line(c, l, tail);
        records.push_back(
            record("invariance", c, l).num("seconds_plain", median(plain->t)).num("ratio", x));
    }
}

} // namespace attn_bench
