// Varlen packs and token-major pages with >= 1024 query rows per KV head: the call copies each KV
// head's K/V rows once, and gets the bits of head-major pages read in place; in fp32, f16, bf16,
// int8 and fp8 (one scale per tensor, or per KV head), against the float64 reference.
#include <doctest/doctest.h>

#include "serving_pack.hpp"

using namespace serving_test;

TEST_CASE("varlen packs and token-major pages with >= 1024 query rows per KV head run on a copy "
          "of their K/V rows") {
    // Rows >= 1 KiB apart (a packed row of 263 values; a token-major page row of 2, 4 or 8 x 130
    // values of 4, 2 or 1 bytes): the call copies each KV head's rows once, as stored
    // (core/kv_pack.hpp). Head-major pages (rows 130 values apart) are read in place with the
    // same arithmetic: the token-major output has their bits. In fp32, f16, bf16 and int8 (with
    // its scales; pages only, and there only against head-major pages, whose int8 reads the
    // random packs check against the reference: 32 heads would take the float64 reference
    // seconds).
    for (const Mode mode : {kVarlen, kVarlenPaged})
        for (const int store : {0, 1, 2, 3, 4, 5}) {
            if (store == 3 && mode == kVarlen) continue;
            std::mt19937 g(11);
            Pack c;
            c.mode = mode;
            c.batch = 3;
            c.hkv = store >= 3 ? 8 : store == 0 ? 2 : 4; // rows >= 1 KiB apart
            c.hq = 4 * c.hkv;
            c.d = c.dv = 130;
            c.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
            c.lq = {300, 0, 500};
            c.lk = {350, 0, 600}; // paged: a prefill chunk after cached keys
            c.max_q = 500;
            c.max_k = 600;
            if (mode == kVarlen) c.kv_row_pad = 3;
            if (mode == kVarlenPaged) c.page = 16;
            c.store = store;
            fill_sequences(c, g);
            round_kv(c);
            std::mt19937 g2 = g; // for the same page ids
            build(c, g);
            Pack hm = c;
            if (mode == kVarlenPaged) {
                hm.head_major = true;
                build(hm, g2);
                REQUIRE(hm.table == c.table);
            }
            const std::string what = std::string(mode == kVarlen ? "varlen" : "paged") +
                                     " copy, storage " + std::to_string(store);
            // The copy is the same code on every ISA: the float64 reference once (on the widest
            // kernel), bits on the others; the scalar kernel, covered by the random packs, is
            // left out (this test took minutes under AddressSanitizer with it).
            const std::vector<std::string> names = isas();
            for (size_t x = names.size(); x-- > 0;) {
                if (names[x] == "scalar") continue;
                REQUIRE(attn_set_isa(names[x].c_str()) == ATTN_OK);
                const Run r1 = run_on_1_and_2_threads(c);
                if (store != 3 && x + 1 == names.size())
                    CHECK(check(c, r1, what + " on " + names[x]) <= 1e-5);
                if (mode == kVarlenPaged) check_same_bits(r1, run(hm));
            }
        }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}
