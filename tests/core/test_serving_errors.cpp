// Bad serving operands (block table, seq_lens_k, cu_seqlens, pools, operands a layout does not
// take) are refused by attn_run with a status and a message naming the sequence and the slot.
#include <doctest/doctest.h>

#include <algorithm>

#include "serving_pack.hpp"

using namespace serving_test;

namespace {

// attn_run's status and message for a pack whose operands were bent by `bend`.
struct Outcome {
    attn_status st;
    std::string msg;
};
template <class F> Outcome run_bent(const Pack &c0, F bend) {
    Pack c = c0;
    attn_desc *d = make_desc(c);
    attn_args *a = make_args(c);
    std::vector<float> out(std::max<size_t>(1, c.out_len())), lse(std::max<size_t>(1, c.lse_len()));
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()) == ATTN_OK);
    bend(c, d, a);
    Outcome o{attn_run(d, ATTN_OP_FORWARD, a), attn_last_error()};
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return o;
}
} // namespace

TEST_CASE("bad serving operands are refused, naming the sequence and the slot") {
    struct Case {
        Mode mode;
        const char *what;
        attn_status st;
        const char *msg;
        void (*bend)(Pack &, attn_desc *, attn_args *);
    };
    const Case cases[] = {
        {kVarlenPaged, "page id out of range", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[1][2] (99) is not a page of the K/V buffers",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[1 * c.max_pages + 2] = 99;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kDensePaged, "-1 among the used slots", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[0][1] is -1 (unused) but sequence 0 has 5 keys",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[0 * c.max_pages + 1] = -1;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kDensePaged, "negative page id", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[2][0] (-7) is not a page",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[2 * c.max_pages + 0] = -7;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kVarlenPaged, "length beyond seq_k", ATTN_ERR_INVALID_ARGUMENT,
         "seq_lens_k[1] (11) is outside [0, seq_k = 10]",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.seq_lens[1] = 11;
             attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size());
         }},
        {kVarlenPaged, "a short block table", ATTN_ERR_INVALID_ARGUMENT,
         "block_table has 8 elements, needs at least 9",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size() - 1);
         }},
        {kVarlenPaged, "a pool too short for its page ids", ATTN_ERR_INVALID_ARGUMENT,
         "is not a page of the K/V buffers, which hold 1 pages",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_f32(a, ATTN_K, c.k.data(), c.page * c.hkv * c.d);
         }},
        {kVarlen, "cu_seqlens_q not starting at 0", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_q[0] (1) must be 0",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_q[0] = 1;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
         }},
        {kVarlen, "decreasing cu_seqlens_k", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_k must not decrease: cu_seqlens_k[1] = 5 > cu_seqlens_k[2] = 4",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_k[2] = 4;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size());
         }},
        {kVarlen, "a sequence longer than max_seqlen_q", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_q: sequence 2 has length 7, above seq_q = 3",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_q[3] = c.cu_q[2] + 7;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
         }},
        {kVarlen, "Q shorter than the pack", ATTN_ERR_INVALID_ARGUMENT,
         "q has 19 elements, needs at least 40",
         [](Pack &c, attn_desc *, attn_args *a) { attn_args_set_f32(a, ATTN_Q, c.q.data(), 19); }},
        {kVarlen, "no cu_seqlens_k", ATTN_ERR_NULL_POINTER,
         "cu_seqlens_k is NULL but ATTN_PARAM_VARLEN is 1",
         [](Pack &, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, nullptr, 0);
         }},
        {kDensePaged, "no block table", ATTN_ERR_NULL_POINTER,
         "block_table is NULL but ATTN_PARAM_PAGE_SIZE is set",
         [](Pack &, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, nullptr, 0);
         }},
        {kVarlen, "a bias in a varlen call", ATTN_ERR_UNSUPPORTED,
         "bias is not supported with ATTN_PARAM_VARLEN",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_f32(a, ATTN_BIAS, c.k.data(), c.k.size());
         }},
        {kVarlenPaged, "cu_seqlens_k with pages", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size());
         }},
    };
    for (const Case &k : cases) {
        const Outcome o = run_bent(small_pack(k.mode), k.bend);
        CHECK_MESSAGE(o.st == k.st, k.what << ": " << o.msg);
        CHECK_MESSAGE(o.msg.find(k.msg) != std::string::npos, k.what << ": " << o.msg);
    }
    // cu_seqlens_q without varlen mode, through a dense descriptor
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 1, 1, 2, 2, 2) == ATTN_OK);
    std::vector<float> x(8, 0.0f), out(4);
    const int32_t cu[2] = {0, 2};
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V}) attn_args_set_f32(a, w, x.data(), 4);
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), 4);
    attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu, 2);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0") !=
          std::string::npos);
    attn_args_destroy(a);
    attn_desc_destroy(d);
}
