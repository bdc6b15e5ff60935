// Prefill over K or V rows that lie a KiB or more apart (BSHD, token-major varlen
// packs and token-major pages): the rows of each (batch entry, KV head) are copied into one
// contiguous block before its items run, and the items then read them as BHSD rows. Without the
// copy every work item (64 query rows on AVX2) reads each tile's rows from their own 4 KiB pages
// and copies V's tile again.
//
// The copies go into one buffer of at most kKeepBytes, kept by the calling thread for its next
// call; a call whose copies do not fit at once runs in waves of (batch entry, KV head) pairs:
//   for (size_t p0 = 0; p0 < pairs; p0 = p1) { p1 = wave(p0); pack(p0 .. p1 - 1); items of them }
#pragma once

#include <cstddef>
#include <vector>

#include "attention.hpp"
#include "scratch_buf.hpp"

namespace attn {
namespace core {

// The copies' buffer limit (kv_pack.cpp says why it is kept); the INT8 quantized copies
// (forward.cpp) keep to it too.
constexpr size_t kKeepBytes = size_t(32) << 20;

class KvPack {
  public:
    // Whether the call gains from the copy: K or V rows of any type >= 1 KiB apart (dense,
    // varlen or paged) and at least 1024 query rows per KV head on average (rows_per_kv_head).
    // A rule of the shape and layouts only; init() may still decline (see there).
    static bool gains(const Params &p, const Tensors &t, size_t rows_per_kv_head);
    // Whether the call gains from the copy (K or V rows of any type >= 1 KiB apart,
    // dense, varlen or paged, at least `rows_per_kv_head` query rows per KV head on average) and
    // its buffer is there: `copies` (the calling thread's, grown to at most 32 MiB and kept for its
    // next call). On true, params() / tensors() describe the call over the copies; a
    // pair's items may run once wave() has placed it and pack(pair) has run.
    bool init(const Params &p, const Tensors &t, size_t rows_per_kv_head, ScratchBuf &copies);
    // Places the pairs [first, end) that fit in the buffer together; returns end (> first).
    size_t wave(size_t first);
    // Copies the rows of one pair (batch entry * heads_kv + KV head) placed by the last wave.
    void pack(size_t pair) const;
    const Params &params() const { return p_; }
    const Tensors &tensors() const { return t_; }

  private:
    // One operand's copy for `keys` keys: `rows` bytes of rows from a 64-byte boundary, then
    // (int8) their fp32 scales from the next; `bytes` in all (0: the operand is not copied).
    struct Block {
        size_t rows, bytes;
    };
    Block block(bool value, size_t keys) const;
    size_t pair_bytes(size_t keys) const;
    Params p_, src_p_;
    Tensors t_, src_t_;
    bool k_ = false, v_ = false;
    unsigned char *buf_ = nullptr;
    size_t cap_ = 0, pairs_ = 0;             // buffer bytes, (batch entry, KV head) pairs
    std::vector<const void *> heads_;        // [2][pairs]: K then V rows of each pair
    std::vector<const float *> scale_heads_; // [2][pairs]: their scales (int8)
};

} // namespace core
} // namespace attn
