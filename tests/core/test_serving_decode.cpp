// Long decode (>= 4096 keys, the keys split across tiles): token-major K/V (pages or packed rows)
// walk a batch entry's KV heads together, and give the bits of head-major pages, read head by
// head, and of a varlen pack; in fp32, f16, bf16, int8 and fp8, against the float64 reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "serving_pack.hpp"

using namespace serving_test;

TEST_CASE("long decode: token-major K/V walk the heads together, with the per-head bits") {
    // >= 4096 keys make a decode call split its keys; token-major K/V (pages, or packed rows)
    // then run a batch entry's KV heads through one pass over the tiles (key-major, see
    // decode_qk_heads), head-major ones head by head. Both must give the same bits, and the
    // float64 answer; in fp32, f16, bf16, int8 and fp8.
    std::mt19937 g(41);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t compared = 0;
    for (int n = 0; n < 12; ++n) {
        Pack c;
        c.mode = kDensePaged;
        c.batch = pick(g, 1, 2);
        c.hkv = n < 2 ? 9 : pick(g, 1, 8); // 9: more heads than one pass takes
        c.hq = c.hkv * (size_t(1) << pick(g, 0, 2));
        c.d = n % 2 ? 128 : pick(g, 16, 72);
        c.dv = pick(g, 0, 2) == 0 ? pick(g, 16, 72) : c.d;
        c.causal = static_cast<int>(pick(g, 0, 2));
        if (n % 4 == 1) c.wl = static_cast<long long>(pick(g, 100, 3000));
        if (n % 3 == 2) c.softcap = uni(g, 1.0f, 20.0f);
        const size_t sq = c.hq / c.hkv == 4 ? 1 : pick(g, 1, 2);
        c.lq.assign(c.batch, sq);
        c.lk.resize(c.batch);
        for (size_t b = 0; b < c.batch; ++b) c.lk[b] = pick(g, 4096, 6000);
        c.max_q = sq;
        c.max_k = *std::max_element(c.lk.begin(), c.lk.end()) + pick(g, 0, 3);
        c.page = n % 3 == 0 ? 16 : pick(g, 5, 64);
        c.store = n >= 10      ? 4 + n % 2 // fp8 E4M3, E5M2
                  : n % 3 == 1 ? 1
                  : n % 5 == 2 ? 2
                  : n % 4 == 0 ? 3
                               : 0; // f16, bf16, int8, fp32
        fill_sequences(c, g);
        round_kv(c);
        Pack hm = c, packed = c;
        hm.head_major = true;
        packed.mode = kVarlenPaged; // varlen Q over the same token-major pages
        std::mt19937 g1(n), g2(n), g3(n);
        build(c, g1);
        build(hm, g2);
        build(packed, g3);
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run rt = run(c), rh = run(hm), rp = run(packed);
            bool same = true;
            for (size_t b = 0; b < c.batch; ++b)
                for (size_t h = 0; h < c.hq; ++h)
                    for (size_t i = 0; i < sq; ++i) {
                        same = same &&
                               std::memcmp(&rt.out[c.out_at(b, h, i)], &rh.out[hm.out_at(b, h, i)],
                                           c.dv * 4) == 0 &&
                               std::memcmp(&rt.out[c.out_at(b, h, i)],
                                           &rp.out[packed.out_at(b, h, i)], c.dv * 4) == 0 &&
                               rt.lse[c.lse_at(b, h, i)] == rh.lse[hm.lse_at(b, h, i)] &&
                               rt.lse[c.lse_at(b, h, i)] == rp.lse[packed.lse_at(b, h, i)];
                        ++compared;
                    }
            CHECK_MESSAGE(same, "case " << n << " on " << isa << ": heads " << c.hq << "/" << c.hkv
                                        << ", d " << c.d << "/" << c.dv << ", page " << c.page
                                        << ", K/V storage " << c.store);
            const double e = check(c, rt, "long decode");
            CHECK_MESSAGE(e <= 1e-5, "case " << n << " on " << isa << ": rel err " << e);
            worst = std::max(worst, e);
        }
    }
    attn_set_isa(nullptr);
    MESSAGE("long decode: " << compared << " rows token-major = head-major = varlen bits; max "
                            << "relative error " << worst);
}
