// Planning a call: the split of a forward or weights call into work items (Plan), the item each
// index stands for, and running items on the pool or on the caller. Also the memory a thread
// keeps between calls (ThreadScratch). Used by forward.cpp and weights.cpp; the kernels see
// only the WorkItem (kernel.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "attention.hpp"
#include "kernel.hpp"
#include "scratch_buf.hpp"

namespace attn {
namespace core {

// KV heads of a batch entry whose decode items walk the key tiles together: items first,
// first + stride, ... (n of them).
struct HeadGroup {
    size_t first, n, stride;
};

// Memory a thread keeps from call to call, so that a warm call allocates nothing. One per thread
// (thread_local, thread_scratch()), freed when the thread exits. Grown as needed, never shrunk.
struct ThreadScratch {
    // Used by whichever thread runs a work item (the caller or a pool worker), for that item
    // only: the kernel's scratch block (KernelInfo::scratch_bytes / backward_scratch, the fp16
    // path's Fp16Kernel::scratch_bytes).
    ScratchBuf item;
    // Used by the calling thread for one forward, weights or backward call, from its start to its
    // end (the contents mean nothing between calls); the workers of that call read them through
    // pointers the caller hands out and never resize them.
    std::vector<uint32_t> qmap;     // real queries of each batch entry (build_qmap)
    std::vector<uint32_t> qlens;    // varlen: the query tokens of each sequence (Plan::nreal)
    std::vector<size_t> first_item; // Plan::first
    std::vector<float> lse;         // forward with KEY_MASS but no LSE bound: every row's lse
    std::vector<HeadGroup> groups;  // the decode items that walk the key tiles together
    std::vector<float> partials;    // key-split partials (forward), dSinks partials (backward)
    std::vector<uint16_t> k16, v16; // the fp16 path: K and V rounded to fp16 once per call
    std::vector<int32_t> kq;        // integer Q.K^T: K's codes (Tensors::kq)
    std::vector<float> kq_f;        // ... its scales, channel means and work rows
    std::vector<float> alibi;       // the standard ALiBi slopes of alibi.size() heads
    ScratchBuf kv_copies{true};     // packed prefill: the K/V copies (kv_pack.hpp)
};
ThreadScratch &thread_scratch();

inline size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

// The split of a call into items depends on the shape, the kernel and the query mask only,
// never on the thread count, so results are bit-identical for any number of threads.
// Items of batch entry b are [first[b], first[b + 1]); each KV head of b has
// (first[b + 1] - first[b]) / heads_kv of them, row blocks of the real queries of b (all of them
// without query padding), consecutive per KV head.
struct Plan {
    const KernelInfo *k;
    size_t group, items, splits, chunk;
    bool serial;           // too little work to be worth waking a worker
    const size_t *first;   // [batch + 1]
    const uint32_t *nreal; // [batch] real queries of b (null: seq_q each)
};

// The ALiBi slopes of a call: with p->alibi == Alibi::Standard, t->alibi points at the
// standard slopes of heads_q heads (kept in scratch.alibi, computed again only for another head
// count) and p's slope strides become (0, 1); otherwise t->alibi stays the caller's operand
// (null = none). Throws std::bad_alloc (then nothing has changed).
void prepare_alibi(Params *p, Tensors *t, ThreadScratch &scratch);

// Real queries of each batch entry (query_valid): qmap[b * seq_q + n] = n-th real query of b.
// Returns false (nothing built) when there is no query mask.
bool build_qmap(const Params &p, const Tensors &t, std::vector<uint32_t> &qmap);

// Below this many multiply-adds a call runs on the caller's thread (see plan.cpp).
constexpr double kSerialMacs = 1 << 20;

// The plan of a forward (allow_split: keys may be split across items) or weights call with
// kernel k (narrowed here to the rows of a KV head). Its arrays live in `scratch`.
Plan make_plan(const Params &p, const Tensors &t, const KernelInfo &k, bool allow_split,
               ThreadScratch &scratch);

// Runs body(item) for every item: on the pool, or on the caller alone for a small call.
void run_items(const Plan &pl, size_t items, const std::function<void(size_t)> &body);

// Item `it` -> rows; within a batch entry the heaviest row blocks (last queries under a causal
// rule) go first.
WorkItem item_of(const Params &p, const Tensors &t, const Plan &pl, size_t it);

// Rows of padded queries: out 0 and lse -inf (forward), weights 0 (weights). They are in no
// work item.
void clear_padded_queries(const Params &p, const Tensors &t);

} // namespace core
} // namespace attn
