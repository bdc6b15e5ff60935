// Guard pages for the serving layouts (varlen packs, paged caches, attn_kv_append, attn_merge):
// every operand (q, the K/V pools, cu_seqlens_q/_k, block_table, seq_lens_k, new_k/new_v, out,
// lse) is exactly as long as the call needs and is placed so that it ENDS at a PROT_NONE page,
// then so that it STARTS right after one; inputs are read-only, outputs surrounded by canaries.
// A read one element outside faults and the handler names the buffer. The result must equal, bit
// for bit, the same call on plain heap buffers; on every ISA, 1 and 2 threads.
#include <signal.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "hardening.hpp"

using hard::GuardBuf;
using hard::Place;

namespace {

char *const g_case = hard::guard_case();
size_t g_cases = 0;

struct Pack {
    bool varlen = true, paged = true, head_major = false;
    size_t batch = 1, hq = 1, hkv = 1, d = 1, max_q = 1, max_k = 1, page = 1, max_pages = 0,
           pages = 0;
    std::vector<int32_t> cu_q, cu_k, table, lens;
    size_t total_q = 0, total_k = 0;
};

Pack random_pack(hard::Rng &rng) {
    Pack c;
    c.varlen = rng.chance(0.7);
    c.paged = !c.varlen || rng.chance(0.6);
    c.head_major = rng.chance(0.5);
    c.batch = rng.range(1, 3);
    c.hkv = rng.range(1, 2);
    c.hq = c.hkv * rng.range(1, 2);
    c.d = rng.range(1, 40);
    const size_t sq = rng.range(1, 9);
    c.cu_q.assign(c.batch + 1, 0);
    c.cu_k.assign(c.batch + 1, 0);
    c.lens.assign(c.batch, 0);
    for (size_t b = 0; b < c.batch; ++b) {
        const size_t lq = c.varlen ? rng.range(0, 9) : sq;
        const size_t lk = lq + rng.range(0, 40);
        c.cu_q[b + 1] = c.cu_q[b] + static_cast<int32_t>(lq);
        c.cu_k[b + 1] = c.cu_k[b] + static_cast<int32_t>(lk);
        c.lens[b] = static_cast<int32_t>(lk);
        c.max_q = std::max(c.max_q, lq);
        c.max_k = std::max(c.max_k, lk);
    }
    c.total_q = static_cast<size_t>(c.cu_q[c.batch]);
    c.total_k = static_cast<size_t>(c.cu_k[c.batch]);
    if (c.paged) {
        c.page = rng.chance(0.5) ? rng.range(1, 5) : 16;
        c.max_pages = (c.max_k + c.page - 1) / c.page;
        size_t used = 0;
        for (size_t b = 0; b < c.batch; ++b) used += (c.lens[b] + c.page - 1) / c.page;
        c.pages = std::max<size_t>(1, used);
        std::vector<int32_t> ids(c.pages);
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(),
                     std::mt19937(static_cast<unsigned>(rng.range(0, 999))));
        c.table.assign(c.batch * c.max_pages, -1);
        size_t next = 0;
        for (size_t b = 0; b < c.batch; ++b)
            for (size_t s = 0; s < (c.lens[b] + c.page - 1) / c.page; ++s)
                c.table[b * c.max_pages + s] = ids[next++];
    }
    return c;
}

attn_desc *make_desc(const Pack &c) {
    attn_desc *d = nullptr;
    HARD_CHECK(attn_desc_create(&d, c.batch, c.hq, c.hkv, c.max_q, c.max_k, c.d) == ATTN_OK,
               "create");
    attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT);
    attn_desc_set_int(d, ATTN_PARAM_VARLEN, c.varlen);
    if (c.paged) {
        attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, static_cast<int64_t>(c.page));
        if (c.head_major)
            for (attn_operand w : {ATTN_K, ATTN_V})
                attn_desc_set_strides(d, w, c.hkv * c.page * c.d, c.page * c.d, c.d);
    }
    return d;
}

// Element counts of each buffer, exactly what the call needs.
struct Sizes {
    size_t q, kv, out, lse, nkv;
};
Sizes sizes_of(const Pack &c) {
    Sizes s;
    const size_t tq = c.varlen ? c.total_q : c.batch * c.max_q;
    s.q = tq * c.hq * c.d;
    s.out = s.q;
    s.lse = tq * c.hq;
    s.kv = c.paged ? c.pages * c.page * c.hkv * c.d : c.total_k * c.hkv * c.d;
    s.nkv = tq * c.hkv * c.d;
    return s;
}

// One forward + append + merge on the given buffers (null-safe for empty sizes).
void call(const Pack &c, attn_desc *d, const float *q, float *k, float *v, const int32_t *cu_q,
          const int32_t *cu_k, const int32_t *table, const int32_t *lens, const float *nk,
          const float *nv, float *out, float *lse, float *out2, float *lse2) {
    const Sizes s = sizes_of(c);
    attn_args *a = nullptr;
    attn_args_create(&a);
    if (c.varlen) attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu_q, c.batch + 1);
    if (c.paged) {
        attn_args_set_i32(a, ATTN_BLOCK_TABLE, table, c.batch * c.max_pages);
        attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens, c.batch);
    } else {
        attn_args_set_i32(a, ATTN_CU_SEQLENS_K, cu_k, c.batch + 1);
    }
    if (c.paged) { // append the queries' own K/V rows first (their positions end each sequence)
        attn_args_set_f32(a, ATTN_NEW_K, s.nkv ? nk : nullptr, s.nkv);
        attn_args_set_f32(a, ATTN_NEW_V, s.nkv ? nv : nullptr, s.nkv);
        const attn_status st = attn_kv_append(d, a, k, s.kv, v, s.kv);
        HARD_CHECK(st == ATTN_OK, "%s: append %s (%s)", g_case, attn_status_string(st),
                   attn_last_error());
    }
    attn_args_set_f32(a, ATTN_Q, s.q ? q : nullptr, s.q);
    attn_args_set_f32(a, ATTN_K, s.kv ? k : nullptr, s.kv);
    attn_args_set_f32(a, ATTN_V, s.kv ? v : nullptr, s.kv);
    attn_args_set_out_f32(a, ATTN_OUT, s.out ? out : nullptr, s.out);
    attn_args_set_out_f32(a, ATTN_LSE, s.lse ? lse : nullptr, s.lse);
    attn_status st = attn_run(d, ATTN_OP_FORWARD, a);
    if (s.out == 0) {
        HARD_CHECK(st == ATTN_ERR_NULL_POINTER, "%s: empty pack: %s", g_case,
                   attn_status_string(st));
        attn_args_destroy(a);
        return;
    }
    HARD_CHECK(st == ATTN_OK, "%s: forward %s (%s)", g_case, attn_status_string(st),
               attn_last_error());
    // merge the result with a copy of itself (out2/lse2 hold the same values)
    std::memcpy(out2, out, s.out * 4);
    std::memcpy(lse2, lse, s.lse * 4);
    attn_args *p = nullptr;
    attn_args_create(&p);
    attn_args_set_out_f32(p, ATTN_OUT, out2, s.out);
    attn_args_set_out_f32(p, ATTN_LSE, lse2, s.lse);
    st = attn_merge(d, a, p);
    HARD_CHECK(st == ATTN_OK, "%s: merge %s (%s)", g_case, attn_status_string(st),
               attn_last_error());
    attn_args_destroy(p);
    attn_args_destroy(a);
}

void run_case(const Pack &c, Place place, hard::Rng &rng) {
    std::snprintf(g_case, hard::kGuardCaseLen,
                  "varlen %d paged %d head_major %d b %zu hq %zu hkv %zu d %zu page %zu isa %s "
                  "place %s",
                  c.varlen, c.paged, c.head_major, c.batch, c.hq, c.hkv, c.d, c.page, attn_isa(),
                  place == Place::EndAtGuard ? "end" : "start");
    attn_desc *d = make_desc(c);
    const Sizes s = sizes_of(c);
    GuardBuf q(s.q * 4, place, "q"), k(s.kv * 4, place, "k"), v(s.kv * 4, place, "v"),
        cu_q((c.batch + 1) * 4, place, "cu_seqlens_q"),
        cu_k((c.batch + 1) * 4, place, "cu_seqlens_k"),
        table(c.table.size() * 4, place, "block_table"), lens(c.batch * 4, place, "seq_lens_k"),
        nk(s.nkv * 4, place, "new_k"), nv(s.nkv * 4, place, "new_v");
    std::vector<float> hq(s.q), hk(s.kv), hv(s.kv), hnk(s.nkv), hnv(s.nkv);
    for (float &x : hq) x = rng.value(-1, 1);
    for (float &x : hk) x = rng.value(-1, 1);
    for (float &x : hv) x = rng.value(-1, 1);
    for (float &x : hnk) x = rng.value(-1, 1);
    for (float &x : hnv) x = rng.value(-1, 1);
    auto copy = [](void *dst, const void *src, size_t bytes) { // empty packs: no memcpy(NULL)
        if (bytes) std::memcpy(dst, src, bytes);
    };
    copy(q.as<float>(), hq.data(), s.q * 4);
    copy(k.as<float>(), hk.data(), s.kv * 4);
    copy(v.as<float>(), hv.data(), s.kv * 4);
    copy(nk.as<float>(), hnk.data(), s.nkv * 4);
    copy(nv.as<float>(), hnv.data(), s.nkv * 4);
    std::memcpy(cu_q.as<int32_t>(), c.cu_q.data(), (c.batch + 1) * 4);
    std::memcpy(cu_k.as<int32_t>(), c.cu_k.data(), (c.batch + 1) * 4);
    if (!c.table.empty()) std::memcpy(table.as<int32_t>(), c.table.data(), c.table.size() * 4);
    std::memcpy(lens.as<int32_t>(), c.lens.data(), c.batch * 4);
    for (GuardBuf *g : {&q, &cu_q, &cu_k, &table, &lens, &nk, &nv}) g->read_only();
    GuardBuf out(s.out * 4, place, "out"), lse(s.lse * 4, place, "lse"),
        out2(s.out * 4, place, "part out"), lse2(s.lse * 4, place, "part lse");
    call(c, d, q.as<float>(), k.as<float>(), v.as<float>(), cu_q.as<int32_t>(), cu_k.as<int32_t>(),
         table.as<int32_t>(), lens.as<int32_t>(), nk.as<float>(), nv.as<float>(), out.as<float>(),
         lse.as<float>(), out2.as<float>(), lse2.as<float>());
    for (const GuardBuf *g : {&out, &lse, &out2, &lse2, &k, &v})
        HARD_CHECK(g->canary_damage() < 0, "%s: canary damaged", g_case);
    // the same call on heap buffers: the same bits
    std::vector<float> ho(s.out + 1), hl(s.lse + 1), ho2(s.out + 1), hl2(s.lse + 1);
    std::vector<int32_t> ht(c.table);
    ht.push_back(0);
    call(c, d, hq.data(), hk.data(), hv.data(), c.cu_q.data(), c.cu_k.data(), ht.data(),
         c.lens.data(), hnk.data(), hnv.data(), ho.data(), hl.data(), ho2.data(), hl2.data());
    if (s.out) {
        HARD_CHECK(std::memcmp(ho.data(), out.as<float>(), s.out * 4) == 0, "%s: out differs",
                   g_case);
        HARD_CHECK(std::memcmp(hl.data(), lse.as<float>(), s.lse * 4) == 0, "%s: lse differs",
                   g_case);
    }
    attn_desc_destroy(d);
    ++g_cases;
}

void all_cases(const char *, void *) {
    hard::Rng rng(91);
    for (int n = 0; n < 60; ++n) {
        const Pack c = random_pack(rng);
        for (Place place : {Place::EndAtGuard, Place::StartAfterGuard}) run_case(c, place, rng);
    }
}

} // namespace

int main() {
    hard::install_guard_handler();
    for (size_t threads : {1u, 2u}) {
        attn_set_num_threads(threads);
        hard::for_each_isa("guard_serving", all_cases, nullptr);
    }
    std::printf("guard_serving: %zu cases, %d failure(s)\n", g_cases, hard::failures());
    return hard::failures() ? 1 : 0;
}
