// The backward call: splits the gradients of a call into (batch entry, KV head, key chunk)
// tasks, runs KernelInfo::backward for each (on the pool unless dBias rows may be shared), and
// sums the chunks' dQ partials and the dSinks partials in a fixed order.
#include <algorithm>
#include <memory>
#include <vector>

#include "attention.hpp"
#include "kernel.hpp"
#include "plan.hpp"
#include "thread_pool.hpp"

namespace attn {
namespace core {
namespace {

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
bool dbias_shared(const Params &p) {
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

} // namespace

// One task per (batch entry, KV head, key chunk) owns every dK, dV (and dBias) row it writes;
// with one chunk it also owns the dQ rows of its query heads, with more each chunk's dQ goes to
// a partial buffer of its own and the partials are summed in chunk order. No two tasks touch the
// same element and the order inside a task is fixed: bit-identical for any thread count. dBias
// rows that tasks may share (broadcast across batch entries or KV heads, or rows overlapping
// through their strides: dbias_shared) make the tasks run one after another, in order. The sink
// gradients are per-task partial sums (from each entry's first chunk) added in batch order.
void backward(const Params &p0, const Tensors &t0) {
    Params p = p0;
    Tensors t = t0;
    prepare_alibi(&p, &t, thread_scratch());
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

} // namespace core
} // namespace attn
