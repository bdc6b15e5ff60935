// Planning a call (see plan.hpp): work items, their rows, the serial-or-pool decision, and the
// memory each thread keeps between calls.
#include "plan.hpp"

#include <algorithm>
#include <cmath>

#include "thread_pool.hpp"

namespace attn {
namespace core {

ThreadScratch &thread_scratch() {
    thread_local ThreadScratch scratch;
    return scratch;
}

bool build_qmap(const Params &p, const Tensors &t, std::vector<uint32_t> &qmap) {
    if (!t.query_valid) return false;
    const size_t sq = p.shape.seq_q;
    qmap.resize(p.shape.batch * sq + p.shape.batch);
    uint32_t *counts = qmap.data() + p.shape.batch * sq;
    for (size_t b = 0; b < p.shape.batch; ++b) {
        uint32_t n = 0;
        for (size_t i = 0; i < sq; ++i)
            if (t.query_valid[b * sq + i]) qmap[b * sq + n++] = static_cast<uint32_t>(i);
        counts[b] = n;
    }
    return true;
}

// kSerialMacs: below this many multiply-adds (~30-40 us on one core with the per-row packing) a
// call runs on the caller's thread: a sleeping worker takes about as long to wake on a VM, so it
// would join too late to help (the caller never waits for a worker that wakes after every item
// is claimed, but the wake-up still costs the caller a few microseconds). Measured with
// bench/peers/peers.py: n = 32 (0.54M) on 2 threads 1.00-1.08x the 1-thread time, n = 64 (2.1M)
// 0.72-0.79x. (Since the workers poll for 200 us after a job, back-to-back calls skip the
// wake-up: n = 64 0.66-0.68x, n = 128 0.55-0.57x on a VM where it was 1.15-1.24x and 0.80-1.01x
// before.)
Plan make_plan(const Params &p, const Tensors &t, const KernelInfo &k, bool allow_split,
               ThreadScratch &scratch) {
    Plan pl;
    pl.k = &k;
    pl.group = p.shape.heads_q / p.shape.heads_kv;
    const size_t B = p.shape.batch;
    pl.nreal = t.qmap ? t.qmap + B * p.shape.seq_q : nullptr;
    if (t.cu_q) { // varlen: the real queries of each sequence are its tokens
        std::vector<uint32_t> &lens = scratch.qlens;
        lens.resize(B);
        for (size_t b = 0; b < B; ++b) lens[b] = static_cast<uint32_t>(t.cu_q[b + 1] - t.cu_q[b]);
        pl.nreal = lens.data();
    }
    size_t maxq = p.shape.seq_q;
    if (pl.nreal) {
        maxq = 0;
        for (size_t b = 0; b < B; ++b) maxq = std::max<size_t>(maxq, pl.nreal[b]);
    }
    // the narrowest kernel whose items hold the rows of a KV head (a shape rule only)
    while (pl.k->narrow && pl.group * maxq <= pl.k->narrow->lanes) pl.k = pl.k->narrow;
    std::vector<size_t> &first = scratch.first_item;
    first.resize(B + 1);
    first[0] = 0;
    for (size_t b = 0; b < B; ++b) {
        const size_t nq = pl.nreal ? pl.nreal[b] : p.shape.seq_q;
        first[b + 1] = first[b] + p.shape.heads_kv * ceil_div(pl.group * nq, pl.k->lanes);
    }
    pl.first = first.data();
    pl.items = first[B];
    pl.splits = 1;
    // Decode-like calls (few row blocks, many keys): split keys into chunks of >= 2048 so that
    // every thread streams its share of K and V; partials merge exactly afterwards.
    // Under batch invariance keys are never split (the split depends on the batch).
    if (allow_split && !p.invariant && pl.items > 0 && pl.items < 16 && p.shape.seq_k >= 4096) {
        pl.splits = std::min(ceil_div(16, pl.items), p.shape.seq_k / 2048);
    }
    pl.chunk = ceil_div(p.shape.seq_k, pl.splits);
    // Waking a sleeping worker costs tens of microseconds: calls whose multiply-adds (an upper
    // bound: every query against every key) take less than that on one core run on the caller.
    // Decided from the work, not the item count, so a small decode step never gets slower with
    // more threads; the result does not depend on it either way.
    double pairs = static_cast<double>(maxq) * p.shape.seq_k; // (query, key) pairs per head
    const double per_pair = static_cast<double>(p.shape.batch) * p.shape.heads_q *
                            (p.shape.head_dim + p.shape.head_dim_v);
    if (p.causal != Causal::None && pairs * per_pair < 4 * kSerialMacs) {
        // near the threshold: count the pairs the causal rule leaves (query i sees the keys up
        // to i + off), about half of a square prefill
        const long long sq = static_cast<long long>(maxq),
                        sk = static_cast<long long>(p.shape.seq_k);
        const long long off = p.causal == Causal::BottomRight ? sk - sq : 0;
        pairs = 0;
        for (long long i = 0; i < sq; ++i)
            pairs += static_cast<double>(std::min(sk, std::max(0LL, i + off + 1)));
    }
    pl.serial = pairs * per_pair < kSerialMacs;
    return pl;
}

void run_items(const Plan &pl, size_t items, const std::function<void(size_t)> &body) {
    if (pl.serial) {
        for (size_t it = 0; it < items; ++it) body(it);
        return;
    }
    pool_run(items, body);
}

WorkItem item_of(const Params &p, const Tensors &t, const Plan &pl, size_t it) {
    WorkItem w;
    const size_t b = static_cast<size_t>(
                         std::upper_bound(pl.first, pl.first + p.shape.batch + 1, it) - pl.first) -
                     1;
    const size_t nq = pl.nreal ? pl.nreal[b] : p.shape.seq_q;
    const size_t total = pl.group * nq;
    const size_t row_blocks = ceil_div(total, pl.k->lanes);
    const size_t local = it - pl.first[b];
    const size_t rb = row_blocks - 1 - local % row_blocks;
    w.b = b;
    w.kvh = local / row_blocks;
    w.r0 = rb * pl.k->lanes;
    w.rows = std::min(pl.k->lanes, total - w.r0);
    w.k_begin = 0;
    w.k_end = key_len(p, t, b);
    return w;
}

void clear_padded_queries(const Params &p, const Tensors &t) {
    if (!t.query_valid) return;
    const Shape &s = p.shape;
    for (size_t b = 0; b < s.batch; ++b)
        for (size_t i = 0; i < s.seq_q; ++i) {
            if (t.query_valid[b * s.seq_q + i]) continue;
            for (size_t h = 0; h < s.heads_q; ++h) {
                if (t.out) {
                    float *o = t.out + b * p.out.batch + h * p.out.head + i * p.out.row;
                    std::fill(o, o + s.head_dim_v, 0.0f);
                }
                if (t.lse) t.lse[(b * s.heads_q + h) * s.seq_q + i] = -INFINITY;
                if (t.weights) {
                    float *wr = t.weights + ((b * s.heads_q + h) * s.seq_q + i) * s.seq_k;
                    const float fill = p.weights_mode == WeightsMode::Softmax ? 0.0f : -INFINITY;
                    std::fill(wr, wr + s.seq_k, fill);
                }
            }
        }
}

} // namespace core
} // namespace attn
