// The forward call: picks one strategy for the call and runs it over the kernel of the active ISA.
//
//   fp16 path       the AVX512-FP16 kernel (kernel.hpp), when the call asks for it and
//                   qualifies (fp16_takes)
//   heads together  decode over token-major or small head-major pages: the KV heads of a row
//                   block walk the key tiles together (KernelInfo::forward_heads)
//   packed prefill  prefill over K/V rows a KiB or more apart: each KV head's rows copied into
//                   one block first (kv_pack.hpp), then plain items over the copies
//   plain items     one KernelInfo::forward per work item
//   key split       few items over many keys: each item's keys in chunks, then an exact merge
//                   of the chunks' partials in a fixed order
// followed by the key-mass pass when KEY_MASS is bound. Every strategy computes each row with
// the same arithmetic as plain items: the choice never changes a bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention.hpp"
#include "kernel.hpp"
#include "kv_pack.hpp"
#include "plan.hpp"
#include "thread_pool.hpp"

namespace attn {
namespace core {
namespace {

enum class Strategy { HeadsTogether, PackedPrefill, PlainItems, KeySplit };

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
const std::vector<HeadGroup> &head_groups(const Params &p, const Plan &pl, size_t per,
                                          std::vector<HeadGroup> &groups) {
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

// The planning half of forward(): which strategy runs the plan (a rule of the shape, the layouts
// and the kernel, never of the thread count).
Strategy choose_strategy(const Params &p, const Tensors &t, const Plan &pl) {
    if (pl.splits > 1) return Strategy::KeySplit;
    if (heads_together_decode(p, pl)) return Strategy::HeadsTogether;
    const size_t kv_heads = p.shape.batch * p.shape.heads_kv;
    if (kv_heads > 0 && KvPack::gains(p, t, pl.items * pl.k->lanes / kv_heads))
        return Strategy::PackedPrefill;
    return Strategy::PlainItems;
}

// ---- Strategies: each runs every item of the plan ----

void plain_items(const Params &p, const Tensors &t, const Plan &pl) {
    const size_t bytes = pl.k->scratch_bytes(p);
    run_items(pl, pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, t, pl, it);
        pl.k->forward(p, t, w, thread_scratch().item.get(bytes), nullptr);
    });
}

void heads_together(const Params &p, const Tensors &t, const Plan &pl, ThreadScratch &cs) {
    // as many heads per group as leave every thread a group (a group runs on one thread)
    const size_t threads = pl.serial ? 1 : pool_threads();
    const size_t heads = p.shape.heads_kv, blocks = pl.items / heads;
    size_t per = kDecodeHeads;
    while (per > 1 && blocks * ceil_div(heads, per) < threads) per = (per + 1) / 2;
    const std::vector<HeadGroup> &groups = head_groups(p, pl, per, cs.groups);
    const size_t bytes = pl.k->scratch_bytes(p);
    run_items(pl, groups.size(), [&](size_t task) {
        const HeadGroup &g = groups[task];
        WorkItem ws[kDecodeHeads];
        for (size_t x = 0; x < g.n; ++x) ws[x] = item_of(p, t, pl, g.first + x * g.stride);
        pl.k->forward_heads(p, t, ws, g.n, thread_scratch().item.get(bytes), nullptr);
    });
}

// Prefill over scattered K/V rows (BSHD, varlen packs, token-major pages): each KV head's rows
// are copied once, in waves that fit the copy buffer (kv_pack.hpp); the same arithmetic, the
// same bits as without the copy. Returns false (nothing done) when the copies do not fit the
// buffer's limit or the buffer cannot be had: the caller then runs plain items.
bool packed_prefill(const Params &p, const Tensors &t, const Plan &pl, ThreadScratch &cs) {
    KvPack pack;
    const size_t kv_heads = p.shape.batch * p.shape.heads_kv;
    if (kv_heads == 0 || !pack.init(p, t, pl.items * pl.k->lanes / kv_heads, cs.kv_copies))
        return false;
    const Params &pp = pack.params();
    const Tensors &tp = pack.tensors();
    const size_t heads = p.shape.heads_kv, bytes = pl.k->scratch_bytes(p);
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
            pl.k->forward(pp, tp, w, thread_scratch().item.get(bytes), nullptr);
        });
    }
    return true;
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

// Decode-like calls: each item's keys in pl.splits chunks (heads together where the K/V layout
// asks for it), each chunk's partial state kept, then merged per item in chunk order.
void key_split(const Params &p, const Tensors &t, const Plan &pl, ThreadScratch &cs) {
    const size_t part_floats = (3 + dim_padded(p, pl)) * pl.k->lanes;
    const size_t bytes = pl.k->scratch_bytes(p);
    std::vector<float> &parts = cs.partials;
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
        const std::vector<HeadGroup> &groups = head_groups(p, pl, kDecodeHeads, cs.groups);
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
            pl.k->forward_heads(p, t, ws, g.n, thread_scratch().item.get(bytes), parts);
        });
    } else {
        run_items(pl, pl.items * pl.splits, [&](size_t it) {
            const WorkItem w = split_item(it / pl.splits, it % pl.splits);
            Partial part{parts_data + it * part_floats};
            pl.k->forward(p, t, w, thread_scratch().item.get(bytes), &part);
        });
    }
    run_items(pl, pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, t, pl, it);
        merge_item(p, t, pl, w, parts_data + it * pl.splits * part_floats, part_floats);
    });
}

// key_mass: one task per (batch, KV head) over all its real rows (KernelInfo::mass).
void key_mass(const Params &p, const Tensors &t, const Plan &pl) {
    const Shape &s = p.shape;
    std::fill(t.key_mass, t.key_mass + s.batch * s.heads_q * s.seq_k, 0.0f);
    const size_t bytes = pl.k->scratch_bytes(p);
    run_items(pl, s.batch * s.heads_kv, [&](size_t task) {
        WorkItem w;
        w.b = task / s.heads_kv;
        w.kvh = task % s.heads_kv;
        const size_t nq = pl.nreal ? pl.nreal[w.b] : s.seq_q;
        w.r0 = 0;
        w.rows = pl.group * nq;
        w.k_begin = 0;
        w.k_end = key_len(p, t, w.b);
        if (w.rows) pl.k->mass(p, t, w, thread_scratch().item.get(bytes));
    });
}

// ---- Integer Q.K^T (Compute::Int8) ----

// Whether every batch entry's keys fit the seq_k rows per (batch entry, KV head) of the
// quantized copies.
bool keys_fit(const Params &p, const Tensors &t) {
    for (size_t b = 0; b < p.shape.batch; ++b)
        if (key_len(p, t, b) > p.shape.seq_k) return false;
    return true;
}

// Whether the call computes Q.K^T and P.V in integers on its row blocks: asked for, a strategy with
// row blocks (not decode-like: those are bound by reading K and V, which a quantizing pass would
// read once more), no batch invariance (the smoothing mean depends on every key of the
// sequence), no key-mass pass (it recomputes the probabilities), and sums that fit int32.
bool int8_takes(const Params &p, const Tensors &t, const Plan &pl, Strategy st) {
    return p.compute == Compute::Int8 && !p.invariant && !t.key_mass &&
           (st == Strategy::PlainItems || st == Strategy::PackedPrefill) &&
           pl.group * p.shape.seq_q > kDecodeRowsMax && p.shape.head_dim <= kInt8MaxDim &&
           p.shape.seq_k > 0 && keys_fit(p, t);
}

// K of every (batch entry, KV head) smoothed and quantized into cs.kq (Tensors::kq), and V per
// tile into cs.vq (Tensors::vq). Q.K^T stays fp32 when some real key is not finite, P.V when
// some real value is not.
void quantize_kv(const Params &p, Tensors *t, const Plan &pl, ThreadScratch &cs) {
    const Shape &s = p.shape;
    const size_t kvs = s.batch * s.heads_kv, row = (s.head_dim + 1) / 2;
    const size_t bk = pl.k->tile_keys, tiles = ceil_div(s.seq_k, bk);
    const size_t tile = (bk + 1) / 2 * s.head_dim_v;
    const size_t work = std::max(3 * s.head_dim, 3 * s.head_dim_v);
    cs.kq.resize(kvs * (s.seq_k * row + tiles * tile));
    cs.kq_f.resize(kvs * (s.seq_k + s.head_dim + tiles * s.head_dim_v + work));
    int32_t *codes = cs.kq.data(), *vcodes = codes + kvs * s.seq_k * row;
    float *scales = cs.kq_f.data(), *means = scales + kvs * s.seq_k;
    float *vscales = means + kvs * s.head_dim, *works = vscales + kvs * tiles * s.head_dim_v;
    std::vector<unsigned char> ok(2 * kvs);
    run_items(pl, kvs, [&](size_t x) {
        const size_t b = x / s.heads_kv, h = x % s.heads_kv;
        float *w = works + x * work;
        ok[x] = pl.k->quantize_keys(p, *t, b, h, codes + x * s.seq_k * row, row,
                                    scales + x * s.seq_k, means + x * s.head_dim, w);
        ok[kvs + x] = pl.k->quantize_values(p, *t, b, h, vcodes + x * tiles * tile,
                                            vscales + x * tiles * s.head_dim_v, w);
    });
    if (std::find(ok.begin(), ok.begin() + kvs, 0) == ok.begin() + kvs) {
        t->kq = codes;
        t->kq_row = row;
        t->kq_scale = scales;
        t->kq_mean = means;
    }
    if (std::find(ok.begin() + kvs, ok.end(), 0) == ok.end()) {
        t->vq = vcodes;
        t->vq_scale = vscales;
        t->vq_tiles = tiles;
        t->vq_tile = tile;
    }
}

// The quantized copies are kept for the next call while they are small (a fresh block costs a
// page fault and the kernel's zeroing per page), released when larger, so a long prefill does
// not leave its copies behind for the thread's lifetime.
void release_quantized(ThreadScratch &cs) {
    if (cs.kq.capacity() * sizeof(int32_t) + cs.kq_f.capacity() * sizeof(float) <= kKeepBytes)
        return;
    std::vector<int32_t>().swap(cs.kq);
    std::vector<float>().swap(cs.kq_f);
}

// ---- The fp16 fast path ----

// Whether the fp16 fast path takes this forward call (see ATTN_PARAM_COMPUTE): prefill-like,
// fp32/fp16 operands, dense or strided, no variant beyond causal rules, windows and key
// lengths, and values whose fp16 products cannot overflow.
bool fp16_takes(const Params &p, const Tensors &t, const KernelInfo &k) {
    const Shape &s = p.shape;
    auto f32_or_f16 = [](DType d) { return d == DType::F32 || d == DType::F16; };
    const bool plain_types = f32_or_f16(p.q_type) && f32_or_f16(p.k_type) && f32_or_f16(p.v_type);
    if (p.compute != Compute::Fp16 || !plain_types || p.invariant || p.varlen || p.page_size ||
        p.softcap > 0.0f || p.plus_one || t.q_scale || t.bias || t.alibi || t.sinks ||
        t.key_valid || t.allowed || t.query_valid || t.key_mass || t.cu_q || t.cu_k ||
        t.block_table)
        return false;
    if (!k.fp16) return false; // the avx512fp16 kernel: the CPU's level, not capped below it
    if (s.seq_q * (s.heads_q / s.heads_kv) < 16 || s.head_dim > 1024 || s.head_dim_v > 1024)
        return false;
    return k.fp16->in_range(p, t);
}

// The forward call on the fp16 fast path (fp16_takes): K and V rounded to fp16 once, then one
// item per (batch entry, query head, block of Fp16Kernel::block_rows queries).
void fp16_path(const Params &p, const Tensors &t0, const KernelInfo &k, ThreadScratch &cs) {
    const Fp16Kernel &f = *k.fp16;
    const Plan pl = make_plan(p, t0, k, false, cs); // its serial decision (work, not threads)
    const size_t rb = f.block_rows, blocks = ceil_div(p.shape.seq_q, rb);
    const size_t bytes = f.scratch_bytes(p), heads = p.shape.heads_q;
    const size_t kvs = p.shape.batch * p.shape.heads_kv;
    // K (transposed into key tiles) and fp32 V are rounded to fp16 once per call: each row
    // serves every query head of its group and every query block; fp16 V is read in place
    cs.k16.resize(kvs * f.k_elems(p));
    uint16_t *k16 = cs.k16.data(), *v16 = nullptr;
    if (p.v_type == DType::F32) {
        cs.v16.resize(kvs * p.shape.seq_k * p.shape.head_dim_v);
        v16 = cs.v16.data();
    }
    run_items(pl, kvs, [&](size_t it) {
        const size_t b = it / p.shape.heads_kv, kvh = it % p.shape.heads_kv;
        f.convert_rows(p, t0, false, b, kvh, k16 + it * f.k_elems(p));
        if (v16) f.convert_rows(p, t0, true, b, kvh, v16 + it * p.shape.seq_k * p.shape.head_dim_v);
    });
    run_items(pl, p.shape.batch * heads * blocks, [&](size_t it) {
        const size_t blk = it % blocks, h = it / blocks % heads, b = it / blocks / heads;
        f.item(p, t0, b, h, blk * rb, k16, v16, thread_scratch().item.get(bytes));
    });
}

} // namespace

void forward(const Params &p0, const Tensors &t0) {
    const KernelInfo &k = current_kernel();
    ThreadScratch &cs = thread_scratch();
    Params p = p0;
    Tensors t = t0;
    prepare_alibi(&p, &t, cs);
    if (fp16_takes(p, t, k)) {
        fp16_path(p, t, k, cs);
        return;
    }
    if (build_qmap(p, t, cs.qmap)) t.qmap = cs.qmap.data();
    if (t.key_mass && !t.lse) { // the mass pass needs every row's lse
        cs.lse.resize(p.shape.batch * p.shape.heads_q * p.shape.seq_q);
        t.lse = cs.lse.data();
    }
    clear_padded_queries(p, t);
    const Plan pl = make_plan(p, t, k, true, cs);
    Strategy st = choose_strategy(p, t, pl);
    if (int8_takes(p, t, pl, st)) {
        quantize_kv(p, &t, pl, cs);
        // the integer products read the quantized copies, contiguous per KV head: a packed copy
        // of the scattered rows would only serve a block that falls back to fp32
        if (t.kq && t.vq && st == Strategy::PackedPrefill) st = Strategy::PlainItems;
    }
    switch (st) {
    case Strategy::KeySplit:
        key_split(p, t, pl, cs);
        break;
    case Strategy::HeadsTogether:
        heads_together(p, t, pl, cs);
        break;
    case Strategy::PackedPrefill:
        if (!packed_prefill(p, t, pl, cs)) plain_items(p, t, pl);
        break;
    case Strategy::PlainItems:
        plain_items(p, t, pl);
        break;
    }
    if (t.key_mass) key_mass(p, t, pl);
    release_quantized(cs);
}

} // namespace core
} // namespace attn
