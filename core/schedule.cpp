// Kernel selection and scheduling: splits a call into work items, runs them on the pool with
// per-thread scratch, and merges key-split partial results (decode) in a fixed order.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "attention.hpp"
#include "kernel.hpp"
#include "thread_pool.hpp"

namespace attn {
namespace core {
namespace {

const char *const kIsaNames[kIsaCount] = {"scalar", "sse2", "avx2", "avx512"};

Isa detect_best() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
        return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    if (__builtin_cpu_supports("sse2")) return Isa::Sse2;
#endif
    return Isa::Scalar;
}

Isa best_isa() {
    static const Isa best = detect_best();
    return best;
}

int env_cap() {
    static const int cap = [] {
        Isa isa;
        const char *env = std::getenv("ATTN_ISA");
        return env && isa_from_name(env, &isa) ? static_cast<int>(isa) : kIsaCount - 1;
    }();
    return cap;
}

std::atomic<int> g_cap{-1}; // -1: use ATTN_ISA / best

const KernelInfo &kernel_for(Isa isa) {
    switch (isa) {
    case Isa::Avx512:
        return kernel_avx512();
    case Isa::Avx2:
        return kernel_avx2();
    case Isa::Sse2:
        return kernel_sse2();
    default:
        return kernel_scalar();
    }
}

// Per-thread scratch that grows and is kept: no allocation per call once warm.
struct ScratchBuf {
    void *ptr = nullptr;
    size_t cap = 0;
    ~ScratchBuf() { ::operator delete(ptr, std::align_val_t(64)); }
    void *get(size_t bytes) {
        if (bytes > cap) {
            ::operator delete(ptr, std::align_val_t(64));
            ptr = nullptr;
            cap = 0;
            ptr = ::operator new(bytes, std::align_val_t(64)); // throws std::bad_alloc
            cap = bytes;
        }
        return ptr;
    }
};
thread_local ScratchBuf t_scratch;
thread_local std::vector<float> t_partials;

size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

struct Plan {
    const KernelInfo *k;
    size_t group, row_blocks, items, splits, chunk;
};

// The split of a call into items depends on the shape and the kernel only, never on the thread
// count, so results are bit-identical for any number of threads.
Plan make_plan(const Params &p, bool allow_split) {
    Plan pl;
    pl.k = &current_kernel();
    pl.group = p.shape.heads_q / p.shape.heads_kv;
    if (pl.k->narrow && pl.group * p.shape.seq_q <= pl.k->narrow->lanes) pl.k = pl.k->narrow;
    pl.row_blocks = ceil_div(pl.group * p.shape.seq_q, pl.k->lanes);
    pl.items = p.shape.batch * p.shape.heads_kv * pl.row_blocks;
    pl.splits = 1;
    // Decode-like calls (few row blocks, many keys): split keys into chunks of >= 2048 so that
    // every thread streams its share of K and V; partials merge exactly afterwards.
    if (allow_split && pl.items < 16 && p.shape.seq_k >= 4096) {
        pl.splits = std::min(ceil_div(16, pl.items), p.shape.seq_k / 2048);
    }
    pl.chunk = ceil_div(p.shape.seq_k, pl.splits);
    return pl;
}

// Item `it` -> rows; the heaviest row blocks (last queries under a causal rule) go first.
WorkItem item_of(const Params &p, const Plan &pl, size_t it) {
    WorkItem w;
    const size_t rb = pl.row_blocks - 1 - it % pl.row_blocks;
    const size_t bh = it / pl.row_blocks;
    w.b = bh / p.shape.heads_kv;
    w.kvh = bh % p.shape.heads_kv;
    w.r0 = rb * pl.k->lanes;
    const size_t total = pl.group * p.shape.seq_q;
    w.rows = std::min(pl.k->lanes, total - w.r0);
    w.k_begin = 0;
    w.k_end = p.shape.seq_k;
    return w;
}

// Exact merge of the key-split partials of one item (fixed order of splits).
void merge_item(const Params &p, const Tensors &t, const Plan &pl, const WorkItem &w,
                const float *parts, size_t part_floats) {
    const size_t R = pl.k->lanes, d = p.shape.head_dim;
    for (size_t l = 0; l < w.rows; ++l) {
        const size_t row = w.r0 + l;
        const size_t i = row / pl.group, h = w.kvh * pl.group + row % pl.group;
        float *o = t.out + w.b * p.out.batch + h * p.out.head + i * p.out.row;
        float M = -INFINITY;
        bool vis = false;
        for (size_t s = 0; s < pl.splits; ++s) {
            const float *ps = parts + s * part_floats;
            if (ps[2 * R + l] != 0.0f) {
                vis = true;
                if (!(ps[l] <= M)) M = ps[l]; // NaN propagates
            }
        }
        float *lse = t.lse ? t.lse + (w.b * p.shape.heads_q + h) * p.shape.seq_q + i : nullptr;
        if (!vis) {
            for (size_t dd = 0; dd < d; ++dd) o[dd] = 0.0f;
            if (lse) *lse = -INFINITY;
            continue;
        }
        const float Ms = std::isinf(M) && M < 0 ? 0.0f : M;
        float L = 0.0f;
        for (size_t s = 0; s < pl.splits; ++s) {
            const float *ps = parts + s * part_floats;
            if (ps[2 * R + l] != 0.0f) L += ps[R + l] * std::exp(ps[l] - Ms);
        }
        for (size_t dd = 0; dd < d; ++dd) {
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

} // namespace

const char *isa_name(Isa isa) {
    const int x = static_cast<int>(isa);
    return x >= 0 && x < kIsaCount ? kIsaNames[x] : "unknown";
}

bool isa_from_name(const char *name, Isa *out) {
    for (int x = 0; x < kIsaCount; ++x)
        if (name && std::strcmp(name, kIsaNames[x]) == 0) {
            *out = static_cast<Isa>(x);
            return true;
        }
    return false;
}

bool isa_supported(Isa isa) {
    return static_cast<int>(isa) <= static_cast<int>(best_isa());
}

Isa active_isa() {
    const int cap = g_cap.load();
    const int c = cap >= 0 ? cap : env_cap();
    const int best = static_cast<int>(best_isa());
    return static_cast<Isa>(c < best ? c : best);
}

void set_isa_cap(Isa cap) {
    g_cap.store(static_cast<int>(cap));
}
void reset_isa_cap() {
    g_cap.store(-1);
}

const KernelInfo &current_kernel() {
    return kernel_for(active_isa());
}

void forward(const Params &p, const Tensors &t) {
    const Plan pl = make_plan(p, true);
    const size_t scratch_bytes = pl.k->scratch_bytes(p);
    if (pl.splits == 1) {
        pool_run(pl.items, [&](size_t it) {
            const WorkItem w = item_of(p, pl, it);
            pl.k->forward(p, t, w, t_scratch.get(scratch_bytes), nullptr);
        });
        return;
    }
    const size_t dp = ceil_div(p.shape.head_dim, pl.k->dim_block) * pl.k->dim_block;
    const size_t part_floats = (3 + dp) * pl.k->lanes;
    std::vector<float> &parts = t_partials; // caller-owned, reused across calls
    parts.resize(pl.items * pl.splits * part_floats);
    float *parts_data = parts.data();
    pool_run(pl.items * pl.splits, [&](size_t it) {
        WorkItem w = item_of(p, pl, it / pl.splits);
        const size_t s = it % pl.splits;
        w.k_begin = s * pl.chunk;
        w.k_end = std::min(p.shape.seq_k, w.k_begin + pl.chunk);
        Partial part{parts_data + it * part_floats};
        pl.k->forward(p, t, w, t_scratch.get(scratch_bytes), &part);
    });
    pool_run(pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, pl, it);
        merge_item(p, t, pl, w, parts_data + it * pl.splits * part_floats, part_floats);
    });
}

void weights(const Params &p, const Tensors &t) {
    const Plan pl = make_plan(p, false);
    const size_t scratch_bytes = pl.k->scratch_bytes(p);
    pool_run(pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, pl, it);
        pl.k->weights(p, t, w, t_scratch.get(scratch_bytes));
    });
}

} // namespace core
} // namespace attn
