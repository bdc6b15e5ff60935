// The packed prefill's copies (see kv_pack.hpp): whether a call gains from them, how many
// (batch entry, KV head) pairs fit the calling thread's buffer at once, and the copy of a pair.
#include "kv_pack.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace attn {
namespace core {
namespace {

// Query rows per KV head from which the copy pays: it reads every row once from its own page,
// where each item (64 rows on AVX2) reads it again. Zen 3, H 8, 1 thread, BSHD time with / without
// the copy: n = 2048 0.90-0.97, n = 1024 0.96-0.99, n = 512 1.01-1.08.
constexpr size_t kPackRowsMin = 1024;

// The buffer: at most kKeepBytes (kv_pack.hpp), kept by the calling thread from call to call. A
// fresh block would cost a page fault and the kernel's zeroing per 4 KiB page each call, 2-16 % of
// a prefill (n = 2048, H 8, d 128: 16 MiB of copies). A pair larger than this (more than 32k keys
// at d 128) runs on its rows in place. The buffer (ThreadScratch::kv_copies, a ScratchBuf(true))
// sits on transparent huge pages where the system grants them (2 MiB-aligned and advised): every
// item reads each KV head's copy again, and with 4 KiB pages a pair's 2-16 MiB outgrow the TLB. n =
// 2048, H 8, 1 thread, BSHD time with / without: d128 0.94-0.99, causal 0.98-1.00, d64 0.94-1.01.

// Rows a KiB or more apart.
bool scattered(const Layout &l, DType type, size_t dim) {
    return l.row != dim && l.row * dtype_bytes(type) >= 1024;
}

size_t round64(size_t bytes) {
    return (bytes + 63) / 64 * 64;
}

} // namespace

bool KvPack::gains(const Params &p, const Tensors &t, size_t rows_per_kv_head) {
    const Shape &s = p.shape;
    const bool k = scattered(p.k, p.k_type, s.head_dim);
    const bool v = t.v && scattered(p.v, p.v_type, s.head_dim_v);
    return (k || v) && rows_per_kv_head >= kPackRowsMin;
}

KvPack::Block KvPack::block(bool value, size_t keys) const {
    if (!(value ? v_ : k_)) return {0, 0};
    const Shape &s = src_p_.shape;
    const DType type = value ? src_p_.v_type : src_p_.k_type;
    const size_t rows = round64(keys * (value ? s.head_dim_v : s.head_dim) * dtype_bytes(type));
    return {rows, rows + (has_scale(type) ? round64(keys * sizeof(float)) : 0)};
}

size_t KvPack::pair_bytes(size_t keys) const {
    return block(false, keys).bytes + block(true, keys).bytes;
}

bool KvPack::init(const Params &p, const Tensors &t, size_t rows_per_kv_head, ScratchBuf &copies) {
    const Shape &s = p.shape;
    k_ = scattered(p.k, p.k_type, s.head_dim);
    v_ = t.v && scattered(p.v, p.v_type, s.head_dim_v);
    if ((!k_ && !v_) || rows_per_kv_head < kPackRowsMin) return false;
    src_p_ = p;
    src_t_ = t;
    pairs_ = s.batch * s.heads_kv;
    size_t total = 0, largest = 0;
    for (size_t b = 0; b < s.batch; ++b) { // a batch entry's pairs are alike
        const size_t n = pair_bytes(key_len(p, t, b));
        largest = std::max(largest, n);
        total += n * s.heads_kv;
    }
    if (total == 0 || largest > kKeepBytes) return false;
    cap_ = std::min(total, kKeepBytes);
    try {
        buf_ = static_cast<unsigned char *>(copies.get(cap_));
    } catch (const std::bad_alloc &) {
        return false; // then on the rows in place
    }
    heads_.assign(2 * pairs_, nullptr);
    scale_heads_.assign(2 * pairs_, nullptr);
    p_ = p;
    t_ = t;
    if (k_) {
        p_.k.row = s.head_dim;
        t_.k_heads = heads_.data();
        t_.k_scale_heads = scale_heads_.data();
    }
    if (v_) {
        p_.v.row = s.head_dim_v;
        t_.v_heads = heads_.data() + pairs_;
        t_.v_scale_heads = scale_heads_.data() + pairs_;
    }
    return true;
}

size_t KvPack::wave(size_t first) {
    size_t used = 0, x = first;
    for (; x < pairs_; ++x) {
        const size_t keys = key_len(src_p_, src_t_, x / src_p_.shape.heads_kv);
        const Block kb = block(false, keys), vb = block(true, keys);
        if (x > first && used + kb.bytes + vb.bytes > cap_) break;
        unsigned char *k = buf_ + used, *v = k + kb.bytes;
        heads_[x] = k;
        heads_[pairs_ + x] = v;
        scale_heads_[x] = reinterpret_cast<float *>(k + kb.rows); // int8: after the rows
        scale_heads_[pairs_ + x] = reinterpret_cast<float *>(v + vb.rows);
        used += kb.bytes + vb.bytes;
    }
    return x;
}

// Copies the rows of one (batch entry, KV head), and an int8 row's scale: its keys only (padding
// past a key length is never read), and of those only the valid ones; a hidden key's row and
// scale become zeros (the kernel skips it either way, but nothing in the copy is left unwritten).
void KvPack::pack(size_t pair) const {
    const Shape &s = src_p_.shape;
    const size_t b = pair / s.heads_kv, kvh = pair % s.heads_kv, n = key_len(src_p_, src_t_, b);
    const uint8_t *valid = src_t_.key_valid ? src_t_.key_valid + b * s.seq_k : nullptr;
    auto copy = [&](bool value, size_t dim) {
        const KvRows from = kv_rows(src_p_, src_t_, value, b, kvh);
        const size_t row = dim * from.elem, x = (value ? pairs_ : 0) + pair;
        auto *to = static_cast<unsigned char *>(const_cast<void *>(heads_[x]));
        float *scale = from.scale ? const_cast<float *>(scale_heads_[x]) : nullptr;
        for (size_t j = 0; j < n; ++j) {
            const bool keep = !valid || valid[j];
            size_t doff, soff;
            from.locate(j, &doff, &soff);
            if (keep)
                std::memcpy(to + j * row, from.base + doff * from.elem, row);
            else
                std::memset(to + j * row, 0, row);
            if (scale) scale[j] = keep ? from.scale[soff] : 0.0f;
        }
    };
    if (k_) copy(false, s.head_dim);
    if (v_) copy(true, s.head_dim_v);
}

} // namespace core
} // namespace attn
