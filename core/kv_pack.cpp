// See kv_pack.hpp.
#include "kv_pack.hpp"

#include <cstring>
#include <new>

namespace attn {
namespace core {
namespace {

// Query rows per KV head from which the copy pays: it reads every row once from its own page,
// where each item (64 rows on AVX2) reads it again. Zen 3, H 8, 1 thread, BSHD time with / without
// the copy: n = 2048 0.90-0.97, n = 1024 0.96-0.99, n = 512 1.01-1.08.
constexpr size_t kPackRowsMin = 1024;
// At most this much memory for the copy (both operands); larger calls run on the rows in place.
constexpr double kPackBytesMax = 256.0 * 1024 * 1024;

bool scattered(const Layout &l, DType type, size_t dim) {
    return type == DType::F32 && l.row != dim && l.row * sizeof(float) >= 1024;
}

} // namespace

// The copy's memory is kept for the calling thread's next call up to this size: a fresh block
// costs a page fault and the kernel's zeroing per 4 KiB page, 2-7 % of an n = 2048 prefill (H 8,
// d 128: 16 MiB).
constexpr size_t kKeepBytes = size_t(32) << 20;
struct Kept {
    void *ptr = nullptr;
    size_t bytes = 0;
    ~Kept() { ::operator delete(ptr, std::align_val_t(64)); }
};
thread_local Kept t_kept;

KvPack::~KvPack() {
    if (buf_ != t_kept.ptr) ::operator delete(buf_, std::align_val_t(64));
}

bool KvPack::init(const Params &p, const Tensors &t, size_t rows_per_kv_head) {
    const Shape &s = p.shape;
    const bool pk = scattered(p.k, p.k_type, s.head_dim),
               pv = t.v && scattered(p.v, p.v_type, s.head_dim_v);
    if ((!pk && !pv) || p.page_size || t.block_table || rows_per_kv_head < kPackRowsMin)
        return false;
    // varlen: one block [heads_kv][total_k][dim] (sequence b at token cu_k[b], as in the pack)
    const size_t keys = t.cu_k ? static_cast<size_t>(t.cu_k[s.batch]) : s.batch * s.seq_k;
    const size_t dk = pk ? s.head_dim : 0, dv = pv ? s.head_dim_v : 0;
    const double bytes = static_cast<double>(keys) * s.heads_kv * (dk + dv) * sizeof(float);
    if (bytes > kPackBytesMax || bytes == 0) return false;
    const size_t need = static_cast<size_t>(bytes);
    if (t_kept.ptr && t_kept.bytes >= need) {
        buf_ = t_kept.ptr;
    } else {
        buf_ = ::operator new(need, std::align_val_t(64), std::nothrow);
        if (!buf_) return false; // then on the rows in place
        if (need <= kKeepBytes) {
            ::operator delete(t_kept.ptr, std::align_val_t(64));
            t_kept.ptr = buf_;
            t_kept.bytes = need;
        }
    }
    src_p_ = p_ = p;
    src_t_ = t_ = t;
    float *next = static_cast<float *>(buf_);
    auto relayout = [&](bool on, size_t dim, Layout *l, const void **data, float **copy) {
        if (!on) return;
        *copy = next;
        next += keys * s.heads_kv * dim;
        *data = *copy;
        l->row = dim;
        l->head = (t.cu_k ? keys : s.seq_k) * dim;
        l->batch = t.cu_k ? 0 : s.heads_kv * l->head;
    };
    relayout(pk, s.head_dim, &p_.k, &t_.k, &k_);
    relayout(pv, s.head_dim_v, &p_.v, &t_.v, &v_);
    tasks_ = s.batch * s.heads_kv;
    return true;
}

// Copies the rows of one (batch entry, KV head): its keys only (padding past a key length is
// never read), and of those only the valid ones; a hidden key's row becomes zeros (the kernel
// skips it either way, but nothing in the copy is left unwritten).
void KvPack::pack(size_t task) const {
    const Shape &s = src_p_.shape;
    const size_t b = task / s.heads_kv, kvh = task % s.heads_kv, n = key_len(src_p_, src_t_, b);
    const uint8_t *valid = src_t_.key_valid ? src_t_.key_valid + b * s.seq_k : nullptr;
    auto copy = [&](bool value, size_t dim) {
        const KvRows from = kv_rows(src_p_, src_t_, value, b, kvh);
        float *to =
            const_cast<float *>(static_cast<const float *>(kv_rows(p_, t_, value, b, kvh).at(0)));
        for (size_t j = 0; j < n; ++j)
            if (!valid || valid[j])
                std::memcpy(to + j * dim, from.at(j), dim * sizeof(float));
            else
                std::memset(to + j * dim, 0, dim * sizeof(float));
    };
    if (k_) copy(false, s.head_dim);
    if (v_) copy(true, s.head_dim_v);
}

} // namespace core
} // namespace attn
