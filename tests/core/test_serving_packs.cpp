// Packed variable-length batches (cu_seqlens) and paged K/V caches (block table, both page
// layouts) through attn_run on every ISA this CPU supports: random packs of every layout against
// ref::compute_v (float64) run on each sequence alone, gathered into plain dense arrays by
// serving_pack.cpp, so the packing logic is checked too; 1 and 2 threads give the same bits.
#include <doctest/doctest.h>

#include <algorithm>

#include "serving_pack.hpp"

using namespace serving_test;

TEST_CASE("varlen and paged packs match the float64 reference on every ISA") {
    std::mt19937 g(20261201);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t runs = 0;
    const int kPacks = 540;
    for (int n = 0; n < kPacks; ++n) {
        const Mode mode = static_cast<Mode>(n % 3);
        Pack c = random_pack(g, mode);
        c.invariant = n % 5 == 4;
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r = run(c, mode == kDensePaged);
            const double e = check(c, r, "pack " + std::to_string(n) + " on " + isa);
            if (e > 1e-5)
                FAIL_CHECK("pack " << n << " mode " << mode << " on " << isa << ": rel err " << e
                                   << " (batch " << c.batch << ", heads " << c.hq << "/" << c.hkv
                                   << ", d " << c.d << "/" << c.dv << ", page " << c.page
                                   << ", causal " << c.causal << ")");
            worst = std::max(worst, e);
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kPacks << " packs x " << names.size() << " ISAs = " << runs
                   << " runs, max relative error " << worst);
    CHECK(worst <= 1e-5);
}

TEST_CASE(
    "varlen and paged packs with the window / ALiBi diagonal, the ALiBi form and per-sequence "
    "slopes match the float64 reference on every ISA") {
    std::mt19937 g(20261206);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t runs = 0, asym = 0, seqs = 0;
    const int kPacks = 240;
    for (int n = 0; n < kPacks; ++n) {
        const Mode mode = static_cast<Mode>(n % 3);
        Pack c = random_pack(g, mode);
        c.diagonal = static_cast<int>(pick(g, 0, 2));
        c.alibi_form = static_cast<int>(pick(g, 0, 1));
        if (pick(g, 0, 2) == 0) c.wl = static_cast<long long>(pick(g, 0, 20));
        if (pick(g, 0, 2) == 0) c.wr = static_cast<long long>(pick(g, 0, 20));
        c.alibi = pick(g, 0, 3) == 0 ? ATTN_ALIBI_STANDARD : ATTN_ALIBI_OPERAND;
        c.slopes.clear();
        c.slopes_batch = 0;
        if (c.alibi == ATTN_ALIBI_OPERAND) {
            if (pick(g, 0, 2) != 0) c.slopes_batch = c.hq + pick(g, 0, 2);
            c.slopes.resize((c.batch - 1) * c.slopes_batch + c.hq);
            for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
        }
        c.invariant = n % 5 == 4;
        for (size_t b = 0; b < c.batch; ++b) {
            seqs += c.lq[b] > 0;
            asym += c.lq[b] > 0 && c.lq[b] != c.lk[b];
        }
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r = run(c, mode == kDensePaged);
            const double e = check(c, r, "pack " + std::to_string(n) + " on " + isa);
            if (e > 1e-5)
                FAIL_CHECK("pack " << n << " mode " << mode << " on " << isa << ": rel err " << e
                                   << " (causal " << c.causal << ", diagonal " << c.diagonal
                                   << ", window " << c.wl << "," << c.wr << ", alibi " << c.alibi
                                   << ", form " << c.alibi_form << ", slopes_batch "
                                   << c.slopes_batch << ")");
            worst = std::max(worst, e);
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kPacks << " packs x " << names.size() << " ISAs = " << runs << " runs (" << asym
                   << " of " << seqs << " sequences with len_q != len_k), max relative error "
                   << worst);
    CHECK(asym * 2 > seqs);
    CHECK(worst <= 1e-5);
}

TEST_CASE("varlen and paged results are bit-identical on 1 and 2 threads") {
    std::mt19937 g(7);
    for (int n = 0; n < 12; ++n) {
        Pack c = random_pack(g, static_cast<Mode>(n % 3));
        // large enough to be spread over the pool
        for (size_t b = 0; b < c.batch; ++b) {
            c.lk[b] = 300 + 97 * b;
            if (c.mode != kDensePaged) c.lq[b] = 1 + 41 * b;
        }
        c.max_q = *std::max_element(c.lq.begin(), c.lq.end());
        c.max_k = *std::max_element(c.lk.begin(), c.lk.end());
        if (c.max_pages_param) c.max_pages_param = (c.max_k + c.page - 1) / c.page + 1;
        fill_sequences(c, g);
        build(c, g);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r1 = run_on_1_and_2_threads(c);
            CHECK(check(c, r1, "threads") <= 1e-5);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("a pack of {2048, 1536, 1024, 512} causal plans only its real tokens") {
    // Not a timing: the call must give each sequence exactly its single-sequence answer.
    std::mt19937 g(3);
    Pack c;
    c.mode = kVarlen;
    c.batch = 4;
    c.hq = 2;
    c.hkv = 1;
    c.d = c.dv = 16;
    c.causal = ATTN_CAUSAL_TOP_LEFT;
    c.lq = {2048, 1536, 1024, 512};
    c.lk = c.lq;
    c.max_q = c.max_k = 2048;
    c.sinks.clear();
    fill_sequences(c, g);
    build(c, g);
    const Run r = run(c);
    CHECK(check(c, r, "long pack") <= 1e-5);
}
