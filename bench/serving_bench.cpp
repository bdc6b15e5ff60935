// Serving layouts against their dense equivalents, as ratios in one run (and
// the cost of batch invariance). Every case and its reference run in interleaved rounds; in
// a round each runs R times back to back and keeps its fastest; each figure is the median over
// rounds of the per-round ratio.
//
//   build/bench/attn_serving_bench [--rounds N] [--reps R] [--threads T] [--hugepages]
//
//   --hugepages: the pack's, the prefill's and the eviction buffers are allocated 2 MiB-aligned
//            and madvise(MADV_HUGEPAGE)d before they are touched (the decode buffers always run
//            in both kinds, below)
//
//   pack     {2048, 1536, 1024, 512} causal, H 8, d 128, one varlen call / the sum of the four
//            single-sequence calls                                               [<= 1.05]
//   paged    decode, 32k keys, GQA 32/8, d 128, page 16 with shuffled page ids, token-major and
//            head-major pages: dense decode time / paged time (K/V read speed)   [>= 0.95]
//            K/V evicted before every call by reading 1 GiB of other memory ("cold"), and hot;
//            the dense K/V and the two pools of each line in one kind of memory, both kinds in
//            the same run:
//            - transparent huge pages (2 MiB-aligned, MADV_HUGEPAGE): how a server keeps its KV
//              pool (numpy's default for large arrays, vLLM's HugeTLB-backed CPU KV offload
//              buffer, PyTorch's C10_THP_MEM_ALLOC_ENABLE);
//            - 4 KiB pages (MADV_NOHUGEPAGE), 4 KiB-aligned: the pools' shuffled pages then miss
//              the TLB in a scattered order where a dense stream walks its page tables in order
//              (a nested walk on a virtual machine)
//   invariant ATTN_PARAM_BATCH_INVARIANT = 1 / 0 on the pack, a 2048 causal prefill and the
//            dense decode (cold, huge pages)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attn.h"

#include "page_alloc.hpp"
#include "timing.hpp"

using attn_bench::check;
using attn_bench::median;
using attn_bench::now;
using attn_bench::PageAlloc;
using attn_bench::Pages;

namespace {

using FVec = std::vector<float, PageAlloc<float>>;

// AnonHugePages of this process (MiB): whether the kernel granted the advice.
double anon_huge_mib() {
    FILE *f = std::fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "AnonHugePages: %lf kB", &kb) == 1) break;
    std::fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

FVec randoms(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    FVec x(n);
    for (auto &v : x) v = u(g);
    return x;
}

// Reading this evicts every cache level (1 GiB, more than any L3 this kind of host has).
struct Evictor {
    FVec buf = FVec((1u << 30) / sizeof(float), 1.0f);
    volatile float sink = 0;
    void run() {
        float s = 0;
        for (size_t i = 0; i < buf.size(); i += 16) s += buf[i];
        sink = s;
    }
};

// A call with its descriptor and operands kept alive.
struct Call {
    attn_desc *d = nullptr;
    attn_args *a = nullptr;
    void run() const { check(attn_run(d, ATTN_OP_FORWARD, a), "attn_run"); }
};

attn_desc *desc(size_t b, size_t hq, size_t hkv, size_t sq, size_t sk, size_t dim, int causal,
                bool invariant) {
    attn_desc *d = nullptr;
    check(attn_desc_create(&d, b, hq, hkv, sq, sk, dim), "desc");
    check(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, causal), "causal");
    check(attn_desc_set_int(d, ATTN_PARAM_BATCH_INVARIANT, invariant), "invariant");
    return d;
}

Call make_call(attn_desc *d, const FVec &q, const FVec &k, const FVec &v, FVec &out) {
    Call c;
    c.d = d;
    check(attn_args_create(&c.a), "args");
    attn_args_set_f32(c.a, ATTN_Q, q.data(), q.size());
    attn_args_set_f32(c.a, ATTN_K, k.data(), k.size());
    attn_args_set_f32(c.a, ATTN_V, v.data(), v.size());
    attn_args_set_out_f32(c.a, ATTN_OUT, out.data(), out.size());
    return c;
}

struct Case {
    std::string name;
    std::function<void()> call;
    bool cold;
    std::vector<double> best; // per round
};

} // namespace

int main(int argc, char **argv) {
    int rounds = 7, reps = 3;
    size_t threads = 0;
    for (int i = 1; i < argc; ++i) {
        const bool value = i + 1 < argc;
        if (!std::strcmp(argv[i], "--hugepages"))
            attn_bench::default_pages() = Pages::huge;
        else if (value && !std::strcmp(argv[i], "--rounds"))
            rounds = std::atoi(argv[++i]);
        else if (value && !std::strcmp(argv[i], "--reps"))
            reps = std::atoi(argv[++i]);
        else if (value && !std::strcmp(argv[i], "--threads"))
            threads = std::strtoul(argv[++i], nullptr, 10);
        else {
            std::fprintf(stderr, "usage: %s [--rounds N] [--reps R] [--threads T] [--hugepages]\n",
                         argv[0]);
            return 2;
        }
    }
    check(attn_set_num_threads(threads), "threads");
    std::printf("libattn %s, isa %s, %zu threads, %d rounds x %d reps%s\n", attn_version_string(),
                attn_isa(), attn_get_num_threads(), rounds, reps,
                attn_bench::default_pages() == Pages::huge
                    ? ", large buffers on transparent huge pages"
                    : "");
    Evictor ev;
    std::vector<Case> cases;

    // ---- the pack and its four single calls ----
    const size_t H = 8, D = 128;
    const size_t lens[4] = {2048, 1536, 1024, 512};
    const size_t total = 2048 + 1536 + 1024 + 512;
    FVec pq = randoms(total * H * D, 1), pk = randoms(total * H * D, 2),
         pv = randoms(total * H * D, 3), pout(total * H * D);
    std::vector<int32_t> cu = {0, 2048, 3584, 4608, 5120};
    Call pack[2];
    for (int inv = 0; inv < 2; ++inv) {
        attn_desc *d = desc(4, H, H, 2048, 2048, D, ATTN_CAUSAL_TOP_LEFT, inv);
        check(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1), "varlen");
        pack[inv] = make_call(d, pq, pk, pv, pout);
        attn_args_set_i32(pack[inv].a, ATTN_CU_SEQLENS_Q, cu.data(), cu.size());
        attn_args_set_i32(pack[inv].a, ATTN_CU_SEQLENS_K, cu.data(), cu.size());
    }
    // single sequences: the same tokens of the pack, each call with BSHD strides into it (the
    // varlen call's own layout), so the ratio is the cost of the packing alone
    std::vector<Call> singles;
    for (size_t s = 0; s < 4; ++s) {
        const size_t n = lens[s], off = static_cast<size_t>(cu[s]) * H * D;
        attn_desc *d = desc(1, H, H, n, n, D, ATTN_CAUSAL_TOP_LEFT, false);
        for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT})
            check(attn_desc_set_strides(d, w, n * H * D, D, H * D), "strides");
        Call c;
        c.d = d;
        check(attn_args_create(&c.a), "args");
        attn_args_set_f32(c.a, ATTN_Q, pq.data() + off, n * H * D);
        attn_args_set_f32(c.a, ATTN_K, pk.data() + off, n * H * D);
        attn_args_set_f32(c.a, ATTN_V, pv.data() + off, n * H * D);
        attn_args_set_out_f32(c.a, ATTN_OUT, pout.data() + off, n * H * D);
        singles.push_back(c);
    }
    // a BHSD copy of the first sequence for the prefill lines
    FVec sq(H * 2048 * D), sk(sq.size()), sv(sq.size()), so(sq.size());
    for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < 2048; ++i) {
            const size_t src = (i * H + h) * D, dst = (h * 2048 + i) * D;
            std::memcpy(&sq[dst], &pq[src], D * 4);
            std::memcpy(&sk[dst], &pk[src], D * 4);
            std::memcpy(&sv[dst], &pv[src], D * 4);
        }
    cases.push_back({"pack varlen", [&] { pack[0].run(); }, false, {}});
    cases.push_back({"pack invariant", [&] { pack[1].run(); }, false, {}});
    cases.push_back({"4 single calls",
                     [&] {
                         for (const Call &c : singles) c.run();
                     },
                     false,
                     {}});
    Call prefill[2];
    for (int inv = 0; inv < 2; ++inv)
        prefill[inv] =
            make_call(desc(1, H, H, 2048, 2048, D, ATTN_CAUSAL_TOP_LEFT, inv), sq, sk, sv, so);
    cases.push_back({"prefill 2048", [&] { prefill[0].run(); }, false, {}});
    cases.push_back({"prefill invariant", [&] { prefill[1].run(); }, false, {}});

    // ---- decode: dense against paged, in each kind of memory ----
    const size_t N = 32768, HQ = 32, HKV = 8, PS = 16, pages = N / PS;
    FVec dq = randoms(HQ * D, 4), dout(HQ * D);
    std::vector<int32_t> table(pages), lens_k = {static_cast<int32_t>(N)};
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    struct DecodeSet {
        FVec dk, dv, tk, tv, hk, hv; // dense BHSD; pools token-major and head-major
        Call dense[2], paged[2];     // dense: invariance off / on; paged: token-, head-major
    };
    auto decode_set = [&](Pages kind) {
        auto set = std::make_unique<DecodeSet>();
        DecodeSet &z = *set;
        const PageAlloc<float> al(kind);
        const size_t n = HKV * N * D;
        for (FVec *v : {&z.dk, &z.dv, &z.tk, &z.tv, &z.hk, &z.hv}) *v = FVec(n, 0.0f, al);
        const FVec k = randoms(n, 5), v = randoms(n, 6);
        std::copy(k.begin(), k.end(), z.dk.begin());
        std::copy(v.begin(), v.end(), z.dv.begin());
        // pools: token-major [pages][PS][HKV][D] and head-major [pages][HKV][PS][D]
        for (size_t h = 0; h < HKV; ++h)
            for (size_t j = 0; j < N; ++j) {
                const size_t pg = static_cast<size_t>(table[j / PS]), t = j % PS,
                             src = (h * N + j) * D;
                const size_t tm = ((pg * PS + t) * HKV + h) * D, hm = ((pg * HKV + h) * PS + t) * D;
                std::memcpy(&z.tk[tm], &k[src], D * 4);
                std::memcpy(&z.tv[tm], &v[src], D * 4);
                std::memcpy(&z.hk[hm], &k[src], D * 4);
                std::memcpy(&z.hv[hm], &v[src], D * 4);
            }
        for (int inv = 0; inv < 2; ++inv)
            z.dense[inv] = make_call(desc(1, HQ, HKV, 1, N, D, ATTN_CAUSAL_BOTTOM_RIGHT, inv), dq,
                                     z.dk, z.dv, dout);
        for (int hm = 0; hm < 2; ++hm) {
            attn_desc *d = desc(1, HQ, HKV, 1, N, D, ATTN_CAUSAL_BOTTOM_RIGHT, false);
            check(attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, PS), "page");
            if (hm) {
                check(attn_desc_set_strides(d, ATTN_K, HKV * PS * D, PS * D, D), "strides");
                check(attn_desc_set_strides(d, ATTN_V, HKV * PS * D, PS * D, D), "strides");
            }
            z.paged[hm] = make_call(d, dq, hm ? z.hk : z.tk, hm ? z.hv : z.tv, dout);
            attn_args_set_i32(z.paged[hm].a, ATTN_BLOCK_TABLE, table.data(), table.size());
            attn_args_set_i32(z.paged[hm].a, ATTN_SEQ_LENS_K, lens_k.data(), lens_k.size());
        }
        return set;
    };
    const std::unique_ptr<DecodeSet> sets[2] = {decode_set(Pages::huge), decode_set(Pages::small)};
    const char *kinds[2] = {"huge pages", "4 KiB pages"};
    std::printf(
        "transparent huge pages in use: %.0f MiB (the huge-page decode buffers: %.0f MiB)\n",
        anon_huge_mib(), 6.0 * HKV * N * D * 4 / (1 << 20));
    for (int kind = 0; kind < 2; ++kind) {
        DecodeSet &z = *sets[kind];
        for (int cold = 1; cold >= 0; --cold) {
            const std::string tag = std::string(cold ? " cold, " : " hot, ") + kinds[kind];
            cases.push_back({"decode dense" + tag, [&z] { z.dense[0].run(); }, cold == 1, {}});
            cases.push_back(
                {"decode paged token-major" + tag, [&z] { z.paged[0].run(); }, cold == 1, {}});
            cases.push_back(
                {"decode paged head-major" + tag, [&z] { z.paged[1].run(); }, cold == 1, {}});
        }
    }
    cases.push_back(
        {"decode invariant cold, huge pages", [&] { sets[0]->dense[1].run(); }, true, {}});

    for (int r = 0; r < rounds; ++r) {
        std::fprintf(stderr, "\rround %d/%d", r + 1, rounds);
        for (size_t x = 0; x < cases.size(); ++x) {
            Case &c = cases[(x + r) % cases.size()];
            double best = 1e30;
            for (int i = 0; i < reps; ++i) {
                if (c.cold) ev.run();
                const double t0 = now();
                c.call();
                best = std::min(best, now() - t0);
            }
            c.best.push_back(best);
        }
    }
    std::fprintf(stderr, "\n");
    auto find = [&](const std::string &n) -> Case & {
        for (Case &c : cases)
            if (c.name == n) return c;
        std::abort();
    };
    auto ratio = [&](const std::string &a, const std::string &b) {
        std::vector<double> x;
        for (int r = 0; r < rounds; ++r) x.push_back(find(a).best[r] / find(b).best[r]);
        return median(x);
    };
    for (const Case &c : cases)
        std::printf("  %-45s %9.3f ms\n", c.name.c_str(), median(c.best) * 1e3);
    const double kv_bytes = 2.0 * HKV * N * D * 4;
    std::printf("pack varlen / 4 single calls:            %.3f   [<= 1.05]\n",
                ratio("pack varlen", "4 single calls"));
    for (const char *kind : kinds)
        for (const char *t : {"cold", "hot"}) {
            const std::string tag = std::string(t) + ", " + kind;
            const std::string d = "decode dense " + tag;
            std::printf("decode %s: dense %.1f GB/s; paged speed / dense: token-major %.3f, "
                        "head-major %.3f   [>= 0.95]\n",
                        tag.c_str(), kv_bytes / median(find(d).best) / 1e9,
                        ratio(d, "decode paged token-major " + tag),
                        ratio(d, "decode paged head-major " + tag));
        }
    std::printf("batch invariance cost (time on / off): pack %.3f, prefill 2048 causal %.3f, "
                "decode 32k cold %.3f\n",
                ratio("pack invariant", "pack varlen"), ratio("prefill invariant", "prefill 2048"),
                ratio("decode invariant cold, huge pages", "decode dense cold, huge pages"));
    return 0;
}
