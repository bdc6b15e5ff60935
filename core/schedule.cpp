// Scheduling: splits a call into work items, runs them on the pool with per-thread scratch, and
// merges key-split partial results (decode) in a fixed order. The kernel comes from dispatch.cpp.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <vector>

#include "attention.hpp"
#include "kernel.hpp"
#include "kv_pack.hpp"
#include "scratch_buf.hpp"
#include "thread_pool.hpp"

namespace attn {
namespace core {
namespace {

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
    // path's fp16_scratch_bytes).
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
    ScratchBuf kv_copies{true};     // packed prefill: the K/V copies (kv_pack.hpp)
};
ThreadScratch &thread_scratch() {
    thread_local ThreadScratch scratch;
    return scratch;
}

size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

// The split of a call into items depends on the shape, the kernel and the query mask only,
// never on the thread count, so results are bit-identical for any number of threads.
// Items of batch entry b are [first[b], first[b + 1]); each KV head of b has `blocks[b]` row
// blocks of the real queries of b (all of them without query padding).
struct Plan {
    const KernelInfo *k;
    size_t group, items, splits, chunk;
    bool serial;           // too little work to be worth waking a worker
    const size_t *first;   // [batch + 1]
    const uint32_t *nreal; // [batch] real queries of b (null: seq_q each)
};

// Real queries of each batch entry (query_valid): qmap[b * seq_q + n] = n-th real query of b.
// Returns false (nothing built) when there is no query mask.
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

// Below this many multiply-adds (~30-40 us on one core with the per-row packing) a call runs on
// the caller's thread: a sleeping worker takes about as long to wake on a VM, so it would join too
// late to help (the caller never waits for a worker that wakes after every item is claimed, but
// the wake-up still costs the caller a few microseconds). Measured with bench/peers/peers.py:
// n = 32 (0.54M) on 2 threads 1.00-1.08x the 1-thread time, n = 64 (2.1M) 0.72-0.79x. (Since
// the workers poll for 200 us after a job, back-to-back calls skip the wake-up: n = 64 0.66-0.68x,
// n = 128 0.55-0.57x on a VM where it was 1.15-1.24x and 0.80-1.01x before.)
constexpr double kSerialMacs = 1 << 20;

Plan make_plan(const Params &p, const Tensors &t, bool allow_split) {
    Plan pl;
    pl.k = &current_kernel();
    pl.group = p.shape.heads_q / p.shape.heads_kv;
    const size_t B = p.shape.batch;
    pl.nreal = t.qmap ? t.qmap + B * p.shape.seq_q : nullptr;
    if (t.cu_q) { // varlen: the real queries of each sequence are its tokens
        std::vector<uint32_t> &lens = thread_scratch().qlens;
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
    std::vector<size_t> &first = thread_scratch().first_item;
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

// Runs body(item) for every item: on the pool, or on the caller alone for a small call.
void run_items(const Plan &pl, size_t items, const std::function<void(size_t)> &body) {
    if (pl.serial) {
        for (size_t it = 0; it < items; ++it) body(it);
        return;
    }
    pool_run(items, body);
}

// Item `it` -> rows; within a batch entry the heaviest row blocks (last queries under a causal
// rule) go first.
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

size_t dim_padded(const Params &p, const Plan &pl) {
    return ceil_div(p.shape.head_dim_v, pl.k->dim_block) * pl.k->dim_block;
}

// Exact merge of the key-split partials of one item (fixed order of splits), then the sink.
void merge_item(const Params &p, const Tensors &t, const Plan &pl, const WorkItem &w,
                const float *parts, size_t part_floats) {
    const size_t R = pl.k->lanes, dv = p.shape.head_dim_v;
    const uint32_t *qmap = t.qmap ? t.qmap + w.b * p.shape.seq_q : nullptr;
    for (size_t l = 0; l < w.rows; ++l) {
        const size_t row = w.r0 + l;
        const size_t qi = row / pl.group, h = w.kvh * pl.group + row % pl.group;
        const size_t i = qmap ? qmap[qi] : qi;
        float *o = t.out + out_index(p, t, w.b, h, i);
        float M = -INFINITY;
        bool vis = false;
        for (size_t s = 0; s < pl.splits; ++s) {
            const float *ps = parts + s * part_floats;
            if (ps[2 * R + l] != 0.0f) {
                vis = true;
                if (!(ps[l] <= M)) M = ps[l]; // NaN propagates
            }
        }
        float *lse = t.lse ? t.lse + lse_index(p, t, w.b, h, i) : nullptr;
        if (!vis) {
            for (size_t dd = 0; dd < dv; ++dd) o[dd] = 0.0f;
            if (lse) *lse = -INFINITY;
            continue;
        }
        float sink;
        const bool has_sink = sink_of(p, t, h, &sink);
        if (has_sink && sink > M) M = sink;
        const float Ms = std::isinf(M) && M < 0 ? 0.0f : M;
        float L = 0.0f;
        for (size_t s = 0; s < pl.splits; ++s) {
            const float *ps = parts + s * part_floats;
            if (ps[2 * R + l] != 0.0f) L += ps[R + l] * std::exp(ps[l] - Ms);
        }
        if (has_sink) L += std::exp(sink - Ms);
        for (size_t dd = 0; dd < dv; ++dd) {
            float acc = 0.0f;
            for (size_t s = 0; s < pl.splits; ++s) {
                const float *ps = parts + s * part_floats;
                if (ps[2 * R + l] != 0.0f) acc += ps[3 * R + dd * R + l] * std::exp(ps[l] - Ms);
            }
            o[dd] = acc / L;
        }
        if (lse) *lse = M + std::log(L);
    }
}

// Rows of padded queries: out 0 and lse -inf (forward), weights 0 (weights). They are in no
// work item.
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

// key_mass: one task per (batch, KV head) over all its real rows (see mass_item).
void key_mass(const Params &p, const Tensors &t, const Plan &pl) {
    const Shape &s = p.shape;
    std::fill(t.key_mass, t.key_mass + s.batch * s.heads_q * s.seq_k, 0.0f);
    const size_t scratch_bytes = pl.k->scratch_bytes(p);
    run_items(pl, s.batch * s.heads_kv, [&](size_t task) {
        WorkItem w;
        w.b = task / s.heads_kv;
        w.kvh = task % s.heads_kv;
        const size_t nq = pl.nreal ? pl.nreal[w.b] : s.seq_q;
        w.r0 = 0;
        w.rows = pl.group * nq;
        w.k_begin = 0;
        w.k_end = key_len(p, t, w.b);
        if (w.rows) pl.k->mass(p, t, w, thread_scratch().item.get(scratch_bytes));
    });
}

} // namespace

// Whether the fp16 fast path takes this forward call (see ATTN_PARAM_COMPUTE): prefill-like,
// fp32/fp16 operands, dense or strided, no variant beyond causal rules, windows and key
// lengths, and values whose fp16 products cannot overflow.
bool fp16_takes(const Params &p, const Tensors &t) {
    const Shape &s = p.shape;
    auto f32_or_f16 = [](DType d) { return d == DType::F32 || d == DType::F16; };
    const bool plain_types = f32_or_f16(p.q_type) && f32_or_f16(p.k_type) && f32_or_f16(p.v_type);
    if (!p.fp16 || !plain_types || p.invariant || p.varlen || p.page_size || p.softcap > 0.0f ||
        p.plus_one || t.bias || t.alibi || t.sinks || t.key_valid || t.allowed || t.query_valid ||
        t.key_mass || t.cu_q || t.cu_k || t.block_table)
        return false;
    if (active_isa() != Isa::Avx512Fp16) return false; // the CPU's level, not capped below it
    if (s.seq_q * (s.heads_q / s.heads_kv) < 16 || s.head_dim > 1024 || s.head_dim_v > 1024)
        return false;
    return fp16_in_range(p, t);
}

// The forward call on the fp16 fast path (fp16_takes).
void fp16_forward(const Params &p, const Tensors &t0) {
    const Plan pl = make_plan(p, t0, false); // its serial decision (work, not threads)
    const size_t rb = fp16_block_rows(), blocks = ceil_div(p.shape.seq_q, rb);
    const size_t bytes = fp16_scratch_bytes(p), heads = p.shape.heads_q;
    const size_t kvs = p.shape.batch * p.shape.heads_kv;
    // K (transposed into key tiles) and fp32 V are rounded to fp16 once per call: each row
    // serves every query head of its group and every query block; fp16 V is read in place
    thread_scratch().k16.resize(kvs * fp16_k_elems(p));
    uint16_t *k16 = thread_scratch().k16.data(), *v16 = nullptr;
    if (p.v_type == DType::F32) {
        thread_scratch().v16.resize(kvs * p.shape.seq_k * p.shape.head_dim_v);
        v16 = thread_scratch().v16.data();
    }
    run_items(pl, kvs, [&](size_t it) {
        const size_t b = it / p.shape.heads_kv, kvh = it % p.shape.heads_kv;
        fp16_convert_rows(p, t0, false, b, kvh, k16 + it * fp16_k_elems(p));
        if (v16)
            fp16_convert_rows(p, t0, true, b, kvh, v16 + it * p.shape.seq_k * p.shape.head_dim_v);
    });
    run_items(pl, p.shape.batch * heads * blocks, [&](size_t it) {
        const size_t blk = it % blocks, h = it / blocks % heads, b = it / blocks / heads;
        fp16_item(p, t0, b, h, blk * rb, k16, v16, thread_scratch().item.get(bytes));
    });
}

// Decode items (a few query rows per KV head) over K or V whose KV heads interleave within a
// token (token-major pages, BSHD, packed rows) or share small pages (head-major pages of at most
// kPageMajorBytes per head): the KV heads of a row block and key range then walk the key tiles
// together (KernelInfo::forward_heads: key-major, or page-major over head-major pages), so
// memory streams in address order rather than one head's row per token (a 4 KiB stride at 8 x
// 128 floats) or one head's 8 KiB per page. Every item's arithmetic, and so every bit, is the
// same either way.
bool heads_together_decode(const Params &p, const Plan &pl) {
    const bool token_major = p.k.head < p.k.row || p.v.head < p.v.row;
    return p.shape.heads_kv > 1 && (token_major || page_major_pages(p)) &&
           pl.group * p.shape.seq_q <= kDecodeRowsMax;
}

// The items of each (batch entry, row block) in groups of at most `per` KV heads.
const std::vector<HeadGroup> &head_groups(const Params &p, const Plan &pl, size_t per) {
    std::vector<HeadGroup> &groups = thread_scratch().groups;
    groups.clear();
    const size_t heads = p.shape.heads_kv;
    for (size_t b = 0; b < p.shape.batch; ++b) {
        const size_t rbs = (pl.first[b + 1] - pl.first[b]) / heads;
        for (size_t q = 0; q < rbs; ++q)
            for (size_t h0 = 0; h0 < heads; h0 += per)
                groups.push_back({pl.first[b] + h0 * rbs + q, std::min(per, heads - h0), rbs});
    }
    return groups;
}

void forward(const Params &p, const Tensors &t0) {
    if (fp16_takes(p, t0)) {
        fp16_forward(p, t0);
        return;
    }
    Tensors t = t0;
    if (build_qmap(p, t, thread_scratch().qmap)) t.qmap = thread_scratch().qmap.data();
    if (t.key_mass && !t.lse) { // the mass pass needs every row's lse
        thread_scratch().lse.resize(p.shape.batch * p.shape.heads_q * p.shape.seq_q);
        t.lse = thread_scratch().lse.data();
    }
    clear_padded_queries(p, t);
    const Plan pl = make_plan(p, t, true);
    const size_t scratch_bytes = pl.k->scratch_bytes(p);
    if (pl.splits == 1 && heads_together_decode(p, pl)) {
        // as many heads per group as leave every thread a group (a group runs on one thread)
        const size_t threads = pl.serial ? 1 : pool_threads();
        const size_t heads = p.shape.heads_kv, blocks = pl.items / heads;
        size_t per = kDecodeHeads;
        while (per > 1 && blocks * ceil_div(heads, per) < threads) per = (per + 1) / 2;
        const std::vector<HeadGroup> &groups = head_groups(p, pl, per);
        run_items(pl, groups.size(), [&](size_t task) {
            const HeadGroup &g = groups[task];
            WorkItem ws[kDecodeHeads];
            for (size_t x = 0; x < g.n; ++x) ws[x] = item_of(p, t, pl, g.first + x * g.stride);
            pl.k->forward_heads(p, t, ws, g.n, thread_scratch().item.get(scratch_bytes), nullptr);
        });
    } else if (pl.splits == 1) {
        // Prefill over scattered K/V rows (BSHD, varlen packs, token-major pages): each KV head's
        // rows are copied once, in waves that fit the copy buffer (kv_pack.hpp); the same
        // arithmetic, the same bits as without the copy.
        KvPack pack;
        const size_t kv_heads = p.shape.batch * p.shape.heads_kv;
        if (kv_heads > 0 &&
            pack.init(p, t, pl.items * pl.k->lanes / kv_heads, thread_scratch().kv_copies)) {
            const Params &pp = pack.params();
            const Tensors &tp = pack.tensors();
            const size_t heads = p.shape.heads_kv;
            auto first_item = [&](size_t pair) { // items of a pair are consecutive
                const size_t b = pair / heads;
                return pair == kv_heads
                           ? pl.items
                           : pl.first[b] + pair % heads * ((pl.first[b + 1] - pl.first[b]) / heads);
            };
            for (size_t p0 = 0, p1; p0 < kv_heads; p0 = p1) {
                p1 = pack.wave(p0);
                run_items(pl, p1 - p0, [&](size_t x) { pack.pack(p0 + x); });
                const size_t i0 = first_item(p0), i1 = first_item(p1);
                run_items(pl, i1 - i0, [&](size_t x) {
                    const WorkItem w = item_of(pp, tp, pl, i0 + x);
                    pl.k->forward(pp, tp, w, thread_scratch().item.get(scratch_bytes), nullptr);
                });
            }
        } else {
            run_items(pl, pl.items, [&](size_t it) {
                const WorkItem w = item_of(p, t, pl, it);
                pl.k->forward(p, t, w, thread_scratch().item.get(scratch_bytes), nullptr);
            });
        }
    } else {
        const size_t part_floats = (3 + dim_padded(p, pl)) * pl.k->lanes;
        std::vector<float> &parts = thread_scratch().partials; // caller-owned, reused across calls
        parts.resize(pl.items * pl.splits * part_floats);
        float *parts_data = parts.data();
        auto split_item = [&](size_t it, size_t s) {
            WorkItem w = item_of(p, t, pl, it);
            const size_t klen = w.k_end;
            w.k_begin = std::min(klen, s * pl.chunk);
            w.k_end = std::min(klen, s * pl.chunk + pl.chunk);
            return w;
        };
        if (heads_together_decode(p, pl)) {
            const std::vector<HeadGroup> &groups = head_groups(p, pl, kDecodeHeads);
            run_items(pl, groups.size() * pl.splits, [&](size_t task) {
                const HeadGroup &g = groups[task / pl.splits];
                const size_t s = task % pl.splits;
                WorkItem ws[kDecodeHeads];
                Partial parts[kDecodeHeads];
                for (size_t x = 0; x < g.n; ++x) {
                    const size_t it = g.first + x * g.stride;
                    ws[x] = split_item(it, s);
                    parts[x].data = parts_data + (it * pl.splits + s) * part_floats;
                }
                pl.k->forward_heads(p, t, ws, g.n, thread_scratch().item.get(scratch_bytes), parts);
            });
        } else {
            run_items(pl, pl.items * pl.splits, [&](size_t it) {
                const WorkItem w = split_item(it / pl.splits, it % pl.splits);
                Partial part{parts_data + it * part_floats};
                pl.k->forward(p, t, w, thread_scratch().item.get(scratch_bytes), &part);
            });
        }
        run_items(pl, pl.items, [&](size_t it) {
            const WorkItem w = item_of(p, t, pl, it);
            merge_item(p, t, pl, w, parts_data + it * pl.splits * part_floats, part_floats);
        });
    }
    if (t.key_mass) key_mass(p, t, pl);
}

void weights(const Params &p, const Tensors &t0) {
    Tensors t = t0;
    if (build_qmap(p, t, thread_scratch().qmap)) t.qmap = thread_scratch().qmap.data();
    clear_padded_queries(p, t);
    const Plan pl = make_plan(p, t, false);
    const size_t scratch_bytes = pl.k->scratch_bytes(p);
    run_items(pl, pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, t, pl, it);
        pl.k->weights(p, t, w, thread_scratch().item.get(scratch_bytes));
    });
}

// Key chunks per (batch entry, KV head) of the backward: 1 when there are enough (batch, KV head)
// tasks to share out, else up to kBwdChunks chunks of at least kBwdChunkKeys keys (so that a
// batch-1 MQA call still runs on every thread), within a budget for the per-chunk dQ partials.
// It depends on the shape only, never on the thread count.
constexpr size_t kBwdChunks = 8, kBwdChunkKeys = 1024;
constexpr double kBwdPartialFloats = 16.0 * 1024 * 1024; // 64 MiB of dQ partials at most

size_t backward_chunks(const Params &p) {
    const Shape &s = p.shape;
    const size_t tasks = s.batch * s.heads_kv;
    if (tasks >= kBwdChunks) return 1;
    size_t c =
        std::min((kBwdChunks + tasks - 1) / tasks, (s.seq_k + kBwdChunkKeys - 1) / kBwdChunkKeys);
    const double per_chunk = static_cast<double>(s.batch) * s.heads_q * s.seq_q * s.head_dim;
    while (c > 1 && c * per_chunk > kBwdPartialFloats) --c;
    return c < 1 ? 1 : c;
}

// Whether two backward tasks (batch entry, KV head, key chunk) can write one dBias element.
// Element (b, h, i, j) lies at b * B + h * H + i * R + j. A dimension of stride 0 (and extent
// > 1) is a broadcast: batch entries or KV heads (tasks) then share rows, query rows and the
// heads of one KV head are walked inside one task. The other dimensions, with the keys (stride
// 1, extent seq_k), must address disjoint elements: sorted by stride, each stride must exceed
// the largest offset the smaller ones reach, else rows overlap (e.g. head stride 1 under rows
// of seq_k keys) and any two tasks may meet on an element (a sufficient test: layouts it
// refuses run serially, which is always correct).
static bool dbias_shared(const Params &p) {
    const Shape &s = p.shape;
    if ((p.bias.batch == 0 && s.batch > 1) || (p.bias.head == 0 && s.heads_kv > 1)) return true;
    struct Dim {
        size_t stride, extent;
    } dims[4] = {
        {1, s.seq_k}, {p.bias.row, s.seq_q}, {p.bias.head, s.heads_q}, {p.bias.batch, s.batch}};
    std::sort(dims, dims + 4, [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
    double reach = 0.0; // the largest offset of the dimensions so far (double: no overflow)
    for (const Dim &d : dims) {
        if (d.stride == 0 || d.extent <= 1) continue;
        if (static_cast<double>(d.stride) <= reach) return true;
        reach += static_cast<double>(d.stride) * static_cast<double>(d.extent - 1);
    }
    return false;
}

// One task per (batch entry, KV head, key chunk) owns every dK, dV (and dBias) row it writes;
// with one chunk it also owns the dQ rows of its query heads, with more each chunk's dQ goes to
// a partial buffer of its own and the partials are summed in chunk order. No two tasks touch the
// same element and the order inside a task is fixed: bit-identical for any thread count. dBias
// rows that tasks may share (broadcast across batch entries or KV heads, or rows overlapping
// through their strides: dbias_shared) make the tasks run one after another, in order. The sink
// gradients are per-task partial sums (from each entry's first chunk) added in batch order.
void backward(const Params &p, const Tensors &t) {
    const Shape &s = p.shape;
    const KernelInfo &k = current_kernel();
    const size_t group = s.heads_q / s.heads_kv, heads = s.batch * s.heads_kv;
    const size_t chunks = backward_chunks(p), tasks = heads * chunks;
    // chunk boundaries: multiples of kBwdChunkKeys (so of every kernel's key block)
    const size_t span = (s.seq_k + chunks - 1) / chunks;
    const size_t chunk_keys = (span + kBwdChunkKeys - 1) / kBwdChunkKeys * kBwdChunkKeys;
    if (t.dbias)
        for (size_t b = 0; b < s.batch; ++b)
            for (size_t h = 0; h < s.heads_q; ++h)
                for (size_t i = 0; i < s.seq_q; ++i)
                    std::fill_n(t.dbias + b * p.bias.batch + h * p.bias.head + i * p.bias.row,
                                s.seq_k, 0.0f);
    std::vector<float> &parts = thread_scratch().partials;
    if (t.dsinks) parts.assign(heads * group, 0.0f);
    float *parts_data = parts.data();
    // dQ partials: [task][group][seq_q][head_dim], left uninitialised (each task zeroes its own)
    const size_t part_floats = group * s.seq_q * s.head_dim;
    const std::unique_ptr<float[]> dq_parts(chunks > 1 && t.dq ? new float[tasks * part_floats]
                                                               : nullptr);
    const size_t bytes = k.backward_scratch(p);
    auto body = [&](size_t task) {
        const size_t bh = task / chunks, c = task % chunks;
        const size_t k0 = c * chunk_keys, k1 = std::min(s.seq_k, k0 + chunk_keys);
        float *dsink = t.dsinks && c == 0 ? parts_data + bh * group : nullptr;
        float *dqp = dq_parts ? dq_parts.get() + task * part_floats : nullptr;
        k.backward(p, t, bh / s.heads_kv, bh % s.heads_kv, k0, k1, dqp,
                   thread_scratch().item.get(bytes), dsink);
    };
    const bool shared_dbias = t.dbias && dbias_shared(p);
    const double macs = static_cast<double>(s.batch) * s.heads_q * s.seq_q * s.seq_k *
                        (2.0 * s.head_dim + 3.0 * s.head_dim_v);
    if (shared_dbias || macs < kSerialMacs || tasks == 1) {
        for (size_t task = 0; task < tasks; ++task) body(task);
    } else {
        pool_run(tasks, body);
    }
    if (dq_parts) // dQ = the chunks' partials, summed in chunk order
        for (size_t bh = 0; bh < heads; ++bh) {
            const size_t b = bh / s.heads_kv, kvh = bh % s.heads_kv;
            const size_t nq = query_len(p, t, b);
            for (size_t g = 0; g < group; ++g)
                for (size_t i = 0; i < nq; ++i) {
                    float *dst = t.dq + q_index(p, t, b, kvh * group + g, i);
                    const float *src =
                        dq_parts.get() + bh * chunks * part_floats + (g * s.seq_q + i) * s.head_dim;
                    for (size_t e = 0; e < s.head_dim; ++e) dst[e] = src[e];
                    for (size_t c = 1; c < chunks; ++c)
                        for (size_t e = 0; e < s.head_dim; ++e) dst[e] += src[c * part_floats + e];
                }
        }
    if (t.dsinks)
        for (size_t h = 0; h < s.heads_q; ++h) {
            float sum = 0.0f;
            for (size_t b = 0; b < s.batch; ++b)
                sum += parts_data[(b * s.heads_kv + h / group) * group + h % group];
            t.dsinks[h] = sum;
        }
}

// Press et al. 2022: for n a power of two, slope_h = 2^(-8 (h + 1) / n); otherwise the slopes
// of the largest power of two m < n, followed by every other slope of 2m (BLOOM's rule).
void alibi_standard_slopes(size_t n, float *slopes) {
    size_t m = 1;
    while (m * 2 <= n) m *= 2;
    for (size_t h = 0; h < m; ++h)
        slopes[h] = static_cast<float>(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / m));
    for (size_t x = 0; m + x < n; ++x)
        slopes[m + x] =
            static_cast<float>(std::pow(2.0, -8.0 * static_cast<double>(2 * x + 1) / (2 * m)));
}

} // namespace core
} // namespace attn
